/* test_vsock_snapshot.c - virtio-vsock saved and restored into a fresh device: a held rx buffer comes back, owed RSTs go out, the guest hears TRANSPORT_RESET, live connections refuse. */
#include "vsock_guest.h"

#include <sys/epoll.h>

/* The payload as docs/snapshot.md lays it out: the transport (48 bytes,
 * 44 per queue), then the guest CID, the next local port, the RSTs owed. */
#define V_PART        (48 + 3 * 44)
#define V_CID         (V_PART + 0)
#define V_NEXT_PORT   (V_PART + 8)
#define V_NR_RSTS     (V_PART + 12)
#define V_RSTS        (V_PART + 16)

#define EV_GPA        0x7f0000   /* event buffers: 64 bytes each, by head */
#define EV_FILL       0xee
#define EVENT_TRANSPORT_RESET 0

static struct snap_out o;

static void setup(void)
{
	vsock_setup();
	snap_out_init(&o);
}

static void teardown(void)
{
	snap_out_free(&o);
	vsock_teardown();
}

TestSuite(vsock_snapshot, .init = setup, .fini = teardown, .timeout = 60);

static int save(const char **why)
{
	snap_out_free(&o);
	snap_out_init(&o);
	return virtio_mmio_save(d.m, &o, why);
}

/* The old device and its I/O thread go, as their process would, and a
 * fresh device from the same config takes their place over the same
 * guest RAM, its kicks watched by the loop as vm.c watches them. */
static void fresh_device(void)
{
	const char *why = "";

	virtio_vsock_destroy(vs);
	event_loop_destroy(&loop);
	cr_assert_eq(event_loop_init(&loop), 0);
	cr_assert_eq(virtio_vsock_init(vs, sock_path, GUEST_CID, &d.mem, &loop, &why), 0, "%s",
		     why);
	d.m = &vs->mmio;
	for (unsigned q = 0; q < 3; q++)
		cr_assert_eq(event_loop_add(&loop, d.m->kick_fds[q], EPOLLIN, virtio_mmio_kick_event,
					    &d.m->kickers[q]), 0);
}

static void restore_fresh(void)
{
	const char *why = "";

	fresh_device();
	cr_assert_eq(virtio_mmio_restore(d.m, o.data, o.len, &why), 0, "%s", why);
	virtio_mmio_resume(d.m);
}

/* An rx buffer made available without a kick. Returns its head. */
static uint16_t rx_post_quietly(void)
{
	uint16_t head = rxq.free[rxq.nr_free - 1];
	struct vseg s = { rx_gpa(head), RX_DEFAULT, true };

	memset(d.ram + s.gpa, RX_FILL, RX_SLOT);
	cr_assert_eq(vdq_chain(&d, &rxq, &s, 1), head);
	vdq_post(&d, &rxq, head);
	return head;
}

/* The id of the rx buffer used last. */
static uint32_t rx_last_used_id(void)
{
	uint16_t i = (uint16_t)(rxq.used_seen - 1);

	return le32toh(*(uint32_t *)(d.ram + rxq.used + 4 + 8 * (uint64_t)(i % rxq.qsize)));
}

/* Post one event buffer of `len` bytes and kick the event queue. */
static void ev_post(uint32_t len)
{
	uint16_t head = evq.free[evq.nr_free - 1];
	struct vseg s = { EV_GPA + 64 * (uint64_t)head, len, true };

	memset(d.ram + s.gpa, EV_FILL, 64);
	cr_assert_eq(vdq_chain(&d, &evq, &s, 1), head);
	vdq_post(&d, &evq, head);
	vdq_kick(&d, &evq);
	spin();
}

/* The next event the device sent, if any: exactly one 4-byte id. */
static bool ev_get(uint32_t *event)
{
	uint32_t id, len;
	const uint8_t *b;

	if (!vdq_get_used(&d, &evq, &id, &len))
		return false;
	cr_assert_eq(len, 4, "event of %u bytes", len);
	b = d.ram + EV_GPA + 64 * (uint64_t)id;
	*event = le32toh(*(const uint32_t *)b);
	for (int i = 4; i < 64; i++)
		cr_assert_eq(b[i], EV_FILL, "event buffer written past its 4 bytes");
	return true;
}

/* A packet from guest port gport to host port hport on no connection. */
static void stray(uint32_t gport, uint32_t hport)
{
	struct gconn gc = { .gport = gport, .hport = hport, .buf_alloc = DEV_BUF };

	gsend(&gc, OP_RW, 0, "?", 1);
}

Test(vsock_snapshot, held_rx_buffer_comes_back_and_the_guest_hears_transport_reset)
{
	struct gconn gc, gc2;
	uint32_t event;
	uint16_t held;
	const char *why = "";
	int fd;

	guest_init(FEAT_VERSION_1 | FEAT_EVENT_IDX);
	rx_post(1, RX_DEFAULT);
	fd = host_conn(&gc, 1234);        /* its REQUEST took the only buffer */
	client_say(fd, "unread");         /* owed to the guest: no buffer to put it in */
	spin();
	held = rx_post_quietly();
	/* The guest stops receiving: the pump pops the buffer for the
	 * connection, finds nothing it may send, and holds the buffer. */
	gsend(&gc, OP_SHUTDOWN, SHUT_RCV_F, NULL, 0);
	cr_assert(vs->rx_held, "no rx buffer held: the scenario did not happen");
	gsend(&gc, OP_RST, 0, NULL, 0);
	expect_closed(fd);
	close(fd);
	cr_assert(virtio_vsock_quiet(vs));

	cr_assert_eq(save(&why), 0, "%s", why);
	cr_assert_not(vs->rx_held, "the held buffer was not given back");
	restore_fresh();
	spin();
	expect_no_rx();

	/* The guest's driver gets its event once it gives a buffer for it. */
	cr_assert_not(ev_get(&event), "an event without a buffer");
	ev_post(4);
	cr_assert(ev_get(&event), "no TRANSPORT_RESET after the restore");
	cr_assert_eq(event, EVENT_TRANSPORT_RESET);
	ev_post(4);
	cr_assert_not(ev_get(&event), "TRANSPORT_RESET sent twice");

	/* The buffer the old device held carries the next packet, and the
	 * queues go on both ways. */
	fd = client_open();
	host_handshake(fd, &gc2, 1234);
	cr_assert_eq(rx_last_used_id(), held, "the REQUEST did not use the held buffer");
	client_say(fd, "after");
	rx_post(2, RX_DEFAULT);
	guest_expect(&gc2, "after", 5);
	gsend(&gc2, OP_RW, 0, "back", 4);
	client_expect(fd, "back", 4);
	close(fd);
	vg_check_guards();
}

/* Linux handles the event on one work queue and a REQUEST on another: a
 * host connection made while the reset is being handled could be reset by
 * it. So a CONNECT waits until the driver has put the event buffer back. */
Test(vsock_snapshot, a_host_connect_waits_until_the_guest_handled_its_reset)
{
	uint32_t event;
	const char *why = "";
	struct pkt req;
	int fd;

	guest_init(FEAT_VERSION_1 | FEAT_EVENT_IDX);
	rx_post(4, RX_DEFAULT);
	cr_assert_eq(save(&why), 0, "%s", why);
	restore_fresh();
	ev_post(4);
	cr_assert(ev_get(&event), "no TRANSPORT_RESET after the restore");
	fd = client_open();
	client_say(fd, "CONNECT 1024\n");
	spin();
	expect_no_rx();   /* held: the guest may still be resetting its sockets */
	ev_post(4);       /* the driver is done with the event and refills */
	spin();
	cr_assert(rx_get(&req), "the CONNECT was not passed on after the reset was handled");
	cr_assert_eq(req.op, OP_REQUEST);
	cr_assert_eq(req.dst_port, 1024);
	close(fd);
	vg_check_guards();
}

Test(vsock_snapshot, owed_rsts_and_a_paused_tx_go_on)
{
	uint16_t last;
	const char *why = "";
	uint32_t id, len;

	guest_init(FEAT_VERSION_1);
	/* No rx buffers: 32 RSTs fill their ring, and the 33rd packet waits. */
	for (uint32_t i = 0; i < 32; i++)
		stray(5000 + i, 6000 + i);
	last = tx_post_hdr(5032, 6032, OP_RW, 0);
	vdq_kick(&d, &txq);
	cr_assert_eq(vs->rst_len, 32);
	cr_assert(vs->tx_paused);

	cr_assert_eq(save(&why), 0, "%s", why);
	restore_fresh();
	spin();
	cr_assert_not(vdq_get_used(&d, &txq, &id, &len), "tx went on with the RST ring full");
	rx_post(40, RX_DEFAULT);
	spin();
	for (uint32_t i = 0; i <= 32; i++) {
		expect_rx(&p, OP_RST);
		cr_assert_eq(p.src_port, 6000 + i, "RST %u from port %u", i, p.src_port);
		cr_assert_eq(p.dst_port, 5000 + i);
	}
	expect_no_rx();
	cr_assert(vdq_get_used(&d, &txq, &id, &len), "the paused tx packet was never taken");
	cr_assert_eq(id, last);
}

Test(vsock_snapshot, refuses_while_connections_are_open_or_waiting)
{
	struct gconn gc;
	const char *why = "";
	int fd, lfd;

	guest_init(FEAT_VERSION_1);
	rx_post(4, RX_DEFAULT);
	fd = host_conn(&gc, 1234);
	cr_assert_not(virtio_vsock_quiet(vs));
	cr_assert_eq(save(&why), -EBUSY);
	cr_assert(strstr(why, "virtio-vsock") && strstr(why, "1 connections open"), "why: %s", why);
	gsend(&gc, OP_RST, 0, NULL, 0);
	expect_closed(fd);
	close(fd);
	cr_assert(virtio_vsock_quiet(vs));
	cr_assert_eq(save(&why), 0, "%s", why);

	/* One waiting for the I/O thread, then one it took. */
	lfd = virtio_vsock_connect_local(vs);
	cr_assert_geq(lfd, 0);
	cr_assert_not(virtio_vsock_quiet(vs));
	cr_assert_eq(save(&why), -EBUSY);
	cr_assert(strstr(why, "1 waiting"), "why: %s", why);
	spin();
	cr_assert_eq(save(&why), -EBUSY);
	close(lfd);
	spin();
	cr_assert(virtio_vsock_quiet(vs));
	cr_assert_eq(save(&why), 0, "%s", why);
}

Test(vsock_snapshot, no_transport_reset_on_a_cold_boot_or_after_a_driver_reset)
{
	const char *why = "";
	uint32_t event;

	guest_init(FEAT_VERSION_1);
	ev_post(4);
	cr_assert_not(ev_get(&event), "an event on a cold boot");
	cr_assert_eq(save(&why), 0, "%s", why);
	restore_fresh();
	spin();
	/* The driver resets and starts over before it ever gave a buffer:
	 * a new driver has no connections to reset. */
	guest_init(FEAT_VERSION_1);
	spin();
	ev_post(4);
	cr_assert_not(ev_get(&event), "TRANSPORT_RESET to a driver that reset the device");
}

Test(vsock_snapshot, event_buffer_too_small_fails_the_device)
{
	const char *why = "";

	guest_init(FEAT_VERSION_1);
	cr_assert_eq(save(&why), 0, "%s", why);
	restore_fresh();
	spin();
	ev_post(2);
	cr_assert(vd_status(&d) & S_NEEDS_RESET, "a 2-byte event buffer was accepted");
}

/* The payload, patched, is refused with rc and the device stays fresh. */
static void expect_refused(const uint8_t *pl, size_t len, int rc, const char *what)
{
	vd_expect_restore_refused(&d, pl, len, rc, "virtio-vsock", what);
	cr_assert_eq(vs->rst_len, 0, "%s: refused, yet RSTs are owed", what);
}

Test(vsock_snapshot, refuses_bad_payloads)
{
	static uint8_t good[1024], pl[1024];
	const char *why = "";
	size_t n;
	uint32_t v;

	guest_init(FEAT_VERSION_1);
	stray(7, 8);
	stray(9, 10);
	cr_assert_eq(save(&why), 0, "%s", why);
	n = o.len;
	cr_assert_eq(n, V_RSTS + 2 * 8);
	memcpy(good, o.data, n);
	fresh_device();
	vd_expect_cuts_refused(&d, good, n, "virtio-vsock");

	memcpy(pl, good, n);
	pl[V_CID] = GUEST_CID + 2;
	expect_refused(pl, n, -EINVAL, "another guest CID");
	memcpy(pl, good, n);
	v = htole32(7);
	memcpy(pl + V_NEXT_PORT, &v, 4);
	expect_refused(pl, n, -EBADMSG, "a local port below 2^30");
	memcpy(pl, good, n);
	v = htole32(33);
	memcpy(pl + V_NR_RSTS, &v, 4);
	expect_refused(pl, n, -EBADMSG, "33 RSTs in a ring of 32");
	memcpy(pl, good, n);
	v = htole32(3);
	memcpy(pl + V_NR_RSTS, &v, 4);
	expect_refused(pl, n, -EBADMSG, "3 RSTs, 2 there");

	cr_assert_eq(virtio_mmio_restore(d.m, good, n, &why), 0, "%s", why);
	cr_assert_eq(vs->rst_len, 2);
}
