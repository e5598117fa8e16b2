/* test_snapshot_format.c - the state file: round trip, atomic save, and every corruption refused. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "snapshot/format.h"

/* Restated from docs/snapshot.md on purpose: the test pins the layout. */
#define HDR 16
#define SEC_HDR 16

static const uint8_t payload_a[] = "the vm config";
static uint8_t payload_big[3000];

/* A file with four sections (one empty) plus the end marker. */
static void build(struct snap_writer *w, const uint8_t **data, size_t *len)
{
	for (size_t i = 0; i < sizeof(payload_big); i++)
		payload_big[i] = (uint8_t)(i * 7 + 1);
	snap_writer_init(w);
	cr_assert_eq(snap_writer_add(w, SNAP_SEC_CONFIG, payload_a, sizeof(payload_a)), 0);
	cr_assert_eq(snap_writer_add(w, SNAP_SEC_VCPU(0), payload_big, sizeof(payload_big)), 0);
	cr_assert_eq(snap_writer_add(w, SNAP_SEC_VM, NULL, 0), 0);
	cr_assert_eq(snap_writer_add(w, SNAP_SEC_VCPU(1), payload_big, 100), 0);
	cr_assert_eq(snap_writer_finish(w, data, len), 0);
}

static const uint32_t required[] = { SNAP_SEC_CONFIG, SNAP_SEC_VM, SNAP_SEC_VCPU(0), SNAP_SEC_VCPU(1) };
#define NR_REQUIRED (sizeof(required) / sizeof(required[0]))

Test(snapshot_format, round_trip)
{
	struct snap_writer w;
	struct snap_file *f = malloc(sizeof(*f));
	const struct snap_section *s;
	const uint8_t *data;
	const char *why = NULL;
	size_t len;

	build(&w, &data, &len);
	cr_assert_eq(len, HDR + 4 * SEC_HDR + sizeof(payload_a) + sizeof(payload_big) + 100 + SEC_HDR);
	cr_assert_eq(memcmp(data, "MAYFLYST", 8), 0);
	cr_assert_eq(data[8], SNAP_FORMAT_VERSION);
	cr_assert_eq(memcmp(data + 9, "\0\0\0\0\0\0\0", HDR - 9), 0);
	cr_assert_eq(snap_parse(f, data, len, required, NR_REQUIRED, &why), 0, "%s", why);
	cr_assert_eq(f->version, SNAP_FORMAT_VERSION);
	cr_assert_eq(f->nr, 4);
	s = snap_find(f, SNAP_SEC_CONFIG);
	cr_assert_not_null(s);
	cr_assert_eq(s->len, sizeof(payload_a));
	cr_assert_eq(memcmp(s->data, payload_a, sizeof(payload_a)), 0);
	s = snap_find(f, SNAP_SEC_VCPU(0));
	cr_assert_eq(s->len, sizeof(payload_big));
	cr_assert_eq(memcmp(s->data, payload_big, sizeof(payload_big)), 0);
	cr_assert_eq(snap_find(f, SNAP_SEC_VM)->len, 0);
	cr_assert_eq(snap_find(f, SNAP_SEC_VCPU(1))->len, 100);
	cr_assert_null(snap_find(f, SNAP_SEC_CPUID));
	/* The sections are views into the buffer, in file order. */
	cr_assert_eq(f->sec[0].data, data + HDR + SEC_HDR);
	snap_writer_free(&w);
	free(f);
}

Test(snapshot_format, writer_refuses_end_type_duplicates_and_too_many)
{
	struct snap_writer w;

	snap_writer_init(&w);
	cr_assert_eq(snap_writer_add(&w, SNAP_SEC_END, "x", 1), -EINVAL);
	cr_assert_eq(snap_writer_add(&w, SNAP_SEC_CPUID, "x", 1), 0);
	cr_assert_eq(snap_writer_add(&w, SNAP_SEC_CPUID, "y", 1), -EEXIST);
	for (uint32_t t = 0x100; w.nr < SNAP_MAX_SECTIONS; t++)
		cr_assert_eq(snap_writer_add(&w, t, NULL, 0), 0);
	cr_assert_eq(snap_writer_add(&w, 0x7777, NULL, 0), -E2BIG);
	snap_writer_free(&w);
}

/* Every single byte of the file flipped: refused, whichever byte it is. A
 * byte in a section's header or payload is reported as that section's crc
 * mismatch (or a length that no longer fits). */
Test(snapshot_format, flipped_byte_anywhere_is_refused)
{
	struct snap_writer w;
	struct snap_file *f = malloc(sizeof(*f));
	const uint8_t *data;
	size_t len;

	build(&w, &data, &len);
	uint8_t *copy = malloc(len);
	for (size_t i = 0; i < len; i++) {
		const char *why = NULL;
		int rc;

		memcpy(copy, data, len);
		copy[i] ^= 0x20;
		rc = snap_parse(f, copy, len, required, NR_REQUIRED, &why);
		cr_assert(rc == -EBADMSG || (rc == -ENOTSUP && i >= 8 && i < 12),
			  "flip at %zu: rc %d (%s)", i, rc, why ? why : "");
		cr_assert_not_null(why);
	}
	/* A payload byte names its section. */
	memcpy(copy, data, len);
	copy[HDR + 2 * SEC_HDR + sizeof(payload_a) + 10] ^= 1;
	const char *why = NULL;
	cr_assert_eq(snap_parse(f, copy, len, NULL, 0, &why), -EBADMSG);
	cr_assert(strstr(why, "crc32 mismatch in section vcpu 0"), "%s", why);
	free(copy);
	snap_writer_free(&w);
	free(f);
}

/* Cut short anywhere, at a section boundary or inside a header or payload:
 * refused. */
Test(snapshot_format, truncation_anywhere_is_refused)
{
	struct snap_writer w;
	struct snap_file *f = malloc(sizeof(*f));
	const uint8_t *data;
	size_t len, boundaries = 0;

	build(&w, &data, &len);
	for (size_t cut = 0; cut < len; cut++) {
		const char *why = NULL;
		/* A copy of exactly `cut` bytes, so ASan sees any read past it. */
		uint8_t *copy = malloc(cut ? cut : 1);

		memcpy(copy, data, cut);
		cr_assert_eq(snap_parse(f, copy, cut, NULL, 0, &why), -EBADMSG, "cut at %zu", cut);
		if (why && strstr(why, "no end marker"))
			boundaries++;
		free(copy);
	}
	/* After the header and after each of the four sections. */
	cr_assert_eq(boundaries, 5);
	snap_writer_free(&w);
	free(f);
}

Test(snapshot_format, wrong_version_says_which)
{
	char want[32];
	struct snap_writer w;
	struct snap_file *f = malloc(sizeof(*f));
	const uint8_t *data;
	const char *why = NULL;
	size_t len;

	build(&w, &data, &len);
	uint8_t *copy = malloc(len);
	memcpy(copy, data, len);
	copy[8] = 63;
	cr_assert_eq(snap_parse(f, copy, len, NULL, 0, &why), -ENOTSUP);
	cr_assert(strstr(why, "version 63"), "%s", why);
	snprintf(want, sizeof(want), "version %u", SNAP_FORMAT_VERSION);
	cr_assert(strstr(why, want), "%s", why);
	free(copy);
	snap_writer_free(&w);
	free(f);
}

/* Hand-built files for what the writer never produces. */
static size_t raw_section(uint8_t *p, uint32_t type, uint64_t len, const void *payload, size_t have)
{
	uint32_t crc = (uint32_t)crc32(0, Z_NULL, 0);

	memcpy(p, &type, 4);
	memcpy(p + 8, &len, 8);
	crc = (uint32_t)crc32(crc, p, 4);
	crc = (uint32_t)crc32(crc, p + 8, 8);
	if (have) {   /* crc32() with a NULL buffer restarts at 0 */
		crc = (uint32_t)crc32(crc, payload, (uInt)have);
		memcpy(p + SEC_HDR, payload, have);
	}
	memcpy(p + 4, &crc, 4);
	return SEC_HDR + have;
}

static size_t raw_end(uint8_t *file, size_t off)
{
	uint32_t type = 0, crc = (uint32_t)crc32(crc32(0, Z_NULL, 0), file, (uInt)off);
	uint64_t zero = 0;

	memcpy(file + off, &type, 4);
	memcpy(file + off + 4, &crc, 4);
	memcpy(file + off + 8, &zero, 8);
	return off + SEC_HDR;
}

static size_t raw_header(uint8_t *file, uint32_t flags)
{
	uint32_t version = SNAP_FORMAT_VERSION;

	memcpy(file, SNAP_MAGIC, 8);
	memcpy(file + 8, &version, 4);
	memcpy(file + 12, &flags, 4);
	return HDR;
}

Test(snapshot_format, refuses_duplicates_missing_flags_overflow_and_trailing_bytes)
{
	static uint8_t file[4096];
	struct snap_file *f = malloc(sizeof(*f));
	const uint32_t need_cpuid[] = { SNAP_SEC_CPUID };
	const char *why = NULL;
	size_t off;

	/* The same type twice. */
	off = raw_header(file, 0);
	off += raw_section(file + off, SNAP_SEC_VM, 3, "abc", 3);
	off += raw_section(file + off, SNAP_SEC_VM, 3, "abc", 3);
	off = raw_end(file, off);
	cr_assert_eq(snap_parse(f, file, off, NULL, 0, &why), -EBADMSG);
	cr_assert(strstr(why, "section vm twice"), "%s", why);

	/* A required section missing; an unknown one is kept. */
	off = raw_header(file, 0);
	off += raw_section(file + off, 0x4242, 1, "z", 1);
	off = raw_end(file, off);
	cr_assert_eq(snap_parse(f, file, off, NULL, 0, &why), 0, "%s", why);
	cr_assert_not_null(snap_find(f, 0x4242));
	cr_assert_eq(snap_parse(f, file, off, need_cpuid, 1, &why), -EBADMSG);
	cr_assert(strstr(why, "no cpuid section"), "%s", why);

	/* Bytes after the end marker. */
	file[off] = 0;
	cr_assert_eq(snap_parse(f, file, off + 1, NULL, 0, &why), -EBADMSG);
	cr_assert(strstr(why, "after the end marker"), "%s", why);

	/* Header flags nobody defined. */
	off = raw_header(file, 1);
	off = raw_end(file, off);
	cr_assert_eq(snap_parse(f, file, off, NULL, 0, &why), -EBADMSG);
	cr_assert(strstr(why, "flags"), "%s", why);

	/* Lengths that run past the end or wrap an offset. */
	const uint64_t lens[] = { UINT64_MAX, UINT64_MAX - SEC_HDR + 1, 1ull << 63, 4 };
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		off = raw_header(file, 0);
		off += raw_section(file + off, SNAP_SEC_CPUID, lens[i], "abc", 3);
		cr_assert_eq(snap_parse(f, file, off, NULL, 0, &why), -EBADMSG, "len %#lx", lens[i]);
		cr_assert(strstr(why, "claims"), "%s", why);
	}

	/* An end marker with a length. */
	off = raw_header(file, 0);
	off = raw_end(file, off);
	file[off - 8] = 1;
	cr_assert_eq(snap_parse(f, file, off, NULL, 0, &why), -EBADMSG);

	/* Not a state file at all. */
	cr_assert_eq(snap_parse(f, "ELF\0\0\0\0\0\0\0\0\0\0\0\0\0", 16, NULL, 0, &why), -EBADMSG);
	cr_assert(strstr(why, "magic"), "%s", why);
	cr_assert_eq(snap_parse(f, NULL, 0, NULL, 0, &why), -EBADMSG);
	free(f);
}

Test(snapshot_format, refuses_more_sections_than_the_table_holds)
{
	size_t size = HDR + (SNAP_MAX_SECTIONS + 1) * SEC_HDR + SEC_HDR;
	uint8_t *file = malloc(size);
	struct snap_file *f = malloc(sizeof(*f));
	const char *why = NULL;
	size_t off = raw_header(file, 0);

	for (uint32_t i = 0; i <= SNAP_MAX_SECTIONS; i++)
		off += raw_section(file + off, 0x100 + i, 0, NULL, 0);
	off = raw_end(file, off);
	cr_assert_eq(snap_parse(f, file, off, NULL, 0, &why), -EBADMSG);
	cr_assert(strstr(why, "more than"), "%s", why);
	free(file);
	free(f);
}

static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	cr_assert_not_null(d);
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *fp = fopen(path, "rb");
	uint8_t *buf = malloc(1 << 16);

	cr_assert_not_null(fp);
	*len = fread(buf, 1, 1 << 16, fp);
	fclose(fp);
	return buf;
}

Test(snapshot_format, save_is_atomic_and_leaves_nothing_on_failure)
{
	char dir[] = "/tmp/mayfly-snapfmt.XXXXXX", path[64], bad[96];
	struct snap_writer w;
	struct snap_file *f = malloc(sizeof(*f));
	const uint8_t *data;
	const char *why = NULL;
	struct stat st;
	size_t len, got;
	uint8_t *buf;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/state", dir);

	/* An older file at the path is replaced whole. */
	FILE *old = fopen(path, "w");
	fputs("old", old);
	fclose(old);
	build(&w, &data, &len);
	snap_writer_free(&w);
	snap_writer_init(&w);
	cr_assert_eq(snap_writer_add(&w, SNAP_SEC_CONFIG, payload_a, sizeof(payload_a)), 0);
	cr_assert_eq(snap_writer_save(&w, path, &why), 0, "%s", why);
	snap_writer_free(&w);
	cr_assert_eq(count_entries(dir), 1, "no temporary file left");
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600);
	buf = slurp(path, &got);
	cr_assert_eq(snap_parse(f, buf, got, NULL, 0, &why), 0, "%s", why);
	cr_assert_eq(memcmp(snap_find(f, SNAP_SEC_CONFIG)->data, payload_a, sizeof(payload_a)), 0);
	free(buf);

	/* A directory that does not exist: an error naming the path, nothing made. */
	snprintf(bad, sizeof(bad), "%s/missing/state", dir);
	snap_writer_init(&w);
	cr_assert_eq(snap_writer_save(&w, bad, &why), -ENOENT);
	cr_assert(strstr(why, bad), "%s", why);
	snap_writer_free(&w);
	cr_assert_eq(count_entries(dir), 1);

	/* A path that is a directory: the rename fails, the temporary file goes. */
	snprintf(bad, sizeof(bad), "%s/adir", dir);
	cr_assert_eq(mkdir(bad, 0700), 0);
	snap_writer_init(&w);
	cr_assert_neq(snap_writer_save(&w, bad, &why), 0);
	snap_writer_free(&w);
	cr_assert_eq(count_entries(dir), 2, "state and adir only");
	rmdir(bad);
	unlink(path);
	rmdir(dir);
	free(f);
}

Test(snapshot_format, section_names)
{
	char buf[32];

	cr_assert_str_eq(snap_section_name(SNAP_SEC_VCPU(7), buf, sizeof(buf)), "vcpu 7");
	cr_assert_str_eq(snap_section_name(SNAP_SEC_CPUID, buf, sizeof(buf)), "cpuid");
	cr_assert_str_eq(snap_section_name(0x4242, buf, sizeof(buf)), "type 0x4242");
	cr_assert_str_eq(snap_section_name(SNAP_SEC_SERIAL, buf, sizeof(buf)), "serial");
	cr_assert_str_eq(snap_section_name(SNAP_SEC_VIRTIO(3), buf, sizeof(buf)), "virtio slot 3");
	cr_assert_str_eq(snap_section_name(SNAP_SEC_OVERLAY(0), buf, sizeof(buf)),
			 "overlay of virtio slot 0");
	cr_assert_str_eq(snap_section_name(SNAP_SEC_VIRTIO(32), buf, sizeof(buf)),
			 "overlay of virtio slot 0", "virtio slots end where overlays begin");
	cr_assert_str_eq(snap_section_name(SNAP_SEC_OVERLAY(32), buf, sizeof(buf)), "type 0x60");
}
