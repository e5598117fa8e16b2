/* test_vsock_credit.c - virtio-vsock flow control: the guest's window, the device's window, bulk transfers both ways. */
#include "vsock_guest.h"

TestSuite(vsock_credit, .init = vsock_setup, .fini = vsock_teardown, .timeout = 60);

/* ---- credit ---- */

Test(vsock_credit, device_respects_guest_credit)
{
	static uint8_t data[300];
	struct gconn gc;
	uint32_t got = 0;
	int fd;

	for (int i = 0; i < 300; i++)
		data[i] = (uint8_t)(i * 7 + 1);
	guest_init(FEAT_VERSION_1);
	rx_post(16, RX_DEFAULT);
	fd = host_conn(&gc, 1234);
	/* The guest's window is 100 bytes; the host writes 300. */
	gc.buf_alloc = 100;
	gsend(&gc, OP_CREDIT_UPDATE, 0, NULL, 0);
	client_send(fd, data, 300);
	spin();
	while (rx_get(&p)) {
		gtake(&gc, &p);
		cr_assert_eq(p.op, OP_RW);
		cr_assert_arr_eq(p.data, data + got, p.len);
		got += p.len;
	}
	cr_assert_eq(got, 100, "device sent %u bytes into a 100-byte window", got);
	/* No credit: the socket stays unread, and the loop quiet. */
	cr_assert_leq(spin(), 1);
	expect_no_rx();
	/* The guest consumed the 100 bytes: the rest comes. */
	gsend(&gc, OP_CREDIT_UPDATE, 0, NULL, 0);
	spin();
	while (rx_get(&p)) {
		gtake(&gc, &p);
		cr_assert_arr_eq(p.data, data + got, p.len);
		got += p.len;
	}
	cr_assert_eq(got, 200);
	/* A guest claiming to have consumed more than it got earns nothing. */
	gc.fwd_cnt += 1000;
	gsend(&gc, OP_CREDIT_UPDATE, 0, NULL, 0);
	spin();
	expect_no_rx();
	gc.fwd_cnt -= 1000;
	gc.buf_alloc = 1000;
	gsend(&gc, OP_CREDIT_UPDATE, 0, NULL, 0);
	guest_expect(&gc, data + 200, 100);
	close(fd);
}

Test(vsock_credit, payload_bounded_by_rx_buffer)
{
	static uint8_t data[100];
	struct gconn gc;
	uint32_t got = 0;
	int fd;

	memset(data, 'z', sizeof(data));
	guest_init(FEAT_VERSION_1);
	rx_post(1, RX_DEFAULT);   /* for the REQUEST only */
	fd = host_conn(&gc, 1234);
	rx_post(20, HDR + 10);   /* room for 10 bytes each */
	client_send(fd, data, 100);
	spin();
	while (rx_get(&p)) {
		gtake(&gc, &p);
		cr_assert_leq(p.len, 10);
		got += p.len;
	}
	cr_assert_eq(got, 100);
	close(fd);
}

Test(vsock_credit, credit_request_and_low_window_update)
{
	static uint8_t chunk[MAX_PAYLOAD];
	struct gconn gc;
	size_t total = 0;
	bool update = false;
	int fd;

	memset(chunk, 'q', sizeof(chunk));
	guest_init(FEAT_VERSION_1);
	rx_post(16, RX_DEFAULT);
	fd = host_conn(&gc, 1234);
	/* Asked, the device says its window at once. */
	gsend(&gc, OP_CREDIT_REQUEST, 0, NULL, 0);
	expect_rx(&p, OP_CREDIT_UPDATE);
	cr_assert_eq(p.buf_alloc, DEV_BUF);
	cr_assert_eq(p.fwd_cnt, 0);
	/* Three 64 KiB packets leave the guest 64 KiB: no update yet. */
	for (int i = 0; i < 3; i++)
		gsend(&gc, OP_RW, 0, chunk, MAX_PAYLOAD);
	expect_no_rx();
	/* The fourth empties the guest's view: the device tells it what
	 * the socket took. */
	gsend(&gc, OP_RW, 0, chunk, MAX_PAYLOAD);
	spin();
	while (rx_get(&p)) {
		gtake(&gc, &p);
		cr_assert_eq(p.op, OP_CREDIT_UPDATE);
		cr_assert_leq(p.fwd_cnt, 4 * MAX_PAYLOAD);
		update = true;
	}
	cr_assert(update, "no CREDIT_UPDATE although the guest's window ran out");
	/* The host reads everything; asked again, the device has forwarded it all. */
	while (total < 4 * MAX_PAYLOAD) {
		ssize_t n = client_recv(fd, chunk, sizeof(chunk), 100);

		cr_assert_gt(n, 0, "host got %zu of %d bytes", total, 4 * MAX_PAYLOAD);
		total += (size_t)n;
		spin();
	}
	while (rx_get(&p))
		gtake(&gc, &p);
	gsend(&gc, OP_CREDIT_REQUEST, 0, NULL, 0);
	spin();
	expect_rx(&p, OP_CREDIT_UPDATE);
	cr_assert_eq(p.fwd_cnt, 4 * MAX_PAYLOAD);
	close(fd);
}

Test(vsock_credit, guest_beyond_credit_reset)
{
	static uint8_t chunk[MAX_PAYLOAD];
	struct gconn gc;
	bool rst = false;
	int fd;

	guest_init(FEAT_VERSION_1);
	rx_post(32, RX_DEFAULT);
	fd = host_conn(&gc, 1234);
	/* The host never reads; the guest ignores the window. */
	for (int i = 0; i < 16 && !rst; i++) {
		gsend(&gc, OP_RW, 0, chunk, MAX_PAYLOAD);
		spin();
		while (rx_get(&p))
			rst |= p.op == OP_RST;
	}
	cr_assert(rst, "1 MiB past a 256 KiB window and no RST");
	expect_closed(fd);
	cr_assert_eq(vs->nr_conns, 0);
	close(fd);
}

/* The guest sends 2 MiB to a host that reads slowly, keeping to the
 * device's window: everything arrives in order, nothing is reset. */
Test(vsock_credit, bulk_guest_to_host_within_credit)
{
	static uint8_t chunk[MAX_PAYLOAD], got[MAX_PAYLOAD];
	const uint32_t total = 2u << 20;
	struct gconn gc;
	uint32_t sent = 0, recvd = 0;
	int fd, idle = 0;

	guest_init(FEAT_VERSION_1);
	rx_post(32, RX_DEFAULT);
	fd = host_conn(&gc, 1234);
	while (recvd < total) {
		uint32_t credit = gc.peer_buf_alloc - (gc.tx_cnt - gc.peer_fwd_cnt);
		bool progress = false;
		ssize_t n;

		if (sent < total && credit) {
			uint32_t len = credit < MAX_PAYLOAD ? credit : MAX_PAYLOAD;

			if (len > total - sent)
				len = total - sent;
			for (uint32_t i = 0; i < len; i++)
				chunk[i] = (uint8_t)((sent + i) * 13 + ((sent + i) >> 16));
			gsend(&gc, OP_RW, 0, chunk, len);
			sent += len;
			progress = true;
		}
		n = client_recv(fd, got, 24 * 1024, 0);   /* a slow reader */
		if (n > 0) {
			for (ssize_t i = 0; i < n; i++)
				cr_assert_eq(got[i], (uint8_t)((recvd + i) * 13 + ((recvd + i) >> 16)),
					     "byte %u", recvd + (uint32_t)i);
			recvd += (uint32_t)n;
			progress = true;
		}
		cr_assert_neq(n, 0, "host socket closed after %u bytes", recvd);
		spin();
		while (rx_get(&p)) {
			gtake(&gc, &p);
			cr_assert_eq(p.op, OP_CREDIT_UPDATE, "op %u during the transfer", p.op);
			rx_post(1, RX_DEFAULT);
		}
		idle = progress ? 0 : idle + 1;
		cr_assert_lt(idle, 50, "stalled: sent %u, host got %u, credit %u", sent, recvd, credit);
	}
	cr_assert_eq(vs->nr_conns, 1);
	close(fd);
}

/* The host sends 1 MiB; the guest takes it in 64 KiB windows. */
Test(vsock_credit, bulk_host_to_guest_within_credit)
{
	static uint8_t buf[32 * 1024];
	const uint32_t total = 1u << 20;
	struct gconn gc;
	uint32_t sent = 0, got = 0, round;
	int fd, idle = 0;

	guest_init(FEAT_VERSION_1);
	rx_post(32, RX_DEFAULT);
	fd = host_conn(&gc, 1234);
	gc.buf_alloc = MAX_PAYLOAD;
	gsend(&gc, OP_CREDIT_UPDATE, 0, NULL, 0);
	while (got < total) {
		bool progress = false;

		if (sent < total) {
			uint32_t len = total - sent < sizeof(buf) ? total - sent : sizeof(buf);
			ssize_t n;

			for (uint32_t i = 0; i < len; i++)
				buf[i] = (uint8_t)((sent + i) * 29 + 3);
			n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (n > 0) {
				sent += (uint32_t)n;
				progress = true;
			}
		}
		spin();
		round = 0;
		while (rx_get(&p)) {
			gtake(&gc, &p);
			cr_assert_eq(p.op, OP_RW);
			round += p.len;
			cr_assert_leq(round, MAX_PAYLOAD, "%u bytes into a 64 KiB window", round);
			for (uint32_t i = 0; i < p.len; i++)
				cr_assert_eq(p.data[i], (uint8_t)((got + i) * 29 + 3), "byte %u", got + i);
			got += p.len;
			progress = true;
			rx_post(1, RX_DEFAULT);
		}
		/* The guest has consumed all: it says so. */
		gsend(&gc, OP_CREDIT_UPDATE, 0, NULL, 0);
		idle = progress ? 0 : idle + 1;
		cr_assert_lt(idle, 50, "stalled: host sent %u, guest got %u", sent, got);
	}
	close(fd);
}
