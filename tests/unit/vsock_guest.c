/* vsock_guest.c - the vsock tests' fake guest driver and host clients (see vsock_guest.h). */
#include "vsock_guest.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

struct vdrv d;
struct virtio_vsock *vs;
struct event_loop loop;
struct vdq rxq, txq, evq;
char dir[200], sock_path[256];
struct pkt p;
static uint64_t tx_heap;
static char extra_paths[8][300];
static int nr_extra;

/* ---- fixture ---- */

static void setup_device(bool with_socket)
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
	rc = virtio_vsock_init(vs, with_socket ? sock_path : NULL, GUEST_CID, &d.mem, &loop, &why);
	cr_assert_eq(rc, 0, "virtio_vsock_init: %s: %s", why, strerror(-rc));
	d.m = &vs->mmio;
	tx_heap = TX_BASE;
}

void vsock_setup(void)
{
	setup_device(true);
}

void vsock_setup_nopath(void)
{
	setup_device(false);
}

void vsock_teardown(void)
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

void vg_check_guards(void)
{
	vd_check_guards();
}

/* Run the I/O thread's part on this thread until nothing fires. A loop
 * that never settles is a device that spins. Returns the batches run. */
int spin(void)
{
	int i = 0;

	while (i < 10000 && event_loop_poll(&loop, 0) > 0)
		i++;
	cr_assert_lt(i, 10000, "the I/O loop never settles: something spins");
	return i;
}

/* Run the loop for `ms` milliseconds (timers). */
void spin_ms(int ms)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		event_loop_poll(&loop, 5);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
}

/* ---- the guest driver ---- */

void guest_init(uint64_t features)
{
	cr_assert_eq(vd_negotiate(&d, features), S_ACK | S_DRIVER | S_FEATURES_OK,
		     "FEATURES_OK refused for 0x%llx", (unsigned long long)features);
	vdq_setup(&d, &rxq, 0, RXQ_SIZE, RXQ_GPA);
	vdq_setup(&d, &txq, 1, QSIZE, TXQ_GPA);
	vdq_setup(&d, &evq, 2, 8, EVQ_GPA);
	vd_set(&d, R_STATUS, S_ALL_OK);
	cr_assert_eq(vd_status(&d), S_ALL_OK);
}

uint64_t rx_gpa(uint32_t head)
{
	return RX_BASE + (uint64_t)head * RX_SLOT;
}

/* Post n rx buffers of `size` bytes, one descriptor each, and kick. */
void rx_post(int n, uint32_t size)
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

void pkt_decode(const uint8_t *h, struct pkt *out)
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
bool rx_get(struct pkt *out)
{
	uint32_t id, len;
	uint64_t g;

	if (!vdq_get_used(&d, &rxq, &id, &len))
		return false;
	g = rx_gpa(id);
	cr_assert_geq(len, HDR, "rx packet of %u bytes", len);
	pkt_decode(d.ram + g, out);
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

void expect_rx(struct pkt *out, uint16_t op)
{
	cr_assert(rx_get(out), "no packet for the guest, expected op %u", op);
	cr_assert_eq(out->op, op, "op %u, expected %u", out->op, op);
}

void expect_no_rx(void)
{
	struct pkt q = { 0 };

	cr_assert_not(rx_get(&q), "unexpected packet op %u len %u", q.op, q.len);
}

uint64_t tx_alloc(uint32_t len)
{
	uint64_t g;

	if (tx_heap + len > TX_END)
		tx_heap = TX_BASE;
	g = tx_heap;
	tx_heap = (tx_heap + len + 15) & ~15ULL;
	return g;
}

void put_hdr(uint8_t *h, uint64_t src_cid, uint64_t dst_cid, uint32_t src_port,
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
void tx_segs(const struct vseg *s, int n)
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
void tx_raw(uint64_t src_cid, uint64_t dst_cid, uint32_t src_port, uint32_t dst_port,
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

uint16_t tx_post_hdr(uint32_t src_port, uint32_t dst_port, uint16_t op, uint32_t flags)
{
	uint64_t h = tx_alloc(HDR);
	uint16_t head;

	put_hdr(d.ram + h, GUEST_CID, HOST_CID, src_port, dst_port, 0, TYPE_STREAM, op, flags,
		DEV_BUF, 0);
	head = vdq_chain(&d, &txq, &(struct vseg){ h, HDR, false }, 1);
	vdq_post(&d, &txq, head);
	return head;
}

/* A well-formed packet on connection gc. */
void gsend(struct gconn *gc, uint16_t op, uint32_t flags, const void *data, uint32_t len)
{
	tx_raw(GUEST_CID, HOST_CID, gc->gport, gc->hport, TYPE_STREAM, op, flags, gc->buf_alloc,
	       gc->fwd_cnt, data, len, len);
	if (op == OP_RW)
		gc->tx_cnt += len;
}

/* A packet for the guest on gc: learn the device's window, count payload. */
void gtake(struct gconn *gc, const struct pkt *q)
{
	cr_assert_eq(q->src_port, gc->hport, "src port %u, expected %u", q->src_port, gc->hport);
	cr_assert_eq(q->dst_port, gc->gport, "dst port %u, expected %u", q->dst_port, gc->gport);
	gc->peer_buf_alloc = q->buf_alloc;
	gc->peer_fwd_cnt = q->fwd_cnt;
	if (q->op == OP_RW)
		gc->fwd_cnt += q->len;
}

/* ---- the host side ---- */

int client_open_at(const char *path)
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

int client_open(void)
{
	return client_open_at(sock_path);
}

void client_send(int fd, const void *buf, size_t len)
{
	cr_assert_eq(send(fd, buf, len, MSG_NOSIGNAL), (ssize_t)len, "send: %s", strerror(errno));
}

void client_say(int fd, const char *s)
{
	client_send(fd, s, strlen(s));
}

/* Up to len bytes, waiting at most ms: the count, 0 on EOF, -1 on nothing. */
ssize_t client_recv(int fd, void *buf, size_t len, int ms)
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
void client_expect(int fd, const void *want, size_t len)
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
void expect_closed(int fd)
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

void expect_open(int fd)
{
	uint8_t junk;

	spin();
	cr_assert_eq(client_recv(fd, &junk, 1, 20), -1, "host socket closed or got data");
}

/* A host listener at PATH_port, for guest-initiated connections. */
int host_listen(uint32_t port)
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

void host_request(int fd, const char *line, struct gconn *gc, uint32_t port)
{
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
}

void host_handshake(int fd, struct gconn *gc, uint32_t port)
{
	char line[64], want[64];
	ssize_t n;

	snprintf(line, sizeof(line), "CONNECT %u\n", port);
	host_request(fd, line, gc, port);
	cr_assert_eq(client_recv(fd, line, 1, 0), -1, "client answered before the guest did");
	gsend(gc, OP_RESPONSE, 0, NULL, 0);
	snprintf(want, sizeof(want), "OK %u\n", gc->hport);
	n = client_recv(fd, line, strlen(want), 100);
	cr_assert_eq(n, (ssize_t)strlen(want), "no OK line (%zd)", n);
	cr_assert_arr_eq(line, want, strlen(want));
}

int host_conn(struct gconn *gc, uint32_t port)
{
	int fd = client_open();

	host_handshake(fd, gc, port);
	return fd;
}

/* Guest connects from gport to host port hport, where lfd listens:
 * RESPONSE for the guest, and the accepted host socket is returned. */
int guest_conn(struct gconn *gc, uint32_t gport, uint32_t hport, int lfd)
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

void guest_conn_refused(struct gconn *gc)
{
	gsend(gc, OP_REQUEST, 0, NULL, 0);
	expect_rx(&p, OP_RST);
	cr_assert_eq(p.src_port, gc->hport);
	cr_assert_eq(p.dst_port, gc->gport);
}

/* Collect RW packets on gc until `len` bytes came, into buf. */
void guest_expect(struct gconn *gc, const void *want, uint32_t len)
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

