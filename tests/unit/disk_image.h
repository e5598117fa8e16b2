/* disk_image.h - the disk tests' image contents and file reads (test_disk.c, test_disk_snapshot.c, virtio_driver.h). */
#ifndef MAYFLY_TEST_DISK_IMAGE_H
#define MAYFLY_TEST_DISK_IMAGE_H

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

/* An image's byte at `off`: position-dependent, so a misplaced sector or
 * block shows. */
static inline uint8_t image_pat(uint64_t off)
{
	return (uint8_t)(off * 131 + (off >> 9) * 7 + 1);
}

/* The first `size` bytes of a file, malloc'd. */
static inline uint8_t *image_slurp(const char *path, uint64_t size)
{
	uint8_t *buf = malloc(size);
	int fd = open(path, O_RDONLY);

	cr_assert_not_null(buf);
	cr_assert_geq(fd, 0, "open %s", path);
	cr_assert_eq(pread(fd, buf, size, 0), (ssize_t)size);
	close(fd);
	return buf;
}

#endif
