/* cow.c - a copy-on-write disk: a read-only base file under a private in-memory overlay. */
#include "disk/backend.h"
#include "disk/disk.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Unit of copy-on-write: one page of overlay, one bit of the dirty map. */
#define COW_BLOCK 4096u

struct cow {
	uint8_t *overlay;     /* disk-sized anonymous mapping: block b at b * COW_BLOCK */
	uint64_t *dirty;      /* one bit per block: 1 = the overlay holds it */
	size_t overlay_len;
	size_t dirty_len;
	uint64_t nr_blocks;
};

static bool cow_is_dirty(const struct cow *c, uint64_t blk)
{
	return c->dirty[blk / 64] & (1ULL << (blk % 64));
}

static void cow_set_dirty(struct cow *c, uint64_t blk)
{
	c->dirty[blk / 64] |= 1ULL << (blk % 64);
}

/* Bytes in block `blk`: COW_BLOCK except for a short last block (the disk
 * is a multiple of 512, not of 4096). */
static uint64_t cow_block_len(const struct disk *disk, uint64_t blk)
{
	uint64_t start = blk * COW_BLOCK;

	return disk->size - start < COW_BLOCK ? disk->size - start : COW_BLOCK;
}

/* Length of the run from `pos` (at most `max` bytes) over blocks that share
 * the dirty state of the first, so a clean run is one pread, not one per block. */
static size_t cow_run(const struct cow *c, uint64_t pos, size_t max, bool *dirty)
{
	uint64_t blk = pos / COW_BLOCK;
	size_t run = COW_BLOCK - pos % COW_BLOCK;

	*dirty = cow_is_dirty(c, blk);
	while (run < max && blk + 1 < c->nr_blocks && cow_is_dirty(c, blk + 1) == *dirty) {
		blk++;
		run += COW_BLOCK;
	}
	return run < max ? run : max;
}

static int cow_readv(struct disk *disk, const struct iovec *iov, int iovcnt, uint64_t offset)
{
	struct cow *c = disk->priv;
	uint64_t len, pos = offset;
	int ret = disk_check_io(disk, iov, iovcnt, offset, &len);

	if (ret)
		return ret;
	/* Every pos + n below stays within offset + len <= size: no overflow. */
	for (int i = 0; i < iovcnt; i++) {
		uint8_t *p = iov[i].iov_base;
		size_t left = iov[i].iov_len;

		while (left) {
			bool dirty;
			size_t n = cow_run(c, pos, left, &dirty);

			if (dirty) {
				memcpy(p, c->overlay + pos, n);
			} else {
				/* pread, never a mapping of the base: a base cut short
				 * by someone on the host is -EIO here, not SIGBUS. */
				ret = disk_pread_full(disk->fd, p, n, pos);
				if (ret)
					return ret;
			}
			p += n;
			pos += n;
			left -= n;
		}
	}
	return 0;
}

/* Copy block `blk` of the base into the overlay so a partial write can
 * land on top of the bytes it does not cover. */
static int cow_fill(struct disk *disk, struct cow *c, uint64_t blk)
{
	uint64_t start = blk * COW_BLOCK;

	return disk_pread_full(disk->fd, c->overlay + start, cow_block_len(disk, blk), start);
}

static int cow_writev(struct disk *disk, const struct iovec *iov, int iovcnt, uint64_t offset)
{
	struct cow *c = disk->priv;
	uint64_t len, pos = offset;
	int ret = disk_check_io(disk, iov, iovcnt, offset, &len);

	if (ret)
		return ret;
	for (int i = 0; i < iovcnt; i++) {
		const uint8_t *p = iov[i].iov_base;
		size_t left = iov[i].iov_len;

		while (left) {
			uint64_t blk = pos / COW_BLOCK, in = pos % COW_BLOCK;
			size_t n = left < COW_BLOCK - in ? left : COW_BLOCK - in;

			if (!cow_is_dirty(c, blk) && (in != 0 || n != cow_block_len(disk, blk))) {
				ret = cow_fill(disk, c, blk);
				if (ret)
					return ret;
			}
			memcpy(c->overlay + pos, p, n);
			cow_set_dirty(c, blk);
			p += n;
			pos += n;
			left -= n;
		}
	}
	return 0;
}

/* Nothing to persist, and saying so is honest: the contract of a
 * copy-on-write disk is that its writes live exactly as long as the VM.
 * Every completed write is already as durable as it will ever be. */
static int cow_flush(struct disk *disk)
{
	(void)disk;
	return 0;
}

static void cow_close(struct disk *disk)
{
	struct cow *c = disk->priv;

	if (!c)
		return;
	munmap(c->dirty, c->dirty_len);
	munmap(c->overlay, c->overlay_len);
	free(c);
	disk->priv = NULL;
}

static const struct disk_ops cow_ops = {
	.readv = cow_readv,
	.writev = cow_writev,
	.flush = cow_flush,
	.close = cow_close,
};

/* NORESERVE anonymous memory: only pages written cost RAM, so memory use
 * is bounded by what the guest writes, at most the disk size. */
static void *cow_map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

int disk_open_cow(struct disk *disk, const char *path, const char **why)
{
	struct cow *c;
	int ret;

	/* The base: read-only, share-locked, never written. */
	ret = disk_file_open(disk, path, true, why);
	if (ret)
		return ret;
	if (disk->size > SIZE_MAX) {
		ret = -EFBIG;
		*why = "image is too large for a copy-on-write overlay";
		goto err_close_file;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		ret = -ENOMEM;
		*why = "out of memory";
		goto err_close_file;
	}
	c->nr_blocks = (disk->size + COW_BLOCK - 1) / COW_BLOCK;
	c->overlay_len = disk->size;
	c->dirty_len = (c->nr_blocks + 63) / 64 * sizeof(uint64_t);
	c->overlay = cow_map(c->overlay_len);
	if (!c->overlay) {
		ret = -errno;
		*why = "cannot map memory for the copy-on-write overlay";
		goto err_free_cow;
	}
	c->dirty = cow_map(c->dirty_len);
	if (!c->dirty) {
		ret = -errno;
		*why = "cannot map memory for the copy-on-write overlay";
		goto err_unmap_overlay;
	}
	/* The guest's writes have no business in a core dump of the VMM. */
	madvise(c->overlay, c->overlay_len, MADV_DONTDUMP);

	disk->priv = c;
	disk->read_only = false;
	disk->ops = &cow_ops;
	return 0;

err_unmap_overlay:
	munmap(c->overlay, c->overlay_len);
err_free_cow:
	free(c);
err_close_file:
	disk_file_close(disk);
	return ret;
}
