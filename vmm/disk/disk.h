/* disk.h - block storage behind virtio-blk: an ops table with a raw file and a copy-on-write backend. */
#ifndef MAYFLY_DISK_DISK_H
#define MAYFLY_DISK_DISK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#define DISK_SECTOR_SIZE 512
#define DISK_ID_LEN      20     /* VIRTIO_BLK_ID_BYTES: the serial GET_ID returns */

struct disk;

/* Every operation takes a byte offset and iovecs already checked by the
 * caller against the disk size; each returns 0 or -errno and never does a
 * short transfer silently. Called from one I/O thread at a time. */
struct disk_ops {
	int (*readv)(struct disk *disk, const struct iovec *iov, int iovcnt, uint64_t offset);
	int (*writev)(struct disk *disk, const struct iovec *iov, int iovcnt, uint64_t offset);
	/* Make completed writes as durable as this backend makes anything. */
	int (*flush)(struct disk *disk);
	void (*close)(struct disk *disk);
};

struct disk {
	const struct disk_ops *ops;
	uint64_t size;            /* bytes; a multiple of DISK_SECTOR_SIZE */
	bool read_only;           /* the guest sees VIRTIO_BLK_F_RO */
	char id[DISK_ID_LEN + 1]; /* NUL-terminated serial */
	int fd;                   /* the image file */
	void *priv;               /* backend state */
};

/* Open PATH as a raw disk, read-write or read-only. The file is locked
 * (flock: exclusive when writable, shared when read-only) so two VMs never
 * write one image. Its size must be a non-zero multiple of 512. Returns 0,
 * or -errno with *why a short reason. */
int disk_open_raw(struct disk *disk, const char *path, bool read_only, const char **why);

/* Open PATH as the base of a copy-on-write disk: the file is opened
 * read-only (and share-locked) and never written; the guest sees a writable
 * disk whose writes land in memory private to this process and vanish with
 * it. Same errors as disk_open_raw. */
int disk_open_cow(struct disk *disk, const char *path, const char **why);

/* Release the backend and close the file. Safe on a zeroed struct disk. */
void disk_close(struct disk *disk);

#endif
