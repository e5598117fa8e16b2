/* test_disk_snapshot.c - a copy-on-write disk saved as a sparse overlay file and a bitmap, restored privately; raw disks and bad payloads refused. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "disk/disk.h"
#include "dir_count.h"
#include "disk_image.h"

/* 2049 blocks of 4 KiB, the last one 512 bytes: a bitmap of 33 words
 * with one bit used in the last. */
#define BLOCK      4096u
#define SIZE       (2048ULL * BLOCK + 512)
#define WORDS      33
#define HDR        16   /* disk size u64, block size u32, 0 u32 (docs/snapshot.md) */
#define BITMAP_LEN (HDR + 8 * WORDS)

static char dir[PATH_MAX], base[PATH_MAX + 16], overlay[PATH_MAX + 16], overlay2[PATH_MAX + 16];
static uint8_t *model;
static struct snap_out o;

static void write_file(const char *path, uint64_t size, bool pattern)
{
	uint8_t buf[BLOCK];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	for (uint64_t off = 0; off < size; off += sizeof(buf)) {
		size_t n = size - off < sizeof(buf) ? size - off : sizeof(buf);

		for (size_t i = 0; i < n; i++)
			buf[i] = pattern ? image_pat(off + i) : 0x77;
		cr_assert_eq(pwrite(fd, buf, n, (off_t)off), (ssize_t)n);
	}
	close(fd);
}

static void setup(void)
{
	const char *t = getenv("TMPDIR");

	snprintf(dir, sizeof(dir), "%s/mayfly-cow-snap-XXXXXX", t && *t ? t : "/tmp");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(base, sizeof(base), "%s/base", dir);
	snprintf(overlay, sizeof(overlay), "%s/overlay", dir);
	snprintf(overlay2, sizeof(overlay2), "%s/overlay2", dir);
	write_file(base, SIZE, true);
	model = malloc(SIZE);
	cr_assert_not_null(model);
	for (uint64_t i = 0; i < SIZE; i++)
		model[i] = image_pat(i);
	snap_out_init(&o);
}

static void teardown(void)
{
	DIR *dp = opendir(dir);
	struct dirent *e;
	char path[PATH_MAX + 300];

	while (dp && (e = readdir(dp))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		unlink(path);
	}
	if (dp)
		closedir(dp);
	rmdir(dir);
	free(model);
	snap_out_free(&o);
}

TestSuite(disk_snapshot, .init = setup, .fini = teardown);

static void put(struct disk *d, uint64_t off, size_t len, uint8_t seed)
{
	uint8_t *buf = malloc(len);
	struct iovec iov = { buf, len };

	cr_assert_not_null(buf);
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(seed + i * 3);
	cr_assert_eq(d->ops->writev(d, &iov, 1, off), 0);
	memcpy(model + off, buf, len);
	free(buf);
}

/* The whole disk reads as the model. */
static void expect_model(struct disk *d, const uint8_t *want)
{
	uint8_t *buf = malloc(SIZE);
	struct iovec iov = { buf, SIZE };

	cr_assert_not_null(buf);
	cr_assert_eq(d->ops->readv(d, &iov, 1, 0), 0);
	for (uint64_t i = 0; i < SIZE; i++)
		if (buf[i] != want[i])
			cr_assert_fail("disk byte %llu is 0x%02x, want 0x%02x", (unsigned long long)i,
				       buf[i], want[i]);
	free(buf);
}

/* Seven dirty blocks: part of 0 (the rest from the base), 10-12 whole,
 * 500-501 across their boundary, and the short last one. */
static void dirty_some(struct disk *d)
{
	put(d, 100, 200, 1);
	put(d, 10 * BLOCK, 3 * BLOCK, 2);
	put(d, 501 * BLOCK - 700, 1400, 3);
	put(d, SIZE - 512, 512, 4);
}

static bool bit(const uint8_t *payload, unsigned b)
{
	return payload[HDR + b / 8] & (1u << (b % 8));
}

Test(disk_snapshot, overlay_is_sparse_and_restores_privately)
{
	struct disk d, r, r2;
	const char *why = "";
	uint8_t *before, *after, *saved_model;
	struct stat st;
	unsigned nbits = 0;

	cr_assert_eq(disk_open_cow(&d, base, &why), 0, "%s", why);
	dirty_some(&d);
	cr_assert_eq(disk_cow_save(&d, overlay, &o, &why), 0, "%s", why);
	disk_close(&d);

	/* The file: the disk's size, only the dirty blocks allocated. */
	cr_assert_eq(stat(overlay, &st), 0);
	cr_assert_eq((uint64_t)st.st_size, SIZE);
	cr_assert_eq(st.st_mode & 0777, 0600);
	cr_assert_gt(st.st_blocks, 0);
	cr_assert_leq((uint64_t)st.st_blocks * 512, 16 * BLOCK, "%llu bytes allocated for 7 "
		      "dirty blocks", (unsigned long long)st.st_blocks * 512);
	before = image_slurp(overlay, SIZE);
	for (uint64_t i = 0; i < SIZE; i++) {
		bool dirty = i < BLOCK || (i >= 10 * BLOCK && i < 13 * BLOCK) ||
			     (i >= 500 * BLOCK && i < 502 * BLOCK) || i >= SIZE - 512;

		if (before[i] != (dirty ? model[i] : 0))
			cr_assert_fail("overlay byte %llu", (unsigned long long)i);
	}
	/* The bitmap: exactly those seven bits. */
	cr_assert_eq(o.len, BITMAP_LEN);
	for (unsigned b = 0; b < WORDS * 64; b++)
		nbits += bit(o.data, b);
	cr_assert_eq(nbits, 7);
	cr_assert(bit(o.data, 0) && bit(o.data, 10) && bit(o.data, 12) && bit(o.data, 500) &&
		  bit(o.data, 501) && bit(o.data, 2048));

	/* Restored: the guest's blocks, the base elsewhere. */
	cr_assert_eq(disk_open_cow_restored(&r, base, overlay, o.data, o.len, &why), 0, "%s", why);
	cr_assert(disk_is_cow(&r));
	cr_assert_not(r.read_only);
	cr_assert_eq(r.size, SIZE);
	expect_model(&r, model);

	/* Writes after the restore stay in this VM: not in the file, not in
	 * a second VM restored from it. */
	saved_model = malloc(SIZE);
	cr_assert_not_null(saved_model);
	memcpy(saved_model, model, SIZE);
	put(&r, 11 * BLOCK + 5, 10, 9);
	put(&r, 1000 * BLOCK, BLOCK, 8);
	expect_model(&r, model);
	cr_assert_eq(disk_open_cow_restored(&r2, base, overlay, o.data, o.len, &why), 0, "%s", why);
	expect_model(&r2, saved_model);
	after = image_slurp(overlay, SIZE);
	cr_assert_arr_eq(after, before, SIZE, "the overlay file changed");
	free(after);
	after = image_slurp(base, SIZE);
	for (uint64_t i = 0; i < SIZE; i++)
		if (after[i] != image_pat(i))
			cr_assert_fail("base byte %llu changed", (unsigned long long)i);
	free(after);

	/* A snapshot of the restored VM holds old and new blocks. */
	snap_out_free(&o);
	snap_out_init(&o);
	cr_assert_eq(disk_cow_save(&r, overlay2, &o, &why), 0, "%s", why);
	disk_close(&r);
	disk_close(&r2);
	cr_assert_eq(disk_open_cow_restored(&r, base, overlay2, o.data, o.len, &why), 0, "%s", why);
	expect_model(&r, model);
	disk_close(&r);
	free(saved_model);
	free(before);
}

Test(disk_snapshot, clean_disk_is_all_holes)
{
	struct disk d, r;
	const char *why = "";
	struct stat st;

	cr_assert_eq(disk_open_cow(&d, base, &why), 0, "%s", why);
	cr_assert_eq(disk_cow_save(&d, overlay, &o, &why), 0, "%s", why);
	disk_close(&d);
	cr_assert_eq(stat(overlay, &st), 0);
	cr_assert_eq((uint64_t)st.st_size, SIZE);
	cr_assert_eq(st.st_blocks, 0, "a clean overlay allocated %lld blocks",
		     (long long)st.st_blocks);
	cr_assert_eq(disk_open_cow_restored(&r, base, overlay, o.data, o.len, &why), 0, "%s", why);
	expect_model(&r, model);
	disk_close(&r);
}

/* Refused with rc, *why saying something, nothing left open. */
static void expect_refused(const char *b, const char *ov, const void *p, size_t len, int rc,
			   const char *what)
{
	struct disk r;
	const char *why = "";
	int fds = open_fds();
	int got = disk_open_cow_restored(&r, b, ov, p, len, &why);

	cr_assert_eq(got, rc, "%s: rc %d, expected %d (%s)", what, got, rc, why);
	cr_assert_str_not_empty(why, "%s: no reason", what);
	cr_assert_eq(open_fds(), fds, "%s: a file left open", what);
	cr_assert_eq(r.fd, -1, "%s", what);
}

Test(disk_snapshot, refuses_bad_bitmaps_and_overlays)
{
	static uint8_t good[BITMAP_LEN + 8], p[BITMAP_LEN + 8];
	struct disk d;
	const char *why = "";
	char small[PATH_MAX + 16];

	cr_assert_eq(disk_open_cow(&d, base, &why), 0, "%s", why);
	dirty_some(&d);
	cr_assert_eq(disk_cow_save(&d, overlay, &o, &why), 0, "%s", why);
	disk_close(&d);
	cr_assert_eq(o.len, BITMAP_LEN);
	memcpy(good, o.data, BITMAP_LEN);

	for (size_t len = 0; len < BITMAP_LEN; len++)
		expect_refused(base, overlay, good, len, -EBADMSG, "cut short");
	expect_refused(base, overlay, good, BITMAP_LEN + 8, -EBADMSG, "a word too many");
	memcpy(p, good, BITMAP_LEN);
	p[0] ^= 0x02;   /* the disk size, 2 bytes off */
	expect_refused(base, overlay, p, BITMAP_LEN, -EINVAL, "a bitmap for another disk size");
	memcpy(p, good, BITMAP_LEN);
	p[8] = 0;
	p[9] = 2;       /* block size 512 */
	expect_refused(base, overlay, p, BITMAP_LEN, -EBADMSG, "another block size");
	memcpy(p, good, BITMAP_LEN);
	p[12] = 1;
	expect_refused(base, overlay, p, BITMAP_LEN, -EBADMSG, "the reserved word set");
	memcpy(p, good, BITMAP_LEN);
	p[HDR + 2049 / 8] |= 1u << (2049 % 8);
	expect_refused(base, overlay, p, BITMAP_LEN, -EBADMSG, "a block past the disk's end");
	p[HDR + 2049 / 8] = good[HDR + 2049 / 8];
	p[BITMAP_LEN - 1] = 0x80;
	expect_refused(base, overlay, p, BITMAP_LEN, -EBADMSG, "the last bit of the last word");

	snprintf(small, sizeof(small), "%s/small", dir);
	write_file(small, SIZE - 512, false);
	expect_refused(base, small, good, BITMAP_LEN, -EINVAL, "an overlay file of another size");
	expect_refused(base, dir, good, BITMAP_LEN, -EINVAL, "an overlay that is a directory");
	snprintf(small, sizeof(small), "%s/missing", dir);
	expect_refused(base, small, good, BITMAP_LEN, -ENOENT, "no overlay file");
	expect_refused(small, overlay, good, BITMAP_LEN, -ENOENT, "no base image");

	/* And the good one still works after all that. */
	cr_assert_eq(disk_open_cow_restored(&d, base, overlay, good, BITMAP_LEN, &why), 0, "%s", why);
	expect_model(&d, model);
	disk_close(&d);
}

Test(disk_snapshot, raw_disks_have_nothing_to_save_or_cannot_be_saved)
{
	struct disk ro, rw, cow;
	const char *why = "";
	struct stat st;

	cr_assert_eq(disk_open_cow(&cow, base, &why), 0, "%s", why);
	cr_assert_eq(disk_check_snapshot(&cow, &why), 0);
	disk_close(&cow);
	cr_assert_eq(disk_open_raw(&ro, base, true, &why), 0, "%s", why);
	cr_assert_eq(disk_check_snapshot(&ro, &why), 0, "a read-only raw disk is fine");
	cr_assert_not(disk_is_cow(&ro));
	cr_assert_eq(disk_cow_save(&ro, overlay, &o, &why), -EINVAL);
	disk_close(&ro);
	cr_assert_eq(disk_open_raw(&rw, base, false, &why), 0, "%s", why);
	cr_assert_eq(disk_check_snapshot(&rw, &why), -ENOTSUP);
	cr_assert(strstr(why, "writable raw disk"), "why: %s", why);
	cr_assert_eq(disk_cow_save(&rw, overlay, &o, &why), -EINVAL);
	disk_close(&rw);
	cr_assert_eq(stat(overlay, &st), -1, "a refused save created the overlay");
	cr_assert_eq(o.len, 0);
}

Test(disk_snapshot, failed_save_leaves_nothing)
{
	struct disk d;
	const char *why = "";
	char path[PATH_MAX + 32];

	cr_assert_eq(disk_open_cow(&d, base, &why), 0, "%s", why);
	dirty_some(&d);
	snprintf(path, sizeof(path), "%s/no-such-dir/overlay", dir);
	cr_assert_eq(disk_cow_save(&d, path, &o, &why), -ENOENT);
	cr_assert(strstr(why, path), "why: %s", why);
	cr_assert_eq(o.len, 0, "a bitmap for an overlay that was not written");
	disk_close(&d);
}
