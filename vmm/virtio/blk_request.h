/* blk_request.h - parse one virtio-blk request from a popped chain (pure: no I/O, no state). */
#ifndef MAYFLY_VIRTIO_BLK_REQUEST_H
#define MAYFLY_VIRTIO_BLK_REQUEST_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "virtio/queue.h"

/* The data part of a request: slices of the chain's segments after the
 * 16-byte header (OUT) or before the 1-byte status (IN, GET_ID). */
struct blk_request {
	uint32_t type;            /* VIRTIO_BLK_T_IN, _OUT, _FLUSH, _GET_ID */
	uint64_t sector;
	uint64_t offset;          /* sector * 512, checked */
	uint32_t data_len;        /* bytes in iov */
	int iovcnt;
	struct iovec iov[VQ_MAX_SIZE];
	uint8_t *status;          /* the status byte: last byte of the last writable segment */
};

/* Parse `chain` against a disk of `capacity` sectors. The header is the
 * first 16 readable bytes (it may span segments); the status byte is the
 * last writable byte. Returns
 *   VIRTIO_BLK_S_OK     the request is valid: do it;
 *   VIRTIO_BLK_S_IOERR  malformed (short header, data length not a multiple
 *                       of 512 or too long, sector + length beyond capacity or
 *                       overflowing, a write to a read-only disk, data in the
 *                       wrong direction); *status set: write this code there;
 *   VIRTIO_BLK_S_UNSUPP unknown type; *status set;
 *   -EINVAL             no writable status byte: nothing can be reported, the
 *                       device must fail.
 * GET_ID takes a writable data part of at least 1 byte (the id is cut to it). */
int blk_request_parse(const struct vq_chain *chain, uint64_t capacity, bool read_only,
		      struct blk_request *req);

#endif
