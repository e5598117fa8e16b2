/* test_vsock_host.c - virtio-vsock's host side: identity, the socket file, host- and guest-initiated connections, the CONNECT line. */
#include "vsock_guest.h"
#include "virtio/vsock_conn.h"

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

/* A line as bytes: it may hold a NUL. */
#define LINE(str) { str, sizeof(str) - 1 }

struct line {
	const char *s;
	size_t len;
};

/* The CONNECT line as Firecracker reads it (and so as its clients write
 * it): words split on whitespace, the keyword in any case, a u32 port as
 * Rust parses one, further words ignored. -1: refused. */
Test(vsock_host, connect_line_parser)
{
	static const struct {
		struct line l;
		int64_t port;
	} cases[] = {
		{ LINE("CONNECT 1024"), 1024 },
		{ LINE("connect 1024"), 1024 },
		{ LINE("cOnNeCt 1024"), 1024 },
		{ LINE("CONNECT  1024"), 1024 },
		{ LINE("CONNECT\t1024"), 1024 },
		{ LINE("  CONNECT 1024  "), 1024 },
		{ LINE("CONNECT 1024\r"), 1024 },
		{ LINE("\vCONNECT\f1024\r"), 1024 },
		{ LINE("CONNECT +1024"), 1024 },
		{ LINE("CONNECT 001024"), 1024 },
		{ LINE("CONNECT 0"), 0 },
		{ LINE("CONNECT 4294967294"), 4294967294LL },
		{ LINE("CONNECT 4294967295"), 4294967295LL },   /* VMADDR_PORT_ANY: the guest refuses */
		{ LINE("CONNECT 00000000000000000000000000000000000000000004294967295"), 4294967295LL },
		{ LINE("CONNECT 1024 and more words"), 1024 },
		{ LINE(""), -1 },
		{ LINE("   "), -1 },
		{ LINE("CONNECT"), -1 },
		{ LINE("CONNECT "), -1 },
		{ LINE("CONNECT\t\r"), -1 },
		{ LINE("CONNECT1024"), -1 },
		{ LINE("CONNEC 1024"), -1 },
		{ LINE("CONNECTS 1024"), -1 },
		{ LINE("HELLO 1024"), -1 },
		{ LINE("1024 CONNECT"), -1 },
		{ LINE("CONNECT abc"), -1 },
		{ LINE("CONNECT 1024x"), -1 },
		{ LINE("CONNECT 0x400"), -1 },
		{ LINE("CONNECT -1"), -1 },
		{ LINE("CONNECT -0"), -1 },
		{ LINE("CONNECT +"), -1 },
		{ LINE("CONNECT ++1"), -1 },
		{ LINE("CONNECT 4294967296"), -1 },
		{ LINE("CONNECT 99999999999999999999999"), -1 },
		{ LINE("CONNECT 5,6"), -1 },
		{ LINE("CONNECT 5\0"), -1 },
		{ LINE("CONNECT 5 \0"), -1 },
		{ LINE("CONNECT\0 5"), -1 },
		{ LINE("CONNECT 5 \x01"), -1 },
		{ LINE("CONNECT 5 \xff"), -1 },
		{ LINE("CONNECT\xc2\xa0" "5"), -1 },    /* U+00A0: ASCII only here */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint32_t port = 7;
		int rc = vsock_host_parse_connect(cases[i].l.s, cases[i].l.len, &port);

		if (cases[i].port < 0) {
			cr_assert_eq(rc, -EINVAL, "case %zu accepted (port %u)", i, port);
			cr_assert_eq(port, 7, "case %zu: port written on refusal", i);
		} else {
			cr_assert_eq(rc, 0, "case %zu refused", i);
			cr_assert_eq(port, (uint32_t)cases[i].port, "case %zu: port %u", i, port);
		}
	}
}

/* Through the socket, the forms hybrid-vsock clients send get through. */
Test(vsock_host, connect_line_forms_accepted)
{
	static const char *const lines[] = {
		"connect 1024\n", "CONNECT  1024\n", "CONNECT\t1024\n", "Connect 1024\r\n",
		" CONNECT +01024 and more\n",
	};

	guest_init(FEAT_VERSION_1);
	rx_post(16, RX_DEFAULT);
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		struct gconn gc;
		char ok[32];
		int fd = client_open();

		host_request(fd, lines[i], &gc, 1024);
		gsend(&gc, OP_RESPONSE, 0, NULL, 0);
		snprintf(ok, sizeof(ok), "OK %u\n", gc.hport);
		client_expect(fd, ok, strlen(ok));
		gsend(&gc, OP_RST, 0, NULL, 0);
		expect_closed(fd);
		close(fd);
	}
	cr_assert_eq(vs->nr_conns, 0);
}

Test(vsock_host, bad_connect_lines_closed)
{
	static const struct line lines[] = {
		LINE("HELLO\n"), LINE("CONNECT\n"), LINE("CONNECT \n"), LINE("CONNECT abc\n"),
		LINE("CONNECT -1\n"), LINE("CONNECT 4294967296\n"), LINE("CONNECT 99999999999999\n"),
		LINE("CONNECT 5\0x\n"), LINE("CONNECT 5 \xff\n"), LINE("\n"),
	};
	char junk[80];

	guest_init(FEAT_VERSION_1);
	rx_post(8, RX_DEFAULT);
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		int fd = client_open();

		client_send(fd, lines[i].s, lines[i].len);
		spin();
		expect_closed(fd);
		close(fd);
	}
	/* 64 bytes without a newline: garbage, not a long wait, even if the
	 * start would parse. */
	{
		int fd = client_open();

		memset(junk, ' ', 64);
		memcpy(junk, "CONNECT 5", 9);
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
	guest_conn_refused(&gc);
	/* A socket file whose listener is gone: also RST. */
	lfd = host_listen(5002);
	close(lfd);
	gc.hport = 5002;
	guest_conn_refused(&gc);
	cr_assert_eq(vs->nr_conns, 0);
	cr_assert_eq(vs->conns_refused, 2);
}

/* ---- held for a live snapshot (mayfly pause, fork) ---- */

Test(vsock_host, hold_refused_during_a_call_and_keeps_clients_waiting)
{
	struct gconn gc;
	unsigned before;
	int fd, waiting;

	guest_init(FEAT_VERSION_1);
	rx_post(8, RX_DEFAULT);
	fd = host_conn(&gc, 1234);
	cr_assert_eq(virtio_vsock_hold(vs), -EBUSY, "an open connection is a call in flight");
	close(fd);
	spin_ms(50);
	cr_assert_eq(virtio_vsock_hold(vs), 0, "a connection whose client hung up is no call");
	before = vs->nr_conns;
	waiting = client_open();
	client_say(waiting, "CONNECT 1234\n");
	spin_ms(100);
	cr_assert_eq(vs->nr_conns, before, "a client got in while the listener was held");
	/* Holds count: two holds, two releases. */
	cr_assert_eq(virtio_vsock_hold(vs), 0);
	virtio_vsock_release(vs);
	spin_ms(100);
	cr_assert_eq(vs->nr_conns, before, "one release of two let a client in");
	virtio_vsock_release(vs);
	spin_ms(100);
	cr_assert_eq(vs->nr_conns, before + 1, "the waiting client was not taken after the release");
	close(waiting);
}
