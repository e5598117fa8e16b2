/* disk.h - block storage behind virtio-blk: an ops table with a raw file and a copy-on-write backend. */
#ifndef MAYFLY_DISK_DISK_H
#define MAYFLY_DISK_DISK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "snapshot/codec.h"

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

/* The same for a base already open (fd, read access; a descriptor another
 * process passed): the disk owns fd from here on, closed on failure too. */
int disk_open_cow_fd(struct disk *disk, int fd, const char **why);

/* Whether the disk holds an image: a spare slot's (struct virtio_blk's
 * before an insert) does not. */
static inline bool disk_is_open(const struct disk *disk)
{
	return disk->ops != NULL;
}

/* --disk-quota: a copy-on-write disk's overlay (host RAM) holds at most
 * `bytes` (rounded down to its 4 KiB blocks; a snapshot's blocks count):
 * a write that needs a block past it fails with -ENOSPC, which the guest
 * sees as VIRTIO_BLK_S_IOERR, and the VM goes on. Rewriting a block it
 * holds always works. The default is the disk's size. 0, or -EINVAL for
 * another kind of disk. */
int disk_cow_set_quota(struct disk *disk, uint64_t bytes);

/* Bytes the overlay holds (its blocks), 0 for another kind of disk. Safe
 * from another thread than the one writing. */
uint64_t disk_cow_used(const struct disk *disk);

/* Whether the overlay holds its quota: a write to a block it does not hold
 * fails (the guest's I/O error). The overlay never shrinks: a guest that
 * deletes files gets no blocks back. False for another kind of disk; safe
 * from another thread than the one writing. */
bool disk_cow_full(const struct disk *disk);

/* Release the backend and close the file. Safe on a zeroed struct disk. */
void disk_close(struct disk *disk);

/* ---- snapshots (docs/snapshot.md, "Devices") ---- */

/* Whether `disk` was opened by disk_open_cow or disk_open_cow_restored. */
bool disk_is_cow(const struct disk *disk);

/* Whether a VM with this disk can be snapshotted. 0 for a copy-on-write
 * disk (save it with disk_cow_save) and for a read-only raw disk (nothing
 * to save: the restored VM opens the same file again, which must not have
 * changed: the guest's page cache may hold its blocks). -ENOTSUP with *why
 * for a writable raw disk: its file is the user's and written in place,
 * so after a snapshot it goes on changing under every restored copy. */
int disk_check_snapshot(const struct disk *disk, const char **why)
	__attribute__((warn_unused_result));

/* Save a copy-on-write disk's overlay: write `overlay_path` atomically (a
 * temporary file, mode 0600, beside it, then rename) as a sparse file of
 * the disk's size holding exactly the blocks the guest wrote, at their
 * offsets, and holes elsewhere; then append the dirty bitmap to `o` as a
 * section payload (disk size u64, block size u32 = 4096, 0 u32, one bit
 * per block in u64 words). Guest I/O must be stopped. -EINVAL for another
 * kind of disk; -errno with *why when the file cannot be written (nothing
 * is left behind, an older file of that name stays). */
int disk_cow_save(const struct disk *disk, const char *overlay_path, struct snap_out *o,
		  const char **why) __attribute__((warn_unused_result));
/* The same into `fd`, an empty file open for writing (a jailed VM gets it
 * from the process that names the file), not synced. */
int disk_cow_save_fd(const struct disk *disk, int fd, struct snap_out *o, const char **why)
	__attribute__((warn_unused_result));

/* Open a copy-on-write disk as a snapshot left it: the base at base_path
 * opened as disk_open_cow does, and the overlay file mapped MAP_PRIVATE as
 * the overlay (any number of VMs share its page cache; a guest write
 * copies the page into this process; the file is opened read-only and
 * never written, and must not change while mapped: snapshot files are
 * replaced, never rewritten), with the dirty bitmap from disk_cow_save's
 * payload (untrusted). Refuses an overlay file that is not a regular file
 * of the base's size, or a payload for another size (-EINVAL), a bitmap of
 * the wrong length, a bad header or bits past the last block (-EBADMSG);
 * *why says which. On failure nothing stays open. */
int disk_open_cow_restored(struct disk *disk, const char *base_path, const char *overlay_path,
			   const void *bitmap, size_t len, const char **why)
	__attribute__((warn_unused_result));

#endif
