/* test_virtio_snapshot.c - a virtio-blk device saved mid-stream and restored into a fresh one over the same RAM: the driver goes on; every bad payload is refused. */
#include <poll.h>

#include "virtio_driver.h"

/* The payload as docs/snapshot.md lays it out: the transport's 48 bytes,
 * 44 per queue, then virtio-blk's capacity. Restated, not shared. */
#define T_DEVICE_ID   0
#define T_NR_QUEUES   4
#define T_DEV_FEAT    8
#define T_DRV_FEAT    16
#define T_QUEUE_SEL   32
#define T_STATUS      36
#define T_ISR         40
#define Q0            48
#define Q_DESC        0
#define Q_AVAIL       8
#define Q_USED        16
#define Q_SIZE        24
#define Q_LAST_AVAIL  28
#define Q_USED_IDX    32
#define Q_SIGNALLED   36
#define Q_FLAGS       40
#define QF_READY      1
#define QF_EVENT_IDX  2
#define BLK_CAPACITY  (Q0 + 44)
#define BLK_LEN       (BLK_CAPACITY + 8)

static struct vdrv d;
static struct snap_out o;
static uint8_t good[BLK_LEN];

static void setup(void)
{
	vd_setup(&d, VD_RAW);
	snap_out_init(&o);
}

static void teardown(void)
{
	snap_out_free(&o);
	vd_teardown(&d);
}

TestSuite(virtio_snapshot, .init = setup, .fini = teardown);

static uint32_t get32(const uint8_t *p, size_t off)
{
	uint32_t v;

	memcpy(&v, p + off, 4);
	return le32toh(v);
}

static void put32(uint8_t *p, size_t off, uint32_t v)
{
	v = htole32(v);
	memcpy(p + off, &v, 4);
}

static void put64(uint8_t *p, size_t off, uint64_t v)
{
	v = htole64(v);
	memcpy(p + off, &v, 8);
}

/* The old device goes, as its process would, and a fresh one, built from
 * the same config, takes its place over the same guest RAM. */
static void fresh_device(void)
{
	struct disk disk;
	const char *why = "";

	virtio_blk_destroy(&d.blk);
	cr_assert_eq(disk_open_raw(&disk, d.path, false, &why), 0, "%s", why);
	cr_assert_eq(virtio_blk_init(&d.blk, &disk, &d.mem, "vda"), 0);
	d.m = &d.blk.mmio;
}

static void write_sector(uint64_t sector, uint8_t seed)
{
	uint64_t buf = vd_alloc(&d, 512);
	struct vres r;

	memset(d.ram + buf, seed, 512);
	r = vd_blk1(&d, BLK_T_OUT, sector, buf, 512);
	cr_assert(r.done && r.status == BLK_S_OK, "write of sector %llu failed",
		  (unsigned long long)sector);
}

/* Six requests done, each interrupting (used_event asked for it), the
 * last interrupt never acknowledged, and a seventh request posted whose
 * kick reached the old device's eventfd but was never served. Returns the
 * seventh's head; its status byte's gpa goes to *st, its buffer's to *buf. */
static uint16_t drive_mid_stream(uint64_t *st, uint64_t *buf)
{
	uint16_t head;

	vd_init(&d, FEAT_BASIC | FEAT_EVENT_IDX);
	for (int i = 0; i < 6; i++) {
		vd_set_used_event(&d, d.used_seen);
		write_sector((uint64_t)i, (uint8_t)(0x40 + i));
		cr_assert_eq(vd_irqs(&d), 1, "request %d did not interrupt", i);
	}
	cr_assert_eq(vd_reg(&d, R_INT_STATUS), INT_VRING);
	*buf = vd_alloc(&d, 512);
	memset(d.ram + *buf, 0xcc, 512);
	head = vd_blk_build(&d, BLK_T_IN, 3, &(struct vseg){ *buf, 512, true }, 1, st);
	vd_post(&d, head);
	vd_set(&d, R_QUEUE_NOTIFY, 0);   /* the kick: written, never read */
	return head;
}

static void save_blk(void)
{
	const char *why = "";

	cr_assert_eq(virtio_mmio_save(d.m, &o, &why), 0, "%s", why);
	cr_assert_eq(o.len, BLK_LEN);
	memcpy(good, o.data, BLK_LEN);
}

static bool fd_readable(int fd)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };

	return poll(&pf, 1, 0) == 1;
}

Test(virtio_snapshot, blk_goes_on_mid_stream)
{
	uint64_t st, buf;
	uint16_t head = drive_mid_stream(&st, &buf);
	const char *why = "";
	uint32_t id, len;

	save_blk();
	fresh_device();
	cr_assert_eq(virtio_mmio_restore(d.m, o.data, o.len, &why), 0, "%s", why);
	cr_assert_eq(vd_status(&d), S_ALL_OK);
	cr_assert_eq(vd_reg(&d, R_QUEUE_READY), 1);
	cr_assert_eq(vd_reg(&d, R_INT_STATUS), INT_VRING, "the pending interrupt is kept");
	cr_assert_eq(vd_irqs(&d), 0, "a restore alone raises nothing");

	/* Resume: the lost kick comes back and the interrupt is raised again. */
	virtio_mmio_resume(d.m);
	cr_assert(fd_readable(d.m->kick_fds[0]), "no kick for the ready queue");
	cr_assert_eq(vd_irqs(&d), 1, "the pending interrupt was not raised again");
	virtio_mmio_kick(d.m, 0);
	cr_assert(vd_get_used(&d, &id, &len), "the request posted before the snapshot is lost");
	cr_assert_eq(id, head);
	cr_assert_eq(len, 513);
	cr_assert_eq(d.ram[st], BLK_S_OK);
	for (int i = 0; i < 512; i++)
		cr_assert_eq(d.ram[buf + i], 0x43, "sector 3 as written before the snapshot");
	cr_assert_eq(vd_used_idx(&d), 7, "the used index goes on from 6");
	/* used_event still says 5, and the last interrupt was at 6: with
	 * EVENT_IDX's state restored, this completion does not interrupt. */
	cr_assert_eq(vd_irqs(&d), 0, "interrupt although used_event did not ask for it");

	vd_set(&d, R_INT_ACK, INT_VRING);
	cr_assert_eq(vd_reg(&d, R_INT_STATUS), 0);
	vd_set_used_event(&d, d.used_seen);
	write_sector(9, 0x99);
	cr_assert_eq(vd_irqs(&d), 1, "no interrupt although used_event asked for one");
	cr_assert_eq(vd_used_idx(&d), 8);
	vd_check_guards();
}

Test(virtio_snapshot, blk_saves_what_it_restored)
{
	uint64_t st, buf;
	const char *why = "";
	struct snap_out again;

	drive_mid_stream(&st, &buf);
	save_blk();
	fresh_device();
	cr_assert_eq(virtio_mmio_restore(d.m, o.data, o.len, &why), 0, "%s", why);
	snap_out_init(&again);
	cr_assert_eq(virtio_mmio_save(d.m, &again, &why), 0, "%s", why);
	cr_assert_eq(again.len, o.len);
	cr_assert_arr_eq(again.data, o.data, o.len);
	snap_out_free(&again);
}

Test(virtio_snapshot, device_before_the_driver_round_trips)
{
	const char *why = "";

	save_blk();
	fresh_device();
	cr_assert_eq(virtio_mmio_restore(d.m, o.data, o.len, &why), 0, "%s", why);
	virtio_mmio_resume(d.m);
	cr_assert_not(fd_readable(d.m->kick_fds[0]), "kicked a device that is not live");
	cr_assert_eq(vd_irqs(&d), 0);
	vd_init(&d, FEAT_BASIC);
	write_sector(1, 0x11);
}

/* ---- refusals ---- */

static void expect_refused(const uint8_t *p, size_t len, int rc, const char *what)
{
	vd_expect_restore_refused(&d, p, len, rc, "virtio-blk vda", what);
}

/* A copy of the good payload with one u32 or u64 changed, refused. */
static void refused32(size_t off, uint32_t v, int rc, const char *what)
{
	uint8_t p[BLK_LEN];

	memcpy(p, good, BLK_LEN);
	put32(p, off, v);
	expect_refused(p, BLK_LEN, rc, what);
}

static void refused64(size_t off, uint64_t v, int rc, const char *what)
{
	uint8_t p[BLK_LEN];

	memcpy(p, good, BLK_LEN);
	put64(p, off, v);
	expect_refused(p, BLK_LEN, rc, what);
}

static void saved_mid_stream(void)
{
	uint64_t st, buf;

	drive_mid_stream(&st, &buf);
	save_blk();
	fresh_device();
	cr_assert_eq(get32(good, T_STATUS), S_ALL_OK);
	cr_assert_eq(get32(good, Q0 + Q_FLAGS) & QF_READY, QF_READY);
}

Test(virtio_snapshot, refuses_every_cut_and_a_byte_more)
{
	saved_mid_stream();
	vd_expect_cuts_refused(&d, good, BLK_LEN, "virtio-blk vda");
	cr_assert_eq(virtio_mmio_restore(d.m, good, BLK_LEN, NULL), 0,
		     "the good payload after all the refusals");
}

Test(virtio_snapshot, refuses_bad_queues)
{
	uint64_t flags;

	saved_mid_stream();
	refused32(Q0 + Q_SIZE, 3, -EBADMSG, "queue size 3");
	refused32(Q0 + Q_SIZE, 0, -EBADMSG, "queue size 0");
	refused32(Q0 + Q_SIZE, 512, -EBADMSG, "queue size above QueueNumMax");
	refused32(Q0 + Q_SIZE, 0x10100, -EBADMSG, "queue size past 16 bits");
	refused64(Q0 + Q_DESC, RAM_SIZE - 16, -EBADMSG, "descriptor table past guest RAM");
	refused64(Q0 + Q_AVAIL, 1ULL << 40, -EBADMSG, "avail ring outside guest RAM");
	refused64(Q0 + Q_USED, ~0ULL - 3, -EBADMSG, "used ring wrapping the address space");
	refused64(Q0 + Q_DESC, DESC_GPA + 8, -EBADMSG, "descriptor table misaligned");
	refused32(Q0 + Q_LAST_AVAIL, 6 + QSIZE + 1, -EBADMSG, "more in flight than the queue holds");
	refused32(Q0 + Q_USED_IDX, 7, -EBADMSG, "used ahead of avail");
	flags = get32(good, Q0 + Q_FLAGS);
	refused32(Q0 + Q_FLAGS, (uint32_t)flags & ~QF_EVENT_IDX, -EBADMSG, "EVENT_IDX unlike the features");
	refused32(Q0 + Q_FLAGS, (uint32_t)flags | 8, -EBADMSG, "unknown queue flag");
	refused32(Q0 + Q_FLAGS, (uint32_t)flags & ~QF_READY, -EBADMSG, "progress on a queue not ready");
	refused32(T_STATUS, S_ACK | S_DRIVER, -EBADMSG, "a ready queue before FEATURES_OK");
}

Test(virtio_snapshot, refuses_states_outside_the_status_table)
{
	saved_mid_stream();
	refused32(T_STATUS, S_ACK | S_FEATURES_OK | S_DRIVER_OK, -EBADMSG, "DRIVER skipped");
	refused32(T_STATUS, S_ALL_OK | 0x10, -EBADMSG, "a reserved status bit");
	refused32(T_STATUS, S_ALL_OK | 0x100, -EBADMSG, "status past 8 bits");
	refused32(T_STATUS, S_DRIVER, -EBADMSG, "DRIVER without ACKNOWLEDGE");
	refused32(T_ISR, INT_VRING | 4, -EBADMSG, "an unknown interrupt status bit");
	refused64(T_DRV_FEAT, FEAT_BASIC | FEAT_EVENT_IDX | FEAT_INDIRECT, -EBADMSG,
		  "a feature the device never offered, past FEATURES_OK");
	refused64(T_DRV_FEAT, FEAT_BLK_FLUSH | FEAT_EVENT_IDX, -EBADMSG, "no VERSION_1");
}

Test(virtio_snapshot, refuses_another_device)
{
	saved_mid_stream();
	refused32(T_DEVICE_ID, 19, -EINVAL, "a vsock's state");
	refused32(T_NR_QUEUES, 3, -EINVAL, "three queues");
	refused64(T_DEV_FEAT, vd_device_features(&d) | FEAT_BLK_RO, -EINVAL, "other features");
	refused64(BLK_CAPACITY, DISK_SECTORS + 8, -EINVAL, "a disk of another size");
}

Test(virtio_snapshot, refuses_a_device_in_use)
{
	const char *why = "";

	saved_mid_stream();
	vd_set(&d, R_STATUS, S_ACK);
	cr_assert_eq(virtio_mmio_restore(d.m, good, BLK_LEN, &why), -EBUSY);
	cr_assert(strstr(why, "virtio-blk vda"), "why: %s", why);
	cr_assert_eq(vd_status(&d), S_ACK);
}

/* What a guest can leave in its registers is restored, even if odd. */
Test(virtio_snapshot, accepts_every_reachable_state)
{
	static const uint32_t statuses[] = {
		0, S_ACK, S_ACK | S_DRIVER, S_ACK | S_DRIVER | S_FEATURES_OK, S_ALL_OK,
		S_FAILED, S_ALL_OK | S_FAILED, S_ALL_OK | S_NEEDS_RESET,
		S_ACK | S_DRIVER | S_FEATURES_OK | S_FAILED | S_NEEDS_RESET,
	};
	uint8_t p[BLK_LEN];
	uint16_t used;

	saved_mid_stream();
	for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
		const char *why = "";
		bool fok = statuses[i] & S_FEATURES_OK;

		memcpy(p, good, BLK_LEN);
		put32(p, T_STATUS, statuses[i]);
		put32(p, T_QUEUE_SEL, 0xffffffff);
		if (!fok)   /* no queue is ready before FEATURES_OK, nor has progress */
			memset(p + Q0 + Q_LAST_AVAIL, 0, 16);
		cr_assert_eq(virtio_mmio_restore(d.m, p, BLK_LEN, &why), 0, "status 0x%x: %s",
			     statuses[i], why);
		cr_assert_eq(vd_status(&d), statuses[i]);
		cr_assert_eq(vd_reg(&d, R_QUEUE_READY), 0, "queue_sel out of range reads 0");
		/* Only a live device serves its queue (the request posted
		 * before the snapshot, each time). */
		used = vd_used_idx(&d);
		virtio_mmio_kick(d.m, 0);
		cr_assert_eq(vd_used_idx(&d), statuses[i] == S_ALL_OK ? 7 : used,
			     "status 0x%x", statuses[i]);
		vd_wr16(&d, USED_GPA + 2, 6);
		fresh_device();
	}
}
