/* test_vsock_packets.c - virtio-vsock packets and chains: packets on nothing, bad headers, a hostile driver, interrupts, chain shapes. */
#include "vsock_guest.h"
#include "lib/log.h"

TestSuite(vsock_packets, .init = vsock_setup, .fini = vsock_teardown, .timeout = 60);

/* ---- packets on nothing, and bad packets ---- */

Test(vsock_packets, rst_for_unknown_connection)
{
	struct gconn gc = { .gport = 41, .hport = 42, .buf_alloc = DEV_BUF };

	guest_init(FEAT_VERSION_1);
	rx_post(8, RX_DEFAULT);
	gsend(&gc, OP_RW, 0, "x", 1);
	expect_rx(&p, OP_RST);
	cr_assert_eq(p.src_port, 42);
	cr_assert_eq(p.dst_port, 41);
	gsend(&gc, OP_SHUTDOWN, SHUT_RCV_F | SHUT_SEND_F, NULL, 0);
	expect_rx(&p, OP_RST);
	gsend(&gc, OP_RESPONSE, 0, NULL, 0);
	expect_rx(&p, OP_RST);
	gsend(&gc, OP_CREDIT_REQUEST, 0, NULL, 0);
	expect_rx(&p, OP_RST);
	/* An RST is never answered. */
	gsend(&gc, OP_RST, 0, NULL, 0);
	expect_no_rx();
}

/* A guest floods packets on no connection (and REQUESTs nobody listens
 * for) while giving a few rx buffers at a time: every one of them gets its
 * RST, exactly once. The device owes at most its ring of RSTs and takes no
 * more tx chains than it can answer: the guest's tx queue waits, the host
 * holds nothing more. */
Test(vsock_packets, rst_flood_every_rst_delivered)
{
	static const uint16_t ops[] = { OP_RW, OP_SHUTDOWN, OP_CREDIT_UPDATE, OP_RESPONSE,
					OP_CREDIT_REQUEST, OP_REQUEST };
	enum { N = 200 };
	static bool seen[N];
	uint32_t id, len;
	int returned = 0, rsts = 0, requests = 0;

	guest_init(FEAT_VERSION_1);
	for (int i = 0; i < N; i++) {
		tx_post_hdr(20000 + (uint32_t)i, 7000 + (uint32_t)i % 3, ops[i % 6], 0);
		requests += ops[i % 6] == OP_REQUEST;
	}
	vdq_kick(&d, &txq);
	for (int round = 0; rsts < N && round < 2 * N; round++) {
		while (vdq_get_used(&d, &txq, &id, &len)) {
			cr_assert_eq(len, 0);
			returned++;
		}
		cr_assert_leq(returned, rsts + VSOCK_RST_RING,
			      "the device took %d tx chains and delivered %d RSTs", returned, rsts);
		cr_assert_eq(vs->nr_conns, 0);
		rx_post(3, RX_DEFAULT);
		while (rx_get(&p)) {
			uint32_t i = p.dst_port - 20000;

			cr_assert_eq(p.op, OP_RST);
			cr_assert_lt(i, N, "RST to guest port %u", p.dst_port);
			cr_assert_eq(p.src_port, 7000 + i % 3);
			cr_assert_not(seen[i], "two RSTs to guest port %u", p.dst_port);
			seen[i] = true;
			rsts++;
		}
	}
	cr_assert_eq(rsts, N, "%d of %d RSTs reached the guest", rsts, N);
	while (vdq_get_used(&d, &txq, &id, &len))
		returned++;
	cr_assert_eq(returned, N, "%d of %d tx chains returned", returned, N);
	cr_assert_eq(vs->conns_refused, (uint64_t)requests);
	/* Nothing owed any more: the device is quiet, and takes packets at once. */
	expect_no_rx();
	rx_post(1, RX_DEFAULT);
	gsend(&(struct gconn){ .gport = 41, .hport = 42 }, OP_RW, 0, NULL, 0);
	expect_rx(&p, OP_RST);
}

Test(vsock_packets, bad_headers_dropped)
{
	int lfd = host_listen(5000);
	uint64_t dropped;

	guest_init(FEAT_VERSION_1);
	rx_post(8, RX_DEFAULT);
	/* A REQUEST that would connect, but for a spoofed source CID. */
	tx_raw(4, HOST_CID, 40000, 5000, TYPE_STREAM, OP_REQUEST, 0, DEV_BUF, 0, NULL, 0, 0);
	/* ... for another destination CID, */
	tx_raw(GUEST_CID, 7, 40000, 5000, TYPE_STREAM, OP_REQUEST, 0, DEV_BUF, 0, NULL, 0, 0);
	tx_raw(GUEST_CID, 1ULL << 32 | HOST_CID, 40000, 5000, TYPE_STREAM, OP_REQUEST, 0, DEV_BUF,
	       0, NULL, 0, 0);
	/* ... of seqpacket or unknown type, */
	tx_raw(GUEST_CID, HOST_CID, 40000, 5000, TYPE_SEQPACKET, OP_REQUEST, 0, DEV_BUF, 0, NULL,
	       0, 0);
	tx_raw(GUEST_CID, HOST_CID, 40000, 5000, 0, OP_REQUEST, 0, DEV_BUF, 0, NULL, 0, 0);
	/* ... and unknown ops, on no connection (which would earn an RST). */
	tx_raw(GUEST_CID, HOST_CID, 40000, 5000, TYPE_STREAM, 0, 0, DEV_BUF, 0, NULL, 0, 0);
	tx_raw(GUEST_CID, HOST_CID, 40000, 5000, TYPE_STREAM, 8, 0, DEV_BUF, 0, NULL, 0, 0);
	tx_raw(GUEST_CID, HOST_CID, 40000, 5000, TYPE_STREAM, 0xffff, 0, DEV_BUF, 0, NULL, 0, 0);
	dropped = vs->pkts_dropped;
	cr_assert_eq(dropped, 8);
	spin();
	expect_no_rx();
	cr_assert_lt(accept(lfd, NULL, NULL), 0, "a dropped REQUEST connected");
	cr_assert_eq(vs->nr_conns, 0);
	cr_assert_eq(vd_status(&d), S_ALL_OK, "a bad packet must not fail the device");
	close(lfd);
}

/* How many lines of fd's file contain `what`. */
static int count_lines(int fd, const char *what)
{
	static char buf[1 << 16];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	int count = 0;

	cr_assert_geq(n, 0);
	buf[n] = '\0';
	for (char *l = strtok(buf, "\n"); l; l = strtok(NULL, "\n"))
		count += strstr(l, what) != NULL;
	return count;
}

/* A guest that sends bad packets in a loop, resetting the device between
 * rounds, gets LOG_LIMIT_BURST lines per cause within the interval: not
 * one per packet, and not one per device life either. */
Test(vsock_packets, guest_caused_lines_are_limited)
{
	FILE *log = tmpfile();
	int saved = dup(STDERR_FILENO);

	cr_assert_not_null(log);
	cr_assert_geq(saved, 0);
	log_init("t", LOG_WARN);
	cr_assert_geq(dup2(fileno(log), STDERR_FILENO), 0);
	for (int round = 0; round < 4; round++) {
		guest_init(FEAT_VERSION_1);
		for (int i = 0; i < 50; i++) {
			tx_raw(4, HOST_CID, 1, 2, TYPE_STREAM, OP_RW, 0, DEV_BUF, 0, NULL, 0, 0);
			tx_raw(GUEST_CID, HOST_CID, 1, 2, 9, OP_RW, 0, DEV_BUF, 0, NULL, 0, 0);
		}
		vd_set(&d, R_STATUS, 0);
	}
	dup2(saved, STDERR_FILENO);
	close(saved);
	cr_assert_eq(vs->pkts_dropped, 400);
	cr_assert_eq(count_lines(fileno(log), "source CID"), LOG_LIMIT_BURST);
	cr_assert_eq(count_lines(fileno(log), "type other than stream"), LOG_LIMIT_BURST);
	fclose(log);
}

Test(vsock_packets, oversized_payload_rejected)
{
	static uint8_t big[MAX_PAYLOAD + 16];
	struct gconn gc;
	int fd;

	guest_init(FEAT_VERSION_1);
	rx_post(8, RX_DEFAULT);
	/* On no connection: RST, the descriptor returned (tx_raw checks). */
	tx_raw(GUEST_CID, HOST_CID, 50, 60, TYPE_STREAM, OP_RW, 0, DEV_BUF, 0, big,
	       MAX_PAYLOAD + 1, MAX_PAYLOAD + 1);
	expect_rx(&p, OP_RST);
	/* On a connection: dropped, the connection reset both ways. */
	fd = host_conn(&gc, 1234);
	tx_raw(GUEST_CID, HOST_CID, gc.gport, gc.hport, TYPE_STREAM, OP_RW, 0, DEV_BUF, 0, big,
	       MAX_PAYLOAD + 1, MAX_PAYLOAD + 1);
	expect_rx(&p, OP_RST);
	cr_assert_eq(p.src_port, gc.hport);
	expect_closed(fd);
	close(fd);
	/* A length beyond the buffers really there: the same. */
	fd = host_conn(&gc, 1234);
	tx_raw(GUEST_CID, HOST_CID, gc.gport, gc.hport, TYPE_STREAM, OP_RW, 0, DEV_BUF, 0, big, 100,
	       10);
	expect_rx(&p, OP_RST);
	expect_closed(fd);
	close(fd);
	/* Exactly 64 KiB is fine. */
	fd = host_conn(&gc, 1234);
	gsend(&gc, OP_RW, 0, big, MAX_PAYLOAD);
	for (size_t total = 0; total < MAX_PAYLOAD;) {
		ssize_t n = client_recv(fd, big, sizeof(big), 100);

		cr_assert_gt(n, 0, "host got %zu of 64 KiB", total);
		total += (size_t)n;
		spin();
	}
	expect_no_rx();
	cr_assert_eq(vd_status(&d), S_ALL_OK);
	cr_assert_eq(vs->nr_conns, 1);
	close(fd);
}

Test(vsock_packets, header_split_across_descriptors)
{
	struct gconn gc;
	uint8_t hdr[HDR];
	uint64_t g = tx_alloc(256);
	struct vseg s[5];
	int fd;

	guest_init(FEAT_VERSION_1);
	rx_post(8, RX_DEFAULT);
	fd = host_conn(&gc, 1234);
	put_hdr(hdr, GUEST_CID, HOST_CID, gc.gport, gc.hport, 11, TYPE_STREAM, OP_RW, 0, DEV_BUF,
		0);
	/* 44 header bytes as 10 + 20 + 14, payload as 5 + 6. */
	memcpy(d.ram + g, hdr, 10);
	memcpy(d.ram + g + 32, hdr + 10, 20);
	memcpy(d.ram + g + 64, hdr + 30, 14);
	memcpy(d.ram + g + 96, "split", 5);
	memcpy(d.ram + g + 128, " chain", 6);
	s[0] = (struct vseg){ g, 10, false };
	s[1] = (struct vseg){ g + 32, 20, false };
	s[2] = (struct vseg){ g + 64, 14, false };
	s[3] = (struct vseg){ g + 96, 5, false };
	s[4] = (struct vseg){ g + 128, 6, false };
	tx_segs(s, 5);
	client_expect(fd, "split chain", 11);
	/* Header and payload in one descriptor, the header's tail with the payload. */
	put_hdr(hdr, GUEST_CID, HOST_CID, gc.gport, gc.hport, 4, TYPE_STREAM, OP_RW, 0, DEV_BUF, 0);
	memcpy(d.ram + g, hdr, 40);
	memcpy(d.ram + g + 64, hdr + 40, 4);
	memcpy(d.ram + g + 68, "more", 4);
	s[0] = (struct vseg){ g, 40, false };
	s[1] = (struct vseg){ g + 64, 8, false };
	tx_segs(s, 2);
	client_expect(fd, "more", 4);
	close(fd);
}

/* ---- a hostile driver ---- */

static void expect_failed_then_recover(void)
{
	struct gconn gc;
	int fd;

	cr_assert(vd_status(&d) & S_NEEDS_RESET, "status 0x%x without NEEDS_RESET", vd_status(&d));
	cr_assert(vd_reg(&d, R_INT_STATUS) & INT_CONFIG);
	cr_assert_eq(vs->nr_conns, 0, "a failed device keeps connections");
	vg_check_guards();
	vd_set(&d, R_STATUS, 0);
	guest_init(FEAT_VERSION_1);
	rx_post(8, RX_DEFAULT);
	fd = host_conn(&gc, 1234);
	client_say(fd, "ok");
	guest_expect(&gc, "ok", 2);
	close(fd);
	vg_check_guards();
}

Test(vsock_packets, hostile_tx_chains_fail_device)
{
	uint64_t g = tx_alloc(64);
	struct gconn gc;
	struct vseg s;
	uint16_t head;
	int fd;

	guest_init(FEAT_VERSION_1);
	rx_post(8, RX_DEFAULT);
	fd = host_conn(&gc, 1234);
	/* No readable bytes at all. */
	s = (struct vseg){ g, 64, true };
	vdq_post(&d, &txq, vdq_chain(&d, &txq, &s, 1));
	vdq_kick(&d, &txq);
	expect_closed(fd);
	close(fd);
	expect_failed_then_recover();
	/* A header cut short. */
	s = (struct vseg){ g, HDR - 1, false };
	vdq_post(&d, &txq, vdq_chain(&d, &txq, &s, 1));
	vdq_kick(&d, &txq);
	expect_failed_then_recover();
	/* A descriptor loop. */
	head = txq.free[txq.nr_free - 1];
	vdq_desc(&d, &txq, head, g, HDR, F_NEXT, head);
	vdq_post(&d, &txq, head);
	vdq_kick(&d, &txq);
	expect_failed_then_recover();
}

Test(vsock_packets, hostile_rx_buffers_fail_device)
{
	struct vseg s;
	uint16_t i;
	int fd;

	guest_init(FEAT_VERSION_1);
	/* A device-readable rx buffer, met when there is something to send. */
	i = rxq.free[rxq.nr_free - 1];
	s = (struct vseg){ rx_gpa(i), RX_DEFAULT, false };
	memset(d.ram + s.gpa, RX_FILL, RX_SLOT);
	vdq_post(&d, &rxq, vdq_chain(&d, &rxq, &s, 1));
	vdq_kick(&d, &rxq);
	fd = client_open();
	client_say(fd, "CONNECT 5\n");
	spin();
	cr_assert_eq(d.ram[s.gpa], RX_FILL, "a device-readable buffer was written");
	expect_closed(fd);
	close(fd);
	expect_failed_then_recover();
	/* A buffer with room for the header only (first in a fresh ring). */
	vd_set(&d, R_STATUS, 0);
	guest_init(FEAT_VERSION_1);
	vdq_post(&d, &rxq, vdq_chain(&d, &rxq, &(struct vseg){ rx_gpa(60), HDR, true }, 1));
	vdq_kick(&d, &rxq);
	fd = client_open();
	client_say(fd, "CONNECT 5\n");
	spin();
	close(fd);
	expect_failed_then_recover();
}

/* ---- interrupts and rx chains ---- */

Test(vsock_packets, event_idx_and_event_queue)
{
	struct gconn gc;
	int fd;

	guest_init(FEAT_VERSION_1 | FEAT_EVENT_IDX);
	/* Event queue buffers are kept, and its kick does nothing. */
	vdq_post(&d, &evq, vdq_chain(&d, &evq, &(struct vseg){ tx_alloc(4), 4, true }, 1));
	vdq_kick(&d, &evq);
	rx_post(8, RX_DEFAULT);
	fd = host_conn(&gc, 1234);
	vd_irqs(&d);
	/* used_event: interrupt once the device passes what we have seen. */
	vd_wr16(&d, rxq.avail + 4 + 2 * (uint64_t)rxq.qsize, rxq.used_seen);
	client_say(fd, "idx");
	guest_expect(&gc, "idx", 3);
	cr_assert_geq(vd_irqs(&d), 1, "no interrupt for an rx packet with EVENT_IDX");
	gsend(&gc, OP_RW, 0, "back", 4);
	client_expect(fd, "back", 4);
	cr_assert_eq(vd_rd16(&d, evq.used + 2), 0, "an event was sent");
	close(fd);
}

/* An rx buffer may come as several descriptors (older Linux: the header
 * alone, then the payload): the header and data land across them. */
Test(vsock_packets, rx_chain_of_several_descriptors)
{
	uint8_t got[HDR + 64];
	struct gconn gc;
	struct vseg s[3];
	uint64_t g = RX_BASE + 60 * (uint64_t)RX_SLOT;   /* a slot rx_post never uses here */
	uint32_t id, len;
	uint16_t head;
	int fd;

	guest_init(FEAT_VERSION_1);
	rx_post(1, RX_DEFAULT);
	fd = host_conn(&gc, 1234);
	memset(d.ram + g, RX_FILL, 512);
	s[0] = (struct vseg){ g, 10, true };
	s[1] = (struct vseg){ g + 64, 34, true };
	s[2] = (struct vseg){ g + 128, 20, true };
	head = vdq_chain(&d, &rxq, s, 3);
	vdq_post(&d, &rxq, head);
	vdq_kick(&d, &rxq);
	client_say(fd, "across three descriptors");
	spin();
	cr_assert(vdq_get_used(&d, &rxq, &id, &len));
	cr_assert_eq(id, head);
	cr_assert_eq(len, HDR + 20, "used len %u", len);
	memcpy(got, d.ram + g, 10);
	memcpy(got + 10, d.ram + g + 64, 34);
	memcpy(got + HDR, d.ram + g + 128, 20);
	pkt_decode(got, &p);
	cr_assert_eq(p.op, OP_RW);
	cr_assert_eq(p.len, 20);
	cr_assert_eq(p.src_port, gc.hport);
	cr_assert_arr_eq(got + HDR, "across three descrip", 20);
	cr_assert_eq(d.ram[g + 10], RX_FILL, "written between descriptors");
	cr_assert_eq(d.ram[g + 64 + 34], RX_FILL);
	cr_assert_eq(d.ram[g + 128 + 20], RX_FILL);
	close(fd);
}
