/* test_image_id.c - the sparse digest of a snapshot's own files: the same file and a copy accepted, every change refused. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/image_id.h"

#define PAGE 4096
#define PAGES 64

static char dir[] = "/tmp/test-image-id.XXXXXX";
static char orig[64], copy[64];

static void setup(void)
{
	cr_assert_not_null(mkdtemp(dir));
	snprintf(orig, sizeof(orig), "%s/memory", dir);
	snprintf(copy, sizeof(copy), "%s/copy", dir);
}

static void teardown(void)
{
	unlink(orig);
	unlink(copy);
	rmdir(dir);
}

TestSuite(image_id, .init = setup, .fini = teardown);

static void put(const char *path, uint64_t off, const void *p, size_t n)
{
	int fd = open(path, O_WRONLY);

	cr_assert_geq(fd, 0);
	cr_assert_eq(pwrite(fd, p, n, (off_t)off), (ssize_t)n);
	close(fd);
}

/* A sparse file of `size` bytes, data in pages 0, 5 and 40 (as the memory
 * file is written: truncated to size, data pages written, holes left). */
static void make(const char *path, uint64_t size)
{
	uint8_t page[PAGE];
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);

	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, (off_t)size), 0);
	close(fd);
	for (int i = 0; i < PAGE; i++)
		page[i] = (uint8_t)(i * 7 + 1);
	put(path, 0, page, PAGE);
	put(path, 5 * PAGE, page, PAGE);
	put(path, 40 * PAGE, page, 100);
}

/* The identity the snapshot records, taken through an fd as the VM does. */
static void identify(const char *path, struct image_id *id)
{
	const char *why = NULL;
	int fd = open(path, O_RDONLY);

	cr_assert_geq(fd, 0);
	cr_assert_eq(image_id_sparse_fd(fd, id, &why), 0, "%s", why);
	close(fd);
}

/* A byte for byte copy with every hole written as zeros (a copy tool that
 * does not keep holes): another inode, the same content. */
static void copy_dense(const char *from, const char *to)
{
	struct stat st;
	uint8_t *buf;
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	cr_assert(in >= 0 && out >= 0);
	cr_assert_eq(fstat(in, &st), 0);
	buf = malloc((size_t)st.st_size);
	cr_assert_eq(read(in, buf, (size_t)st.st_size), st.st_size);
	cr_assert_eq(write(out, buf, (size_t)st.st_size), st.st_size);
	free(buf);
	close(in);
	close(out);
}

static int check(const char *path, const struct image_id *id)
{
	const char *why = NULL;

	return image_id_check_sparse(path, id, &why);
}

Test(image_id, same_file_and_a_copy_accepted)
{
	struct image_id id, id2;

	make(orig, PAGES * PAGE);
	identify(orig, &id);
	cr_assert_eq(id.size, PAGES * PAGE);
	cr_assert_eq(check(orig, &id), 0);
	copy_dense(orig, copy);
	cr_assert_eq(check(copy, &id), 0, "a dense copy has the same digest");
	identify(copy, &id2);
	cr_assert_eq(memcmp(id.sha256, id2.sha256, IMAGE_HASH_LEN), 0);
	cr_assert_neq(id.ino, id2.ino);
}

Test(image_id, a_changed_file_refused)
{
	struct image_id id;
	uint8_t b = 0xff;

	make(orig, PAGES * PAGE);
	identify(orig, &id);
	/* In a data page, then in a hole: both change the content. */
	put(orig, 5 * PAGE + 17, &b, 1);
	cr_assert_eq(check(orig, &id), -ESTALE);
	make(orig, PAGES * PAGE);
	put(orig, 20 * PAGE + 3, &b, 1);
	cr_assert_eq(check(orig, &id), -ESTALE, "a byte written into a hole");
}

Test(image_id, a_corrupt_or_truncated_copy_refused)
{
	struct image_id id;
	uint8_t b = 0x5a;

	make(orig, PAGES * PAGE);
	identify(orig, &id);
	copy_dense(orig, copy);
	put(copy, 40 * PAGE + 99, &b, 1);
	cr_assert_eq(check(copy, &id), -ESTALE, "a flipped byte");
	copy_dense(orig, copy);
	cr_assert_eq(truncate(copy, (PAGES - 1) * PAGE), 0);
	cr_assert_eq(check(copy, &id), -ESTALE, "a copy cut by a page of zeros");
	copy_dense(orig, copy);
	cr_assert_eq(truncate(copy, 40 * PAGE + 50), 0);
	cr_assert_eq(check(copy, &id), -ESTALE, "a copy cut inside data");
}

Test(image_id, a_page_moved_refused)
{
	struct image_id id, moved;
	uint8_t page[PAGE];
	int fd;

	make(orig, PAGES * PAGE);
	identify(orig, &id);
	/* The same bytes one page further: the page numbers are hashed. */
	fd = open(orig, O_RDWR);
	cr_assert_eq(pread(fd, page, PAGE, 5 * PAGE), PAGE);
	cr_assert_eq(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 5 * PAGE, PAGE), 0);
	cr_assert_eq(pwrite(fd, page, PAGE, 6 * PAGE), PAGE);
	close(fd);
	identify(orig, &moved);
	cr_assert_neq(memcmp(id.sha256, moved.sha256, IMAGE_HASH_LEN), 0);
	cr_assert_eq(check(orig, &id), -ESTALE);
}

Test(image_id, odd_size_and_empty_file)
{
	struct image_id id, empty;
	uint8_t b = 1;

	/* An overlay is the disk's size, not always whole pages. */
	make(orig, PAGES * PAGE + 100);
	put(orig, PAGES * PAGE + 99, &b, 1);
	identify(orig, &id);
	copy_dense(orig, copy);
	cr_assert_eq(check(copy, &id), 0);
	cr_assert_eq(truncate(copy, PAGES * PAGE + 99), 0);
	cr_assert_eq(check(copy, &id), -ESTALE, "the last byte cut");
	cr_assert_eq(truncate(copy, 0), 0);
	identify(copy, &empty);
	cr_assert_eq(empty.size, 0);
	cr_assert_neq(memcmp(id.sha256, empty.sha256, IMAGE_HASH_LEN), 0);
}

Test(image_id, missing_file)
{
	struct image_id id = { 0 };
	const char *why = NULL;

	cr_assert_eq(image_id_check_sparse("/nonexistent/memory", &id, &why), -ENOENT);
	cr_assert(why && strstr(why, "/nonexistent/memory"), "%s", why);
}
