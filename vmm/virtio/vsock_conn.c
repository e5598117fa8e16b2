/* vsock_conn.c - virtio-vsock connections: their table, state, credit, relaying both ways, and how they end. */
#include "virtio/vsock_conn.h"
#include "lib/clock.h"
#include "lib/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static unsigned bucket(uint32_t local, uint32_t peer)
{
	return ((local * 2654435761u) ^ peer) % VSOCK_HASH_BUCKETS;
}

static struct vsock_conn *conn_find(struct virtio_vsock *v, uint32_t local, uint32_t peer)
{
	for (struct vsock_conn *c = v->buckets[bucket(local, peer)]; c; c = c->hash_next)
		if (c->local_port == local && c->peer_port == peer)
			return c;
	return NULL;
}

void vsock_conn_hash(struct vsock_conn *c)
{
	struct vsock_conn **b = &c->v->buckets[bucket(c->local_port, c->peer_port)];

	c->hash_next = *b;
	*b = c;
	c->hashed = true;
}

/* ---- the event loop ---- */

static void conn_event(void *opaque, uint32_t events);

static void conn_unwatch(struct vsock_conn *c)
{
	if (c->watched && c->v->loop && event_loop_del(c->v->loop, c->fd))
		log_debug("virtio-vsock: connection socket was not in the loop");
	c->watched = false;
}

/* What the socket should be watched for now. EPOLLIN is off while we know
 * it is readable (until a read says EAGAIN), so a socket we cannot drain
 * (no credit, no rx buffers) does not spin the loop. */
static uint32_t conn_wanted_events(const struct vsock_conn *c)
{
	uint32_t ev = 0;

	switch (c->state) {
	case CONN_LINE:
		return c->line_held ? 0 : EPOLLIN | EPOLLRDHUP;
	case CONN_CONNECTING:
		return 0;   /* only HUP/ERR: the client's data waits for the guest */
	case CONN_OPEN:
		if (!c->readable && !c->host_eof && !(c->peer_shut & VIRTIO_VSOCK_SHUTDOWN_RCV))
			ev |= EPOLLIN | EPOLLRDHUP;
		if (c->buf_len)
			ev |= EPOLLOUT;
		return ev;
	case CONN_CLOSING:
		break;
	}
	return 0;
}

/* 0, or -errno when the loop would not take the socket. */
int vsock_conn_watch(struct vsock_conn *c)
{
	uint32_t ev = conn_wanted_events(c);
	int rc = 0;

	/* A hung-up socket reports EPOLLHUP forever, whatever it is watched
	 * for: it stays out of the loop and is drained by the rx pump. */
	if (c->fd < 0 || c->host_hup || !c->v->loop)
		return 0;
	if (!c->watched) {
		rc = event_loop_add(c->v->loop, c->fd, ev, conn_event, c);
		c->watched = !rc;
	} else if (ev != c->events) {
		rc = event_loop_mod(c->v->loop, c->fd, ev);
	}
	if (!rc)
		c->events = ev;
	return rc;
}

/* ---- lifetime ---- */

struct vsock_conn *vsock_conn_new(struct virtio_vsock *v, int fd, enum conn_state state)
{
	struct vsock_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->v = v;
	c->fd = fd;
	c->state = state;
	c->next = v->conns;
	if (v->conns)
		v->conns->prev = c;
	v->conns = c;
	v->nr_conns++;
	return c;
}

static void conn_close_fd(struct vsock_conn *c)
{
	conn_unwatch(c);
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->buf);
	c->buf = NULL;
	c->buf_len = c->buf_head = 0;
}

void vsock_conn_free(struct vsock_conn *c)
{
	struct virtio_vsock *v = c->v;

	conn_close_fd(c);
	if (c->hashed) {
		struct vsock_conn **p = &v->buckets[bucket(c->local_port, c->peer_port)];

		while (*p != c)
			p = &(*p)->hash_next;
		*p = c->hash_next;
	}
	if (c->in_rx) {
		struct vsock_conn **p = &v->rx_head, *prev = NULL;

		while (*p != c) {
			prev = *p;
			p = &(*p)->rx_next;
		}
		*p = c->rx_next;
		if (v->rx_tail == c)
			v->rx_tail = prev;
	}
	if (c->prev)
		c->prev->next = c->next;
	else
		v->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	v->nr_conns--;
	free(c);
	/* A slot is free again: a listener paused by the cap or by EMFILE may
	 * go on, and so may local connections. */
	if (v->listen_paused && !v->held && v->loop &&
	    !event_loop_mod(v->loop, v->listen_fd, EPOLLIN))
		v->listen_paused = false;
	vsock_host_slot_freed(v);
}

void vsock_conn_close_all(struct virtio_vsock *v)
{
	while (v->conns)
		vsock_conn_free(v->conns);
	v->rx_head = v->rx_tail = NULL;
}

/* ---- credit ---- */

/* Payload bytes the guest can take now: its buf_alloc less what we sent
 * that it has not yet consumed. A guest claiming to have consumed more than
 * we sent gets nothing. */
static uint32_t conn_credit(const struct vsock_conn *c)
{
	uint32_t in_flight = c->tx_cnt - c->peer_fwd_cnt;

	return in_flight >= c->peer_buf_alloc ? 0 : c->peer_buf_alloc - in_flight;
}

/* The guest sees our free space as buf_alloc less what it sent since the
 * fwd_cnt we last told it. When that runs low and we have freed space
 * since, tell it before it stalls. */
static void conn_check_credit(struct vsock_conn *c)
{
	uint32_t seen_free = VSOCK_CONN_BUF - (c->rx_cnt - c->fwd_cnt_sent);

	if (c->fwd_cnt != c->fwd_cnt_sent && seen_free < VSOCK_MAX_PAYLOAD)
		c->pending |= PEND_CREDIT;
}

/* ---- the rx list: connections that owe the guest a packet ---- */

static bool conn_can_send_data(const struct vsock_conn *c)
{
	return c->state == CONN_OPEN && c->readable && !c->host_eof &&
	       !(c->peer_shut & VIRTIO_VSOCK_SHUTDOWN_RCV) && conn_credit(c) > 0;
}

static bool conn_has_work(const struct vsock_conn *c)
{
	return c->pending || conn_can_send_data(c);
}

void vsock_conn_mark(struct vsock_conn *c)
{
	struct virtio_vsock *v = c->v;

	if (c->in_rx || !conn_has_work(c))
		return;
	c->in_rx = true;
	c->rx_next = NULL;
	if (v->rx_tail)
		v->rx_tail->rx_next = c;
	else
		v->rx_head = c;
	v->rx_tail = c;
}

bool vsock_conn_rx_work(const struct virtio_vsock *v)
{
	return v->rx_head != NULL;
}

/* ---- closing ---- */

/* Whether the guest has heard of the connection (so must hear of its end). */
static bool guest_knows(const struct vsock_conn *c)
{
	return c->state == CONN_OPEN ||
	       (c->state == CONN_CONNECTING && !(c->pending & PEND_REQUEST));
}

/* End the connection on the host side and owe the guest an RST. The
 * connection stays (CLOSING, counted against the cap, but without its
 * socket) until the RST is delivered, however long the guest takes to give
 * an rx buffer: a guest that never heard it would keep the connection
 * open. What that costs is bounded by the cap; a driver reset ends it. */
void vsock_conn_reset(struct vsock_conn *c)
{
	if (c->state == CONN_CLOSING)
		return;
	if (!guest_knows(c)) {
		vsock_conn_free(c);
		return;
	}
	conn_close_fd(c);
	c->state = CONN_CLOSING;
	c->pending = PEND_RST;
	c->readable = false;
	c->deadline = 0;
	vsock_conn_mark(c);
}

/* Both directions are finished (the guest shut down both, or sent all it
 * will while the host did too): once the guest's last bytes reached the
 * socket, close with RST. Returns true if the connection was reset. */
static bool conn_maybe_finish(struct vsock_conn *c)
{
	bool done = c->peer_shut == SHUT_BOTH ||
		    ((c->peer_shut & VIRTIO_VSOCK_SHUTDOWN_SEND) && c->host_eof);

	if (!done)
		return false;
	if (c->buf_len && !c->wr_dead) {
		if (!c->deadline)
			vsock_conn_set_deadline(c, c->v->linger_ms);
		return false;
	}
	vsock_conn_reset(c);
	return true;
}

/* ---- guest -> host ---- */

/* Bytes of iov past `skip` into the ring (the credit check made room). */
static int buf_append(struct vsock_conn *c, const struct iovec *iov, int iovcnt, size_t skip)
{
	if (!c->buf) {
		c->buf = malloc(VSOCK_CONN_BUF);
		if (!c->buf)
			return -ENOMEM;
		c->buf_head = 0;
	}
	for (int i = 0; i < iovcnt; i++) {
		const uint8_t *p = iov[i].iov_base;
		size_t n = iov[i].iov_len;

		if (skip >= n) {
			skip -= n;
			continue;
		}
		p += skip;
		n -= skip;
		skip = 0;
		while (n) {
			uint32_t tail = (c->buf_head + c->buf_len) % VSOCK_CONN_BUF;
			size_t k = VSOCK_CONN_BUF - tail < n ? VSOCK_CONN_BUF - tail : n;

			memcpy(c->buf + tail, p, k);
			c->buf_len += (uint32_t)k;
			p += k;
			n -= k;
		}
	}
	return 0;
}

/* The guest's bytes that the socket could not take yet. Returns true if
 * the connection was reset. */
static bool conn_flush(struct vsock_conn *c)
{
	struct virtio_vsock *v = c->v;

	while (c->buf_len) {
		uint32_t first = VSOCK_CONN_BUF - c->buf_head;
		struct iovec iov[2] = {
			{ c->buf + c->buf_head, first < c->buf_len ? first : c->buf_len },
			{ c->buf, first < c->buf_len ? c->buf_len - first : 0 },
		};
		struct msghdr msg = { .msg_iov = iov, .msg_iovlen = iov[1].iov_len ? 2 : 1 };
		ssize_t n = sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		if (n <= 0) {
			vsock_conn_reset(c);   /* the host side is gone: the guest hears RST */
			return true;
		}
		c->buf_head = (c->buf_head + (uint32_t)n) % VSOCK_CONN_BUF;
		c->buf_len -= (uint32_t)n;
		c->fwd_cnt += (uint32_t)n;
		v->bytes_to_host += (uint64_t)n;
	}
	if (!c->buf_len && c->buf) {
		free(c->buf);   /* an idle connection holds no buffer */
		c->buf = NULL;
	}
	if (!c->buf_len && (c->peer_shut & VIRTIO_VSOCK_SHUTDOWN_SEND) && !c->wr_shut) {
		shutdown(c->fd, SHUT_WR);
		c->wr_shut = true;
	}
	conn_check_credit(c);
	if (conn_maybe_finish(c))
		return true;
	if (vsock_conn_watch(c)) {
		vsock_conn_reset(c);
		return true;
	}
	return false;
}

static void conn_from_guest(struct vsock_conn *c, const struct vsock_pkt *pkt)
{
	struct virtio_vsock *v = c->v;
	uint32_t len = pkt->hdr.len;
	ssize_t sent = 0;

	if (!len)
		return;
	if (c->peer_shut & VIRTIO_VSOCK_SHUTDOWN_SEND) {
		vsock_conn_reset(c);   /* data after its own SHUTDOWN(SEND): a confused guest */
		return;
	}
	if (len > VSOCK_CONN_BUF - (c->rx_cnt - c->fwd_cnt)) {
		log_limited(&v->lim_credit, LOG_WARN, "virtio-vsock %s: guest sent beyond the "
			    "credit it was given: connection reset", v->mmio.name);
		vsock_conn_reset(c);
		return;
	}
	c->rx_cnt += len;
	if (c->wr_dead || c->wr_shut) {
		c->fwd_cnt += len;   /* nobody to take them: discarded, but credited */
		return;
	}
	if (!c->buf_len) {
		struct msghdr msg = { .msg_iov = (struct iovec *)pkt->iov,
				      .msg_iovlen = (size_t)pkt->iovcnt };

		sent = sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (sent < 0 && errno != EAGAIN && errno != EINTR) {
			vsock_conn_reset(c);
			return;
		}
		if (sent < 0)
			sent = 0;
		c->fwd_cnt += (uint32_t)sent;
		v->bytes_to_host += (uint64_t)sent;
	}
	if ((uint32_t)sent < len && buf_append(c, pkt->iov, pkt->iovcnt, (size_t)sent)) {
		vsock_conn_reset(c);
		return;
	}
	conn_check_credit(c);
	if (vsock_conn_watch(c))
		vsock_conn_reset(c);
}

static void conn_guest_shutdown(struct vsock_conn *c, uint32_t flags)
{
	c->peer_shut |= (uint8_t)(flags & SHUT_BOTH);
	if ((c->peer_shut & VIRTIO_VSOCK_SHUTDOWN_SEND) && !c->buf_len && !c->wr_shut &&
	    !c->wr_dead) {
		shutdown(c->fd, SHUT_WR);   /* the host client reads EOF */
		c->wr_shut = true;
	}
	if (conn_maybe_finish(c))
		return;
	if (vsock_conn_watch(c))
		vsock_conn_reset(c);
}

/* ---- host -> guest ---- */

/* The socket hung up both ways: writes are pointless, and what is left to
 * read is drained by the rx pump (then RST), outside the loop. */
static void conn_hup(struct vsock_conn *c)
{
	c->host_hup = true;
	c->wr_dead = true;
	conn_unwatch(c);
	c->fwd_cnt += c->buf_len;
	c->buf_len = 0;
	free(c->buf);
	c->buf = NULL;
	if (c->host_eof || (c->peer_shut & VIRTIO_VSOCK_SHUTDOWN_RCV)) {
		vsock_conn_reset(c);
		return;
	}
	c->readable = true;
}

/* EOF from the host socket: the host sends no more. Returns true if the
 * connection was reset. */
static bool conn_host_eof(struct vsock_conn *c)
{
	c->host_eof = true;
	c->readable = false;
	if (c->host_hup) {
		vsock_conn_reset(c);
		return true;
	}
	if (conn_maybe_finish(c))
		return true;
	c->pending |= PEND_SHUTDOWN;
	if (vsock_conn_watch(c)) {
		vsock_conn_reset(c);
		return true;
	}
	return false;
}

/* Read host bytes straight into the rx chain after the header. */
static uint32_t conn_read_data(struct vsock_conn *c, struct vq_chain *chain)
{
	struct virtio_vsock *v = c->v;
	uint32_t room = chain->writable_len - VSOCK_HDR_LEN;
	uint32_t max = conn_credit(c);
	struct iovec iov[VQ_MAX_SIZE];
	ssize_t n;
	int cnt;

	if (max > room)
		max = room;
	if (max > VSOCK_MAX_PAYLOAD)
		max = VSOCK_MAX_PAYLOAD;
	cnt = vsock_chain_iov(chain, VSOCK_HDR_LEN, max, iov);
	n = readv(c->fd, iov, cnt);
	if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		c->readable = false;
		if (c->host_hup || vsock_conn_watch(c))
			vsock_conn_reset(c);   /* a hung-up socket cannot block: it is empty */
		return 0;
	}
	if (n < 0) {
		vsock_conn_reset(c);
		return 0;
	}
	if (n == 0) {
		conn_host_eof(c);
		return 0;
	}
	c->tx_cnt += (uint32_t)n;
	v->bytes_to_guest += (uint64_t)n;
	return (uint32_t)n;
}

/* One packet from connection c into the chain; *freed when c is gone. */
static uint32_t conn_packet(struct vsock_conn *c, struct vq_chain *chain, bool *freed)
{
	struct virtio_vsock *v = c->v;
	uint16_t op;
	uint32_t flags = 0, len = 0;

	if (c->pending & PEND_RST) {
		vsock_put_hdr(v, chain, c->local_port, c->peer_port, VIRTIO_VSOCK_OP_RST, 0, 0, 0, 0);
		v->rsts_sent++;
		vsock_conn_free(c);
		*freed = true;
		return VSOCK_HDR_LEN;
	}
	if (c->pending & PEND_REQUEST) {
		op = VIRTIO_VSOCK_OP_REQUEST;
		c->pending &= (uint8_t)~PEND_REQUEST;
	} else if (c->pending & PEND_RESPONSE) {
		op = VIRTIO_VSOCK_OP_RESPONSE;
		c->pending &= (uint8_t)~PEND_RESPONSE;
	} else if (conn_can_send_data(c) && (len = conn_read_data(c, chain)) > 0) {
		op = VIRTIO_VSOCK_OP_RW;
	} else if (c->state == CONN_CLOSING) {
		return 0;   /* conn_read_data reset it: the RST goes on its next turn */
	} else if (c->pending & PEND_SHUTDOWN) {
		/* After the last data, which was read before the EOF that set this. */
		op = VIRTIO_VSOCK_OP_SHUTDOWN;
		flags = VIRTIO_VSOCK_SHUTDOWN_SEND;
		c->pending &= (uint8_t)~PEND_SHUTDOWN;
	} else if (c->pending & PEND_CREDIT) {
		op = VIRTIO_VSOCK_OP_CREDIT_UPDATE;
	} else {
		return 0;
	}
	/* Every header carries our credit, so any packet is a credit update. */
	vsock_put_hdr(v, chain, c->local_port, c->peer_port, op, flags, len, VSOCK_CONN_BUF,
		      c->fwd_cnt);
	c->fwd_cnt_sent = c->fwd_cnt;
	c->pending &= (uint8_t)~PEND_CREDIT;
	return VSOCK_HDR_LEN + len;
}

uint32_t vsock_conn_fill(struct virtio_vsock *v, struct vq_chain *chain)
{
	struct vsock_conn *c = v->rx_head;
	bool freed = false;
	uint32_t written;

	if (!c)
		return 0;
	v->rx_head = c->rx_next;
	if (!v->rx_head)
		v->rx_tail = NULL;
	c->in_rx = false;
	written = conn_packet(c, chain, &freed);
	if (!freed)
		vsock_conn_mark(c);   /* round robin: back of the line if it owes more */
	return written;
}

/* The guest accepted a host-initiated connection: tell the client. */
static void conn_accepted(struct vsock_conn *c)
{
	char ok[32];
	int len = snprintf(ok, sizeof(ok), "OK %u\n", c->local_port);

	/* Nothing was written to this socket before: its buffer takes 14 bytes. */
	if (send(c->fd, ok, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT) != len) {
		vsock_conn_reset(c);
		return;
	}
	c->state = CONN_OPEN;
	c->deadline = 0;
	if (vsock_conn_watch(c))
		vsock_conn_reset(c);
}

/* ---- guest packets ---- */

/* A guest REQUEST to host port P: connect to PATH_P, or RST. */
static void guest_connect(struct virtio_vsock *v, const struct vsock_hdr *h)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct vsock_conn *c;
	int fd = -1;

	if (v->nr_conns >= v->max_conns) {
		log_limited(&v->lim_cap_guest, LOG_WARN, "virtio-vsock %s: %u connections open: "
			    "the guest's connection to port %u refused", v->mmio.name, v->max_conns,
			    h->dst_port);
		goto refuse;
	}
	if (v->net_accept && h->dst_port == v->net_port) {
		fd = v->net_accept(v->net_opaque);
		if (fd < 0) {
			fd = -1;
			goto refuse;
		}
		goto connected;
	}
	/* Without a socket file (local connections only) there is no PATH_P. */
	if (!v->path[0] ||
	    (size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s_%u", v->path, h->dst_port) >=
		    sizeof(sa.sun_path))
		goto refuse;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	/* A Unix connect completes at once or fails (EAGAIN: backlog full). */
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		log_limited(&v->lim_guest_refused, LOG_DEBUG, "virtio-vsock %s: guest connect to "
			    "host port %u: %s: %s", v->mmio.name, h->dst_port, sa.sun_path,
			    strerror(errno));
		goto refuse;
	}
connected:
	c = vsock_conn_new(v, fd, CONN_OPEN);
	if (!c)
		goto refuse;
	c->local_port = h->dst_port;
	c->peer_port = h->src_port;
	c->peer_buf_alloc = h->buf_alloc;
	c->peer_fwd_cnt = h->fwd_cnt;
	vsock_conn_hash(c);
	c->pending = PEND_RESPONSE;
	if (vsock_conn_watch(c)) {
		vsock_conn_free(c);
		fd = -1;
		goto refuse;
	}
	v->conns_guest++;
	vsock_conn_mark(c);
	return;

refuse:
	if (fd >= 0)
		close(fd);
	v->conns_refused++;
	vsock_queue_rst(v, h->dst_port, h->src_port);
}

void vsock_conn_reject(struct virtio_vsock *v, const struct vsock_hdr *h)
{
	struct vsock_conn *c = conn_find(v, h->dst_port, h->src_port);

	if (c)
		vsock_conn_reset(c);
	else if (h->op != VIRTIO_VSOCK_OP_RST)
		vsock_queue_rst(v, h->dst_port, h->src_port);
}

static void warn_state(struct virtio_vsock *v, const struct vsock_hdr *h)
{
	log_limited(&v->lim_state, LOG_WARN, "virtio-vsock %s: guest sent op %u in the wrong "
		    "connection state: reset", v->mmio.name, h->op);
}

void vsock_conn_packet(struct virtio_vsock *v, const struct vsock_pkt *pkt)
{
	const struct vsock_hdr *h = &pkt->hdr;
	struct vsock_conn *c = conn_find(v, h->dst_port, h->src_port);

	if (c && c->state == CONN_CLOSING) {
		/* Our RST is on its way; an RST back ends it, a REQUEST means
		 * the guest forgot it and starts over. */
		if (h->op == VIRTIO_VSOCK_OP_RST || h->op == VIRTIO_VSOCK_OP_REQUEST)
			vsock_conn_free(c);
		if (h->op == VIRTIO_VSOCK_OP_REQUEST)
			guest_connect(v, h);
		return;
	}
	if (!c) {
		if (h->op == VIRTIO_VSOCK_OP_REQUEST)
			guest_connect(v, h);
		else if (h->op != VIRTIO_VSOCK_OP_RST)   /* never answer an RST */
			vsock_queue_rst(v, h->dst_port, h->src_port);
		return;
	}
	c->peer_buf_alloc = h->buf_alloc;
	c->peer_fwd_cnt = h->fwd_cnt;
	switch (h->op) {
	case VIRTIO_VSOCK_OP_RST:
		if (c->state == CONN_CONNECTING)
			log_limited(&v->lim_host_refused, LOG_DEBUG, "virtio-vsock %s: guest "
				    "refused port %u", v->mmio.name, c->peer_port);
		vsock_conn_free(c);   /* the host client sees its socket close */
		return;
	case VIRTIO_VSOCK_OP_RESPONSE:
		if (c->state != CONN_CONNECTING || (c->pending & PEND_REQUEST)) {
			warn_state(v, h);
			vsock_conn_reset(c);
			return;
		}
		conn_accepted(c);
		break;
	case VIRTIO_VSOCK_OP_REQUEST:
		warn_state(v, h);
		vsock_conn_reset(c);
		return;
	case VIRTIO_VSOCK_OP_RW:
	case VIRTIO_VSOCK_OP_SHUTDOWN:
		if (c->state != CONN_OPEN) {
			warn_state(v, h);
			vsock_conn_reset(c);
			return;
		}
		if (h->op == VIRTIO_VSOCK_OP_RW)
			conn_from_guest(c, pkt);
		else
			conn_guest_shutdown(c, h->flags);
		break;
	case VIRTIO_VSOCK_OP_CREDIT_REQUEST:
		c->pending |= PEND_CREDIT;
		break;
	case VIRTIO_VSOCK_OP_CREDIT_UPDATE:
		break;   /* the window was taken above */
	}
	/* c may have been reset above, but not freed: CLOSING owes an RST. */
	vsock_conn_mark(c);
}

/* ---- socket events ---- */

static void conn_handle(struct vsock_conn *c, uint32_t events)
{
	if (events & EPOLLERR) {
		vsock_conn_reset(c);
		return;
	}
	switch (c->state) {
	case CONN_LINE:
		if (c->line_held && (events & EPOLLHUP))
			vsock_conn_free(c);   /* the client left while it waited */
		else
			vsock_host_read_line(c);
		return;
	case CONN_CONNECTING:
		if (events & EPOLLHUP)
			vsock_conn_reset(c);   /* the client gave up waiting */
		return;
	case CONN_OPEN:
		if (events & EPOLLHUP) {
			conn_hup(c);
			break;
		}
		if ((events & EPOLLOUT) && conn_flush(c))
			return;
		if (events & (EPOLLIN | EPOLLRDHUP)) {
			c->readable = true;
			if (vsock_conn_watch(c)) {
				vsock_conn_reset(c);
				return;
			}
		}
		break;
	case CONN_CLOSING:
		return;
	}
	vsock_conn_mark(c);
}

static void conn_event(void *opaque, uint32_t events)
{
	struct vsock_conn *c = opaque;
	struct virtio_vsock *v = c->v;

	pthread_mutex_lock(&v->mmio.lock);
	if (!vsock_sync(v)) {   /* after a reset, c is gone */
		conn_handle(c, events);
		vsock_rx_pump(v);
	}
	pthread_mutex_unlock(&v->mmio.lock);
}

