/* cow.c - a copy-on-write disk: a read-only base file under a private in-memory overlay. */
#include "lib/atomic_file.h"
#include "lib/errmsg.h"
#include "disk/backend.h"
#include "disk/disk.h"
#include "lib/map_guard.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Unit of copy-on-write: one page of overlay, one bit of the dirty map. */
#define COW_BLOCK 4096u

struct cow {
	uint8_t *overlay;     /* disk-sized anonymous mapping: block b at b * COW_BLOCK */
	uint64_t *dirty;      /* one bit per block: 1 = the overlay holds it */
	size_t overlay_len;
	size_t dirty_len;
	uint64_t nr_blocks;
	uint64_t used_blocks;   /* dirty bits set; written by the I/O thread only */
	uint64_t quota_blocks;  /* at most this many: host RAM the guest may take */
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

			if (!cow_is_dirty(c, blk)) {
				/* Past the quota a write is the guest's I/O error;
				 * the blocks before it in this request stay written,
				 * as on a disk that failed mid-request. */
				if (c->used_blocks >= c->quota_blocks)
					return -ENOSPC;
				if (in != 0 || n != cow_block_len(disk, blk)) {
					ret = cow_fill(disk, c, blk);
					if (ret)
						return ret;
				}
				/* Read by the control thread (disk_cow_full). */
				__atomic_store_n(&c->used_blocks, c->used_blocks + 1, __ATOMIC_RELAXED);
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

/* The overlay: anonymous memory, or with a snapshot's overlay file
 * (overlay_fd), that file mapped privately. Either way a guest write makes
 * a page private to this process and nothing is ever written back. */
static int cow_map_overlay(struct disk *disk, struct cow *c, int overlay_fd, const char **why)
{
	struct stat st;

	if (overlay_fd < 0) {
		c->overlay = cow_map(c->overlay_len);
		if (!c->overlay)
			return errmsg_why(why, -errno, "cannot map memory for the copy-on-write overlay");
		return 0;
	}
	if (fstat(overlay_fd, &st) < 0)
		return errmsg_why(why, -errno, "cannot stat the overlay file");
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != disk->size)
		return errmsg_why(why, -EINVAL, "the overlay file is %llu bytes, the base image %llu",
				(unsigned long long)st.st_size, (unsigned long long)disk->size);
	c->overlay = mmap(NULL, c->overlay_len, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_NORESERVE, overlay_fd, 0);
	if (c->overlay == MAP_FAILED) {
		c->overlay = NULL;
		return errmsg_why(why, -errno, "cannot map the overlay file");
	}
	/* Best effort: without the guard, a cut file is a bare SIGBUS death. */
	(void)map_guard_add(c->overlay, c->overlay_len,
			    "mayfly: the root disk's blocks are gone: the snapshot's disk-vda file "
			    "was cut short while the VM ran; ending the process (exit 7)\n");
	return 0;
}

/* base_fd >= 0: the base is that descriptor (taken), else path. */
static int cow_open(struct disk *disk, const char *path, int base_fd, int overlay_fd,
		    const char **why)
{
	struct cow *c;
	int ret;

	/* The base: read-only, share-locked, never written. */
	ret = base_fd >= 0 ? disk_file_adopt(disk, base_fd, true, why) :
	      disk_file_open(disk, path, true, why);
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
	c->quota_blocks = c->nr_blocks;
	c->overlay_len = disk->size;
	c->dirty_len = (c->nr_blocks + 63) / 64 * sizeof(uint64_t);
	ret = cow_map_overlay(disk, c, overlay_fd, why);
	if (ret)
		goto err_free_cow;
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

int disk_open_cow(struct disk *disk, const char *path, const char **why)
{
	return cow_open(disk, path, -1, -1, why);
}

int disk_open_cow_fd(struct disk *disk, int fd, const char **why)
{
	return cow_open(disk, NULL, fd, -1, why);
}

int disk_cow_set_quota(struct disk *disk, uint64_t bytes)
{
	struct cow *c = disk->priv;

	if (!disk_is_cow(disk))
		return -EINVAL;
	c->quota_blocks = bytes / COW_BLOCK;
	return 0;
}

uint64_t disk_cow_used(const struct disk *disk)
{
	const struct cow *c = disk->priv;

	return disk_is_cow(disk) ? __atomic_load_n(&c->used_blocks, __ATOMIC_RELAXED) * COW_BLOCK : 0;
}

bool disk_cow_full(const struct disk *disk)
{
	const struct cow *c = disk->priv;

	return disk_is_cow(disk) && __atomic_load_n(&c->used_blocks, __ATOMIC_RELAXED) >= c->quota_blocks;
}

/* ---- snapshot ---- */

#define COW_SNAP_HEADER 16u   /* disk size u64, block size u32, 0 u32 */

bool disk_is_cow(const struct disk *disk)
{
	return disk->ops == &cow_ops;
}

int disk_check_snapshot(const struct disk *disk, const char **why)
{
	if (disk_is_cow(disk) || disk->read_only)
		return 0;
	return errmsg_why(why, -ENOTSUP, "a writable raw disk cannot be in a snapshot: its file is "
			"written in place, so a restored VM would find it changed under it");
}

/* Write each run of dirty blocks to the overlay file at its own offset;
 * clean blocks stay holes. */
static int cow_write_dirty(const struct disk *disk, const struct cow *c, int fd)
{
	uint64_t b = 0;

	while (b < c->nr_blocks) {
		uint64_t end = b;
		struct iovec iov;
		int ret;

		if (b % 64 == 0 && !c->dirty[b / 64]) {
			b += 64;
			continue;
		}
		while (end < c->nr_blocks && cow_is_dirty(c, end))
			end++;
		if (end == b) {
			b++;
			continue;
		}
		iov.iov_base = c->overlay + b * COW_BLOCK;
		iov.iov_len = (end == c->nr_blocks ? disk->size : end * COW_BLOCK) - b * COW_BLOCK;
		ret = disk_xfer(fd, &iov, 1, b * COW_BLOCK, true);
		if (ret)
			return ret;
		b = end;
	}
	return 0;
}

int disk_cow_save_fd(const struct disk *disk, int fd, struct snap_out *o, const char **why)
{
	const struct cow *c = disk->priv;
	int ret;

	if (!disk_is_cow(disk))
		return errmsg_why(why, -EINVAL, "not a copy-on-write disk");
	/* The size first: every block not written stays a hole. */
	ret = ftruncate(fd, (off_t)disk->size) < 0 ? -errno : cow_write_dirty(disk, c, fd);
	if (ret)
		return errmsg_why(why, ret, "cannot write the disk overlay: %s", strerror(-ret));
	snap_out_u64(o, disk->size);
	snap_out_u32(o, COW_BLOCK);
	snap_out_u32(o, 0);
	for (size_t i = 0; i < c->dirty_len / sizeof(uint64_t); i++)
		snap_out_u64(o, c->dirty[i]);
	return 0;
}

struct overlay_fill {
	const struct disk *disk;
	struct snap_out *o;
};

static int overlay_fill(int fd, void *opaque, const char **why)
{
	struct overlay_fill *f = opaque;

	return disk_cow_save_fd(f->disk, fd, f->o, why);
}

int disk_cow_save(const struct disk *disk, const char *overlay_path, struct snap_out *o,
		  const char **why)
{
	struct overlay_fill f = { disk, o };

	if (!disk_is_cow(disk))
		return errmsg_why(why, -EINVAL, "not a copy-on-write disk");
	return atomic_file_fill(overlay_path, overlay_fill, &f, why);
}

/* Fill the dirty map of a freshly opened disk from a saved payload. */
static int cow_load_dirty(struct disk *disk, const void *data, size_t len, const char **why)
{
	struct cow *c = disk->priv;
	size_t words = c->dirty_len / sizeof(uint64_t);
	uint64_t size, tail_bits = c->nr_blocks % 64;
	uint32_t block, zero;
	struct snap_in in;

	snap_in_init(&in, data, len);
	size = snap_in_u64(&in);
	block = snap_in_u32(&in);
	zero = snap_in_u32(&in);
	if (in.bad || block != COW_BLOCK || zero)
		return errmsg_why(why, -EBADMSG, "corrupt overlay bitmap: bad header");
	if (size != disk->size)
		return errmsg_why(why, -EINVAL, "the snapshot's overlay is for a disk of %llu bytes, "
				"the base image has %llu", (unsigned long long)size,
				(unsigned long long)disk->size);
	if (len - COW_SNAP_HEADER != c->dirty_len)
		return errmsg_why(why, -EBADMSG, "corrupt overlay bitmap: %zu bytes, a disk of %llu "
				"bytes needs %zu", len - COW_SNAP_HEADER,
				(unsigned long long)disk->size, c->dirty_len);
	c->used_blocks = 0;
	for (size_t i = 0; i < words; i++) {
		c->dirty[i] = snap_in_u64(&in);
		c->used_blocks += (uint64_t)__builtin_popcountll(c->dirty[i]);
	}
	if (tail_bits && (c->dirty[words - 1] >> tail_bits))
		return errmsg_why(why, -EBADMSG, "corrupt overlay bitmap: bits past the last block");
	return 0;
}

int disk_open_cow_restored(struct disk *disk, const char *base_path, const char *overlay_path,
			   const void *bitmap, size_t len, const char **why)
{
	int fd, ret;

	memset(disk, 0, sizeof(*disk));
	disk->fd = -1;
	fd = open(overlay_path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		ret = -errno;
		return errmsg_why(why, ret, "cannot open the overlay file %s: %s", overlay_path,
				strerror(-ret));
	}
	ret = cow_open(disk, base_path, -1, fd, why);
	close(fd);   /* the mapping keeps the file */
	if (ret)
		return ret;
	ret = cow_load_dirty(disk, bitmap, len, why);
	if (ret)
		disk_close(disk);
	return ret;
}
