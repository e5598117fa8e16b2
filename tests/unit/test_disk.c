/* test_disk.c - raw and copy-on-write disks on temporary files: data, locks, refusals. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "disk/disk.h"
#include "disk_image.h"

#define NR_PATHS 4
#define MAX_IOV  256

static char paths[NR_PATHS][PATH_MAX];
static char dir_path[PATH_MAX];

static void teardown(void)
{
	for (int i = 0; i < NR_PATHS; i++)
		if (paths[i][0])
			unlink(paths[i]);
	if (dir_path[0])
		rmdir(dir_path);
}

TestSuite(disk, .fini = teardown);

static const char *tmpdir(void)
{
	const char *t = getenv("TMPDIR");

	return t && *t ? t : "/tmp";
}

/* Create temp file number `n` of `size` bytes filled with image_pat(). */
static const char *make_image(int n, uint64_t size)
{
	uint8_t buf[4096];
	int fd;

	snprintf(paths[n], sizeof(paths[n]), "%s/mayfly-test-disk-XXXXXX", tmpdir());
	fd = mkstemp(paths[n]);
	cr_assert_geq(fd, 0, "mkstemp in %s: %s", tmpdir(), strerror(errno));
	for (uint64_t off = 0; off < size; off += sizeof(buf)) {
		size_t n_bytes = size - off < sizeof(buf) ? size - off : sizeof(buf);

		for (size_t i = 0; i < n_bytes; i++)
			buf[i] = image_pat(off + i);
		cr_assert_eq(pwrite(fd, buf, n_bytes, (off_t)off), (ssize_t)n_bytes);
	}
	close(fd);
	return paths[n];
}

static void base_model(uint8_t *model, uint64_t size)
{
	for (uint64_t i = 0; i < size; i++)
		model[i] = image_pat(i);
}

static int read_one(struct disk *d, void *buf, size_t len, uint64_t off)
{
	struct iovec iov = { buf, len };

	return d->ops->readv(d, &iov, 1, off);
}

static int write_one(struct disk *d, const void *buf, size_t len, uint64_t off)
{
	struct iovec iov = { (void *)buf, len };

	return d->ops->writev(d, &iov, 1, off);
}

/* Split buf into iovecs of the given sizes, cycling through them. */
static int split(struct iovec *iov, int max, uint8_t *buf, size_t len,
		 const size_t *sizes, int nr_sizes)
{
	int n = 0;

	for (size_t done = 0; done < len; n++) {
		size_t s = sizes[n % nr_sizes];

		cr_assert_lt(n, max);
		if (s > len - done)
			s = len - done;
		iov[n] = (struct iovec){ buf + done, s };
		done += s;
	}
	return n;
}

/* ---- short transfers and EINTR, on demand ----
 *
 * Link-time interposition: the disk code's pread/pwrite/preadv/pwritev
 * resolve to these. With `chop` set, every third call fails with EINTR and
 * the others move at most a few odd-sized bytes, the way signals and busy
 * filesystems may; otherwise each is the plain system call. */

static bool chop;
static unsigned int chop_calls;

/* 0: fail with EINTR; else the most bytes this call may move. */
static size_t chop_cap(void)
{
	static const size_t caps[] = { 700, 1, 3000, 512, 5000 };

	chop_calls++;
	if (chop_calls % 3 == 0)
		return 0;
	return caps[chop_calls % 5];
}

static ssize_t chop_vec(long nr, int fd, const struct iovec *iov, int iovcnt, off64_t off)
{
	struct iovec cut[8];
	size_t cap;
	int n = 0;

	if (!chop)
		return syscall(nr, fd, iov, iovcnt, (unsigned long)off, 0UL);
	cap = chop_cap();
	if (!cap) {
		errno = EINTR;
		return -1;
	}
	for (; n < iovcnt && n < 8 && cap; n++) {
		cut[n] = iov[n];
		if (cut[n].iov_len > cap)
			cut[n].iov_len = cap;
		cap -= cut[n].iov_len;
	}
	return syscall(nr, fd, cut, n, (unsigned long)off, 0UL);
}

static ssize_t chop_one(long nr, int fd, const void *buf, size_t len, off64_t off)
{
	size_t cap;

	if (chop) {
		cap = chop_cap();
		if (!cap) {
			errno = EINTR;
			return -1;
		}
		len = len < cap ? len : cap;
	}
	return syscall(nr, fd, buf, len, off);
}

ssize_t preadv64(int fd, const struct iovec *iov, int iovcnt, off64_t off)
{
	return chop_vec(SYS_preadv, fd, iov, iovcnt, off);
}

ssize_t pwritev64(int fd, const struct iovec *iov, int iovcnt, off64_t off)
{
	return chop_vec(SYS_pwritev, fd, iov, iovcnt, off);
}

ssize_t pread64(int fd, void *buf, size_t len, off64_t off)
{
	return chop_one(SYS_pread64, fd, buf, len, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off64_t off)
{
	return chop_one(SYS_pwrite64, fd, buf, len, off);
}

/* ---- raw ---- */

Test(disk, raw_read_write_round_trip)
{
	const uint64_t size = 64 * 1024;
	const char *path = make_image(0, size);
	static const size_t sizes[] = { 100, 412, 1000, 2584 };
	struct iovec iov[16];
	uint8_t data[4096], back[4096], *file;
	struct disk d;
	const char *why = NULL;
	int n;

	cr_assert_eq(disk_open_raw(&d, path, false, &why), 0, "%s", why);
	cr_assert_eq(d.size, size);
	cr_assert_not(d.read_only);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i ^ 0x5a);
	n = split(iov, 16, data, sizeof(data), sizes, 4);
	cr_assert_eq(d.ops->writev(&d, iov, n, 3 * 512), 0);
	cr_assert_eq(read_one(&d, back, sizeof(back), 3 * 512), 0);
	cr_assert_arr_eq(back, data, sizeof(data));
	cr_assert_eq(d.ops->flush(&d), 0);
	disk_close(&d);

	/* The bytes are in the file, and the rest of it is untouched. */
	file = image_slurp(path, size);
	cr_assert_arr_eq(file + 3 * 512, data, sizeof(data));
	for (uint64_t i = 0; i < size; i++)
		if (i < 3 * 512 || i >= 3 * 512 + sizeof(data))
			cr_assert_eq(file[i], image_pat(i), "byte %lu", (unsigned long)i);
	free(file);

	cr_assert_eq(disk_open_raw(&d, path, true, &why), 0, "%s", why);
	cr_assert(d.read_only);
	memset(back, 0, sizeof(back));
	n = split(iov, 16, back, sizeof(back), sizes, 4);
	cr_assert_eq(d.ops->readv(&d, iov, n, 3 * 512), 0);
	cr_assert_arr_eq(back, data, sizeof(data));
	disk_close(&d);
}

Test(disk, raw_read_only_refuses_writes)
{
	const char *path = make_image(0, 8192);
	uint8_t buf[512], *file;
	struct disk d;
	const char *why = NULL;

	cr_assert_eq(disk_open_raw(&d, path, true, &why), 0, "%s", why);
	cr_assert_eq(read_one(&d, buf, sizeof(buf), 512), 0);
	for (int i = 0; i < 512; i++)
		cr_assert_eq(buf[i], image_pat(512 + i));
	memset(buf, 0xee, sizeof(buf));
	cr_assert_eq(write_one(&d, buf, sizeof(buf), 0), -EROFS);
	cr_assert_eq(d.ops->flush(&d), 0);
	disk_close(&d);
	file = image_slurp(path, 8192);
	for (int i = 0; i < 8192; i++)
		cr_assert_eq(file[i], image_pat(i));
	free(file);
}

Test(disk, raw_many_iovecs_beyond_iov_max)
{
	const uint64_t size = 1 << 20;
	const char *path = make_image(0, size);
	const int nr = IOV_MAX + 300;
	struct iovec *iov = calloc(nr, sizeof(*iov));
	uint8_t *data = malloc((size_t)nr * 512), *back = calloc(nr, 512);
	struct disk d;
	const char *why = NULL;

	cr_assert(iov && data && back);
	for (size_t i = 0; i < (size_t)nr * 512; i++)
		data[i] = (uint8_t)(i * 13 + 5);
	cr_assert_eq(disk_open_raw(&d, path, false, &why), 0, "%s", why);
	for (int i = 0; i < nr; i++)
		iov[i] = (struct iovec){ data + (size_t)i * 512, 512 };
	cr_assert_eq(d.ops->writev(&d, iov, nr, 1024), 0);
	for (int i = 0; i < nr; i++)
		iov[i] = (struct iovec){ back + (size_t)i * 512, 512 };
	cr_assert_eq(d.ops->readv(&d, iov, nr, 1024), 0);
	cr_assert_arr_eq(back, data, (size_t)nr * 512);
	disk_close(&d);
	free(iov);
	free(data);
	free(back);
}

Test(disk, raw_read_past_shrunk_end_is_eio)
{
	const char *path = make_image(0, 16384);
	uint8_t buf[4096];
	struct disk d;
	const char *why = NULL;

	cr_assert_eq(disk_open_raw(&d, path, true, &why), 0, "%s", why);
	cr_assert_eq(truncate(path, 8192 + 100), 0);
	cr_assert_eq(read_one(&d, buf, sizeof(buf), 0), 0);
	/* Starts inside the file, ends past it: a short read, then EOF. */
	cr_assert_eq(read_one(&d, buf, sizeof(buf), 8192), -EIO);
	cr_assert_eq(read_one(&d, buf, sizeof(buf), 12288), -EIO);
	disk_close(&d);
}

Test(disk, out_of_range_is_refused)
{
	const char *path = make_image(0, 8192);
	uint8_t buf[1024];
	struct disk raw, cow;
	const char *why = NULL;

	cr_assert_eq(disk_open_raw(&raw, path, true, &why), 0, "%s", why);
	cr_assert_eq(disk_open_cow(&cow, path, &why), 0, "%s", why);
	cr_assert_eq(read_one(&raw, buf, sizeof(buf), 8192 - 512), -EINVAL);
	cr_assert_eq(read_one(&cow, buf, sizeof(buf), 8192 - 512), -EINVAL);
	cr_assert_eq(write_one(&cow, buf, sizeof(buf), 8192 - 512), -EINVAL);
	cr_assert_eq(read_one(&cow, buf, sizeof(buf), UINT64_MAX - 100), -EINVAL);
	cr_assert_eq(write_one(&cow, buf, sizeof(buf), UINT64_MAX - 100), -EINVAL);
	cr_assert_eq(read_one(&raw, buf, 512, 8192 - 512), 0);
	cr_assert_eq(read_one(&raw, buf, 0, 8192), 0);
	disk_close(&cow);
	disk_close(&raw);
}

/* ---- locks ---- */

Test(disk, writer_excludes_everyone)
{
	const char *path = make_image(0, 4096);
	struct disk a, b;
	const char *why = NULL;

	cr_assert_eq(disk_open_raw(&a, path, false, &why), 0, "%s", why);
	why = NULL;
	cr_assert_eq(disk_open_raw(&b, path, false, &why), -EBUSY);
	cr_assert_str_eq(why, "image is in use by another VM (locked)");
	why = NULL;
	cr_assert_eq(disk_open_raw(&b, path, true, &why), -EBUSY);
	cr_assert_not_null(why);
	why = NULL;
	cr_assert_eq(disk_open_cow(&b, path, &why), -EBUSY);
	cr_assert_not_null(why);
	disk_close(&b); /* after a failed open: a no-op */
	disk_close(&a);
	cr_assert_eq(disk_open_raw(&b, path, false, &why), 0, "%s", why);
	disk_close(&b);
}

Test(disk, readers_share_and_keep_writers_out)
{
	const char *path = make_image(0, 4096);
	struct disk ro1, ro2, cow1, cow2, w;
	const char *why = NULL;

	cr_assert_eq(disk_open_raw(&ro1, path, true, &why), 0, "%s", why);
	cr_assert_eq(disk_open_raw(&ro2, path, true, &why), 0, "%s", why);
	cr_assert_eq(disk_open_cow(&cow1, path, &why), 0, "%s", why);
	cr_assert_eq(disk_open_cow(&cow2, path, &why), 0, "%s", why);
	disk_close(&ro1);
	disk_close(&ro2);
	disk_close(&cow2);
	why = NULL;
	cr_assert_eq(disk_open_raw(&w, path, false, &why), -EBUSY);
	cr_assert_str_eq(why, "image is in use by another VM (locked)");
	disk_close(&cow1);
	cr_assert_eq(disk_open_raw(&w, path, false, &why), 0, "%s", why);
	disk_close(&w);
}

/* ---- refusals ---- */

static void expect_refused(const char *path, int err)
{
	struct disk d;
	const char *why;

	for (int mode = 0; mode < 3; mode++) {
		int ret;

		why = NULL;
		ret = mode == 2 ? disk_open_cow(&d, path, &why) : disk_open_raw(&d, path, mode, &why);
		if (err)
			cr_assert_eq(ret, err, "mode %d: %d (%s)", mode, ret, why);
		else
			cr_assert_lt(ret, 0, "mode %d", mode);
		cr_assert_not_null(why, "mode %d", mode);
		cr_assert_eq(d.fd, -1);
		cr_assert_null(d.ops);
		disk_close(&d);
	}
}

Test(disk, bad_images_are_refused_with_a_reason)
{
	const char *empty = make_image(0, 0), *odd = make_image(1, 1000);
	const char *tiny = make_image(2, 511);

	expect_refused(empty, -EINVAL);
	expect_refused(odd, -EINVAL);
	expect_refused(tiny, -EINVAL);
	snprintf(paths[3], sizeof(paths[3]), "%s.missing", empty);
	expect_refused(paths[3], -ENOENT);
	paths[3][0] = '\0';

	snprintf(dir_path, sizeof(dir_path), "%s/mayfly-test-dir-XXXXXX", tmpdir());
	cr_assert_not_null(mkdtemp(dir_path));
	expect_refused(dir_path, 0);
}

Test(disk, fifo_is_refused_without_hanging)
{
	snprintf(paths[0], sizeof(paths[0]), "%s/mayfly-test-fifo-%d", tmpdir(), (int)getpid());
	cr_assert_eq(mkfifo(paths[0], 0600), 0);
	expect_refused(paths[0], 0);
}

Test(disk, close_is_safe_on_zeroed_and_twice)
{
	const char *path = make_image(0, 4096);
	struct disk d;
	const char *why = NULL;
	int stdin_flags = fcntl(0, F_GETFD);

	/* Zeroed means fd 0: disk_close must not take stdin with it. */
	memset(&d, 0, sizeof(d));
	disk_close(&d);
	cr_assert_eq(fcntl(0, F_GETFD), stdin_flags);
	cr_assert_eq(disk_open_cow(&d, path, &why), 0, "%s", why);
	disk_close(&d);
	disk_close(&d);
}

Test(disk, id_is_stable_and_names_the_image)
{
	const char *p0 = make_image(0, 4096), *p1 = make_image(1, 4096);
	struct disk a, b, c;
	char first[DISK_ID_LEN + 1];
	const char *why = NULL;

	cr_assert_eq(disk_open_raw(&a, p0, true, &why), 0, "%s", why);
	memcpy(first, a.id, sizeof(first));
	cr_assert_eq(strncmp(a.id, "mayfly-", 7), 0, "%s", a.id);
	cr_assert_eq(strlen(a.id), DISK_ID_LEN);
	cr_assert_eq(disk_open_cow(&b, p0, &why), 0, "%s", why);
	cr_assert_str_eq(a.id, b.id);
	cr_assert_eq(disk_open_raw(&c, p1, true, &why), 0, "%s", why);
	cr_assert_str_neq(a.id, c.id);
	disk_close(&a);
	disk_close(&b);
	cr_assert_eq(disk_open_raw(&a, p0, false, &why), 0, "%s", why);
	cr_assert_str_eq(a.id, first, "the same file, opened again");
	disk_close(&a);
	disk_close(&c);
}

/* ---- copy-on-write ---- */

Test(disk, cow_writes_are_seen_and_never_reach_the_base)
{
	const uint64_t size = 64 * 1024;
	const char *path = make_image(0, size);
	uint8_t *before = image_slurp(path, size), *after;
	uint8_t data[8192], back[8192];
	struct disk d;
	const char *why = NULL;

	cr_assert_eq(disk_open_cow(&d, path, &why), 0, "%s", why);
	cr_assert_not(d.read_only);
	cr_assert_eq(d.size, size);
	memset(data, 0xab, sizeof(data));
	cr_assert_eq(write_one(&d, data, sizeof(data), 0), 0);
	cr_assert_eq(write_one(&d, data, 512, size - 512), 0);
	cr_assert_eq(read_one(&d, back, sizeof(back), 0), 0);
	cr_assert_arr_eq(back, data, sizeof(data));
	cr_assert_eq(read_one(&d, back, 512, size - 512), 0);
	cr_assert_arr_eq(back, data, 512);
	cr_assert_eq(d.ops->flush(&d), 0);

	after = image_slurp(path, size);
	cr_assert_arr_eq(after, before, size, "the base changed while open");
	free(after);
	disk_close(&d);
	after = image_slurp(path, size);
	cr_assert_arr_eq(after, before, size, "the base changed on close");
	free(after);
	free(before);
}

Test(disk, cow_partial_block_write_keeps_the_rest)
{
	const char *path = make_image(0, 32768);
	uint8_t sector[512], block[4096];
	struct disk d;
	const char *why = NULL;

	cr_assert_eq(disk_open_cow(&d, path, &why), 0, "%s", why);
	memset(sector, 0x11, sizeof(sector));
	cr_assert_eq(write_one(&d, sector, sizeof(sector), 4096 + 1024), 0);
	cr_assert_eq(read_one(&d, block, sizeof(block), 4096), 0);
	for (int i = 0; i < 4096; i++) {
		uint8_t want = i >= 1024 && i < 1536 ? 0x11 : image_pat(4096 + i);

		cr_assert_eq(block[i], want, "byte %d", i);
	}
	/* A second partial write into the now dirty block keeps the first. */
	memset(sector, 0x22, sizeof(sector));
	cr_assert_eq(write_one(&d, sector, sizeof(sector), 4096 + 3584), 0);
	cr_assert_eq(read_one(&d, block, sizeof(block), 4096), 0);
	for (int i = 0; i < 4096; i++) {
		uint8_t want = i >= 1024 && i < 1536 ? 0x11 : i >= 3584 ? 0x22 : image_pat(4096 + i);

		cr_assert_eq(block[i], want, "byte %d", i);
	}
	disk_close(&d);
}

Test(disk, cow_write_spans_blocks_and_iovecs_unaligned)
{
	const uint64_t size = 256 * 1024;
	const char *path = make_image(0, size);
	static const size_t wsizes[] = { 700, 3000, 5000, 12345, 1 };
	static const size_t rsizes[] = { 4096, 333, 9000 };
	static uint8_t model[256 * 1024], data[40 * 1024], back[256 * 1024];
	struct iovec iov[64];
	struct disk d;
	const char *why = NULL;
	const uint64_t off = 3 * 512; /* inside block 0, not 4 KiB aligned */
	int n;

	base_model(model, size);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 29 + 3);
	memcpy(model + off, data, sizeof(data));

	cr_assert_eq(disk_open_cow(&d, path, &why), 0, "%s", why);
	n = split(iov, 64, data, sizeof(data), wsizes, 5);
	cr_assert_eq(d.ops->writev(&d, iov, n, off), 0);
	n = split(iov, 64, back, size, rsizes, 3);
	cr_assert_eq(d.ops->readv(&d, iov, n, 0), 0);
	cr_assert_arr_eq(back, model, size);
	disk_close(&d);
}

Test(disk, cow_reads_mix_clean_and_dirty_blocks)
{
	const uint64_t size = 16 * 4096;
	const char *path = make_image(0, size);
	static uint8_t model[16 * 4096], back[16 * 4096];
	uint8_t buf[4096];
	struct disk d;
	const char *why = NULL;
	static const uint64_t writes[][2] = { /* offset, length */
		{ 1 * 4096, 4096 }, { 3 * 4096 + 512, 512 }, { 4 * 4096, 1024 },
		{ 7 * 4096 - 512, 1024 }, { 15 * 4096 + 3584, 512 },
	};

	base_model(model, size);
	cr_assert_eq(disk_open_cow(&d, path, &why), 0, "%s", why);
	for (size_t w = 0; w < sizeof(writes) / sizeof(writes[0]); w++) {
		memset(buf, (int)(0xc0 + w), sizeof(buf));
		cr_assert_eq(write_one(&d, buf, writes[w][1], writes[w][0]), 0);
		memset(model + writes[w][0], (int)(0xc0 + w), writes[w][1]);
	}
	cr_assert_eq(read_one(&d, back, size, 0), 0);
	cr_assert_arr_eq(back, model, size);
	/* Sector-sized reads straddling each boundary between clean and dirty. */
	for (uint64_t o = 0; o + 1024 <= size; o += 512) {
		cr_assert_eq(read_one(&d, buf, 1024, o), 0);
		cr_assert_arr_eq(buf, model + o, 1024, "at %lu", (unsigned long)o);
	}
	disk_close(&d);
}

/* Random sector writes and reads with random iovec splits against a model. */
Test(disk, cow_matches_a_model_under_random_io)
{
	const uint64_t size = 40 * 4096 + 1536; /* a short last block */
	const char *path = make_image(0, size);
	static uint8_t model[40 * 4096 + 1536], buf[64 * 1024];
	struct iovec iov[MAX_IOV];
	struct disk d;
	const char *why = NULL;
	unsigned int seed = 12345;

	base_model(model, size);
	cr_assert_eq(disk_open_cow(&d, path, &why), 0, "%s", why);
	for (int round = 0; round < 2000; round++) {
		uint64_t sectors = size / 512;
		uint64_t first = (uint64_t)rand_r(&seed) % sectors;
		uint64_t count = 1 + (uint64_t)rand_r(&seed) % 32;
		size_t len, done = 0;
		int n = 0;
		bool write = rand_r(&seed) & 1;

		if (first + count > sectors)
			count = sectors - first;
		len = count * 512;
		while (done < len && n < MAX_IOV - 1) {
			size_t s = 1 + (size_t)rand_r(&seed) % 3000;

			if (s > len - done)
				s = len - done;
			iov[n++] = (struct iovec){ buf + done, s };
			done += s;
		}
		if (done < len)
			iov[n++] = (struct iovec){ buf + done, len - done };
		if (write) {
			for (size_t i = 0; i < len; i++)
				buf[i] = (uint8_t)rand_r(&seed);
			cr_assert_eq(d.ops->writev(&d, iov, n, first * 512), 0);
			memcpy(model + first * 512, buf, len);
		} else {
			cr_assert_eq(d.ops->readv(&d, iov, n, first * 512), 0);
			cr_assert_arr_eq(buf, model + first * 512, len, "round %d", round);
		}
	}
	cr_assert_eq(read_one(&d, buf, 0, 0), 0);
	for (uint64_t o = 0; o < size; o += sizeof(buf)) {
		size_t len = size - o < sizeof(buf) ? size - o : sizeof(buf);

		cr_assert_eq(read_one(&d, buf, len, o), 0);
		cr_assert_arr_eq(buf, model + o, len);
	}
	disk_close(&d);
}

Test(disk, cow_quota_refuses_new_blocks_only)
{
	const char *why = "";
	uint8_t buf[4096];
	struct disk d, raw;

	memset(buf, 0xab, sizeof(buf));
	cr_assert_eq(disk_open_cow(&d, make_image(0, 64 * 1024), &why), 0, "%s", why);
	cr_assert_eq(disk_cow_set_quota(&d, 4096), 0);
	cr_assert_not(disk_cow_full(&d));
	cr_assert_eq(write_one(&d, buf, 100, 4096 + 10), 0, "the first block is within the quota");
	cr_assert(disk_cow_full(&d), "its one block held: the next new one fails");
	cr_assert_eq(write_one(&d, buf, 100, 0), -ENOSPC);
	cr_assert_eq(write_one(&d, buf, 4096, 4096), 0, "its own block again");
	/* A write spanning the held block and a new one: the held part lands. */
	cr_assert_eq(write_one(&d, buf, 8192, 4096), -ENOSPC);
	cr_assert_eq(disk_cow_used(&d), 4096);
	cr_assert_eq(disk_cow_set_quota(&d, 0), 0);
	cr_assert_eq(write_one(&d, buf, 1, 4096), 0, "a lower quota never takes a block back");
	disk_close(&d);
	cr_assert_eq(disk_open_raw(&raw, make_image(1, 4096), false, &why), 0, "%s", why);
	cr_assert_eq(disk_cow_set_quota(&raw, 4096), -EINVAL);
	cr_assert_eq(disk_cow_used(&raw), 0);
	cr_assert_not(disk_cow_full(&raw), "a raw disk has no quota");
	disk_close(&raw);
}

Test(disk, cow_short_last_block)
{
	const uint64_t size = 3 * 4096 + 512;
	const char *path = make_image(0, size);
	uint8_t buf[1024], back[1024];
	struct disk d;
	const char *why = NULL;

	cr_assert_eq(disk_open_cow(&d, path, &why), 0, "%s", why);
	memset(buf, 0x77, sizeof(buf));
	/* The whole last block is one sector: a full overwrite, no fill. */
	cr_assert_eq(write_one(&d, buf, 512, 3 * 4096), 0);
	cr_assert_eq(read_one(&d, back, 1024, 3 * 4096 - 512), 0);
	for (int i = 0; i < 512; i++)
		cr_assert_eq(back[i], image_pat(3 * 4096 - 512 + i));
	cr_assert_arr_eq(back + 512, buf, 512);
	disk_close(&d);
}

Test(disk, cow_disks_on_one_base_are_private)
{
	const char *path = make_image(0, 16384);
	uint8_t a_data[4096], b_data[4096], back[4096];
	struct disk a, b;
	const char *why = NULL;

	cr_assert_eq(disk_open_cow(&a, path, &why), 0, "%s", why);
	cr_assert_eq(disk_open_cow(&b, path, &why), 0, "%s", why);
	memset(a_data, 0xaa, sizeof(a_data));
	memset(b_data, 0xbb, sizeof(b_data));
	cr_assert_eq(write_one(&a, a_data, 4096, 4096), 0);
	cr_assert_eq(write_one(&b, b_data, 512, 8192), 0);

	cr_assert_eq(read_one(&b, back, 4096, 4096), 0);
	for (int i = 0; i < 4096; i++)
		cr_assert_eq(back[i], image_pat(4096 + i));
	cr_assert_eq(read_one(&a, back, 512, 8192), 0);
	for (int i = 0; i < 512; i++)
		cr_assert_eq(back[i], image_pat(8192 + i));
	cr_assert_eq(read_one(&a, back, 4096, 4096), 0);
	cr_assert_arr_eq(back, a_data, 4096);
	cr_assert_eq(read_one(&b, back, 512, 8192), 0);
	cr_assert_arr_eq(back, b_data, 512);
	disk_close(&a);
	disk_close(&b);
}

Test(disk, cow_base_truncated_underneath_is_eio_not_a_crash)
{
	const char *path = make_image(0, 32768);
	uint8_t buf[4096], back[4096];
	struct disk d;
	const char *why = NULL;

	cr_assert_eq(disk_open_cow(&d, path, &why), 0, "%s", why);
	memset(buf, 0x5c, sizeof(buf));
	cr_assert_eq(write_one(&d, buf, 4096, 0), 0);
	cr_assert_eq(truncate(path, 8192), 0);

	cr_assert_eq(read_one(&d, back, 4096, 0), 0, "a dirty block needs no base");
	cr_assert_arr_eq(back, buf, 4096);
	cr_assert_eq(read_one(&d, back, 4096, 4096), 0, "still inside the base");
	cr_assert_eq(read_one(&d, back, 4096, 16384), -EIO);
	cr_assert_eq(read_one(&d, back, 512, 32768 - 512), -EIO);
	/* A partial write must fill from the base first: that fails too. */
	cr_assert_eq(write_one(&d, buf, 512, 16384), -EIO);
	/* A whole-block write needs nothing from the base. */
	cr_assert_eq(write_one(&d, buf, 4096, 20480), 0);
	cr_assert_eq(read_one(&d, back, 4096, 20480), 0);
	cr_assert_arr_eq(back, buf, 4096);
	disk_close(&d);
}

Test(disk, short_transfers_and_eintr_are_resumed)
{
	const uint64_t size = 128 * 1024;
	const char *path = make_image(0, size), *base = make_image(1, size);
	static const size_t wsizes[] = { 512, 1000, 24, 4096, 7000, 3 };
	static const size_t rsizes[] = { 333, 4096, 2000 };
	static uint8_t data[48 * 1024], back[48 * 1024], model[128 * 1024];
	struct iovec iov[64];
	struct disk raw, cow;
	const char *why = NULL;
	int n;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + 11);
	cr_assert_eq(disk_open_raw(&raw, path, false, &why), 0, "%s", why);
	cr_assert_eq(disk_open_cow(&cow, base, &why), 0, "%s", why);
	chop = true;
	chop_calls = 0;

	n = split(iov, 64, data, sizeof(data), wsizes, 6);
	cr_assert_eq(raw.ops->writev(&raw, iov, n, 1024), 0);
	n = split(iov, 64, back, sizeof(back), rsizes, 3);
	cr_assert_eq(raw.ops->readv(&raw, iov, n, 1024), 0);
	cr_assert_arr_eq(back, data, sizeof(data));

	/* Copy-on-write: partial-block fills and clean reads go through pread. */
	base_model(model, size);
	memcpy(model + 4096 + 512, data, 512);
	cr_assert_eq(write_one(&cow, data, 512, 4096 + 512), 0);
	n = split(iov, 64, back, sizeof(back), rsizes, 3);
	cr_assert_eq(cow.ops->readv(&cow, iov, n, 0), 0);
	cr_assert_arr_eq(back, model, sizeof(back));

	chop = false;
	cr_assert_gt(chop_calls, 100, "the interposer was bypassed: %u calls", chop_calls);
	disk_close(&cow);
	disk_close(&raw);
}
