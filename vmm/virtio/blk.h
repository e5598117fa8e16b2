/* blk.h - the virtio-blk device: a disk backend served over one virtqueue. */
#ifndef MAYFLY_VIRTIO_BLK_H
#define MAYFLY_VIRTIO_BLK_H

#include <linux/virtio_blk.h>

#include "disk/disk.h"
#include "virtio/blk_request.h"
#include "virtio/mmio.h"
#include "virtio/queue.h"

#define VIRTIO_BLK_QUEUE_SIZE 256
#define VIRTIO_BLK_SEG_MAX    (VIRTIO_BLK_QUEUE_SIZE - 2)   /* a request is header + data + status */

struct virtio_blk {
	struct virtio_mmio mmio;      /* the transport; its opaque is this struct */
	struct disk disk;             /* owned: closed by virtio_blk_destroy */
	struct virtio_blk_config config;
	bool inserted;                /* virtio_blk_insert filled the empty slot */
	/* Scratch for the request in progress (I/O thread, transport lock held). */
	struct vq_chain chain;
	struct blk_request req;
	/* Failed disk I/O: the guest can retry a failing request forever. */
	struct log_limit lim_io;
	/* Statistics, for the log at exit. */
	uint64_t reads, writes, flushes, errors;
	uint64_t bytes_read, bytes_written;
};

/* A snapshot of the device is its transport's: virtio_mmio_save and
 * virtio_mmio_restore on &blk->mmio, whose payload ends with the disk's
 * capacity in sectors (u64; a restore refuses another size with -EINVAL;
 * an empty slot's is 0). A slot filled by virtio_blk_insert refuses to be
 * saved (-ENOTSUP).
 * The disk's contents are the disk's business (disk_cow_save). */

/* Wrap an opened disk (ownership moves to blk) in a virtio-blk device
 * named `name` ("vda"). 0 or -errno. */
int virtio_blk_init(struct virtio_blk *blk, struct disk *disk, const struct guest_mem *mem,
		    const char *name) __attribute__((warn_unused_result));

/* An empty slot (--spare-disks): no sectors, serial `id`; reads and
 * writes fail (IOERR) until virtio_blk_insert. 0 or -errno. */
int virtio_blk_init_empty(struct virtio_blk *blk, const struct guest_mem *mem, const char *name,
			  const char *id) __attribute__((warn_unused_result));

/* Put an opened disk (ownership moves to blk; its id is the serial the
 * guest reads) into an empty slot while the VM runs: the capacity changes
 * and the guest gets a config-change interrupt (Linux resizes the disk).
 * Any thread; takes the transport lock. 0, or -EBUSY with *why when the
 * slot holds a disk (disk then stays the caller's). The VM can no longer
 * be saved (a snapshot would not hold the inserted disk). */
int virtio_blk_insert(struct virtio_blk *blk, struct disk *disk, const char **why)
	__attribute__((warn_unused_result));

/* Log the request statistics at info level. */
void virtio_blk_log_stats(const struct virtio_blk *blk);

void virtio_blk_destroy(struct virtio_blk *blk);

#endif
