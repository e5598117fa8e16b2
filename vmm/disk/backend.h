/* backend.h - helpers shared by the disk backends (raw.c, cow.c); devices use disk.h only. */
#ifndef MAYFLY_DISK_BACKEND_H
#define MAYFLY_DISK_BACKEND_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "disk/disk.h"

/* Zero *disk, then open PATH (read-only or read-write, close-on-exec),
 * check it is a regular file or block device whose size is a non-zero
 * multiple of 512, and flock it (shared when read-only, exclusive when
 * writable, never waiting). Fills fd, size, read_only and id, leaves ops
 * and priv NULL. Returns 0, or -errno with *why set and disk->fd == -1
 * (-EBUSY when another holder has the lock). */
int disk_file_open(struct disk *disk, const char *path, bool read_only, const char **why)
	__attribute__((warn_unused_result));

/* The same for fd, already open (a descriptor passed by another process):
 * its access mode must allow read_only's use. The fd is the disk's on
 * success and closed on failure. */
int disk_file_adopt(struct disk *disk, int fd, bool read_only, const char **why)
	__attribute__((warn_unused_result));

/* Undo disk_file_open for a backend whose own setup failed. */
void disk_file_close(struct disk *disk);

/* Total length of iov into *len, and whether [offset, offset + len) lies
 * inside the disk. The caller checked this already; backends check again
 * so that no arithmetic below them can overflow. Returns 0 or -EINVAL. */
int disk_check_io(const struct disk *disk, const struct iovec *iov, int iovcnt,
		  uint64_t offset, uint64_t *len);

/* Move all of iov at offset (preadv, or pwritev when `write`), resuming
 * after short transfers and EINTR; past IOV_MAX iovecs too. A transfer of
 * nothing is -EIO (end of file on a read). 0 or -errno. */
int disk_xfer(int fd, const struct iovec *iov, int iovcnt, uint64_t offset, bool write);

/* pread until `len` bytes are in: resumes after short reads and EINTR;
 * end of file before that is -EIO (the image shrank under us). */
int disk_pread_full(int fd, void *buf, size_t len, uint64_t offset);

#endif
