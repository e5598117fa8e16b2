/* blk.c - virtio-blk: read, write, flush and get-id requests served from a disk backend. */
#include "virtio/blk.h"
#include "lib/errmsg.h"
#include "lib/log.h"

#include <endian.h>
#include <errno.h>
#include <linux/virtio_ids.h>
#include <linux/virtio_ring.h>
#include <stdio.h>
#include <string.h>

/* Move disk into blk (the caller's struct left closed-empty) and show
 * its size in config space. Transport lock held, or before the device
 * is live. */
static void take_disk(struct virtio_blk *blk, struct disk *disk)
{
	blk->disk = *disk;
	memset(disk, 0, sizeof(*disk));
	disk->fd = -1;
	blk->config.capacity = htole64(blk->disk.size / DISK_SECTOR_SIZE);
}

static void blk_config_read(void *dev, uint32_t offset, uint8_t *data, uint32_t len)
{
	struct virtio_blk *blk = dev;

	memcpy(data, (const uint8_t *)&blk->config + offset, len);
}

/* Do one parsed, valid request. Returns the status byte's value and adds
 * to *written the bytes put into the guest's writable buffers. */
static uint8_t blk_execute(struct virtio_blk *blk, struct blk_request *req, uint32_t *written)
{
	struct disk *disk = &blk->disk;
	int rc = 0;

	/* An empty slot has no sectors, so only a flush or GET_ID gets here. */
	if (!disk_is_open(disk) && req->type != VIRTIO_BLK_T_GET_ID)
		return VIRTIO_BLK_S_IOERR;
	switch (req->type) {
	case VIRTIO_BLK_T_IN:
		rc = req->data_len ? disk->ops->readv(disk, req->iov, req->iovcnt, req->offset) : 0;
		if (!rc) {
			blk->reads++;
			blk->bytes_read += req->data_len;
			*written += req->data_len;
		}
		break;
	case VIRTIO_BLK_T_OUT:
		rc = req->data_len ? disk->ops->writev(disk, req->iov, req->iovcnt, req->offset) : 0;
		if (!rc) {
			blk->writes++;
			blk->bytes_written += req->data_len;
		}
		break;
	case VIRTIO_BLK_T_FLUSH:
		rc = disk->ops->flush(disk);
		blk->flushes++;
		break;
	case VIRTIO_BLK_T_GET_ID: {
		size_t n = req->data_len < DISK_ID_LEN ? req->data_len : DISK_ID_LEN;
		uint8_t id[DISK_ID_LEN] = { 0 };
		size_t done = 0;

		/* The id is NUL-padded to 20 bytes, cut to the buffer. */
		memcpy(id, disk->id, strnlen(disk->id, DISK_ID_LEN));
		for (int i = 0; i < req->iovcnt && done < n; i++) {
			size_t k = req->iov[i].iov_len < n - done ? req->iov[i].iov_len : n - done;

			memcpy(req->iov[i].iov_base, id + done, k);
			done += k;
		}
		*written += (uint32_t)n;
		break;
	}
	}
	if (rc) {
		blk->errors++;
		log_limited(&blk->lim_io, LOG_WARN, "virtio-blk %s: %s at byte %llu (%u bytes) failed: %s",
			    blk->mmio.name, req->type == VIRTIO_BLK_T_IN ? "read" :
			    req->type == VIRTIO_BLK_T_OUT ? "write" : "flush",
			    (unsigned long long)req->offset, req->data_len, strerror(-rc));
		return VIRTIO_BLK_S_IOERR;
	}
	return VIRTIO_BLK_S_OK;
}

/* Serve the queue until it is empty (I/O thread, transport lock held). */
static void blk_queue_notify(void *dev, struct virtio_mmio *m, unsigned index)
{
	struct virtio_blk *blk = dev;
	struct vq *q = &m->queues[index];
	bool pushed = false;
	const char *why = "";
	int rc;

	while ((rc = vq_pop(q, &blk->chain, &why)) > 0) {
		struct blk_request *req = &blk->req;
		uint32_t written = 0;
		int status = blk_request_parse(&blk->chain, blk->disk.size / DISK_SECTOR_SIZE,
					       blk->disk.read_only, req);

		if (status < 0) {
			virtio_mmio_fail(m, "request without a writable status byte");
			return;
		}
		if (status == VIRTIO_BLK_S_OK)
			status = blk_execute(blk, req, &written);
		else
			blk->errors++;
		*req->status = (uint8_t)status;
		vq_push(q, blk->chain.head, written + 1);
		pushed = true;
	}
	if (rc < 0) {
		virtio_mmio_fail(m, why);
		return;
	}
	if (pushed && vq_should_interrupt(q))
		virtio_mmio_notify(m);
}

static void blk_reset(void *dev)
{
	(void)dev;   /* requests finish synchronously: nothing is in flight */
}

/* Snapshot: the device's part is the disk's capacity in sectors, so a
 * base image of another size is refused here rather than shown to a
 * guest that knows the old one. Requests finish synchronously, so none is
 * in flight. */
static int blk_save(void *dev, struct snap_out *o, const char **why)
{
	struct virtio_blk *blk = dev;

	if (blk->inserted)
		return errmsg_why(why, -ENOTSUP, "virtio-blk %s: a disk inserted while the VM ran "
				"cannot be in a snapshot", blk->mmio.name);
	snap_out_u64(o, blk->disk.size / DISK_SECTOR_SIZE);
	return 0;
}

static int blk_restore(void *dev, struct snap_in *in, const char **why)
{
	struct virtio_blk *blk = dev;
	uint64_t sectors = snap_in_u64(in);

	if (!snap_in_end(in))
		return errmsg_why(why, -EBADMSG, "virtio-blk %s: corrupt snapshot state: its part is "
				"not one 8-byte capacity", blk->mmio.name);
	if (sectors != blk->disk.size / DISK_SECTOR_SIZE)
		return errmsg_why(why, -EINVAL, "virtio-blk %s: the snapshot's disk has %llu sectors, "
				"this one %llu", blk->mmio.name, (unsigned long long)sectors,
				(unsigned long long)(blk->disk.size / DISK_SECTOR_SIZE));
	return 0;
}

static const struct virtio_device_ops blk_ops = {
	.name = "blk",
	.device_id = VIRTIO_ID_BLOCK,
	.nr_queues = 1,
	.queue_max = VIRTIO_BLK_QUEUE_SIZE,
	.config_read = blk_config_read,
	.config_size = sizeof(struct virtio_blk_config),
	.queue_notify = blk_queue_notify,
	.reset = blk_reset,
	.save = blk_save,
	.restore = blk_restore,
};

int virtio_blk_init(struct virtio_blk *blk, struct disk *disk, const struct guest_mem *mem,
		    const char *name)
{
	/* No INDIRECT_DESC: every descriptor is in the one table vq_pop checks.
	 * SEG_MAX lets Linux send multi-segment requests without it. */
	uint64_t features = (1ULL << VIRTIO_RING_F_EVENT_IDX) | (1ULL << VIRTIO_BLK_F_FLUSH) |
			    (1ULL << VIRTIO_BLK_F_SEG_MAX) | (1ULL << VIRTIO_BLK_F_BLK_SIZE);
	int rc;

	memset(blk, 0, sizeof(*blk));
	take_disk(blk, disk);
	if (blk->disk.read_only)
		features |= 1ULL << VIRTIO_BLK_F_RO;
	blk->config.seg_max = htole32(VIRTIO_BLK_SEG_MAX);
	blk->config.blk_size = htole32(DISK_SECTOR_SIZE);
	rc = virtio_mmio_init(&blk->mmio, &blk_ops, blk, features, mem, name);
	if (rc)
		virtio_blk_destroy(blk);
	return rc;
}

int virtio_blk_init_empty(struct virtio_blk *blk, const struct guest_mem *mem, const char *name,
			  const char *id)
{
	struct disk none = { .fd = -1 };

	snprintf(none.id, sizeof(none.id), "%s", id);
	return virtio_blk_init(blk, &none, mem, name);
}

int virtio_blk_insert(struct virtio_blk *blk, struct disk *disk, const char **why)
{
	int rc = 0;

	pthread_mutex_lock(&blk->mmio.lock);
	if (disk_is_open(&blk->disk)) {
		rc = errmsg_why(why, -EBUSY, "virtio-blk %s holds a disk already", blk->mmio.name);
	} else {
		take_disk(blk, disk);
		blk->inserted = true;
		virtio_mmio_config_changed(&blk->mmio);
	}
	pthread_mutex_unlock(&blk->mmio.lock);
	return rc;
}

void virtio_blk_log_stats(const struct virtio_blk *blk)
{
	log_info("virtio-blk %s: %llu reads (%llu KiB), %llu writes (%llu KiB), %llu flushes, "
		 "%llu errors, %llu kicks, %llu interrupts", blk->mmio.name,
		 (unsigned long long)blk->reads, (unsigned long long)blk->bytes_read / 1024,
		 (unsigned long long)blk->writes, (unsigned long long)blk->bytes_written / 1024,
		 (unsigned long long)blk->flushes, (unsigned long long)blk->errors,
		 (unsigned long long)blk->mmio.kicks, (unsigned long long)blk->mmio.interrupts);
}

void virtio_blk_destroy(struct virtio_blk *blk)
{
	virtio_mmio_destroy(&blk->mmio);
	disk_close(&blk->disk);
}
