/* blk_request.c - parse one virtio-blk request from a popped chain (pure: no I/O, no state). */
#include "virtio/blk_request.h"
#include "disk/disk.h"

#include <endian.h>
#include <errno.h>
#include <linux/virtio_blk.h>
#include <string.h>

#define BLK_HDR_LEN ((uint64_t)sizeof(struct virtio_blk_outhdr))

/* Gather the first 16 readable bytes, wherever the driver split them. */
static void blk_read_header(const struct vq_chain *chain, struct virtio_blk_outhdr *hdr)
{
	uint8_t *dst = (uint8_t *)hdr;
	uint64_t got = 0;

	for (int i = 0; i < chain->nr_readable && got < BLK_HDR_LEN; i++) {
		uint64_t n = chain->segs[i].len;

		if (n > BLK_HDR_LEN - got)
			n = BLK_HDR_LEN - got;
		memcpy(dst + got, chain->segs[i].hva, n);
		got += n;
	}
}

/* Append to req->iov the bytes [skip, skip + len) of segments first..end-1
 * (counted from the start of segment `first`), dropping empty slices. */
static void blk_slice(struct blk_request *req, const struct vq_chain *chain,
		      int first, int end, uint64_t skip, uint64_t len)
{
	for (int i = first; i < end && len; i++) {
		uint64_t seg_len = chain->segs[i].len, n;

		if (skip >= seg_len) {
			skip -= seg_len;
			continue;
		}
		n = seg_len - skip < len ? seg_len - skip : len;
		req->iov[req->iovcnt].iov_base = chain->segs[i].hva + skip;
		req->iov[req->iovcnt].iov_len = n;
		req->iovcnt++;
		len -= n;
		skip = 0;
	}
}

/* For IN and OUT: the data is whole sectors, and [sector, sector + len/512)
 * lies inside the disk with no overflow on the way to a byte offset. */
static int blk_check_range(struct blk_request *req, uint64_t data_len, uint64_t capacity)
{
	uint64_t end_sector, end_byte;

	if (data_len % DISK_SECTOR_SIZE)
		return VIRTIO_BLK_S_IOERR;
	if (__builtin_mul_overflow(req->sector, (uint64_t)DISK_SECTOR_SIZE, &req->offset) ||
	    __builtin_add_overflow(req->sector, data_len / DISK_SECTOR_SIZE, &end_sector) ||
	    __builtin_add_overflow(req->offset, data_len, &end_byte) ||
	    end_sector > capacity)
		return VIRTIO_BLK_S_IOERR;
	return VIRTIO_BLK_S_OK;
}

int blk_request_parse(const struct vq_chain *chain, uint64_t capacity, bool read_only,
		      struct blk_request *req)
{
	uint64_t readable = 0, writable = 0, data_len;
	struct virtio_blk_outhdr hdr;
	int nr_segs = chain->nr_segs, nr_readable = chain->nr_readable;
	int last_w = -1, ret;

	req->type = 0;
	req->sector = 0;
	req->offset = 0;
	req->data_len = 0;
	req->iovcnt = 0;
	req->status = NULL;

	/* queue.c promises this shape; a chain that breaks it cannot be
	 * trusted to say where the status byte is. Lengths are summed here in
	 * 64 bits rather than taken from the chain. */
	if (nr_segs > VQ_MAX_SIZE || nr_readable > nr_segs)
		return -EINVAL;
	for (int i = 0; i < nr_segs; i++) {
		if (chain->segs[i].writable != (i >= nr_readable))
			return -EINVAL;
		if (i < nr_readable) {
			readable += chain->segs[i].len;
		} else {
			writable += chain->segs[i].len;
			if (chain->segs[i].len)
				last_w = i;
		}
	}
	if (last_w < 0)
		return -EINVAL;
	req->status = chain->segs[last_w].hva + chain->segs[last_w].len - 1;

	if (readable < BLK_HDR_LEN)
		return VIRTIO_BLK_S_IOERR;
	blk_read_header(chain, &hdr);
	req->type = le32toh(hdr.type);
	req->sector = le64toh(hdr.sector);

	switch (req->type) {
	case VIRTIO_BLK_T_IN:
		/* The device writes the data: nothing readable past the header. */
		data_len = writable - 1;
		if (readable != BLK_HDR_LEN || data_len > UINT32_MAX)
			return VIRTIO_BLK_S_IOERR;
		ret = blk_check_range(req, data_len, capacity);
		if (ret != VIRTIO_BLK_S_OK)
			return ret;
		blk_slice(req, chain, nr_readable, nr_segs, 0, data_len);
		break;
	case VIRTIO_BLK_T_OUT:
		/* The device reads the data: nothing writable but the status. */
		data_len = readable - BLK_HDR_LEN;
		if (read_only || writable != 1 || data_len > UINT32_MAX)
			return VIRTIO_BLK_S_IOERR;
		ret = blk_check_range(req, data_len, capacity);
		if (ret != VIRTIO_BLK_S_OK)
			return ret;
		blk_slice(req, chain, 0, nr_readable, BLK_HDR_LEN, data_len);
		break;
	case VIRTIO_BLK_T_FLUSH:
		data_len = 0;
		if (readable != BLK_HDR_LEN || writable != 1)
			return VIRTIO_BLK_S_IOERR;
		break;
	case VIRTIO_BLK_T_GET_ID:
		/* Room for at least one byte of the id; any length is fine, the
		 * caller copies min(data_len, DISK_ID_LEN). */
		data_len = writable - 1;
		if (readable != BLK_HDR_LEN || data_len == 0 || data_len > UINT32_MAX)
			return VIRTIO_BLK_S_IOERR;
		blk_slice(req, chain, nr_readable, nr_segs, 0, data_len);
		break;
	default:
		return VIRTIO_BLK_S_UNSUPP;
	}
	req->data_len = (uint32_t)data_len;
	return VIRTIO_BLK_S_OK;
}
