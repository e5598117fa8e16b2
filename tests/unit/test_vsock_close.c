/* test_vsock_close.c - virtio-vsock connection ends: hang-ups, shutdowns, resets, the driver's reset, the connection cap. */
#include "vsock_guest.h"

#include <sys/resource.h>

TestSuite(vsock_close, .init = vsock_setup, .fini = vsock_teardown, .timeout = 60);

/* ---- ends of connections ---- */

Test(vsock_close, host_disconnects_mid_connect_line)
{
	int fd = client_open();

	guest_init(FEAT_VERSION_1);
	rx_post(8, RX_DEFAULT);
	client_say(fd, "CONN");
	spin();
	cr_assert_eq(vs->nr_conns, 1);
	close(fd);
	spin();
	cr_assert_eq(vs->nr_conns, 0);
	expect_no_rx();   /* the guest never heard of it */
	/* Gone before the line was even read. */
	fd = client_open();
	close(fd);
	spin();
	cr_assert_eq(vs->nr_conns, 0);
	expect_no_rx();
}

Test(vsock_close, host_disconnects_before_guest_answers)
{
	struct gconn gc;
	int fd = client_open();

	guest_init(FEAT_VERSION_1);
	rx_post(3, RX_DEFAULT);   /* REQUEST, RST, RST: then none */
	host_request(fd, "CONNECT 9\n", &gc, 9);
	close(fd);
	spin();
	expect_rx(&p, OP_RST);
	cr_assert_eq(p.src_port, gc.hport);
	cr_assert_eq(vs->nr_conns, 0);
	gsend(&gc, OP_RESPONSE, 0, NULL, 0);
	expect_rx(&p, OP_RST);
	/* Gone before the REQUEST went out (no rx buffers): no RST either. */
	fd = client_open();
	client_say(fd, "CONNECT 9\n");
	spin();
	close(fd);
	spin();
	cr_assert_eq(vs->nr_conns, 0);
	rx_post(8, RX_DEFAULT);
	expect_no_rx();
}

Test(vsock_close, host_disconnects_mid_stream)
{
	struct gconn gc;
	int fd;

	guest_init(FEAT_VERSION_1);
	rx_post(8, RX_DEFAULT);
	fd = host_conn(&gc, 1234);
	client_say(fd, "last words");
	close(fd);
	spin();
	guest_expect(&gc, "last words", 10);
	expect_rx(&p, OP_RST);
	cr_assert_eq(vs->nr_conns, 0);
	/* The guest's data after that meets an RST, not a crash. */
	gsend(&gc, OP_RW, 0, "anyone?", 7);
	expect_rx(&p, OP_RST);
}

Test(vsock_close, host_hangup_waits_for_credit)
{
	struct gconn gc;
	int fd;

	guest_init(FEAT_VERSION_1);
	rx_post(8, RX_DEFAULT);
	fd = host_conn(&gc, 1234);
	gc.buf_alloc = 0;
	gsend(&gc, OP_CREDIT_UPDATE, 0, NULL, 0);
	client_say(fd, "pending");
	close(fd);
	/* Hung up with unread data and no credit: no spinning, no loss. */
	cr_assert_leq(spin(), 2);
	expect_no_rx();
	gc.buf_alloc = DEV_BUF;
	gsend(&gc, OP_CREDIT_UPDATE, 0, NULL, 0);
	guest_expect(&gc, "pending", 7);
	expect_rx(&p, OP_RST);
	cr_assert_eq(vs->nr_conns, 0);
}

Test(vsock_close, host_half_close_and_guest_shutdowns)
{
	struct gconn gc;
	int fd;

	guest_init(FEAT_VERSION_1);
	rx_post(8, RX_DEFAULT);
	fd = host_conn(&gc, 1234);
	client_say(fd, "bye");
	shutdown(fd, SHUT_WR);
	guest_expect(&gc, "bye", 3);
	expect_rx(&p, OP_SHUTDOWN);
	cr_assert_eq(p.flags, SHUT_SEND_F, "flags %u", p.flags);
	/* Half closed: the guest still talks to the host. */
	gsend(&gc, OP_RW, 0, "still here", 10);
	client_expect(fd, "still here", 10);
	/* The guest is done too: RST, and the host sees EOF. */
	gsend(&gc, OP_SHUTDOWN, SHUT_SEND_F, NULL, 0);
	expect_rx(&p, OP_RST);
	expect_closed(fd);
	cr_assert_eq(vs->nr_conns, 0);
	close(fd);
}

Test(vsock_close, guest_shutdown_send_then_both)
{
	struct gconn gc;
	uint8_t b;
	int fd;

	guest_init(FEAT_VERSION_1);
	rx_post(8, RX_DEFAULT);
	fd = host_conn(&gc, 1234);
	gsend(&gc, OP_RW, 0, "final", 5);
	gsend(&gc, OP_SHUTDOWN, SHUT_SEND_F, NULL, 0);
	client_expect(fd, "final", 5);
	cr_assert_eq(client_recv(fd, &b, 1, 100), 0, "no EOF after the guest's SHUTDOWN(SEND)");
	/* The host can still send to the guest. */
	client_say(fd, "reply");
	guest_expect(&gc, "reply", 5);
	/* SHUTDOWN(RCV|SEND): a full close, answered with RST. */
	gsend(&gc, OP_SHUTDOWN, SHUT_RCV_F | SHUT_SEND_F, NULL, 0);
	expect_rx(&p, OP_RST);
	cr_assert_eq(vs->nr_conns, 0);
	expect_closed(fd);
	close(fd);
}

Test(vsock_close, guest_rst_closes_host_socket)
{
	struct gconn gc;
	int lfd = host_listen(5000), fd, hfd;

	guest_init(FEAT_VERSION_1);
	rx_post(8, RX_DEFAULT);
	fd = host_conn(&gc, 1234);
	gsend(&gc, OP_RST, 0, NULL, 0);
	expect_closed(fd);
	expect_no_rx();
	close(fd);
	hfd = guest_conn(&gc, 40000, 5000, lfd);
	gsend(&gc, OP_RST, 0, NULL, 0);
	expect_closed(hfd);
	expect_no_rx();
	cr_assert_eq(vs->nr_conns, 0);
	close(hfd);
	close(lfd);
}

Test(vsock_close, driver_reset_closes_everything)
{
	struct gconn g1, g2;
	int lfd = host_listen(5000), fd1, fd2, line_fd;

	guest_init(FEAT_VERSION_1);
	rx_post(8, RX_DEFAULT);
	fd1 = host_conn(&g1, 1234);
	fd2 = guest_conn(&g2, 40000, 5000, lfd);
	line_fd = client_open();
	client_say(line_fd, "CONN");
	spin();
	cr_assert_eq(vs->nr_conns, 3);
	vd_set(&d, R_STATUS, 0);
	spin();
	cr_assert_eq(vs->nr_conns, 0);
	expect_closed(fd1);
	expect_closed(fd2);
	expect_closed(line_fd);
	/* As good as new. */
	guest_init(FEAT_VERSION_1);
	rx_post(8, RX_DEFAULT);
	close(fd1);
	fd1 = host_conn(&g1, 1234);
	client_say(fd1, "again");
	guest_expect(&g1, "again", 5);
	close(fd1);
	close(fd2);
	close(line_fd);
	close(lfd);
}

/* ---- limits ---- */

Test(vsock_close, connection_cap)
{
	static int fds[VSOCK_MAX_CONNS + 1];
	struct rlimit rl;
	struct gconn gc = { .gport = 40000, .hport = 5000, .buf_alloc = DEV_BUF };
	int lfd, extra;

	/* Both ends of every connection live in this process. */
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur < 4 * VSOCK_MAX_CONNS) {
		rl.rlim_cur = rl.rlim_max < 4 * VSOCK_MAX_CONNS ? rl.rlim_max : 4 * VSOCK_MAX_CONNS;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur < 2 * VSOCK_MAX_CONNS + 64)
		vs->max_conns = 16;   /* a tight fd limit: the same check, smaller */
	lfd = host_listen(5000);
	guest_init(FEAT_VERSION_1);
	rx_post(8, RX_DEFAULT);
	for (unsigned i = 0; i < vs->max_conns; i++) {
		fds[i] = client_open();
		client_say(fds[i], "CONN");   /* held in the CONNECT line */
		if (i % 32 == 31)
			spin();
	}
	spin();
	cr_assert_eq(vs->nr_conns, vs->max_conns);
	/* One more waits in the backlog; a guest connect is refused. */
	extra = client_open();
	client_say(extra, "CONNECT 7\n");
	spin();
	expect_no_rx();
	cr_assert_eq(vs->nr_conns, vs->max_conns);
	gsend(&gc, OP_REQUEST, 0, NULL, 0);
	expect_rx(&p, OP_RST);
	cr_assert_lt(accept(lfd, NULL, NULL), 0);
	/* A slot frees: the waiting client goes through. */
	close(fds[0]);
	spin();
	expect_rx(&p, OP_REQUEST);
	cr_assert_eq(p.dst_port, 7);
	for (unsigned i = 1; i < vs->max_conns; i++)
		close(fds[i]);
	close(extra);
	spin();
	cr_assert_eq(vs->nr_conns, 0, "%u left", vs->nr_conns);
	expect_rx(&p, OP_RST);   /* extra's REQUEST had gone out */
	close(lfd);
}

/* The guest closes 200 connections at once (SHUTDOWN both ways on each)
 * and is slow to give rx buffers, slower than the linger time: every one
 * still gets its RST, exactly once; until then each is only a closed
 * connection counted against the cap. */
Test(vsock_close, teardown_of_many_connections_every_rst_delivered)
{
	enum { N = 200 };
	static struct gconn gcs[N];
	static int fds[N];
	static bool seen[N];
	int rsts = 0;

	vs->linger_ms = 20;
	guest_init(FEAT_VERSION_1);
	for (int i = 0; i < N; i++) {
		rx_post(1, RX_DEFAULT);
		fds[i] = host_conn(&gcs[i], 1000 + (uint32_t)i);
	}
	for (int i = 0; i < N; i++)
		gsend(&gcs[i], OP_SHUTDOWN, SHUT_RCV_F | SHUT_SEND_F, NULL, 0);
	for (int i = 0; i < N; i++)
		expect_closed(fds[i]);
	spin_ms(100);   /* well past the linger time */
	cr_assert_leq(vs->nr_conns, N);
	while (rsts < N && rxq.nr_free >= 4) {   /* until the device keeps buffers unused */
		rx_post(4, RX_DEFAULT);
		spin();
		while (rx_get(&p)) {
			uint32_t i = p.dst_port - 1000;

			cr_assert_eq(p.op, OP_RST, "op %u", p.op);
			cr_assert_lt(i, N, "RST to guest port %u", p.dst_port);
			cr_assert_eq(p.src_port, gcs[i].hport);
			cr_assert_not(seen[i], "two RSTs to guest port %u", p.dst_port);
			seen[i] = true;
			rsts++;
		}
	}
	cr_assert_eq(rsts, N, "%d of %d connections heard their RST", rsts, N);
	cr_assert_eq(vs->nr_conns, 0);
	for (int i = 0; i < N; i++)
		close(fds[i]);
}
