/* vsock.c - virtio-vsock, the device side: three queues, packet headers, validation, the rx pump and reset. */
#include "virtio/vsock_conn.h"
#include "lib/clock.h"
#include "lib/log.h"

#include <endian.h>
#include <errno.h>
#include <linux/virtio_ids.h>
#include <linux/virtio_ring.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

_Static_assert(sizeof(struct virtio_vsock_hdr) == VSOCK_HDR_LEN, "the wire header is 44 bytes");

_Static_assert(VSOCK_PKT_NR_VERDICTS <= sizeof(((struct virtio_vsock *)0)->lim_pkt) /
					sizeof(struct log_limit),
	       "a log limit for every verdict");

/* How each bad header is treated: a table, so the policy reads in one place. */
static const struct verdict_rule {
	const char *why;
	bool reset;                /* reset the connection (or owe an RST), not just drop */
} verdict_rules[VSOCK_PKT_NR_VERDICTS] = {
	[VSOCK_PKT_BAD_SRC] = { "packet with a source CID that is not the guest's dropped", false },
	[VSOCK_PKT_BAD_DST] = { "packet for a CID other than the host (2) dropped", false },
	[VSOCK_PKT_BAD_TYPE] = { "packet of a type other than stream dropped", false },
	[VSOCK_PKT_BAD_OP] = { "packet with an unknown op dropped", false },
	[VSOCK_PKT_TOO_BIG] = { "packet with a payload above 64 KiB dropped, connection reset", true },
	[VSOCK_PKT_SHORT] = { "packet whose length exceeds its buffers dropped, connection reset",
			      true },
};

void vsock_hdr_decode(const uint8_t raw[VSOCK_HDR_LEN], struct vsock_hdr *h)
{
	struct virtio_vsock_hdr w;

	memcpy(&w, raw, sizeof(w));
	*h = (struct vsock_hdr){
		.src_cid = le64toh(w.src_cid), .dst_cid = le64toh(w.dst_cid),
		.src_port = le32toh(w.src_port), .dst_port = le32toh(w.dst_port),
		.len = le32toh(w.len), .type = le16toh(w.type), .op = le16toh(w.op),
		.flags = le32toh(w.flags), .buf_alloc = le32toh(w.buf_alloc),
		.fwd_cnt = le32toh(w.fwd_cnt),
	};
}

void vsock_hdr_encode(const struct vsock_hdr *h, uint8_t raw[VSOCK_HDR_LEN])
{
	struct virtio_vsock_hdr w = {
		.src_cid = htole64(h->src_cid), .dst_cid = htole64(h->dst_cid),
		.src_port = htole32(h->src_port), .dst_port = htole32(h->dst_port),
		.len = htole32(h->len), .type = htole16(h->type), .op = htole16(h->op),
		.flags = htole32(h->flags), .buf_alloc = htole32(h->buf_alloc),
		.fwd_cnt = htole32(h->fwd_cnt),
	};

	memcpy(raw, &w, sizeof(w));
}

enum vsock_verdict vsock_hdr_check(const struct vsock_hdr *h, uint64_t guest_cid, uint32_t avail)
{
	if (h->src_cid != guest_cid)
		return VSOCK_PKT_BAD_SRC;
	if (h->dst_cid != VSOCK_HOST_CID)
		return VSOCK_PKT_BAD_DST;
	if (h->type != VIRTIO_VSOCK_TYPE_STREAM)
		return VSOCK_PKT_BAD_TYPE;
	if (h->op < VIRTIO_VSOCK_OP_REQUEST || h->op > VIRTIO_VSOCK_OP_CREDIT_REQUEST)
		return VSOCK_PKT_BAD_OP;
	if (h->len > VSOCK_MAX_PAYLOAD)
		return VSOCK_PKT_TOO_BIG;
	if (h->len > avail)
		return VSOCK_PKT_SHORT;
	return VSOCK_PKT_OK;
}

int vsock_chain_iov(const struct vq_chain *c, uint32_t off, uint32_t len, struct iovec *iov)
{
	int n = 0;

	for (uint16_t i = 0; i < c->nr_segs && len; i++) {
		uint32_t take;

		if (off >= c->segs[i].len) {
			off -= c->segs[i].len;
			continue;
		}
		take = c->segs[i].len - off < len ? c->segs[i].len - off : len;
		iov[n++] = (struct iovec){ .iov_base = c->segs[i].hva + off, .iov_len = take };
		len -= take;
		off = 0;
	}
	return n;
}

void vsock_put_hdr(struct virtio_vsock *v, struct vq_chain *c, uint32_t src_port,
		   uint32_t dst_port, uint16_t op, uint32_t flags, uint32_t len,
		   uint32_t buf_alloc, uint32_t fwd_cnt)
{
	struct vsock_hdr h = {
		.src_cid = VSOCK_HOST_CID, .dst_cid = v->guest_cid,
		.src_port = src_port, .dst_port = dst_port, .len = len,
		.type = VIRTIO_VSOCK_TYPE_STREAM, .op = op, .flags = flags,
		.buf_alloc = buf_alloc, .fwd_cnt = fwd_cnt,
	};
	uint8_t raw[VSOCK_HDR_LEN];

	vsock_hdr_encode(&h, raw);
	vsock_chain_put(c, raw, VSOCK_HDR_LEN);
}

void vsock_chain_put(const struct vq_chain *c, const void *src, uint32_t len)
{
	struct iovec iov[VSOCK_HDR_LEN];
	int n = vsock_chain_iov(c, 0, len, iov);
	size_t done = 0;

	for (int i = 0; i < n; i++) {
		memcpy(iov[i].iov_base, (const uint8_t *)src + done, iov[i].iov_len);
		done += iov[i].iov_len;
	}
}

/* RSTs for packets on no connection are never dropped: a guest that
 * missed one would keep a connection it thinks is open. Nor does their
 * number grow with what the guest sends: each tx packet owes at most one,
 * and vsock_tx takes a packet only while this ring has a free slot. When
 * it is full, tx waits for the guest to give rx buffers (vsock_rx_pump
 * resumes it): the guest's own tx queue stalls, not the host. */
void vsock_queue_rst(struct virtio_vsock *v, uint32_t src_port, uint32_t dst_port)
{
	unsigned slot;

	if (v->rst_len == VSOCK_RST_RING) {
		/* Unreachable (see above); were it not, dropping beats overflowing. */
		log_limited(&v->lim_rst_ring, LOG_ERROR,
			    "virtio-vsock %s: RST ring full although tx is paused for it: RST "
			    "dropped", v->mmio.name);
		v->pkts_dropped++;
		return;
	}
	slot = (v->rst_head + v->rst_len++) % VSOCK_RST_RING;
	v->rsts[slot].src = src_port;
	v->rsts[slot].dst = dst_port;
}

/* Every connection's socket closes: the driver must reset anyway. */
void vsock_fail(struct virtio_vsock *v, const char *why)
{
	virtio_mmio_fail(&v->mmio, why);
	v->rx_held = false;
	v->rst_len = 0;
	v->tx_paused = false;
	vsock_conn_close_all(v);
}

bool vsock_sync(struct virtio_vsock *v)
{
	if (!v->reset_pending)
		return false;
	v->reset_pending = false;
	vsock_conn_close_all(v);
	return true;
}

/* Fill rx buffers with what is owed to the guest, RSTs for packets on no
 * connection first (they hold up tx). Returns whether any was used. */
static bool vsock_rx_fill(struct virtio_vsock *v)
{
	struct vq *q = &v->mmio.queues[VSOCK_QUEUE_RX];
	bool pushed = false;

	while (v->rst_len || vsock_conn_rx_work(v)) {
		struct vq_chain *c = &v->rx_chain;
		uint32_t written;

		if (!v->rx_held) {
			const char *why = "";
			int rc = vq_pop(q, c, &why);

			if (rc < 0) {
				vsock_fail(v, why);
				return false;
			}
			if (rc == 0)
				break;   /* no buffers: the driver kicks rx when it adds some */
			/* An rx buffer is all device-writable, with room for a header
			 * and some payload: one without would stall data for good. */
			if (c->nr_readable || c->writable_len <= VSOCK_HDR_LEN) {
				vsock_fail(v, "rx buffer with device-readable parts or no room past a header");
				return false;
			}
			v->rx_held = true;
		}
		if (v->rst_len) {
			vsock_put_hdr(v, c, v->rsts[v->rst_head].src, v->rsts[v->rst_head].dst,
				      VIRTIO_VSOCK_OP_RST, 0, 0, 0, 0);
			v->rst_head = (v->rst_head + 1) % VSOCK_RST_RING;
			v->rst_len--;
			v->rsts_sent++;
			written = VSOCK_HDR_LEN;
		} else {
			written = vsock_conn_fill(v, c);
		}
		if (written) {
			vq_push(q, c->head, written);
			v->rx_held = false;
			pushed = true;
		}
	}
	return pushed;
}

/* One tx chain: the header is its first 44 readable bytes (they may span
 * descriptors), the payload the hdr.len bytes after them. */
static void vsock_tx_packet(struct virtio_vsock *v, const struct vq_chain *c)
{
	struct vsock_pkt pkt;
	uint8_t raw[VSOCK_HDR_LEN];
	struct iovec iov[VSOCK_HDR_LEN];
	int n = vsock_chain_iov(c, 0, VSOCK_HDR_LEN, iov);
	const struct verdict_rule *rule;
	enum vsock_verdict verdict;
	size_t done = 0;

	for (int i = 0; i < n; i++) {
		memcpy(raw + done, iov[i].iov_base, iov[i].iov_len);
		done += iov[i].iov_len;
	}
	vsock_hdr_decode(raw, &pkt.hdr);
	verdict = vsock_hdr_check(&pkt.hdr, v->guest_cid, c->readable_len - VSOCK_HDR_LEN);
	if (verdict == VSOCK_PKT_OK) {
		pkt.iovcnt = vsock_chain_iov(c, VSOCK_HDR_LEN, pkt.hdr.len, pkt.iov);
		vsock_conn_packet(v, &pkt);
		return;
	}
	rule = &verdict_rules[verdict];
	v->pkts_dropped++;
	log_limited(&v->lim_pkt[verdict], LOG_WARN, "virtio-vsock %s: %s (op %u, len %u)",
		    v->mmio.name, rule->why, pkt.hdr.op, pkt.hdr.len);
	if (rule->reset)
		vsock_conn_reject(v, &pkt.hdr);
}

static void vsock_tx(struct virtio_vsock *v, struct virtio_mmio *m)
{
	struct vq *q = &m->queues[VSOCK_QUEUE_TX];
	struct vq_chain *c = &v->tx_chain;
	bool pushed = false;
	const char *why = "";
	int rc;

	for (;;) {
		/* A packet may owe one RST: take it only while their ring has
		 * room (see vsock_queue_rst). */
		if (v->rst_len == VSOCK_RST_RING) {
			v->tx_paused = true;
			break;
		}
		rc = vq_pop(q, c, &why);
		if (rc < 0) {
			vsock_fail(v, why);
			return;
		}
		if (rc == 0)
			break;
		/* Without a whole header there is no packet to drop politely:
		 * a driver that sends this is broken. */
		if (c->nr_segs != c->nr_readable || c->readable_len < VSOCK_HDR_LEN) {
			vsock_fail(v, "tx chain without a whole readable header, or with writable parts");
			return;
		}
		vsock_tx_packet(v, c);
		/* Consumed: the tx buffer goes back whatever became of the packet. */
		vq_push(q, c->head, 0);
		pushed = true;
		if (!virtio_mmio_live(m))
			return;
	}
	if (pushed && vq_should_interrupt(q))
		virtio_mmio_notify(m);
}

void vsock_rx_pump(struct virtio_vsock *v)
{
	struct virtio_mmio *m = &v->mmio;
	struct vq *q = &m->queues[VSOCK_QUEUE_RX];
	bool pushed;

	if (!virtio_mmio_live(m) || !q->ready)
		return;
	pushed = vsock_rx_fill(v);
	/* RSTs went out: tx paused for room in their ring goes on. Each turn
	 * takes tx chains and rx buffers, so it ends when the guest's do. */
	while (v->tx_paused && v->rst_len < VSOCK_RST_RING && virtio_mmio_live(m)) {
		v->tx_paused = false;
		vsock_tx(v, m);
		pushed |= vsock_rx_fill(v);
	}
	if (pushed && virtio_mmio_live(m) && vq_should_interrupt(q))
		virtio_mmio_notify(m);
}

static void vsock_queue_notify(void *dev, struct virtio_mmio *m, unsigned index)
{
	struct virtio_vsock *v = dev;

	vsock_sync(v);
	if (index == VSOCK_QUEUE_TX)
		vsock_tx(v, m);
	/* Both an rx kick (new buffers) and tx work (owed replies) need the
	 * rx pump. Event buffers are only used after a snapshot restore. */
	if (index == VSOCK_QUEUE_EVENT)
		vsock_event_pump(v);
	else
		vsock_rx_pump(v);
}

void vsock_wake_io(struct virtio_vsock *v)
{
	uint64_t one = 1;

	/* Only an overflowing counter fails with EAGAIN, and that still wakes. */
	if (write(v->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_limited(&v->lim_wake, LOG_WARN, "virtio-vsock %s: cannot wake the I/O thread: %s",
			    v->mmio.name, strerror(errno));
}

/* vCPU thread, lock held: only flag it; the sockets and the event loop are
 * the I/O thread's, which closes everything on its next wakeup. */
static void vsock_reset(void *dev)
{
	struct virtio_vsock *v = dev;

	v->reset_pending = true;
	v->rx_held = false;   /* the chain belonged to the old ring */
	v->reset_event_owed = false;   /* a new driver has no connections to reset */
	v->reset_unacked = false;
	v->rst_len = 0;
	v->tx_paused = false;
	vsock_wake_io(v);
}

static void vsock_wake_event(void *opaque, uint32_t events)
{
	struct virtio_vsock *v = opaque;
	uint64_t count;

	(void)events;
	if (read(v->wake_fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
		return;
	pthread_mutex_lock(&v->mmio.lock);
	vsock_sync(v);
	vsock_host_take_local(v);
	/* Released after a live snapshot: watch the listener again. */
	if (v->listen_paused && !v->held && v->nr_conns < v->max_conns &&
	    !event_loop_mod(v->loop, v->listen_fd, EPOLLIN))
		v->listen_paused = false;
	pthread_mutex_unlock(&v->mmio.lock);
}

static void vsock_config_read(void *dev, uint32_t offset, uint8_t *data, uint32_t len)
{
	struct virtio_vsock *v = dev;

	memcpy(data, (const uint8_t *)&v->config + offset, len);
}

static const struct virtio_device_ops vsock_ops = {
	.name = "vsock",
	.device_id = VIRTIO_ID_VSOCK,
	.nr_queues = 3,
	.queue_max = VSOCK_QUEUE_SIZE,
	.config_read = vsock_config_read,
	.config_size = sizeof(struct virtio_vsock_config),
	.queue_notify = vsock_queue_notify,
	.reset = vsock_reset,
	.save = vsock_snapshot_save,
	.restore = vsock_snapshot_restore,
};

int virtio_vsock_init(struct virtio_vsock *v, const char *path, uint64_t guest_cid,
		      const struct guest_mem *mem, struct event_loop *loop, const char **why)
{
	int rc;

	memset(v, 0, sizeof(*v));
	pthread_mutex_init(&v->local_lock, NULL);
	v->listen_fd = v->wake_fd = v->timer_fd = -1;
	v->guest_cid = guest_cid;
	v->config.guest_cid = htole64(guest_cid);
	v->next_port = VSOCK_HOST_PORT_BASE;
	v->max_conns = VSOCK_MAX_CONNS;
	v->response_timeout_ms = VSOCK_RESPONSE_TIMEOUT_MS;
	v->line_timeout_ms = VSOCK_LINE_TIMEOUT_MS;
	v->linger_ms = VSOCK_LINGER_MS;
	/* CIDs 0-2 are reserved and -1 means "any" (virtio 1.2, 5.10.4). */
	if (guest_cid <= VSOCK_HOST_CID || guest_cid >= 0xffffffffULL) {
		*why = "guest CID must be between 3 and 2^32 - 2";
		return -EINVAL;
	}
	/* EVENT_IDX: the queue does the index math; the device only asks
	 * vq_should_interrupt after its pushes. No SEQPACKET. */
	rc = virtio_mmio_init(&v->mmio, &vsock_ops, v, 1ULL << VIRTIO_RING_F_EVENT_IDX, mem, "vsock");
	if (rc) {
		*why = "cannot create the transport's eventfds";
		goto err_mmio;
	}
	v->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	v->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (v->wake_fd < 0 || v->timer_fd < 0) {
		rc = -errno;
		*why = "cannot create the wake eventfd or the timer";
		goto err_mmio;
	}
	v->loop = loop;
	if (path) {
		rc = vsock_host_listen(v, path, why);
		if (rc)
			goto err_mmio;
		*why = "cannot watch the socket in the I/O thread's loop";
		rc = event_loop_add(loop, v->listen_fd, EPOLLIN, vsock_listen_event, v);
		if (rc)
			goto err_mmio;
	}
	*why = "cannot watch the wake eventfd or the timer in the I/O thread's loop";
	rc = event_loop_add(loop, v->wake_fd, EPOLLIN, vsock_wake_event, v);
	if (rc)
		goto err_listen_watch;
	rc = event_loop_add(loop, v->timer_fd, EPOLLIN, vsock_timer_event, v);
	if (rc)
		goto err_wake_watch;
	*why = "";
	return 0;

err_wake_watch:
	(void)event_loop_del(loop, v->wake_fd);
err_listen_watch:
	if (v->listen_fd >= 0)
		(void)event_loop_del(loop, v->listen_fd);
err_mmio:
	virtio_vsock_destroy(v);
	return rc;
}

void virtio_vsock_serve_port(struct virtio_vsock *v, uint32_t port, int (*accept)(void *opaque),
			     void *opaque)
{
	v->net_port = port;
	v->net_opaque = opaque;
	v->net_accept = accept;
}

void virtio_vsock_log_stats(const struct virtio_vsock *v)
{
	log_info("virtio-vsock %s: %llu host and %llu guest connections, %llu refused, "
		 "%llu KiB to the guest, %llu KiB to the host, %llu packets dropped, %llu RSTs, "
		 "%llu kicks, %llu interrupts", v->path[0] ? v->path : "(no socket file)",
		 (unsigned long long)v->conns_host, (unsigned long long)v->conns_guest,
		 (unsigned long long)v->conns_refused, (unsigned long long)v->bytes_to_guest / 1024,
		 (unsigned long long)v->bytes_to_host / 1024, (unsigned long long)v->pkts_dropped,
		 (unsigned long long)v->rsts_sent, (unsigned long long)v->mmio.kicks,
		 (unsigned long long)v->mmio.interrupts);
}

void virtio_vsock_destroy(struct virtio_vsock *v)
{
	v->loop = NULL;   /* may be destroyed already: sockets just close */
	vsock_conn_close_all(v);
	vsock_host_unlisten(v);
	vsock_host_drop_local(v);
	if (v->wake_fd >= 0)
		close(v->wake_fd);
	if (v->timer_fd >= 0)
		close(v->timer_fd);
	v->wake_fd = v->timer_fd = -1;
	virtio_mmio_destroy(&v->mmio);
}
