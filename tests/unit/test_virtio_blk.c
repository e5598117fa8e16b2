/* test_virtio_blk.c - virtio-blk requests end to end through the mmio transport, over fake RAM and real disk files. */
#include "observe.h"
#include "virtio_driver.h"

static struct vdrv d;

static void teardown(void)
{
	vd_teardown(&d);
}

static void setup_raw(void) { vd_setup(&d, VD_RAW); }
static void setup_ro(void) { vd_setup(&d, VD_RAW_RO); }
static void setup_cow(void) { vd_setup(&d, VD_COW); }

TestSuite(virtio_blk, .init = setup_raw, .fini = teardown);

/* A guest buffer of `len` bytes filled with a pattern seeded by `seed`. */
static uint64_t filled(uint32_t len, uint8_t seed)
{
	uint64_t gpa = vd_alloc(&d, len);

	for (uint32_t i = 0; i < len; i++)
		d.ram[gpa + i] = (uint8_t)(seed + i * 7 + (i >> 8));
	return gpa;
}

/* A guest buffer of `len` bytes the device must overwrite. */
static uint64_t scratch(uint32_t len)
{
	uint64_t gpa = vd_alloc(&d, len);

	memset(d.ram + gpa, 0xcc, len);
	return gpa;
}

static void expect_ok(struct vres r, uint32_t len)
{
	cr_assert(r.done, "no used entry");
	cr_assert_eq(r.status, BLK_S_OK, "status %u", r.status);
	cr_assert_eq(r.len, len, "used len %u, expected %u", r.len, len);
}

static void expect_status(struct vres r, uint8_t status)
{
	cr_assert(r.done, "no used entry");
	cr_assert_eq(r.status, status, "status %u, expected %u", r.status, status);
	cr_assert_eq(r.len, 1, "an error writes only the status byte");
	cr_assert_eq(vd_status(&d), S_ALL_OK, "a request error must not fail the device");
}

/* Guest bytes at gpa equal the image pattern from byte `off`. */
static void expect_image_bytes(uint64_t gpa, uint64_t off, uint32_t len)
{
	for (uint32_t i = 0; i < len; i++)
		cr_assert_eq(d.ram[gpa + i], image_pat(off + i), "byte %u of the read (disk byte %llu)", i,
			     (unsigned long long)(off + i));
}

/* ---- requests ---- */

Test(virtio_blk, read_returns_image_contents)
{
	uint64_t buf = scratch(2048);

	vd_init(&d, FEAT_BASIC);
	expect_ok(vd_blk1(&d, BLK_T_IN, 5, buf, 2048), 2048 + 1);
	expect_image_bytes(buf, 5 * 512, 2048);
	expect_ok(vd_blk1(&d, BLK_T_IN, DISK_SECTORS - 1, buf, 512), 513);
	expect_image_bytes(buf, (DISK_SECTORS - 1) * 512ULL, 512);
	cr_assert_geq(vd_irqs(&d), 1);
}

Test(virtio_blk, write_then_read_back)
{
	uint64_t src = filled(1024, 0x31), dst = scratch(1024);
	uint8_t file[2048];

	vd_init(&d, FEAT_BASIC);
	expect_ok(vd_blk1(&d, BLK_T_OUT, 3, src, 1024), 1);
	expect_ok(vd_blk1(&d, BLK_T_IN, 3, dst, 1024), 1024 + 1);
	cr_assert_arr_eq(d.ram + dst, d.ram + src, 1024);
	/* A raw disk writes through to the file, and only where it was asked. */
	vd_file(&d, 2 * 512, file, sizeof(file));
	cr_assert_arr_eq(file + 512, d.ram + src, 1024);
	for (int i = 0; i < 512; i++) {
		cr_assert_eq(file[i], image_pat(2 * 512 + i), "sector 2 touched");
		cr_assert_eq(file[1536 + i], image_pat(5 * 512 + i), "sector 5 touched");
	}
}

Test(virtio_blk, multi_segment_data)
{
	struct vseg out[3] = {
		{ filled(512, 1), 512, false }, { filled(1024, 2), 1024, false }, { filled(512, 3), 512, false },
	};
	uint64_t hdr1 = vd_alloc(&d, 8), hdr2 = vd_alloc(&d, 8), in = scratch(1536), tail = scratch(513);
	struct vseg s[4];
	uint16_t head;
	uint32_t id, len;

	vd_init(&d, FEAT_BASIC);
	expect_ok(vd_blk(&d, BLK_T_OUT, 10, out, 3), 1);
	/* Read back with the header split in two and the status byte sharing
	 * the last data segment: the device must not assume any framing. */
	vd_wr32(&d, hdr1, BLK_T_IN);
	vd_wr32(&d, hdr1 + 4, 0);
	vd_wr64(&d, hdr2, 10);
	s[0] = (struct vseg){ hdr1, 8, false };
	s[1] = (struct vseg){ hdr2, 8, false };
	s[2] = (struct vseg){ in, 1536, true };
	s[3] = (struct vseg){ tail, 513, true };
	head = vd_chain(&d, s, 4);
	vd_post(&d, head);
	vd_kick(&d);
	cr_assert(vd_get_used(&d, &id, &len));
	cr_assert_eq(id, head);
	cr_assert_eq(len, 2048 + 1);
	cr_assert_eq(d.ram[tail + 512], BLK_S_OK);
	cr_assert_arr_eq(d.ram + in, d.ram + out[0].gpa, 512);
	cr_assert_arr_eq(d.ram + in + 512, d.ram + out[1].gpa, 1024);
	cr_assert_arr_eq(d.ram + tail, d.ram + out[2].gpa, 512);
}

Test(virtio_blk, batch_of_requests_one_interrupt)
{
	uint64_t st[4], buf[4];
	uint32_t id, len;

	vd_init(&d, FEAT_BASIC);
	for (int i = 0; i < 4; i++) {
		struct vseg s = { buf[i] = scratch(512), 512, true };

		vd_stage(&d, vd_blk_build(&d, BLK_T_IN, (uint64_t)i * 7, &s, 1, &st[i]));
	}
	vd_publish_idx(&d, d.avail_idx);
	vd_kick(&d);
	for (int i = 0; i < 4; i++) {
		cr_assert(vd_get_used(&d, &id, &len), "request %d not completed", i);
		cr_assert_eq(len, 513);
		cr_assert_eq(d.ram[st[i]], BLK_S_OK);
		expect_image_bytes(buf[i], (uint64_t)i * 7 * 512, 512);
	}
	cr_assert_eq(vd_irqs(&d), 1, "one kick, one interrupt");
}

Test(virtio_blk, flush)
{
	vd_init(&d, FEAT_BASIC);
	expect_ok(vd_blk(&d, BLK_T_FLUSH, 0, NULL, 0), 1);
}

Test(virtio_blk, get_id)
{
	uint64_t buf = scratch(20), small = scratch(8);
	char want[DISK_ID_LEN] = { 0 };

	memcpy(want, d.blk.disk.id, strnlen(d.blk.disk.id, DISK_ID_LEN));
	cr_assert_str_not_empty(d.blk.disk.id);
	vd_init(&d, FEAT_BASIC);
	expect_ok(vd_blk1(&d, BLK_T_GET_ID, 0, buf, 20), 20 + 1);
	cr_assert_arr_eq(d.ram + buf, want, DISK_ID_LEN);
	/* A shorter buffer gets the id cut to it. */
	expect_ok(vd_blk1(&d, BLK_T_GET_ID, 0, small, 8), 8 + 1);
	cr_assert_arr_eq(d.ram + small, want, 8);
}

Test(virtio_blk, unknown_type_unsupported)
{
	uint64_t buf = scratch(512);

	vd_init(&d, FEAT_BASIC);
	expect_status(vd_blk1(&d, 0x1234, 0, buf, 512), BLK_S_UNSUPP);
	expect_status(vd_blk(&d, 11 /* DISCARD, not offered */, 0, NULL, 0), BLK_S_UNSUPP);
	expect_ok(vd_blk(&d, BLK_T_FLUSH, 0, NULL, 0), 1);
}

Test(virtio_blk, read_beyond_capacity_ioerr_device_live)
{
	uint64_t buf = scratch(1024);

	vd_init(&d, FEAT_BASIC);
	expect_status(vd_blk1(&d, BLK_T_IN, DISK_SECTORS, buf, 512), BLK_S_IOERR);
	expect_status(vd_blk1(&d, BLK_T_IN, DISK_SECTORS - 1, buf, 1024), BLK_S_IOERR);
	expect_status(vd_blk1(&d, BLK_T_IN, 1ULL << 63, buf, 512), BLK_S_IOERR);
	expect_status(vd_blk1(&d, BLK_T_IN, ~0ULL, buf, 512), BLK_S_IOERR);
	expect_status(vd_blk1(&d, BLK_T_OUT, DISK_SECTORS, buf, 512), BLK_S_IOERR);
	cr_assert(vd_file_pristine(&d));
	expect_ok(vd_blk1(&d, BLK_T_IN, 1, buf, 512), 513);
	expect_image_bytes(buf, 512, 512);
}

Test(virtio_blk, length_not_multiple_of_512_ioerr)
{
	uint64_t src = filled(600, 9), dst = scratch(1000);

	vd_init(&d, FEAT_BASIC);
	expect_status(vd_blk1(&d, BLK_T_OUT, 0, src, 100), BLK_S_IOERR);
	expect_status(vd_blk1(&d, BLK_T_OUT, 0, src, 600), BLK_S_IOERR);
	expect_status(vd_blk1(&d, BLK_T_IN, 0, dst, 1000), BLK_S_IOERR);
	cr_assert(vd_file_pristine(&d));
	for (int i = 0; i < 1000; i++)
		cr_assert_eq(d.ram[dst + i], 0xcc, "a refused read wrote data");
}

Test(virtio_blk, failing_disk_io_logs_a_few_lines)
{
	uint64_t buf = scratch(512);
	struct capture cap;
	char *text;

	vd_init(&d, FEAT_BASIC);
	/* The image shrinks behind the device's back: every read fails. */
	cr_assert_eq(ftruncate(d.blk.disk.fd, 0), 0);
	log_init("t", LOG_WARN);
	capture_start(&cap);
	for (int i = 0; i < 1000; i++)
		expect_status(vd_blk1(&d, BLK_T_IN, 1, buf, 512), BLK_S_IOERR);
	text = capture_stop_summed(&cap);
	expect_limited(text, "read at byte 512", 1000);
	free(text);
}

Test(virtio_blk, read_only_disk_refuses_writes, .init = setup_ro)
{
	uint64_t src = filled(512, 5), dst = scratch(512);

	cr_assert(vd_device_features(&d) & FEAT_BLK_RO, "read-only disk without VIRTIO_BLK_F_RO");
	vd_init(&d, FEAT_BASIC | FEAT_BLK_RO);
	expect_status(vd_blk1(&d, BLK_T_OUT, 0, src, 512), BLK_S_IOERR);
	cr_assert(vd_file_pristine(&d));
	expect_ok(vd_blk1(&d, BLK_T_IN, 0, dst, 512), 513);
	expect_image_bytes(dst, 0, 512);
	expect_ok(vd_blk(&d, BLK_T_FLUSH, 0, NULL, 0), 1);
}

Test(virtio_blk, copy_on_write_keeps_base, .init = setup_cow)
{
	uint64_t src = filled(1024, 0x77), dst = scratch(4096), last = filled(512, 0x12);

	cr_assert_not(vd_device_features(&d) & FEAT_BLK_RO);
	vd_init(&d, FEAT_BASIC);
	/* Sectors 9-10: the middle of a 4 KiB block, whose rest comes from the base. */
	expect_ok(vd_blk1(&d, BLK_T_OUT, 9, src, 1024), 1);
	expect_ok(vd_blk1(&d, BLK_T_OUT, DISK_SECTORS - 1, last, 512), 1);
	expect_ok(vd_blk(&d, BLK_T_FLUSH, 0, NULL, 0), 1);
	expect_ok(vd_blk1(&d, BLK_T_IN, 8, dst, 4096), 4097);
	expect_image_bytes(dst, 8 * 512, 512);
	cr_assert_arr_eq(d.ram + dst + 512, d.ram + src, 1024);
	expect_image_bytes(dst + 1536, 11 * 512, 4096 - 1536);
	memset(d.ram + dst, 0xcc, 512);
	expect_ok(vd_blk1(&d, BLK_T_IN, DISK_SECTORS - 1, dst, 512), 513);
	cr_assert_arr_eq(d.ram + dst, d.ram + last, 512);
	cr_assert(vd_file_pristine(&d), "copy-on-write changed the base file");
}

/* --disk-quota: the overlay takes two 4 KiB blocks, then every write that
 * needs a new one is the guest's I/O error; the device and the blocks it
 * holds go on working, and the base is never touched. */
Test(virtio_blk, copy_on_write_past_disk_quota_is_ioerr_and_goes_on, .init = setup_cow)
{
	uint64_t src = filled(4096, 0x5a), dst = scratch(4096);

	cr_assert_eq(disk_cow_set_quota(&d.blk.disk, 2 * 4096 + 100), 0);
	vd_init(&d, FEAT_BASIC);
	expect_ok(vd_blk1(&d, BLK_T_OUT, 0, src, 4096), 1);
	expect_ok(vd_blk1(&d, BLK_T_OUT, 8, src, 512), 1);
	cr_assert_eq(disk_cow_used(&d.blk.disk), 2 * 4096);
	for (int i = 0; i < 3; i++)
		expect_status(vd_blk1(&d, BLK_T_OUT, 16 + 8 * (uint64_t)i, src, 512), BLK_S_IOERR);
	cr_assert_eq(disk_cow_used(&d.blk.disk), 2 * 4096, "a refused write took a block");
	/* A block it holds takes any number of rewrites. */
	expect_ok(vd_blk1(&d, BLK_T_OUT, 9, src, 1024), 1);
	expect_ok(vd_blk1(&d, BLK_T_IN, 16, dst, 4096), 4097);
	expect_image_bytes(dst, 16 * 512, 4096);
	expect_ok(vd_blk1(&d, BLK_T_IN, 0, dst, 4096), 4097);
	cr_assert_arr_eq(d.ram + dst, d.ram + src, 4096);
	cr_assert(vd_file_pristine(&d));
	cr_assert_eq(vd_status(&d), S_ALL_OK);
}

/* ---- interrupts ---- */

Test(virtio_blk, event_idx_used_event_decides)
{
	vd_init(&d, FEAT_BASIC | FEAT_EVENT_IDX);
	expect_ok(vd_blk(&d, BLK_T_FLUSH, 0, NULL, 0), 1);
	cr_assert_eq(vd_irqs(&d), 1, "the first completion always interrupts");
	cr_assert_eq(vd_avail_event(&d), 1, "avail_event not published");
	/* used_event far ahead: completions without an interrupt. */
	vd_set_used_event(&d, (uint16_t)(vd_used_idx(&d) + 100));
	expect_ok(vd_blk(&d, BLK_T_FLUSH, 0, NULL, 0), 1);
	expect_ok(vd_blk(&d, BLK_T_FLUSH, 0, NULL, 0), 1);
	cr_assert_eq(vd_irqs(&d), 0, "interrupt despite used_event far ahead");
	/* used_event at the current index: the next completion interrupts. */
	vd_set_used_event(&d, vd_used_idx(&d));
	expect_ok(vd_blk(&d, BLK_T_FLUSH, 0, NULL, 0), 1);
	cr_assert_eq(vd_irqs(&d), 1, "no interrupt when used_event asked for one");
	cr_assert_eq(vd_avail_event(&d), 4);
}

Test(virtio_blk, no_interrupt_flag_without_event_idx)
{
	vd_init(&d, FEAT_BASIC);
	vd_wr16(&d, d.avail, NO_INTERRUPT);
	expect_ok(vd_blk(&d, BLK_T_FLUSH, 0, NULL, 0), 1);
	cr_assert_eq(vd_irqs(&d), 0);
	vd_wr16(&d, d.avail, 0);
	expect_ok(vd_blk(&d, BLK_T_FLUSH, 0, NULL, 0), 1);
	cr_assert_eq(vd_irqs(&d), 1);
}

/* ---- a hostile driver ---- */

/* The last kick broke the protocol: the device must be NEEDS_RESET with
 * the driver told, nothing written outside RAM, dead until reset, and
 * then as good as new. */
static void expect_failed_then_recover(void)
{
	uint64_t buf;

	cr_assert(vd_status(&d) & S_NEEDS_RESET, "status 0x%x without NEEDS_RESET", vd_status(&d));
	cr_assert(vd_reg(&d, R_INT_STATUS) & INT_CONFIG);
	cr_assert_geq(vd_irqs(&d), 1, "no interrupt for the failure");
	vd_check_guards();
	cr_assert(vd_file_pristine(&d));
	/* Dead: a valid request after the breakage goes unserved. */
	d.used_seen = vd_used_idx(&d);
	d.avail_idx = vd_rd16(&d, d.avail + 2);
	{
		uint16_t used = vd_used_idx(&d);
		struct vres r = vd_blk(&d, BLK_T_FLUSH, 0, NULL, 0);

		cr_assert_not(r.done);
		cr_assert_eq(r.status, STATUS_UNSET);
		cr_assert_eq(vd_used_idx(&d), used);
		cr_assert_eq(vd_irqs(&d), 0);
		cr_assert(vd_status(&d) & S_NEEDS_RESET);
	}
	vd_set(&d, R_STATUS, 0);
	cr_assert_eq(vd_status(&d), 0);
	vd_init(&d, FEAT_BASIC);
	buf = scratch(512);
	expect_ok(vd_blk1(&d, BLK_T_IN, 2, buf, 512), 513);
	expect_image_bytes(buf, 2 * 512, 512);
	vd_check_guards();
}

Test(virtio_blk, descriptor_loop_fails_device)
{
	uint64_t hdr = vd_alloc(&d, 16);

	vd_init(&d, FEAT_BASIC);
	vd_desc(&d, 0, hdr, 16, F_NEXT, 1);
	vd_desc(&d, 1, hdr, 16, F_NEXT, 0);
	vd_post(&d, 0);
	vd_kick(&d);
	expect_failed_then_recover();
	/* A descriptor that is its own next. */
	vd_desc(&d, 5, hdr, 16, F_NEXT | F_WRITE, 5);
	vd_post(&d, 5);
	vd_kick(&d);
	expect_failed_then_recover();
}

/* Rings placed so that "descriptor 256" (one past the table) is free RAM
 * the test can make look valid: a device that indexed it would serve it. */
static void init_with_room_after_table(void)
{
	cr_assert_eq(vd_negotiate(&d, FEAT_BASIC), S_ACK | S_DRIVER | S_FEATURES_OK);
	memset(d.ram + DESC_GPA, 0, HEAP_GPA - DESC_GPA);
	vd_queue_regs(&d, QSIZE, DESC_GPA, 0x4000, 0x5000);
	vd_set(&d, R_QUEUE_READY, 1);
	vd_set(&d, R_STATUS, S_ALL_OK);
	cr_assert_eq(vd_status(&d), S_ALL_OK);
}

Test(virtio_blk, head_or_next_out_of_range_fails_device)
{
	uint64_t hdr = vd_alloc(&d, 16), st = vd_alloc(&d, 17);

	/* Head 256: a writable descriptor there would get an IOERR status. */
	init_with_room_after_table();
	vd_desc(&d, QSIZE, st, 17, F_WRITE, 0);
	d.ram[st + 16] = STATUS_UNSET;
	vd_post(&d, QSIZE);
	vd_kick(&d);
	cr_assert_eq(vd_used_idx(&d), 0, "head 256 served");
	cr_assert_eq(d.ram[st + 16], STATUS_UNSET);
	expect_failed_then_recover();
	vd_post(&d, 0xffff);
	vd_kick(&d);
	expect_failed_then_recover();
	/* next 256: a flush whose status descriptor lies one past the table. */
	init_with_room_after_table();
	vd_wr32(&d, hdr, BLK_T_FLUSH);
	vd_desc(&d, 0, hdr, 16, F_NEXT, QSIZE);
	vd_desc(&d, QSIZE, st, 1, F_WRITE, 0);
	d.ram[st] = STATUS_UNSET;
	vd_post(&d, 0);
	vd_kick(&d);
	cr_assert_eq(vd_used_idx(&d), 0, "next 256 followed");
	cr_assert_eq(d.ram[st], STATUS_UNSET);
	expect_failed_then_recover();
}

/* An IN request of 512 bytes whose data buffer is at `gpa`. */
static void read_into(uint64_t gpa)
{
	struct vseg s = { gpa, 512, true };
	uint64_t st;

	vd_post(&d, vd_blk_build(&d, BLK_T_IN, 0, &s, 1, &st));
	vd_kick(&d);
}

Test(virtio_blk, buffer_beyond_ram_fails_device)
{
	vd_init(&d, FEAT_BASIC);
	read_into(RAM_SIZE - 256);   /* straddles the end */
	expect_failed_then_recover();
	read_into(RAM_SIZE);
	expect_failed_then_recover();
	read_into(RAM_SIZE + GUARD - 512);   /* wholly in the canary page above */
	expect_failed_then_recover();
	read_into(~0ULL - 255);   /* wraps around */
	expect_failed_then_recover();
	read_into(1ULL << 32);
	expect_failed_then_recover();
}

Test(virtio_blk, status_beyond_ram_fails_device)
{
	uint64_t hdr = vd_alloc(&d, 16);

	vd_init(&d, FEAT_BASIC);
	vd_wr32(&d, hdr, BLK_T_FLUSH);
	vd_desc(&d, 0, hdr, 16, F_NEXT, 1);
	vd_desc(&d, 1, RAM_SIZE, 1, F_WRITE, 0);
	vd_post(&d, 0);
	vd_kick(&d);
	expect_failed_then_recover();
}

Test(virtio_blk, avail_index_jump_fails_device)
{
	uint16_t used;

	vd_init(&d, FEAT_BASIC);
	/* A full ring of valid flushes, then an index one past full: refused
	 * before anything is served. */
	for (int i = 0; i < QSIZE / 2; i++) {
		uint64_t st;

		vd_stage(&d, vd_blk_build(&d, BLK_T_FLUSH, 0, NULL, 0, &st));
	}
	for (int i = QSIZE / 2; i < QSIZE; i++)
		vd_stage(&d, (uint16_t)(2 * i - QSIZE));
	vd_publish_idx(&d, QSIZE + 1);
	vd_kick(&d);
	cr_assert_eq(vd_used_idx(&d), 0, "served from a ring whose index jumped");
	expect_failed_then_recover();
	/* Backwards: requests served, then the index goes back. */
	expect_ok(vd_blk(&d, BLK_T_FLUSH, 0, NULL, 0), 1);
	used = vd_used_idx(&d);
	vd_publish_idx(&d, (uint16_t)(d.avail_idx - 2));
	vd_kick(&d);
	cr_assert_eq(vd_used_idx(&d), used, "served from a ring whose index went back");
	expect_failed_then_recover();
}

Test(virtio_blk, missing_status_descriptor_fails_device)
{
	struct vseg s[2] = { { vd_alloc(&d, 16), 16, false }, { filled(512, 4), 512, false } };
	uint8_t before[512];

	vd_init(&d, FEAT_BASIC);
	vd_wr32(&d, s[0].gpa, BLK_T_OUT);
	memcpy(before, d.ram + s[1].gpa, 512);
	vd_post(&d, vd_chain(&d, s, 2));
	vd_kick(&d);
	cr_assert_arr_eq(d.ram + s[1].gpa, before, 512, "a readable buffer was written");
	cr_assert_eq(vd_used_idx(&d), 0);
	expect_failed_then_recover();
	/* Header only. */
	vd_post(&d, vd_chain(&d, s, 1));
	vd_kick(&d);
	expect_failed_then_recover();
}

Test(virtio_blk, read_only_status_descriptor_fails_device)
{
	uint64_t hdr = vd_alloc(&d, 16), st = vd_alloc(&d, 1);
	struct vseg s[3] = { { hdr, 16, false }, { scratch(512), 512, true }, { st, 1, false } };

	vd_init(&d, FEAT_BASIC);
	vd_wr32(&d, hdr, BLK_T_IN);
	d.ram[st] = STATUS_UNSET;
	vd_post(&d, vd_chain(&d, s, 3));
	vd_kick(&d);
	cr_assert_eq(d.ram[st], STATUS_UNSET, "a device-readable status byte was written");
	cr_assert_eq(vd_used_idx(&d), 0);
	expect_failed_then_recover();
}

Test(virtio_blk, same_head_twice_in_one_batch_fails_device)
{
	struct vseg s = { scratch(512), 512, true };
	uint64_t st;
	uint16_t head;

	vd_init(&d, FEAT_BASIC);
	head = vd_blk_build(&d, BLK_T_IN, 0, &s, 1, &st);
	vd_stage(&d, head);
	vd_stage(&d, head);
	vd_publish_idx(&d, d.avail_idx);
	vd_kick(&d);
	cr_assert_leq(vd_used_idx(&d), 1, "the same head served twice");
	expect_failed_then_recover();
}

/* ---- a spare slot (--spare-disks) and a disk inserted into it ---- */

static void setup_empty(void)
{
	vd_teardown(&d);
	vd_setup_ram(&d);
	vd_make_image(&d);
	cr_assert_eq(virtio_blk_init_empty(&d.blk, &d.mem, "vdb", "spare-0"), 0);
	d.m = &d.blk.mmio;
}

static uint64_t config_capacity(void)
{
	return vd_reg(&d, R_CONFIG) | (uint64_t)vd_reg(&d, R_CONFIG + 4) << 32;
}

/* Empty, the slot has no sectors and fails every transfer without a disk
 * behind it; an insert gives it the image's size, a new config generation
 * and the config-change interrupt; then it serves the image copy-on-write
 * under the new serial; a second insert is refused; and the VM can no
 * longer be saved. */
Test(virtio_blk, spare_slot_then_insert, .init = setup_empty)
{
	uint64_t buf = scratch(512), id = scratch(20), src = filled(512, 0x31);
	struct disk disk, second;
	struct snap_out o;
	const char *why = "";
	uint32_t gen;
	int fd;

	cr_assert_not(vd_device_features(&d) & FEAT_BLK_RO, "a spare slot is writable");
	vd_init(&d, FEAT_BASIC);
	cr_assert_eq(config_capacity(), 0);
	expect_status(vd_blk1(&d, BLK_T_IN, 0, buf, 512), BLK_S_IOERR);
	expect_status(vd_blk1(&d, BLK_T_OUT, 0, src, 512), BLK_S_IOERR);
	expect_status(vd_blk(&d, BLK_T_FLUSH, 0, NULL, 0), BLK_S_IOERR);
	expect_ok(vd_blk1(&d, BLK_T_GET_ID, 0, id, 20), 21);
	cr_assert_str_eq((char *)d.ram + id, "spare-0");
	gen = vd_reg(&d, 0x0fc);
	vd_irqs(&d);
	vd_set(&d, R_INT_ACK, vd_reg(&d, R_INT_STATUS));

	fd = open(d.path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(disk_open_cow_fd(&disk, fd, &why), 0, "%s", why);
	snprintf(disk.id, sizeof(disk.id), "ctr-1");
	cr_assert_eq(virtio_blk_insert(&d.blk, &disk, &why), 0, "%s", why);
	cr_assert_eq(config_capacity(), DISK_SECTORS);
	cr_assert_eq(vd_reg(&d, 0x0fc), gen + 1, "the config generation moves");
	cr_assert(vd_reg(&d, R_INT_STATUS) & INT_CONFIG, "a config-change interrupt");
	cr_assert_eq(vd_irqs(&d), 1);
	vd_set(&d, R_INT_ACK, INT_CONFIG);

	expect_ok(vd_blk1(&d, BLK_T_IN, 3, buf, 512), 513);
	expect_image_bytes(buf, 3 * 512, 512);
	expect_ok(vd_blk1(&d, BLK_T_OUT, 3, src, 512), 1);
	expect_ok(vd_blk1(&d, BLK_T_IN, 3, buf, 512), 513);
	cr_assert_arr_eq(d.ram + buf, d.ram + src, 512);
	cr_assert(vd_file_pristine(&d), "the inserted image was written");
	memset(d.ram + id, 0, 20);
	expect_ok(vd_blk1(&d, BLK_T_GET_ID, 0, id, 20), 21);
	cr_assert_str_eq((char *)d.ram + id, "ctr-1");

	fd = open(d.path, O_RDONLY | O_CLOEXEC);
	cr_assert_eq(disk_open_cow_fd(&second, fd, &why), 0, "%s", why);
	cr_assert_eq(virtio_blk_insert(&d.blk, &second, &why), -EBUSY);
	cr_assert(disk_is_open(&second), "a refused disk stays the caller's");
	disk_close(&second);

	snap_out_init(&o);
	cr_assert_eq(virtio_mmio_save(d.m, &o, &why), -ENOTSUP);
	cr_assert(strstr(why, "inserted"), "%s", why);
	snap_out_free(&o);
}

/* An image opened for writing only, or not a disk at all, is refused by
 * disk_open_cow_fd, which closes the descriptor either way. */
Test(virtio_blk, insert_refuses_bad_descriptors, .init = setup_empty)
{
	struct disk disk;
	const char *why = "";
	int fd = open(d.path, O_WRONLY | O_CLOEXEC), pipefd[2];

	cr_assert_geq(fd, 0);
	cr_assert_eq(disk_open_cow_fd(&disk, fd, &why), -EBADF);
	cr_assert_eq(fcntl(fd, F_GETFD), -1, "the descriptor was closed");
	cr_assert_eq(pipe2(pipefd, O_CLOEXEC), 0);
	cr_assert_eq(disk_open_cow_fd(&disk, pipefd[0], &why), -EINVAL, "%s", why);
	close(pipefd[1]);
	cr_assert_eq(config_capacity(), 0, "the slot stays empty");
}
