"""png-check.py - does a screenshot of mayfly bench's SVG show it? Reads the
PNG with the standard library alone (zlib, the five row filters) and checks
that it is not blank, that a long black horizontal and a long black vertical
line (the axes) are there, and both series' colours (#0072b2, #d55e00).
usage: python3 png-check.py SHOT.png   prints what it found; exit 1 when short."""
import struct
import sys
import zlib


def read_png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit("not a PNG")
    pos, idat, head = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            head = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    width, height, depth, colour, _, _, interlace = head
    if depth != 8 or colour not in (2, 6) or interlace:
        sys.exit("unexpected PNG: depth %d colour type %d interlace %d" % (depth, colour, interlace))
    bpp = 3 if colour == 2 else 4
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(width)])
        prev = line
    return width, height, rows


def longest_run(pixels, test):
    best = cur = 0
    for p in pixels:
        cur = cur + 1 if test(p) else 0
        best = max(best, cur)
    return best


def near(p, rgb):
    return all(abs(a - b) <= 40 for a, b in zip(p, rgb))


width, height, rows = read_png(sys.argv[1])
# Ink: anything darker than the light grid (#dddddd) and the white page.
ink = lambda p: sum(p) < 600
white = sum(1 for r in rows for p in r if p == (255, 255, 255))
# The SVG draws its axes at y 320 (x 70 to 660) and x 70 (y 50 to 320), at
# 1:1 in a 900x560 window; a series drawn over them is ink too.
hline = max(longest_run(rows[y], ink) for y in range(317, 324))
vline = max(longest_run([rows[y][x] for y in range(height)], ink) for x in range(67, 74))
blue = sum(1 for r in rows for p in r if near(p, (0x00, 0x72, 0xb2)))
orange = sum(1 for r in rows for p in r if near(p, (0xd5, 0x5e, 0x00)))
found = "%dx%d, %d%% white, x axis %d px, y axis %d px, %d blue and %d orange pixels" % (
    width, height, 100 * white // (width * height), hline, vline, blue, orange)
print(found)
# The axes: 590 px across, 270 px down; a blank or broken page has neither.
ok = 5 < 100 * white // (width * height) < 99 and hline >= 500 and vline >= 250 and blue > 50 and orange > 50
sys.exit(0 if ok else 1)
