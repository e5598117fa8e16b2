/* test_virtio_vsock.c - virtio-vsock end to end: a simulated guest driver over fake RAM, real Unix sockets on the host. */
#define RAM_SIZE (8u << 20)
#include "virtio_driver.h"
#include "virtio/vsock.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

/* The packet header as virtio 1.2, 5.10.6 lays it out: 44 bytes, little-endian. */
#define H_SRC_CID     0
#define H_DST_CID     8
#define H_SRC_PORT    16
#define H_DST_PORT    20
#define H_LEN         24
#define H_TYPE        28
#define H_OP          30
#define H_FLAGS       32
#define H_BUF_ALLOC   36
#define H_FWD_CNT     40
#define HDR           44

#define OP_REQUEST        1
#define OP_RESPONSE       2
#define OP_RST            3
#define OP_SHUTDOWN       4
#define OP_RW             5
#define OP_CREDIT_UPDATE  6
#define OP_CREDIT_REQUEST 7
#define SHUT_RCV_F        1
#define SHUT_SEND_F       2
#define TYPE_STREAM       1
#define TYPE_SEQPACKET    2
#define HOST_CID          2
#define GUEST_CID         3
#define DEVICE_ID_VSOCK   19
#define FEAT_SEQPACKET    (1ULL << 1)

#define DEV_BUF           (256 * 1024)    /* the buf_alloc the device advertises */
#define MAX_PAYLOAD       (64 * 1024)
#define PORT_BASE         (1u << 30)

/* Guest memory: rings, a wrapping tx area, one 64 KiB slot per rx descriptor. */
#define RXQ_GPA    0x10000
#define TXQ_GPA    0x14000
#define EVQ_GPA    0x18000
#define RXQ_SIZE   64
#define TX_BASE    0x100000
#define TX_END     0x300000
#define RX_BASE    0x300000
#define RX_SLOT    0x10100
#define RX_FILL    0xcc           /* rx buffers are pre-filled: writes past used len show */
#define RX_DEFAULT (4096 + HDR)

static struct vdrv d;
static struct virtio_vsock *vs;
static struct event_loop loop;
static struct vdq rxq, txq, evq;
static uint64_t tx_heap;
static char dir[200], sock_path[256];
static char extra_paths[8][300];
static int nr_extra;

/* A packet as the guest sees it. */
struct pkt {
	uint64_t src_cid, dst_cid;
	uint32_t src_port, dst_port, len;
	uint16_t type, op;
	uint32_t flags, buf_alloc, fwd_cnt;
	uint8_t data[MAX_PAYLOAD];
};

static struct pkt p;    /* scratch: 64 KiB is too much for every test's stack */

/* The guest's end of one connection, tracking credit both ways. */
struct gconn {
	uint32_t gport, hport;
	uint32_t buf_alloc;      /* what the guest advertises */
	uint32_t fwd_cnt;        /* payload bytes the guest consumed */
	uint32_t peer_buf_alloc, peer_fwd_cnt;   /* the device's window, last heard */
	uint32_t tx_cnt;         /* payload bytes the guest sent */
};

/* ---- fixture ---- */

static void setup(void)
{
	const char *t = getenv("TMPDIR");
	const char *why = "";
	int rc;

	vd_setup_ram(&d);
	snprintf(dir, sizeof(dir), "%s/mayfly-vsock-XXXXXX", t && *t ? t : "/tmp");
	cr_assert_not_null(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
	snprintf(sock_path, sizeof(sock_path), "%s/v.sock", dir);
	nr_extra = 0;
	cr_assert_eq(event_loop_init(&loop), 0);
	vs = calloc(1, sizeof(*vs));
	cr_assert_not_null(vs);
	rc = virtio_vsock_init(vs, sock_path, GUEST_CID, &d.mem, &loop, &why);
	cr_assert_eq(rc, 0, "virtio_vsock_init: %s: %s", why, strerror(-rc));
	d.m = &vs->mmio;
	tx_heap = TX_BASE;
}

static void teardown(void)
{
	if (vs) {
		virtio_vsock_destroy(vs);
		free(vs);
		vs = NULL;
	}
	d.m = NULL;
	event_loop_destroy(&loop);
	for (int i = 0; i < nr_extra; i++)
		unlink(extra_paths[i]);
	unlink(sock_path);
	rmdir(dir);
	vd_check_guards();
}

TestSuite(virtio_vsock, .init = setup, .fini = teardown, .timeout = 60);

/* Run the I/O thread's part on this thread until nothing fires. A loop
 * that never settles is a device that spins. Returns the batches run. */
static int spin(void)
{
	int i = 0;

	while (i < 10000 && event_loop_poll(&loop, 0) > 0)
		i++;
	cr_assert_lt(i, 10000, "the I/O loop never settles: something spins");
	return i;
}

/* Run the loop for `ms` milliseconds (timers). */
static void spin_ms(int ms)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		event_loop_poll(&loop, 5);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
}

/* ---- the guest driver ---- */

static void guest_init(uint64_t features)
{
	cr_assert_eq(vd_negotiate(&d, features), S_ACK | S_DRIVER | S_FEATURES_OK,
		     "FEATURES_OK refused for 0x%llx", (unsigned long long)features);
	vdq_setup(&d, &rxq, 0, RXQ_SIZE, RXQ_GPA);
	vdq_setup(&d, &txq, 1, QSIZE, TXQ_GPA);
	vdq_setup(&d, &evq, 2, 8, EVQ_GPA);
	vd_set(&d, R_STATUS, S_ALL_OK);
	cr_assert_eq(vd_status(&d), S_ALL_OK);
}

static uint64_t rx_gpa(uint32_t head)
{
	return RX_BASE + (uint64_t)head * RX_SLOT;
}

/* Post n rx buffers of `size` bytes, one descriptor each, and kick. */
static void rx_post(int n, uint32_t size)
{
	cr_assert_leq(size, RX_SLOT);
	for (int i = 0; i < n; i++) {
		uint16_t want = rxq.free[rxq.nr_free - 1];
		struct vseg s = { rx_gpa(want), size, true };

		memset(d.ram + s.gpa, RX_FILL, RX_SLOT);
		cr_assert_eq(vdq_chain(&d, &rxq, &s, 1), want);
		vdq_post(&d, &rxq, want);
	}
	vdq_kick(&d, &rxq);
}

static void decode(const uint8_t *h, struct pkt *out)
{
	out->src_cid = le64toh(*(const uint64_t *)(h + H_SRC_CID));
	out->dst_cid = le64toh(*(const uint64_t *)(h + H_DST_CID));
	out->src_port = le32toh(*(const uint32_t *)(h + H_SRC_PORT));
	out->dst_port = le32toh(*(const uint32_t *)(h + H_DST_PORT));
	out->len = le32toh(*(const uint32_t *)(h + H_LEN));
	out->type = le16toh(*(const uint16_t *)(h + H_TYPE));
	out->op = le16toh(*(const uint16_t *)(h + H_OP));
	out->flags = le32toh(*(const uint32_t *)(h + H_FLAGS));
	out->buf_alloc = le32toh(*(const uint32_t *)(h + H_BUF_ALLOC));
	out->fwd_cnt = le32toh(*(const uint32_t *)(h + H_FWD_CNT));
}

/* The next packet the device put in an rx buffer, if any. Checks the
 * framing: a host-to-guest stream packet, used len = header + payload, and
 * not a byte written past it. */
static bool rx_get(struct pkt *out)
{
	uint32_t id, len;
	uint64_t g;

	if (!vdq_get_used(&d, &rxq, &id, &len))
		return false;
	g = rx_gpa(id);
	cr_assert_geq(len, HDR, "rx packet of %u bytes", len);
	decode(d.ram + g, out);
	cr_assert_eq(out->src_cid, HOST_CID);
	cr_assert_eq(out->dst_cid, GUEST_CID);
	cr_assert_eq(out->type, TYPE_STREAM);
	cr_assert_eq(len, HDR + out->len, "used len %u for a %u-byte payload", len, out->len);
	cr_assert_leq(out->len, MAX_PAYLOAD);
	memcpy(out->data, d.ram + g + HDR, out->len);
	for (uint32_t i = len; i < RX_SLOT; i++)
		cr_assert_eq(d.ram[g + i], RX_FILL, "rx buffer written past its used length (+%u)", i);
	return true;
}

static void expect_rx(struct pkt *out, uint16_t op)
{
	cr_assert(rx_get(out), "no packet for the guest, expected op %u", op);
	cr_assert_eq(out->op, op, "op %u, expected %u", out->op, op);
}

static void expect_no_rx(void)
{
	struct pkt q = { 0 };

	cr_assert_not(rx_get(&q), "unexpected packet op %u len %u", q.op, q.len);
}

static uint64_t tx_alloc(uint32_t len)
{
	uint64_t g;

	if (tx_heap + len > TX_END)
		tx_heap = TX_BASE;
	g = tx_heap;
	tx_heap = (tx_heap + len + 15) & ~15ULL;
	return g;
}

static void put_hdr(uint8_t *h, uint64_t src_cid, uint64_t dst_cid, uint32_t src_port,
		    uint32_t dst_port, uint32_t len, uint16_t type, uint16_t op, uint32_t flags,
		    uint32_t buf_alloc, uint32_t fwd_cnt)
{
	*(uint64_t *)(h + H_SRC_CID) = htole64(src_cid);
	*(uint64_t *)(h + H_DST_CID) = htole64(dst_cid);
	*(uint32_t *)(h + H_SRC_PORT) = htole32(src_port);
	*(uint32_t *)(h + H_DST_PORT) = htole32(dst_port);
	*(uint32_t *)(h + H_LEN) = htole32(len);
	*(uint16_t *)(h + H_TYPE) = htole16(type);
	*(uint16_t *)(h + H_OP) = htole16(op);
	*(uint32_t *)(h + H_FLAGS) = htole32(flags);
	*(uint32_t *)(h + H_BUF_ALLOC) = htole32(buf_alloc);
	*(uint32_t *)(h + H_FWD_CNT) = htole32(fwd_cnt);
}

/* Send one tx chain and kick; the device must give it back, unwritten. */
static void tx_segs(const struct vseg *s, int n)
{
	uint32_t id, len;
	uint16_t head = vdq_chain(&d, &txq, s, n);

	vdq_post(&d, &txq, head);
	vdq_kick(&d, &txq);
	cr_assert(vdq_get_used(&d, &txq, &id, &len), "tx chain not returned");
	cr_assert_eq(id, head);
	cr_assert_eq(len, 0, "the device wrote %u bytes into a tx buffer", len);
}

/* A packet with every header field chosen: header and payload in separate
 * descriptors; `avail` payload bytes really there (may differ from len). */
static void tx_raw(uint64_t src_cid, uint64_t dst_cid, uint32_t src_port, uint32_t dst_port,
		   uint16_t type, uint16_t op, uint32_t flags, uint32_t buf_alloc, uint32_t fwd_cnt,
		   const void *data, uint32_t len, uint32_t avail)
{
	struct vseg s[2];
	uint64_t h = tx_alloc(HDR);

	put_hdr(d.ram + h, src_cid, dst_cid, src_port, dst_port, len, type, op, flags, buf_alloc,
		fwd_cnt);
	s[0] = (struct vseg){ h, HDR, false };
	if (avail) {
		uint64_t g = tx_alloc(avail);

		if (data)
			memcpy(d.ram + g, data, avail < len ? avail : len);
		s[1] = (struct vseg){ g, avail, false };
	}
	tx_segs(s, avail ? 2 : 1);
}

/* A well-formed packet on connection gc. */
static void gsend(struct gconn *gc, uint16_t op, uint32_t flags, const void *data, uint32_t len)
{
	tx_raw(GUEST_CID, HOST_CID, gc->gport, gc->hport, TYPE_STREAM, op, flags, gc->buf_alloc,
	       gc->fwd_cnt, data, len, len);
	if (op == OP_RW)
		gc->tx_cnt += len;
}

/* A packet for the guest on gc: learn the device's window, count payload. */
static void gtake(struct gconn *gc, const struct pkt *q)
{
	cr_assert_eq(q->src_port, gc->hport, "src port %u, expected %u", q->src_port, gc->hport);
	cr_assert_eq(q->dst_port, gc->gport, "dst port %u, expected %u", q->dst_port, gc->gport);
	gc->peer_buf_alloc = q->buf_alloc;
	gc->peer_fwd_cnt = q->fwd_cnt;
	if (q->op == OP_RW)
		gc->fwd_cnt += q->len;
}

/* ---- the host side ---- */

static int client_open_at(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	cr_assert_geq(fd, 0);
	cr_assert_lt(snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path),
		     (int)sizeof(sa.sun_path));
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "connect %s: %s", path,
		     strerror(errno));
	return fd;
}

static int client_open(void)
{
	return client_open_at(sock_path);
}

static void client_send(int fd, const void *buf, size_t len)
{
	cr_assert_eq(send(fd, buf, len, MSG_NOSIGNAL), (ssize_t)len, "send: %s", strerror(errno));
}

static void client_say(int fd, const char *s)
{
	client_send(fd, s, strlen(s));
}

/* Up to len bytes, waiting at most ms: the count, 0 on EOF, -1 on nothing. */
static ssize_t client_recv(int fd, void *buf, size_t len, int ms)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	ssize_t n;

	if (poll(&pf, 1, ms) <= 0)
		return -1;
	n = recv(fd, buf, len, 0);
	if (n < 0 && errno == ECONNRESET)
		return 0;
	return n < 0 ? -1 : n;
}

/* Exactly len bytes, spinning the loop between tries. */
static void client_expect(int fd, const void *want, size_t len)
{
	uint8_t got[8192];
	size_t done = 0;

	cr_assert_leq(len, sizeof(got));
	for (int tries = 0; done < len && tries < 200; tries++) {
		ssize_t n = client_recv(fd, got + done, len - done, 10);

		cr_assert_neq(n, 0, "EOF after %zu of %zu bytes", done, len);
		if (n > 0)
			done += (size_t)n;
		spin();
	}
	cr_assert_eq(done, len, "got %zu of %zu bytes", done, len);
	cr_assert_arr_eq(got, want, len);
}

/* The device closed its end: EOF (after any data, which is skipped). */
static void expect_closed(int fd)
{
	uint8_t junk[4096];

	for (int tries = 0; tries < 200; tries++) {
		ssize_t n = client_recv(fd, junk, sizeof(junk), 10);

		if (n == 0)
			return;
		spin();
	}
	cr_assert_fail("the device never closed the host socket");
}

static void expect_open(int fd)
{
	uint8_t junk;

	spin();
	cr_assert_eq(client_recv(fd, &junk, 1, 20), -1, "host socket closed or got data");
}

/* A host listener at PATH_port, for guest-initiated connections. */
static int host_listen(uint32_t port)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	cr_assert_geq(fd, 0);
	cr_assert_lt(nr_extra, 8);
	snprintf(extra_paths[nr_extra], sizeof(extra_paths[0]), "%s_%u", sock_path, port);
	cr_assert_lt(snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", extra_paths[nr_extra]),
		     (int)sizeof(sa.sun_path));
	nr_extra++;
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "bind: %s", strerror(errno));
	cr_assert_eq(listen(fd, 8), 0);
	return fd;
}

/* Host client connects to guest port `port` and the guest accepts: the
 * client gets "OK <host port>\n". Returns the client's fd. */
static int host_conn(struct gconn *gc, uint32_t port)
{
	char line[64], want[64];
	int fd = client_open();
	ssize_t n;

	snprintf(line, sizeof(line), "CONNECT %u\n", port);
	client_say(fd, line);
	spin();
	expect_rx(&p, OP_REQUEST);
	cr_assert_eq(p.dst_port, port);
	cr_assert_geq(p.src_port, PORT_BASE, "host port %u below 2^30", p.src_port);
	cr_assert_eq(p.len, 0);
	cr_assert_eq(p.buf_alloc, DEV_BUF);
	cr_assert_eq(p.fwd_cnt, 0);
	*gc = (struct gconn){ .gport = port, .hport = p.src_port, .buf_alloc = DEV_BUF };
	gtake(gc, &p);
	cr_assert_eq(client_recv(fd, line, 1, 0), -1, "client answered before the guest did");
	gsend(gc, OP_RESPONSE, 0, NULL, 0);
	snprintf(want, sizeof(want), "OK %u\n", gc->hport);
	n = client_recv(fd, line, strlen(want), 100);
	cr_assert_eq(n, (ssize_t)strlen(want), "no OK line (%zd)", n);
	cr_assert_arr_eq(line, want, strlen(want));
	return fd;
}

/* Guest connects from gport to host port hport, where lfd listens:
 * RESPONSE for the guest, and the accepted host socket is returned. */
static int guest_conn(struct gconn *gc, uint32_t gport, uint32_t hport, int lfd)
{
	int fd;

	*gc = (struct gconn){ .gport = gport, .hport = hport, .buf_alloc = DEV_BUF };
	gsend(gc, OP_REQUEST, 0, NULL, 0);
	expect_rx(&p, OP_RESPONSE);
	gtake(gc, &p);
	cr_assert_eq(p.buf_alloc, DEV_BUF);
	fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	cr_assert_geq(fd, 0, "the device did not connect to PATH_%u: %s", hport, strerror(errno));
	return fd;
}

/* Collect RW packets on gc until `len` bytes came, into buf. */
static void guest_expect(struct gconn *gc, const void *want, uint32_t len)
{
	static uint8_t got[1 << 16];
	uint32_t done = 0;

	cr_assert_leq(len, sizeof(got));
	for (int tries = 0; done < len && tries < 100; tries++) {
		spin();
		while (done < len && rx_get(&p)) {
			gtake(gc, &p);
			cr_assert_eq(p.op, OP_RW, "op %u while data was expected", p.op);
			cr_assert_leq(done + p.len, len, "more data than sent");
			memcpy(got + done, p.data, p.len);
			done += p.len;
			rx_post(1, RX_DEFAULT);
		}
	}
	cr_assert_eq(done, len, "guest got %u of %u bytes", done, len);
	cr_assert_arr_eq(got, want, len);
}

/* ---- identity ---- */

Test(virtio_vsock, identity_features_config)
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

Test(virtio_vsock, socket_file_made_and_removed)
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

Test(virtio_vsock, stale_socket_replaced_others_refused)
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

Test(virtio_vsock, host_connect_handshake_and_data)
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

Test(virtio_vsock, pipelined_data_after_connect_line)
{
	struct gconn gc;
	char line[64];
	int fd = client_open();

	guest_init(FEAT_VERSION_1);
	rx_post(8, RX_DEFAULT);
	client_say(fd, "CONNECT 77\r\nearly bytes");
	spin();
	expect_rx(&p, OP_REQUEST);
	gc = (struct gconn){ .gport = 77, .hport = p.src_port, .buf_alloc = DEV_BUF };
	expect_no_rx();   /* no data before the guest accepted */
	gsend(&gc, OP_RESPONSE, 0, NULL, 0);
	snprintf(line, sizeof(line), "OK %u\n", gc.hport);
	client_expect(fd, line, strlen(line));
	guest_expect(&gc, "early bytes", 11);
	close(fd);
}

Test(virtio_vsock, guest_refuses_host_connect)
{
	struct gconn gc;
	char buf[16];
	int fd = client_open();

	guest_init(FEAT_VERSION_1);
	rx_post(8, RX_DEFAULT);
	client_say(fd, "CONNECT 9\n");
	spin();
	expect_rx(&p, OP_REQUEST);
	gc = (struct gconn){ .gport = 9, .hport = p.src_port };
	gsend(&gc, OP_RST, 0, NULL, 0);
	cr_assert_eq(client_recv(fd, buf, sizeof(buf), 100), 0, "no EOF after the guest refused");
	expect_no_rx();   /* nobody answers an RST */
	spin();
	cr_assert_eq(vs->nr_conns, 0);
	close(fd);
}

Test(virtio_vsock, guest_silent_times_out)
{
	struct gconn gc;
	int fd = client_open();

	vs->response_timeout_ms = 50;
	guest_init(FEAT_VERSION_1);
	rx_post(8, RX_DEFAULT);
	client_say(fd, "CONNECT 9\n");
	spin();
	expect_rx(&p, OP_REQUEST);
	gc = (struct gconn){ .gport = 9, .hport = p.src_port };
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

Test(virtio_vsock, bad_connect_lines_closed)
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

Test(virtio_vsock, connect_line_timeout)
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

Test(virtio_vsock, connect_before_driver_closed_at_once)
{
	int fd = client_open();

	client_say(fd, "CONNECT 5\n");
	spin();
	expect_closed(fd);
	close(fd);
	cr_assert_eq(vs->nr_conns, 0);
}

/* ---- credit ---- */

Test(virtio_vsock, device_respects_guest_credit)
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

Test(virtio_vsock, payload_bounded_by_rx_buffer)
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

Test(virtio_vsock, credit_request_and_low_window_update)
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

Test(virtio_vsock, guest_beyond_credit_reset)
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
Test(virtio_vsock, bulk_guest_to_host_within_credit)
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
Test(virtio_vsock, bulk_host_to_guest_within_credit)
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

/* ---- guest-initiated connections ---- */

Test(virtio_vsock, guest_connect_relay)
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

Test(virtio_vsock, guest_connect_without_listener_rst)
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

/* ---- packets on nothing, and bad packets ---- */

Test(virtio_vsock, rst_for_unknown_connection)
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

/* RSTs owed while the guest posts no buffers are bounded, then delivered. */
Test(virtio_vsock, rsts_bounded_without_rx_buffers)
{
	struct gconn gc = { .gport = 41, .hport = 42, .buf_alloc = DEV_BUF };
	int n = 0;

	guest_init(FEAT_VERSION_1);
	for (int i = 0; i < 100; i++)
		gsend(&gc, OP_RW, 0, "x", 1);
	rx_post(RXQ_SIZE, RX_DEFAULT);
	while (rx_get(&p)) {
		cr_assert_eq(p.op, OP_RST);
		n++;
	}
	cr_assert_gt(n, 0);
	cr_assert_leq(n, 32, "%d RSTs kept for a guest without buffers", n);
}

Test(virtio_vsock, bad_headers_dropped)
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

Test(virtio_vsock, oversized_payload_rejected)
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

Test(virtio_vsock, header_split_across_descriptors)
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

/* ---- ends of connections ---- */

Test(virtio_vsock, host_disconnects_mid_connect_line)
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

Test(virtio_vsock, host_disconnects_before_guest_answers)
{
	struct gconn gc;
	int fd = client_open();

	guest_init(FEAT_VERSION_1);
	rx_post(3, RX_DEFAULT);   /* REQUEST, RST, RST: then none */
	client_say(fd, "CONNECT 9\n");
	spin();
	expect_rx(&p, OP_REQUEST);
	gc = (struct gconn){ .gport = 9, .hport = p.src_port, .buf_alloc = DEV_BUF };
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

Test(virtio_vsock, host_disconnects_mid_stream)
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

Test(virtio_vsock, host_hangup_waits_for_credit)
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

Test(virtio_vsock, host_half_close_and_guest_shutdowns)
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

Test(virtio_vsock, guest_shutdown_send_then_both)
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

Test(virtio_vsock, guest_rst_closes_host_socket)
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

Test(virtio_vsock, driver_reset_closes_everything)
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

Test(virtio_vsock, connection_cap)
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

/* ---- a hostile driver ---- */

static void expect_failed_then_recover(void)
{
	struct gconn gc;
	int fd;

	cr_assert(vd_status(&d) & S_NEEDS_RESET, "status 0x%x without NEEDS_RESET", vd_status(&d));
	cr_assert(vd_reg(&d, R_INT_STATUS) & INT_CONFIG);
	cr_assert_eq(vs->nr_conns, 0, "a failed device keeps connections");
	vd_check_guards();
	vd_set(&d, R_STATUS, 0);
	guest_init(FEAT_VERSION_1);
	rx_post(8, RX_DEFAULT);
	fd = host_conn(&gc, 1234);
	client_say(fd, "ok");
	guest_expect(&gc, "ok", 2);
	close(fd);
	vd_check_guards();
}

Test(virtio_vsock, hostile_tx_chains_fail_device)
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

Test(virtio_vsock, hostile_rx_buffers_fail_device)
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

/* ---- interrupts ---- */

Test(virtio_vsock, event_idx_and_event_queue)
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
Test(virtio_vsock, rx_chain_of_several_descriptors)
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
	decode(got, &p);
	cr_assert_eq(p.op, OP_RW);
	cr_assert_eq(p.len, 20);
	cr_assert_eq(p.src_port, gc.hport);
	cr_assert_arr_eq(got + HDR, "across three descrip", 20);
	cr_assert_eq(d.ram[g + 10], RX_FILL, "written between descriptors");
	cr_assert_eq(d.ram[g + 64 + 34], RX_FILL);
	cr_assert_eq(d.ram[g + 128 + 20], RX_FILL);
	close(fd);
}

/* ---- the event loop's run-time sources (vmm/event.c) ---- */

struct ev_probe {
	struct event_loop *loop;
	int fd;
	int calls;
	struct ev_probe *victim;   /* deleted (and its fd closed) when this one runs */
};

static void ev_probe_fn(void *opaque, uint32_t events)
{
	struct ev_probe *e = opaque;

	(void)events;
	e->calls++;
	if (e->victim && e->victim->fd >= 0) {
		cr_assert_eq(event_loop_del(e->loop, e->victim->fd), 0);
		close(e->victim->fd);
		e->victim->fd = -1;
	}
}

static int ready_eventfd(void)
{
	uint64_t one = 1;
	int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, &one, sizeof(one)), (ssize_t)sizeof(one));
	return fd;
}

Test(event_loop, delete_during_batch_is_safe)
{
	struct event_loop l;
	struct ev_probe a = { .loop = &l }, b = { .loop = &l }, c = { .loop = &l };

	cr_assert_eq(event_loop_init(&l), 0);
	a.fd = ready_eventfd();
	b.fd = ready_eventfd();
	a.victim = &b;   /* whichever runs first deletes the other */
	b.victim = &a;
	cr_assert_eq(event_loop_add(&l, a.fd, EPOLLIN, ev_probe_fn, &a), 0);
	cr_assert_eq(event_loop_add(&l, b.fd, EPOLLIN, ev_probe_fn, &b), 0);
	cr_assert_eq(event_loop_poll(&l, 0), 2, "both were ready in one batch");
	cr_assert_eq(a.calls + b.calls, 1, "a source deleted in the batch still ran");
	/* A source added after the batch never gets the dead slot's events. */
	c.fd = ready_eventfd();
	cr_assert_eq(event_loop_add(&l, c.fd, EPOLLIN, ev_probe_fn, &c), 0);
	cr_assert_eq(event_loop_poll(&l, 0), 2, "the survivor (still readable) and c");
	cr_assert_eq(c.calls, 1);
	cr_assert_eq(a.calls + b.calls, 2);
	close(a.fd >= 0 ? a.fd : b.fd);
	close(c.fd);
	event_loop_destroy(&l);
}

Test(event_loop, dead_slot_reused_only_after_the_batch)
{
	static struct event_loop l;
	static int fds[EVENT_MAX_SOURCES];
	struct rlimit rl;
	struct ev_probe e = { .loop = &l };
	int extra;

	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur < EVENT_MAX_SOURCES + 64) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		if (rl.rlim_cur < EVENT_MAX_SOURCES + 64)
			cr_skip_test("fd limit below %d", EVENT_MAX_SOURCES + 64);
	}
	cr_assert_eq(event_loop_init(&l), 0);
	for (int i = 0; i < EVENT_MAX_SOURCES; i++) {
		fds[i] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		cr_assert_eq(event_loop_add(&l, fds[i], EPOLLIN, ev_probe_fn, &e), 0, "source %d", i);
	}
	extra = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	cr_assert_eq(event_loop_add(&l, extra, EPOLLIN, ev_probe_fn, &e), -ENOSPC);
	/* Deleted, but its slot waits for the next wait: still full. */
	cr_assert_eq(event_loop_del(&l, fds[7]), 0);
	cr_assert_eq(event_loop_del(&l, fds[7]), -ENOENT);
	cr_assert_eq(event_loop_add(&l, extra, EPOLLIN, ev_probe_fn, &e), -ENOSPC);
	cr_assert_eq(event_loop_poll(&l, 0), 0);
	cr_assert_eq(event_loop_add(&l, extra, EPOLLIN, ev_probe_fn, &e), 0);
	for (int i = 0; i < EVENT_MAX_SOURCES; i++)
		close(fds[i]);
	close(extra);
	event_loop_destroy(&l);
}

Test(event_loop, modify_events)
{
	struct event_loop l;
	struct ev_probe e = { .loop = &l };

	cr_assert_eq(event_loop_init(&l), 0);
	e.fd = ready_eventfd();
	cr_assert_eq(event_loop_add(&l, e.fd, EPOLLIN, ev_probe_fn, &e), 0);
	cr_assert_eq(event_loop_mod(&l, e.fd, 0), 0);
	cr_assert_eq(event_loop_poll(&l, 0), 0, "a source watched for nothing fired");
	cr_assert_eq(event_loop_mod(&l, e.fd, EPOLLIN), 0);
	cr_assert_eq(event_loop_poll(&l, 0), 1);
	cr_assert_eq(e.calls, 1);
	cr_assert_eq(event_loop_mod(&l, 12345, EPOLLIN), -ENOENT);
	cr_assert_eq(event_loop_del(&l, 12345), -ENOENT);
	cr_assert_eq(event_loop_del(&l, e.fd), 0);
	cr_assert_eq(event_loop_poll(&l, 0), 0, "a deleted source fired");
	close(e.fd);
	event_loop_destroy(&l);
}
