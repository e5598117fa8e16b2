/* test_virtio_mmio.c - the virtio-mmio transport driven through its register window, as a guest driver would. */
#include "observe.h"
#include "virtio_driver.h"

static struct vdrv d;

static void setup(void)
{
	vd_setup(&d, VD_RAW);
}

static void teardown(void)
{
	vd_teardown(&d);
}

TestSuite(virtio_mmio, .init = setup, .fini = teardown);

/* A config-space read of `len` bytes at `off` into a buffer pre-filled with 0xff. */
static uint64_t cfg(uint32_t off, uint32_t len)
{
	uint64_t v = ~0ULL;

	virtio_mmio_io(d.m, R_CONFIG + off, (uint8_t *)&v, len, false);
	if (len < 8)
		cr_assert_eq(v >> (8 * len), ~0ULL >> (8 * len), "read of %u bytes wrote past them", len);
	return len < 8 ? v & ((1ULL << (8 * len)) - 1) : v;
}

/* A register access of `len` bytes; reads pre-fill the buffer with 0xff. */
static uint64_t raw_io(uint64_t off, uint32_t len, uint64_t val, bool is_write)
{
	uint64_t v = is_write ? val : ~0ULL;

	virtio_mmio_io(d.m, off, (uint8_t *)&v, len, is_write);
	return v;
}

/* A flush request that must complete with OK. */
static void expect_request_works(void)
{
	struct vres r = vd_blk(&d, BLK_T_FLUSH, 0, NULL, 0);

	cr_assert(r.done, "no used entry for a valid request");
	cr_assert_eq(r.status, BLK_S_OK);
	cr_assert_eq(r.len, 1);
}

/* A flush request the device must not touch. */
static void expect_request_ignored(void)
{
	uint16_t used = vd_used_idx(&d);
	struct vres r = vd_blk(&d, BLK_T_FLUSH, 0, NULL, 0);

	cr_assert_not(r.done, "the device served a request it should have ignored");
	cr_assert_eq(vd_used_idx(&d), used);
	cr_assert_eq(r.status, STATUS_UNSET, "status byte written");
	cr_assert_eq(vd_irqs(&d), 0, "interrupt raised");
}

/* ---- identity and features ---- */

Test(virtio_mmio, identity_registers)
{
	cr_assert_eq(vd_reg(&d, R_MAGIC), 0x74726976);
	cr_assert_eq(vd_reg(&d, R_VERSION), 2);
	cr_assert_eq(vd_reg(&d, R_DEVICE_ID), 2, "virtio-blk is device id 2");
	cr_assert_eq(vd_reg(&d, R_VENDOR_ID), 0x464d594d, "vendor is \"MYMF\"");
	cr_assert_eq(vd_status(&d), 0);
	cr_assert_eq(vd_reg(&d, R_INT_STATUS), 0);
	cr_assert_eq(vd_reg(&d, R_QUEUE_READY), 0);
}

Test(virtio_mmio, device_features_offered)
{
	uint64_t f = vd_device_features(&d);

	cr_assert(f & FEAT_VERSION_1, "VERSION_1 (bit 32) not offered: 0x%llx", (unsigned long long)f);
	cr_assert(f & FEAT_EVENT_IDX);
	cr_assert(f & FEAT_BLK_FLUSH);
	cr_assert(f & FEAT_BLK_SEG_MAX);
	cr_assert(f & FEAT_BLK_SIZE);
	cr_assert_not(f & FEAT_INDIRECT, "INDIRECT_DESC offered but not supported");
	cr_assert_not(f & FEAT_BLK_RO, "a writable disk offered RO");
	vd_set(&d, R_DEV_FEAT_SEL, 2);
	cr_assert_eq(vd_reg(&d, R_DEV_FEAT), 0, "feature word 2 must read 0");
}

Test(virtio_mmio, full_init_sequence)
{
	uint64_t f = FEAT_VERSION_1 | FEAT_BLK_FLUSH | FEAT_EVENT_IDX;

	vd_set(&d, R_STATUS, S_ACK);
	cr_assert_eq(vd_status(&d), S_ACK);
	vd_set(&d, R_STATUS, S_ACK | S_DRIVER);
	cr_assert_eq(vd_status(&d), S_ACK | S_DRIVER);
	vd_set(&d, R_DRV_FEAT_SEL, 0);
	vd_set(&d, R_DRV_FEAT, (uint32_t)f);
	vd_set(&d, R_DRV_FEAT_SEL, 1);
	vd_set(&d, R_DRV_FEAT, (uint32_t)(f >> 32));
	vd_set(&d, R_STATUS, S_ACK | S_DRIVER | S_FEATURES_OK);
	cr_assert_eq(vd_status(&d), S_ACK | S_DRIVER | S_FEATURES_OK);
	vd_set(&d, R_QUEUE_SEL, 0);
	cr_assert_eq(vd_reg(&d, R_QUEUE_MAX), QSIZE);
	cr_assert_eq(vd_reg(&d, R_QUEUE_READY), 0);
	vd_queue_setup(&d);
	vd_set(&d, R_STATUS, S_ALL_OK);
	cr_assert_eq(vd_status(&d), S_ALL_OK);
	expect_request_works();
	cr_assert_eq(vd_irqs(&d), 1);
	cr_assert_eq(vd_reg(&d, R_INT_STATUS), INT_VRING);
}

Test(virtio_mmio, features_ok_refused_for_feature_not_offered)
{
	cr_assert_eq(vd_negotiate(&d, FEAT_BASIC | FEAT_INDIRECT), S_ACK | S_DRIVER);
	/* Without FEATURES_OK neither the queue nor DRIVER_OK can follow. */
	vd_queue_regs(&d, QSIZE, DESC_GPA, AVAIL_GPA, USED_GPA);
	vd_set(&d, R_QUEUE_READY, 1);
	cr_assert_eq(vd_reg(&d, R_QUEUE_READY), 0);
	vd_set(&d, R_STATUS, S_ALL_OK);
	cr_assert_eq(vd_status(&d), S_ACK | S_DRIVER);
	/* The driver may try again with what was offered. */
	vd_set(&d, R_DRV_FEAT_SEL, 0);
	vd_set(&d, R_DRV_FEAT, (uint32_t)FEAT_BLK_FLUSH);
	vd_set(&d, R_STATUS, S_ACK | S_DRIVER | S_FEATURES_OK);
	cr_assert_eq(vd_status(&d), S_ACK | S_DRIVER | S_FEATURES_OK);
}

Test(virtio_mmio, features_ok_refused_without_version_1)
{
	cr_assert_eq(vd_negotiate(&d, FEAT_BLK_FLUSH), S_ACK | S_DRIVER);
	cr_assert_eq(vd_negotiate(&d, 0), S_ACK | S_DRIVER);
	cr_assert_eq(vd_negotiate(&d, FEAT_VERSION_1), S_ACK | S_DRIVER | S_FEATURES_OK);
}

Test(virtio_mmio, features_written_after_features_ok_ignored)
{
	/* EVENT_IDX slipped in after FEATURES_OK must not take effect: the
	 * device then neither writes avail_event nor heeds used_event. */
	cr_assert_eq(vd_negotiate(&d, FEAT_BASIC), S_ACK | S_DRIVER | S_FEATURES_OK);
	vd_set(&d, R_DRV_FEAT_SEL, 0);
	vd_set(&d, R_DRV_FEAT, (uint32_t)(FEAT_BASIC | FEAT_EVENT_IDX));
	vd_queue_setup(&d);
	vd_set(&d, R_STATUS, S_ALL_OK);
	vd_wr16(&d, d.used + 4 + 8 * QSIZE, 0x5a5a);
	vd_set_used_event(&d, 0x1000);
	expect_request_works();
	cr_assert_eq(vd_avail_event(&d), 0x5a5a, "avail_event written without EVENT_IDX");
	cr_assert_eq(vd_irqs(&d), 1, "used_event heeded without EVENT_IDX");
	expect_request_works();
	cr_assert_eq(vd_irqs(&d), 1);
}

/* ---- the status state machine ---- */

Test(virtio_mmio, status_steps_out_of_order_ignored)
{
	vd_set(&d, R_STATUS, S_DRIVER_OK);
	cr_assert_eq(vd_status(&d), 0, "0 -> DRIVER_OK accepted");
	vd_set(&d, R_STATUS, S_ALL_OK);
	cr_assert_eq(vd_status(&d), 0, "0 -> everything accepted");
	vd_set(&d, R_STATUS, S_DRIVER);
	cr_assert_eq(vd_status(&d), 0, "0 -> DRIVER without ACK accepted");
	vd_set(&d, R_STATUS, S_ACK);
	vd_set(&d, R_STATUS, S_ACK | S_DRIVER | S_FEATURES_OK);
	cr_assert_eq(vd_status(&d), S_ACK, "DRIVER skipped");
	vd_set(&d, R_STATUS, S_ACK | S_DRIVER);
	vd_set(&d, R_STATUS, S_ACK);
	cr_assert_eq(vd_status(&d), S_ACK | S_DRIVER, "a bit taken back");
	vd_set(&d, R_STATUS, S_ACK | S_DRIVER | S_DRIVER_OK);
	cr_assert_eq(vd_status(&d), S_ACK | S_DRIVER, "FEATURES_OK skipped");
	vd_set(&d, R_STATUS, S_ACK | S_DRIVER | S_NEEDS_RESET);
	cr_assert_eq(vd_status(&d), S_ACK | S_DRIVER, "driver set NEEDS_RESET");
}

Test(virtio_mmio, driver_failed_stops_the_device)
{
	vd_init(&d, FEAT_BASIC);
	vd_set(&d, R_STATUS, S_ALL_OK | S_FAILED);
	cr_assert_eq(vd_status(&d), S_ALL_OK | S_FAILED);
	expect_request_ignored();
	vd_init(&d, FEAT_BASIC);
	expect_request_works();
}

/* ---- queue registers ---- */

Test(virtio_mmio, queue_num_max)
{
	cr_assert_eq(vd_negotiate(&d, FEAT_BASIC), S_ACK | S_DRIVER | S_FEATURES_OK);
	vd_set(&d, R_QUEUE_SEL, 0);
	cr_assert_eq(vd_reg(&d, R_QUEUE_MAX), 256);
	vd_set(&d, R_QUEUE_SEL, 1);
	cr_assert_eq(vd_reg(&d, R_QUEUE_MAX), 0);
	vd_set(&d, R_QUEUE_SEL, 0xffffffff);
	cr_assert_eq(vd_reg(&d, R_QUEUE_MAX), 0);
	/* A queue that does not exist takes no configuration, nor fails the device. */
	vd_set(&d, R_QUEUE_SEL, 1);
	vd_set(&d, R_QUEUE_NUM, 3);
	vd_set(&d, R_QUEUE_READY, 1);
	cr_assert_eq(vd_reg(&d, R_QUEUE_READY), 0);
	cr_assert_eq(vd_status(&d), S_ACK | S_DRIVER | S_FEATURES_OK);
}

Test(virtio_mmio, queue_regs_before_features_ok_ignored)
{
	vd_set(&d, R_STATUS, S_ACK);
	vd_set(&d, R_STATUS, S_ACK | S_DRIVER);
	vd_queue_regs(&d, QSIZE, DESC_GPA, AVAIL_GPA, USED_GPA);
	vd_set(&d, R_QUEUE_READY, 1);
	cr_assert_eq(vd_reg(&d, R_QUEUE_READY), 0);
	cr_assert_eq(vd_status(&d), S_ACK | S_DRIVER, "ignored writes must not fail the device");
	vd_set(&d, R_DRV_FEAT_SEL, 1);
	vd_set(&d, R_DRV_FEAT, 1);
	vd_set(&d, R_STATUS, S_ACK | S_DRIVER | S_FEATURES_OK);
	cr_assert_eq(vd_status(&d), S_ACK | S_DRIVER | S_FEATURES_OK);
	/* Had the early writes landed, this would make a good queue; the
	 * size is still 0, so the device must fail instead. */
	vd_set(&d, R_QUEUE_READY, 1);
	cr_assert_eq(vd_reg(&d, R_QUEUE_READY), 0);
	cr_assert(vd_status(&d) & S_NEEDS_RESET);
}

Test(virtio_mmio, queue_regs_after_driver_ok_ignored)
{
	vd_init(&d, FEAT_BASIC);
	/* Point the live queue at nothing: size 0, descriptors above 4 GiB. */
	vd_set(&d, R_QUEUE_NUM, 0);
	vd_set(&d, R_DESC_HI, 1);
	vd_set(&d, R_AVAIL_LO, 0x6000);
	vd_set(&d, R_USED_LO, 0x7000);
	vd_set(&d, R_QUEUE_READY, 0);
	vd_set(&d, R_QUEUE_READY, 1);
	cr_assert_eq(vd_status(&d), S_ALL_OK);
	cr_assert_eq(vd_reg(&d, R_QUEUE_READY), 1);
	/* Requests still come from, and complete to, the rings set up first. */
	expect_request_works();
	expect_request_works();
	vd_check_guards();
}

Test(virtio_mmio, queue_setup_after_driver_ok_ignored)
{
	cr_assert_eq(vd_negotiate(&d, FEAT_BASIC), S_ACK | S_DRIVER | S_FEATURES_OK);
	vd_set(&d, R_STATUS, S_ALL_OK);
	cr_assert_eq(vd_status(&d), S_ALL_OK);
	vd_queue_regs(&d, QSIZE, DESC_GPA, AVAIL_GPA, USED_GPA);
	vd_set(&d, R_QUEUE_READY, 1);
	cr_assert_eq(vd_reg(&d, R_QUEUE_READY), 0);
	expect_request_ignored();
}

/* QueueReady with this configuration must fail the device. */
static void expect_bad_queue(uint32_t size, uint64_t desc, uint64_t avail, uint64_t used)
{
	cr_assert_eq(vd_negotiate(&d, FEAT_BASIC), S_ACK | S_DRIVER | S_FEATURES_OK);
	vd_irqs(&d);
	vd_queue_regs(&d, size, desc, avail, used);
	vd_set(&d, R_QUEUE_READY, 1);
	cr_assert_eq(vd_reg(&d, R_QUEUE_READY), 0);
	cr_assert_eq(vd_status(&d), S_ACK | S_DRIVER | S_FEATURES_OK | S_NEEDS_RESET);
	cr_assert_eq(vd_reg(&d, R_INT_STATUS), INT_CONFIG);
	cr_assert_eq(vd_irqs(&d), 1);
	vd_check_guards();
	/* The driver's view: rings it can write a request into. */
	d.qsize = QSIZE;
	d.desc = DESC_GPA;
	d.avail = AVAIL_GPA;
	d.used = USED_GPA;
	/* It stays failed through DRIVER_OK. */
	vd_set(&d, R_STATUS, S_ALL_OK);
	cr_assert(vd_status(&d) & S_NEEDS_RESET);
	expect_request_ignored();
}

Test(virtio_mmio, queue_size_zero_fails) { expect_bad_queue(0, DESC_GPA, AVAIL_GPA, USED_GPA); }
Test(virtio_mmio, queue_size_not_power_of_two_fails) { expect_bad_queue(100, DESC_GPA, AVAIL_GPA, USED_GPA); }
Test(virtio_mmio, queue_size_above_max_fails) { expect_bad_queue(512, DESC_GPA, AVAIL_GPA, USED_GPA); }
Test(virtio_mmio, queue_size_above_16_bits_fails) { expect_bad_queue(0x10010, DESC_GPA, AVAIL_GPA, USED_GPA); }
Test(virtio_mmio, desc_misaligned_fails) { expect_bad_queue(QSIZE, DESC_GPA + 8, AVAIL_GPA, USED_GPA); }
Test(virtio_mmio, avail_misaligned_fails) { expect_bad_queue(QSIZE, DESC_GPA, AVAIL_GPA + 1, USED_GPA); }
Test(virtio_mmio, used_misaligned_fails) { expect_bad_queue(QSIZE, DESC_GPA, AVAIL_GPA, USED_GPA + 2); }
Test(virtio_mmio, desc_beyond_ram_fails) { expect_bad_queue(QSIZE, RAM_SIZE - 16 * QSIZE + 16, AVAIL_GPA, USED_GPA); }
Test(virtio_mmio, desc_above_4g_fails) { expect_bad_queue(QSIZE, DESC_GPA | 1ULL << 32, AVAIL_GPA, USED_GPA); }

/* The rings' last field (used_event, avail_event) counts: one byte pair past RAM fails. */
Test(virtio_mmio, avail_event_field_beyond_ram_fails)
{
	expect_bad_queue(QSIZE, DESC_GPA, RAM_SIZE - (4 + 2 * QSIZE), USED_GPA);
}

Test(virtio_mmio, used_event_field_beyond_ram_fails)
{
	expect_bad_queue(QSIZE, DESC_GPA, AVAIL_GPA, RAM_SIZE - (4 + 8 * QSIZE));
}

/* Rings that end exactly at the end of RAM are fine. */
static void expect_good_queue(uint64_t desc, uint64_t avail, uint64_t used)
{
	memset(d.ram + RAM_SIZE - 0x4000, 0, 0x4000);
	cr_assert_eq(vd_negotiate(&d, FEAT_BASIC), S_ACK | S_DRIVER | S_FEATURES_OK);
	vd_queue_regs(&d, QSIZE, desc, avail, used);
	vd_set(&d, R_QUEUE_READY, 1);
	cr_assert_eq(vd_reg(&d, R_QUEUE_READY), 1);
	vd_set(&d, R_STATUS, S_ALL_OK);
	cr_assert_eq(vd_status(&d), S_ALL_OK);
	expect_request_works();
	vd_check_guards();
}

Test(virtio_mmio, rings_ending_at_ram_end_accepted)
{
	uint64_t avail = RAM_SIZE - (4 + 2 * QSIZE + 2), used = (avail - (4 + 8 * QSIZE + 2)) & ~3ULL;
	uint64_t desc = RAM_SIZE - 16 * QSIZE;

	expect_good_queue((used - 16 * QSIZE) & ~15ULL, avail, used);
	avail = desc - (4 + 2 * QSIZE + 2);
	expect_good_queue(desc, avail, (avail - (4 + 8 * QSIZE + 2)) & ~3ULL);
}

/* ---- kicks, reset ---- */

Test(virtio_mmio, kick_before_driver_ok_does_nothing)
{
	uint32_t id, len;

	cr_assert_eq(vd_negotiate(&d, FEAT_BASIC), S_ACK | S_DRIVER | S_FEATURES_OK);
	vd_queue_setup(&d);
	expect_request_ignored();
	cr_assert_eq(vd_reg(&d, R_INT_STATUS), 0);
	/* The request stays in the ring: DRIVER_OK and the next kick serve it. */
	vd_set(&d, R_STATUS, S_ALL_OK);
	vd_kick(&d);
	cr_assert(vd_get_used(&d, &id, &len));
	cr_assert_eq(id, 0);
	cr_assert_eq(len, 1);
	cr_assert_eq(vd_irqs(&d), 1);
	expect_request_works();
}

Test(virtio_mmio, reset_returns_to_initial_state)
{
	vd_init(&d, FEAT_BASIC | FEAT_EVENT_IDX);
	expect_request_works();
	cr_assert_eq(vd_reg(&d, R_INT_STATUS), INT_VRING);
	vd_set(&d, R_STATUS, 0);
	cr_assert_eq(vd_status(&d), 0);
	cr_assert_eq(vd_reg(&d, R_INT_STATUS), 0);
	vd_set(&d, R_QUEUE_SEL, 0);
	cr_assert_eq(vd_reg(&d, R_QUEUE_READY), 0);
	/* Driver features were cleared: FEATURES_OK without writing them lacks VERSION_1. */
	vd_set(&d, R_STATUS, S_ACK);
	vd_set(&d, R_STATUS, S_ACK | S_DRIVER);
	vd_set(&d, R_STATUS, S_ACK | S_DRIVER | S_FEATURES_OK);
	cr_assert_eq(vd_status(&d), S_ACK | S_DRIVER);
}

Test(virtio_mmio, reset_clears_needs_reset)
{
	expect_bad_queue(0, DESC_GPA, AVAIL_GPA, USED_GPA);
	vd_set(&d, R_STATUS, 0);
	cr_assert_eq(vd_status(&d), 0);
	cr_assert_eq(vd_reg(&d, R_INT_STATUS), 0);
}

Test(virtio_mmio, kick_after_reset_does_nothing)
{
	vd_init(&d, FEAT_BASIC);
	expect_request_works();
	vd_irqs(&d);
	vd_set(&d, R_STATUS, 0);
	expect_request_ignored();
}

Test(virtio_mmio, reinit_after_reset_serves_requests)
{
	vd_init(&d, FEAT_BASIC);
	expect_request_works();
	expect_request_works();
	vd_set(&d, R_STATUS, 0);
	vd_init(&d, FEAT_BASIC);
	expect_request_works();
	cr_assert_eq(vd_used_idx(&d), 1, "used index did not restart at reset");
}

/* ---- access rules, interrupts, config space ---- */

Test(virtio_mmio, non_32_bit_or_misaligned_register_access_ignored)
{
	static const uint32_t widths[] = { 1, 2, 8 };

	for (size_t i = 0; i < 3; i++)
		cr_assert_eq(raw_io(R_MAGIC, widths[i], 0, false), widths[i] == 8 ? 0 : ~0ULL << (8 * widths[i]),
			     "%u-byte read of MagicValue not ignored", widths[i]);
	cr_assert_eq(raw_io(R_MAGIC + 2, 4, 0, false), 0xffffffff00000000ULL);
	raw_io(R_STATUS, 1, S_ACK, true);
	raw_io(R_STATUS, 2, S_ACK, true);
	raw_io(R_STATUS, 8, S_ACK, true);
	raw_io(R_STATUS + 1, 4, S_ACK, true);
	raw_io(R_STATUS - 2, 4, (uint64_t)S_ACK << 16, true);
	cr_assert_eq(vd_status(&d), 0);
	/* Nor can a narrow write reset a live device. */
	vd_init(&d, FEAT_BASIC);
	raw_io(R_STATUS, 1, 0, true);
	raw_io(R_STATUS, 2, 0, true);
	cr_assert_eq(vd_status(&d), S_ALL_OK);
	expect_request_works();
}

Test(virtio_mmio, interrupt_ack_clears_bits)
{
	vd_init(&d, FEAT_BASIC);
	expect_request_works();
	cr_assert_eq(vd_reg(&d, R_INT_STATUS), INT_VRING);
	/* A head out of range fails the device: the config-change bit joins. */
	vd_post(&d, QSIZE);
	vd_kick(&d);
	cr_assert(vd_status(&d) & S_NEEDS_RESET);
	cr_assert_eq(vd_reg(&d, R_INT_STATUS), INT_VRING | INT_CONFIG);
	vd_set(&d, R_INT_ACK, INT_VRING);
	cr_assert_eq(vd_reg(&d, R_INT_STATUS), INT_CONFIG);
	vd_set(&d, R_INT_ACK, 0);
	cr_assert_eq(vd_reg(&d, R_INT_STATUS), INT_CONFIG);
	vd_set(&d, R_INT_ACK, INT_CONFIG);
	cr_assert_eq(vd_reg(&d, R_INT_STATUS), 0);
	cr_assert(vd_status(&d) & S_NEEDS_RESET, "ack must not clear NEEDS_RESET");
}

Test(virtio_mmio, config_space_any_width)
{
	cr_assert_eq(cfg(0, 8), DISK_SECTORS, "capacity (le64)");
	cr_assert_eq(cfg(0, 4), DISK_SECTORS);
	cr_assert_eq(cfg(4, 4), 0);
	cr_assert_eq(cfg(0, 2), DISK_SECTORS);
	cr_assert_eq(cfg(0, 1), DISK_SECTORS & 0xff);
	cr_assert_eq(cfg(1, 1), DISK_SECTORS >> 8);
	cr_assert_eq(cfg(12, 4), VIRTIO_BLK_SEG_MAX, "seg_max");
	cr_assert_eq(cfg(12, 2), VIRTIO_BLK_SEG_MAX);
	cr_assert_eq(cfg(20, 4), 512, "blk_size");
	cr_assert_eq(cfg(21, 1), 2);
	cr_assert_eq(cfg(20, 8) & 0xffffffff, 512);
}

Test(virtio_mmio, config_space_beyond_its_size_reads_zero)
{
	uint32_t size = sizeof(struct virtio_blk_config);
	static const uint32_t widths[] = { 1, 2, 4, 8 };

	/* Leave device state behind config space non-zero, so a read that
	 * strays past it shows. */
	vd_init(&d, FEAT_BASIC);
	expect_request_works();
	expect_request_works();
	for (size_t i = 0; i < 4; i++) {
		for (uint32_t off = size; off < size + 32; off++)
			cr_assert_eq(cfg(off, widths[i]), 0, "%u bytes at %u", widths[i], off);
		cr_assert_eq(cfg(0xf00 - 8, widths[i]), 0, "%u bytes at the window's end", widths[i]);
	}
	cr_assert_eq(cfg(size - 2, 4), 0, "a read straddling the end");
	cr_assert_eq(cfg(size - 4, 8), 0, "a read straddling the end");
}

Test(virtio_mmio, config_space_writes_ignored)
{
	uint64_t v = 0;

	virtio_mmio_io(d.m, R_CONFIG, (uint8_t *)&v, 8, true);
	virtio_mmio_io(d.m, R_CONFIG + 12, (uint8_t *)&v, 4, true);
	cr_assert_eq(cfg(0, 8), DISK_SECTORS);
	cr_assert_eq(cfg(12, 4), VIRTIO_BLK_SEG_MAX);
}

/* ---- log lines a driver can trigger are limited ---- */

Test(virtio_mmio, features_ok_refused_20000_times_logs_a_few_lines)
{
	struct capture cap;
	char *text;

	log_init("t", LOG_WARN);
	capture_start(&cap);
	cr_assert_eq(vd_negotiate(&d, FEAT_BASIC | FEAT_INDIRECT), S_ACK | S_DRIVER);
	for (int i = 1; i < 20000; i++)
		vd_set(&d, R_STATUS, S_ACK | S_DRIVER | S_FEATURES_OK);
	cr_assert_eq(vd_status(&d), S_ACK | S_DRIVER, "FEATURES_OK refused every time");
	text = capture_stop_summed(&cap);
	expect_limited(text, "not offered", 20000);
	free(text);
}

Test(virtio_mmio, reset_and_break_again_loop_logs_a_few_lines)
{
	uint64_t hdr = vd_alloc(&d, 16);
	struct capture cap;
	char *text;

	log_init("t", LOG_WARN);
	capture_start(&cap);
	for (int i = 0; i < 1000; i++) {
		vd_init(&d, FEAT_BASIC);   /* resets first */
		vd_desc(&d, 0, hdr, 16, F_NEXT, 0);   /* a descriptor that is its own next */
		vd_post(&d, 0);
		vd_kick(&d);
		cr_assert(vd_status(&d) & S_NEEDS_RESET, "round %d: the device did not fail", i);
	}
	text = capture_stop_summed(&cap);
	/* Each round is a new failure: the limit outlives the resets. */
	expect_limited(text, "device failed, needs reset", 1000);
	free(text);
}

Test(virtio_mmio, each_kind_of_mistake_has_its_own_limit)
{
	struct capture cap;
	uint64_t v = 0;
	char *text;

	log_init("t", LOG_WARN);
	capture_start(&cap);
	for (int i = 0; i < 1000; i++)
		virtio_mmio_io(d.m, R_STATUS + 1, (uint8_t *)&v, 2, true);
	vd_set(&d, R_MAGIC, 1);
	text = capture_stop_summed(&cap);
	expect_limited(text, "not 32-bit aligned", 1000);
	cr_assert_eq(count_lines(text, "read-only or unknown register"), 1,
		     "the flood of one mistake hid another: %s", text);
	free(text);
}
