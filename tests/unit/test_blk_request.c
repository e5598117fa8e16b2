/* test_blk_request.c - virtio-blk request parsing over hand-built chains, honest and hostile. */
#include <criterion/criterion.h>
#include <errno.h>
#include <linux/virtio_blk.h>
#include <stdint.h>
#include <string.h>

#include "virtio/blk_request.h"

#define CAPACITY 1024 /* sectors: a 512 KiB disk */

static struct vq_chain chain;
static struct blk_request req;
static uint8_t hdr[16 + 8192];   /* header, then room for OUT data in the same segment */
static uint8_t data[VQ_MAX_SIZE][512];
static uint8_t status[8];

static void reset(void)
{
	memset(&chain, 0, sizeof(chain));
	memset(&req, 0xa5, sizeof(req)); /* the parser must not rely on a clean req */
	memset(status, 0, sizeof(status));
}

TestSuite(blk_request, .init = reset);

/* Little-endian on the wire, whatever the host. */
static void put_hdr(uint8_t *p, uint32_t type, uint64_t sector)
{
	memset(p, 0, 16);
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(type >> (8 * i));
	p[4] = 0x77; /* ioprio: ignored */
	for (int i = 0; i < 8; i++)
		p[8 + i] = (uint8_t)(sector >> (8 * i));
}

static void add(void *hva, uint32_t len, bool writable)
{
	cr_assert_lt(chain.nr_segs, VQ_MAX_SIZE);
	chain.segs[chain.nr_segs++] = (struct vq_seg){ hva, len, writable };
	if (writable) {
		chain.writable_len += len;
	} else {
		cr_assert_eq(chain.nr_readable, chain.nr_segs - 1, "readable after writable");
		chain.nr_readable++;
		chain.readable_len += len;
	}
}

static int parse(bool read_only)
{
	return blk_request_parse(&chain, CAPACITY, read_only, &req);
}

/* ---- honest requests ---- */

Test(blk_request, read_into_one_segment)
{
	put_hdr(hdr, VIRTIO_BLK_T_IN, 8);
	add(hdr, 16, false);
	add(data[0], 512, true);
	add(status, 1, true);
	cr_assert_eq(parse(false), VIRTIO_BLK_S_OK);
	cr_assert_eq(req.type, VIRTIO_BLK_T_IN);
	cr_assert_eq(req.sector, 8);
	cr_assert_eq(req.offset, 8 * 512);
	cr_assert_eq(req.data_len, 512);
	cr_assert_eq(req.iovcnt, 1);
	cr_assert_eq(req.iov[0].iov_base, data[0]);
	cr_assert_eq(req.iov[0].iov_len, 512);
	cr_assert_eq(req.status, status);
}

Test(blk_request, read_with_status_in_the_data_segment)
{
	put_hdr(hdr, VIRTIO_BLK_T_IN, 0);
	add(hdr, 16, false);
	add(data[0], 512, true);
	add(data[1], 513, true); /* spills into data[2]: one buffer, 513 bytes */
	cr_assert_eq(parse(true), VIRTIO_BLK_S_OK, "reads are fine on a read-only disk");
	cr_assert_eq(req.data_len, 1024);
	cr_assert_eq(req.iovcnt, 2);
	cr_assert_eq(req.iov[1].iov_base, data[1]);
	cr_assert_eq(req.iov[1].iov_len, 512);
	cr_assert_eq(req.status, &data[1][512]);
}

Test(blk_request, write_from_the_header_segment)
{
	put_hdr(hdr, VIRTIO_BLK_T_OUT, CAPACITY - 2);
	add(hdr, 16 + 1024, false);
	add(status, 1, true);
	cr_assert_eq(parse(false), VIRTIO_BLK_S_OK);
	cr_assert_eq(req.type, VIRTIO_BLK_T_OUT);
	cr_assert_eq(req.offset, (uint64_t)(CAPACITY - 2) * 512);
	cr_assert_eq(req.data_len, 1024);
	cr_assert_eq(req.iovcnt, 1);
	cr_assert_eq(req.iov[0].iov_base, hdr + 16);
	cr_assert_eq(req.iov[0].iov_len, 1024);
	cr_assert_eq(req.status, status);
}

Test(blk_request, flush)
{
	put_hdr(hdr, VIRTIO_BLK_T_FLUSH, 0);
	add(hdr, 16, false);
	add(status, 1, true);
	cr_assert_eq(parse(true), VIRTIO_BLK_S_OK);
	cr_assert_eq(req.type, VIRTIO_BLK_T_FLUSH);
	cr_assert_eq(req.data_len, 0);
	cr_assert_eq(req.iovcnt, 0);
	cr_assert_eq(req.status, status);
}

Test(blk_request, get_id)
{
	put_hdr(hdr, VIRTIO_BLK_T_GET_ID, 0);
	add(hdr, 16, false);
	add(data[0], 20, true);
	add(status, 1, true);
	cr_assert_eq(parse(true), VIRTIO_BLK_S_OK);
	cr_assert_eq(req.type, VIRTIO_BLK_T_GET_ID);
	cr_assert_eq(req.data_len, 20);
	cr_assert_eq(req.iovcnt, 1);
	cr_assert_eq(req.iov[0].iov_base, data[0]);
	cr_assert_eq(req.status, status);
}

Test(blk_request, get_id_with_one_byte_of_room)
{
	put_hdr(hdr, VIRTIO_BLK_T_GET_ID, 0);
	add(hdr, 16, false);
	add(status, 2, true);
	cr_assert_eq(parse(false), VIRTIO_BLK_S_OK);
	cr_assert_eq(req.data_len, 1);
	cr_assert_eq(req.iov[0].iov_base, status);
	cr_assert_eq(req.iov[0].iov_len, 1);
	cr_assert_eq(req.status, &status[1]);
}

Test(blk_request, header_split_over_segments)
{
	/* 10 + 6 bytes of header, the second segment carrying data after it. */
	put_hdr(hdr, VIRTIO_BLK_T_OUT, 0x0102030405ULL & 0x3ff);
	memcpy(data[0], hdr + 10, 6);
	add(hdr, 10, false);
	add(data[0], 6 + 500, false);
	add(data[1], 12, false);
	add(status, 1, true);
	cr_assert_eq(parse(false), VIRTIO_BLK_S_OK);
	cr_assert_eq(req.sector, 0x0102030405ULL & 0x3ff);
	cr_assert_eq(req.data_len, 512);
	cr_assert_eq(req.iovcnt, 2);
	cr_assert_eq(req.iov[0].iov_base, data[0] + 6);
	cr_assert_eq(req.iov[0].iov_len, 500);
	cr_assert_eq(req.iov[1].iov_base, data[1]);
	cr_assert_eq(req.iov[1].iov_len, 12);
}

Test(blk_request, header_one_byte_per_segment)
{
	uint8_t bytes[16];

	put_hdr(bytes, VIRTIO_BLK_T_IN, 3);
	for (int i = 0; i < 16; i++)
		add(&bytes[i], 1, false);
	add(data[0], 512, true);
	add(status, 1, true);
	cr_assert_eq(parse(false), VIRTIO_BLK_S_OK);
	cr_assert_eq(req.type, VIRTIO_BLK_T_IN);
	cr_assert_eq(req.sector, 3);
	cr_assert_eq(req.iovcnt, 1);
}

Test(blk_request, data_over_the_most_segments_a_chain_can_have)
{
	const int nr = VQ_MAX_SIZE - 2;

	put_hdr(hdr, VIRTIO_BLK_T_IN, 10);
	add(hdr, 16, false);
	for (int i = 0; i < nr; i++)
		add(data[i], 512, true);
	add(status, 1, true);
	cr_assert_eq(chain.nr_segs, VQ_MAX_SIZE);
	cr_assert_eq(parse(false), VIRTIO_BLK_S_OK);
	cr_assert_eq(req.data_len, (uint32_t)nr * 512);
	cr_assert_eq(req.iovcnt, nr);
	for (int i = 0; i < nr; i++) {
		cr_assert_eq(req.iov[i].iov_base, data[i]);
		cr_assert_eq(req.iov[i].iov_len, 512);
	}
}

Test(blk_request, zero_length_read_and_write_are_no_ops)
{
	put_hdr(hdr, VIRTIO_BLK_T_IN, CAPACITY);
	add(hdr, 16, false);
	add(status, 1, true);
	cr_assert_eq(parse(false), VIRTIO_BLK_S_OK);
	cr_assert_eq(req.data_len, 0);
	cr_assert_eq(req.iovcnt, 0);
	put_hdr(hdr, VIRTIO_BLK_T_OUT, 5);
	cr_assert_eq(parse(false), VIRTIO_BLK_S_OK);
	cr_assert_eq(req.data_len, 0);
	cr_assert_eq(req.iovcnt, 0);
}

Test(blk_request, last_sector_is_reachable)
{
	put_hdr(hdr, VIRTIO_BLK_T_IN, CAPACITY - 1);
	add(hdr, 16, false);
	add(data[0], 512, true);
	add(status, 1, true);
	cr_assert_eq(parse(false), VIRTIO_BLK_S_OK);
	cr_assert_eq(req.offset, (uint64_t)(CAPACITY - 1) * 512);
}

/* ---- hostile requests ---- */

Test(blk_request, short_header)
{
	put_hdr(hdr, VIRTIO_BLK_T_IN, 0);
	add(hdr, 15, false);
	add(data[0], 512, true);
	add(status, 1, true);
	cr_assert_eq(parse(false), VIRTIO_BLK_S_IOERR);
	cr_assert_eq(req.status, status);
	cr_assert_eq(req.iovcnt, 0);
}

Test(blk_request, no_readable_bytes_at_all)
{
	add(data[0], 512, true);
	add(status, 1, true);
	cr_assert_eq(parse(false), VIRTIO_BLK_S_IOERR);
	cr_assert_eq(req.status, status);
}

Test(blk_request, no_writable_byte_cannot_be_answered)
{
	put_hdr(hdr, VIRTIO_BLK_T_FLUSH, 0);
	add(hdr, 16, false);
	cr_assert_eq(parse(false), -EINVAL);
	cr_assert_null(req.status);
}

Test(blk_request, status_only_in_a_readable_segment)
{
	/* What would be the status byte is device-readable: nowhere to answer. */
	put_hdr(hdr, VIRTIO_BLK_T_OUT, 0);
	add(hdr, 16, false);
	add(data[0], 512, false);
	add(status, 1, false);
	cr_assert_eq(parse(false), -EINVAL);
	cr_assert_null(req.status);
}

Test(blk_request, empty_chain)
{
	cr_assert_eq(parse(false), -EINVAL);
}

Test(blk_request, chain_breaking_its_own_shape)
{
	put_hdr(hdr, VIRTIO_BLK_T_IN, 0);
	add(hdr, 16, false);
	add(status, 1, true);
	chain.nr_readable = 2; /* says the status segment is readable */
	cr_assert_eq(parse(false), -EINVAL);
	chain.nr_readable = 3; /* more readable segments than segments */
	cr_assert_eq(parse(false), -EINVAL);
	chain.nr_readable = 1;
	chain.nr_segs = VQ_MAX_SIZE + 1;
	cr_assert_eq(parse(false), -EINVAL);
}

Test(blk_request, data_not_a_multiple_of_512)
{
	put_hdr(hdr, VIRTIO_BLK_T_IN, 0);
	add(hdr, 16, false);
	add(data[0], 511, true);
	add(status, 1, true);
	cr_assert_eq(parse(false), VIRTIO_BLK_S_IOERR);
	cr_assert_eq(req.status, status);

	reset();
	put_hdr(hdr, VIRTIO_BLK_T_OUT, 0);
	add(hdr, 16 + 100, false);
	add(status, 1, true);
	cr_assert_eq(parse(false), VIRTIO_BLK_S_IOERR);
	cr_assert_eq(req.iovcnt, 0);
}

Test(blk_request, sector_beyond_capacity)
{
	put_hdr(hdr, VIRTIO_BLK_T_IN, CAPACITY + 1);
	add(hdr, 16, false);
	add(status, 1, true);
	cr_assert_eq(parse(false), VIRTIO_BLK_S_IOERR, "even with no data");
	cr_assert_eq(req.status, status);

	reset();
	put_hdr(hdr, VIRTIO_BLK_T_IN, CAPACITY);
	add(hdr, 16, false);
	add(data[0], 512, true);
	add(status, 1, true);
	cr_assert_eq(parse(false), VIRTIO_BLK_S_IOERR);
	cr_assert_eq(req.iovcnt, 0);
}

Test(blk_request, sector_plus_length_beyond_capacity)
{
	put_hdr(hdr, VIRTIO_BLK_T_OUT, CAPACITY - 1);
	add(hdr, 16 + 1024, false);
	add(status, 1, true);
	cr_assert_eq(parse(false), VIRTIO_BLK_S_IOERR);
	cr_assert_eq(req.status, status);
	cr_assert_eq(req.iovcnt, 0);
}

Test(blk_request, sector_times_512_overflows)
{
	static const uint64_t sectors[] = {
		UINT64_MAX, UINT64_MAX - 1, 1ULL << 55, (1ULL << 55) + 1, UINT64_MAX / 512 + 1,
	};

	add(hdr, 16, false);
	add(data[0], 512, true);
	add(status, 1, true);
	for (size_t i = 0; i < sizeof(sectors) / sizeof(sectors[0]); i++) {
		put_hdr(hdr, VIRTIO_BLK_T_IN, sectors[i]);
		cr_assert_eq(blk_request_parse(&chain, UINT64_MAX, false, &req),
			     VIRTIO_BLK_S_IOERR, "sector %#lx", (unsigned long)sectors[i]);
	}
	/* The largest sector whose byte offset fits, on an absurd disk: fine. */
	put_hdr(hdr, VIRTIO_BLK_T_IN, UINT64_MAX / 512 - 1);
	cr_assert_eq(blk_request_parse(&chain, UINT64_MAX, false, &req), VIRTIO_BLK_S_OK);
	/* ...but the end of its data does not fit in 64 bits. */
	put_hdr(hdr, VIRTIO_BLK_T_IN, UINT64_MAX / 512);
	cr_assert_eq(blk_request_parse(&chain, UINT64_MAX, false, &req), VIRTIO_BLK_S_IOERR);
}

Test(blk_request, write_to_a_read_only_disk)
{
	put_hdr(hdr, VIRTIO_BLK_T_OUT, 0);
	add(hdr, 16 + 512, false);
	add(status, 1, true);
	cr_assert_eq(parse(true), VIRTIO_BLK_S_IOERR);
	cr_assert_eq(req.status, status);
	cr_assert_eq(parse(false), VIRTIO_BLK_S_OK);
}

Test(blk_request, read_with_readable_data_after_the_header)
{
	put_hdr(hdr, VIRTIO_BLK_T_IN, 0);
	add(hdr, 16 + 512, false);
	add(data[0], 512, true);
	add(status, 1, true);
	cr_assert_eq(parse(false), VIRTIO_BLK_S_IOERR);
	cr_assert_eq(req.iovcnt, 0);
}

Test(blk_request, write_with_writable_data_besides_the_status)
{
	put_hdr(hdr, VIRTIO_BLK_T_OUT, 0);
	add(hdr, 16 + 512, false);
	add(data[0], 512, true);
	add(status, 1, true);
	cr_assert_eq(parse(false), VIRTIO_BLK_S_IOERR);
	reset();
	put_hdr(hdr, VIRTIO_BLK_T_OUT, 0);
	add(hdr, 16 + 512, false);
	add(status, 2, true);
	cr_assert_eq(parse(false), VIRTIO_BLK_S_IOERR);
	cr_assert_eq(req.status, &status[1]);
}

Test(blk_request, unknown_types_are_unsupported)
{
	static const uint32_t types[] = {
		VIRTIO_BLK_T_DISCARD, VIRTIO_BLK_T_WRITE_ZEROES, 2, 0x1234, UINT32_MAX,
	};

	add(hdr, 16, false);
	add(status, 1, true);
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		put_hdr(hdr, types[i], 0);
		cr_assert_eq(parse(false), VIRTIO_BLK_S_UNSUPP, "type %u", types[i]);
		cr_assert_eq(req.type, types[i]);
		cr_assert_eq(req.status, status);
		cr_assert_eq(req.iovcnt, 0);
	}
}

Test(blk_request, flush_with_data)
{
	put_hdr(hdr, VIRTIO_BLK_T_FLUSH, 0);
	add(hdr, 16 + 512, false);
	add(status, 1, true);
	cr_assert_eq(parse(false), VIRTIO_BLK_S_IOERR, "readable data");
	reset();
	put_hdr(hdr, VIRTIO_BLK_T_FLUSH, 0);
	add(hdr, 16, false);
	add(data[0], 512, true);
	add(status, 1, true);
	cr_assert_eq(parse(false), VIRTIO_BLK_S_IOERR, "writable data");
	cr_assert_eq(req.status, status);
}

Test(blk_request, get_id_without_room_or_with_readable_data)
{
	put_hdr(hdr, VIRTIO_BLK_T_GET_ID, 0);
	add(hdr, 16, false);
	add(status, 1, true);
	cr_assert_eq(parse(false), VIRTIO_BLK_S_IOERR, "no room for the id");
	reset();
	put_hdr(hdr, VIRTIO_BLK_T_GET_ID, 0);
	add(hdr, 16 + 20, false);
	add(data[0], 20, true);
	add(status, 1, true);
	cr_assert_eq(parse(false), VIRTIO_BLK_S_IOERR, "data in the wrong direction");
}

Test(blk_request, data_longer_than_32_bits)
{
	/* Segments are never touched past the header and status, so two
	 * huge ones can stand on small buffers. */
	put_hdr(hdr, VIRTIO_BLK_T_IN, 0);
	add(hdr, 16, false);
	add(data[0], 0x80000000u, true);
	add(data[1], 0x80000000u, true);
	add(status, 1, true);
	cr_assert_eq(blk_request_parse(&chain, UINT64_MAX / 512, false, &req), VIRTIO_BLK_S_IOERR);
}

Test(blk_request, zero_length_segments_are_skipped)
{
	put_hdr(hdr, VIRTIO_BLK_T_IN, 0);
	add(hdr, 16, false);
	add(data[0], 0, false);
	add(data[1], 512, true);
	add(data[2], 0, true);
	add(status, 1, true);
	add(data[3], 0, true);
	cr_assert_eq(parse(false), VIRTIO_BLK_S_OK);
	cr_assert_eq(req.iovcnt, 1);
	cr_assert_eq(req.iov[0].iov_base, data[1]);
	cr_assert_eq(req.status, status);
}
