/* test_vsock_host.c - virtio-vsock's host side: identity, the socket file, host- and guest-initiated connections, the CONNECT line. */
#include "vsock_guest.h"

#include <sys/stat.h>
#include <sys/un.h>

TestSuite(vsock_host, .init = vsock_setup, .fini = vsock_teardown, .timeout = 60);

/* ---- identity ---- */

Test(vsock_host, identity_features_config)
{
	uint64_t f = vd_device_features(&d);
	uint64_t cid = 0;
	uint32_t lo, hi;

	cr_assert_eq(vd_reg(&d, R_DEVICE_ID), DEVICE_ID_VSOCK);
	cr_assert(f & FEAT_VERSION_1);
	cr_assert(f & FEAT_EVENT_IDX);
	cr_assert_not(f & FEAT_SEQPACKET, "SEQPACKET offered but not handled");
	cr_assert_not(f & FEAT_INDIRECT);
	for (int i = 0; i < 8; i++) {
		uint8_t b = 0;

		virtio_mmio_io(d.m, R_CONFIG + (uint64_t)i, &b, 1, false);
		cid |= (uint64_t)b << (8 * i);
	}
	cr_assert_eq(cid, GUEST_CID, "config guest_cid %llu", (unsigned long long)cid);
	lo = vd_reg(&d, R_CONFIG);
	hi = vd_reg(&d, R_CONFIG + 4);
	cr_assert_eq(lo, GUEST_CID);
	cr_assert_eq(hi, 0);
	for (unsigned q = 0; q < 3; q++) {
		vd_set(&d, R_QUEUE_SEL, q);
		cr_assert_eq(vd_reg(&d, R_QUEUE_MAX), 256, "queue %u", q);
	}
	vd_set(&d, R_QUEUE_SEL, 3);
	cr_assert_eq(vd_reg(&d, R_QUEUE_MAX), 0, "a fourth queue");
}

/* ---- the socket file ---- */

Test(vsock_host, socket_file_made_and_removed)
{
	struct stat st;

	cr_assert_eq(lstat(sock_path, &st), 0);
	cr_assert(S_ISSOCK(st.st_mode));
	virtio_vsock_destroy(vs);
	free(vs);
	vs = NULL;
	cr_assert_neq(lstat(sock_path, &st), 0, "socket file left behind");
	cr_assert_eq(errno, ENOENT);
}

Test(vsock_host, stale_socket_replaced_others_refused)
{
	struct virtio_vsock *w = calloc(1, sizeof(*w));
	char path[PATH_MAX];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *why = "";
	struct stat st;
	int fd;

	cr_assert_not_null(w);
	/* Another device on the live socket: refused, the live one untouched. */
	cr_assert_eq(virtio_vsock_init(w, sock_path, GUEST_CID, &d.mem, &loop, &why), -EADDRINUSE);
	cr_assert_eq(lstat(sock_path, &st), 0, "a failed init removed the live socket");
	/* A regular file: refused and kept. */
	snprintf(path, sizeof(path), "%s/file", dir);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	cr_assert_geq(fd, 0);
	close(fd);
	cr_assert_eq(virtio_vsock_init(w, path, GUEST_CID, &d.mem, &loop, &why), -EEXIST);
	cr_assert_eq(lstat(path, &st), 0);
	cr_assert(S_ISREG(st.st_mode));
	unlink(path);
	/* A socket nobody listens on: a leftover, replaced. */
	snprintf(path, sizeof(path), "%s/stale", dir);
	cr_assert_lt(snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path),
		     (int)sizeof(sa.sun_path));
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	cr_assert_eq(virtio_vsock_init(w, path, GUEST_CID, &d.mem, &loop, &why), 0, "%s", why);
	fd = client_open_at(path);
	close(fd);
	virtio_vsock_destroy(w);
	cr_assert_neq(lstat(path, &st), 0, "socket file left behind");
	/* Bad CID and a path too long for sun_path. */
	cr_assert_eq(virtio_vsock_init(w, path, 2, &d.mem, &loop, &why), -EINVAL);
	memset(path, 'x', sizeof(path) - 1);
	path[200] = '\0';
	cr_assert_eq(virtio_vsock_init(w, path, GUEST_CID, &d.mem, &loop, &why), -ENAMETOOLONG);
	free(w);
}

/* ---- host-initiated connections ---- */

Test(vsock_host, host_connect_handshake_and_data)
{
	struct gconn gc;
	int fd;

	guest_init(FEAT_VERSION_1);
	rx_post(8, RX_DEFAULT);
	fd = host_conn(&gc, 1234);
	cr_assert_eq(vs->nr_conns, 1);
	/* host -> guest */
	client_say(fd, "hello guest");
	guest_expect(&gc, "hello guest", 11);
	/* guest -> host */
	gsend(&gc, OP_RW, 0, "hello host", 10);
	client_expect(fd, "hello host", 10);
	cr_assert_geq(vd_irqs(&d), 1);
	/* Two connections to the same port get different host ports. */
	{
		struct gconn gc2;
		int fd2 = host_conn(&gc2, 1234);

		cr_assert_neq(gc2.hport, gc.hport);
		client_say(fd2, "two");
		guest_expect(&gc2, "two", 3);
		close(fd2);
	}
	close(fd);
}

Test(vsock_host, pipelined_data_after_connect_line)
{
	struct gconn gc;
	char line[64];
	int fd = client_open();

	guest_init(FEAT_VERSION_1);
	rx_post(8, RX_DEFAULT);
	host_request(fd, "CONNECT 77\r\nearly bytes", &gc, 77);
	expect_no_rx();   /* no data before the guest accepted */
	gsend(&gc, OP_RESPONSE, 0, NULL, 0);
	snprintf(line, sizeof(line), "OK %u\n", gc.hport);
	client_expect(fd, line, strlen(line));
	guest_expect(&gc, "early bytes", 11);
	close(fd);
}

Test(vsock_host, guest_refuses_host_connect)
{
	struct gconn gc;
	char buf[16];
	int fd = client_open();

	guest_init(FEAT_VERSION_1);
	rx_post(8, RX_DEFAULT);
	host_request(fd, "CONNECT 9\n", &gc, 9);
	gsend(&gc, OP_RST, 0, NULL, 0);
	cr_assert_eq(client_recv(fd, buf, sizeof(buf), 100), 0, "no EOF after the guest refused");
	expect_no_rx();   /* nobody answers an RST */
	spin();
	cr_assert_eq(vs->nr_conns, 0);
	close(fd);
}

Test(vsock_host, guest_silent_times_out)
{
	struct gconn gc;
	int fd = client_open();

	vs->response_timeout_ms = 50;
	guest_init(FEAT_VERSION_1);
	rx_post(8, RX_DEFAULT);
	host_request(fd, "CONNECT 9\n", &gc, 9);
	spin_ms(150);
	expect_closed(fd);
	expect_rx(&p, OP_RST);
	cr_assert_eq(p.src_port, gc.hport);
	cr_assert_eq(p.dst_port, 9);
	cr_assert_eq(vs->nr_conns, 0);
	/* The guest's late answer meets an RST. */
	gsend(&gc, OP_RESPONSE, 0, NULL, 0);
	expect_rx(&p, OP_RST);
	close(fd);
}

Test(vsock_host, bad_connect_lines_closed)
{
	static const char *const lines[] = {
		"HELLO\n", "CONNECT\n", "CONNECT \n", "CONNECT abc\n", "CONNECT -1\n",
		"CONNECT 4294967295\n", "CONNECT 99999999999999\n", "connect 5\n", "CONNECT 5 6\n",
	};
	char junk[80];

	guest_init(FEAT_VERSION_1);
	rx_post(8, RX_DEFAULT);
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		int fd = client_open();

		client_say(fd, lines[i]);
		spin();
		expect_closed(fd);
		close(fd);
	}
	/* A NUL in the line: not "CONNECT 5". */
	{
		int fd = client_open();

		client_send(fd, "CONNECT 5\0x\n", 12);
		spin();
		expect_closed(fd);
		close(fd);
	}
	/* 64 bytes without a newline: garbage, not a long wait. */
	{
		int fd = client_open();

		memset(junk, 'C', 64);
		client_send(fd, junk, 64);
		spin();
		expect_closed(fd);
		close(fd);
	}
	expect_no_rx();
	spin();
	cr_assert_eq(vs->nr_conns, 0);
}

Test(vsock_host, connect_line_timeout)
{
	int fd = client_open();

	vs->line_timeout_ms = 50;
	guest_init(FEAT_VERSION_1);
	client_say(fd, "CONNE");
	spin();
	expect_open(fd);
	spin_ms(150);
	expect_closed(fd);
	cr_assert_eq(vs->nr_conns, 0);
	close(fd);
}

Test(vsock_host, connect_before_driver_closed_at_once)
{
	int fd = client_open();

	client_say(fd, "CONNECT 5\n");
	spin();
	expect_closed(fd);
	close(fd);
	cr_assert_eq(vs->nr_conns, 0);
}

/* ---- guest-initiated connections ---- */

Test(vsock_host, guest_connect_relay)
{
	struct gconn gc;
	int lfd = host_listen(5000), fd;

	guest_init(FEAT_VERSION_1);
	rx_post(8, RX_DEFAULT);
	fd = guest_conn(&gc, 40000, 5000, lfd);
	cr_assert_eq(p.src_port, 5000);
	cr_assert_eq(p.dst_port, 40000);
	gsend(&gc, OP_RW, 0, "from guest", 10);
	client_expect(fd, "from guest", 10);
	client_say(fd, "from host");
	guest_expect(&gc, "from host", 9);
	cr_assert_eq(vs->conns_guest, 1);
	virtio_vsock_log_stats(vs);
	close(fd);
	close(lfd);
}

Test(vsock_host, guest_connect_without_listener_rst)
{
	struct gconn gc = { .gport = 40001, .hport = 5001, .buf_alloc = DEV_BUF };
	int lfd;

	guest_init(FEAT_VERSION_1);
	rx_post(8, RX_DEFAULT);
	gsend(&gc, OP_REQUEST, 0, NULL, 0);
	expect_rx(&p, OP_RST);
	cr_assert_eq(p.src_port, 5001);
	cr_assert_eq(p.dst_port, 40001);
	/* A socket file whose listener is gone: also RST. */
	lfd = host_listen(5002);
	close(lfd);
	gc.hport = 5002;
	gsend(&gc, OP_REQUEST, 0, NULL, 0);
	expect_rx(&p, OP_RST);
	cr_assert_eq(vs->nr_conns, 0);
	cr_assert_eq(vs->conns_refused, 2);
}
