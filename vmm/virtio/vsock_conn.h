/* vsock_conn.h - inside virtio-vsock: what the device (vsock.c), its connections (vsock_conn.c) and its host front door (vsock_host.c) share. */
#ifndef MAYFLY_VIRTIO_VSOCK_CONN_H
#define MAYFLY_VIRTIO_VSOCK_CONN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "virtio/vsock.h"

/* A packet header in host byte order (the wire form is little-endian). */
struct vsock_hdr {
	uint64_t src_cid, dst_cid;
	uint32_t src_port, dst_port;
	uint32_t len;
	uint16_t type, op;
	uint32_t flags, buf_alloc, fwd_cnt;
};

/* A validated packet from the guest: its payload is hdr.len bytes in iov,
 * pointing into guest RAM (valid until the tx chain is pushed). */
struct vsock_pkt {
	struct vsock_hdr hdr;
	int iovcnt;
	struct iovec iov[VQ_MAX_SIZE];
};

#define SHUT_BOTH (VIRTIO_VSOCK_SHUTDOWN_RCV | VIRTIO_VSOCK_SHUTDOWN_SEND)

/* A connection's life. Host-initiated: LINE -> CONNECTING -> OPEN;
 * guest-initiated: straight to OPEN (the RESPONSE is owed). Any state ->
 * CLOSING when the host side goes and the guest must hear RST; a guest RST
 * or a refusal frees the connection at once. */
enum conn_state {
	CONN_LINE,          /* host client accepted: reading "CONNECT <port>\n" */
	CONN_CONNECTING,    /* REQUEST owed or sent to the guest; waiting for its RESPONSE */
	CONN_OPEN,          /* relaying both ways */
	CONN_CLOSING,       /* socket closed; RST owed to the guest */
};

/* Control packets owed to the guest: at most one of each, so what a
 * connection can owe is bounded whatever the guest or host do. */
#define PEND_RST      (1u << 0)
#define PEND_REQUEST  (1u << 1)
#define PEND_RESPONSE (1u << 2)
#define PEND_SHUTDOWN (1u << 3)
#define PEND_CREDIT   (1u << 4)

struct vsock_conn {
	struct virtio_vsock *v;
	struct vsock_conn *next, *prev;     /* v->conns */
	struct vsock_conn *hash_next;       /* v->buckets, once the ports are known */
	struct vsock_conn *rx_next;         /* v->rx_head: owes the guest a packet */
	bool hashed, in_rx;
	enum conn_state state;
	bool host_initiated;
	bool line_held;                     /* its CONNECT waits for a restore's reset */
	int fd;                             /* -1 once closed */
	bool watched;                       /* fd is in the event loop ... */
	uint32_t events;                    /* ... for these events */
	uint32_t local_port, peer_port;     /* the host's port, the guest's port */
	uint8_t pending;                    /* PEND_* */
	uint64_t deadline;                  /* CLOCK_MONOTONIC ns; 0: none */

	/* host -> guest: read straight into rx buffers, never buffered here */
	bool readable;                      /* the socket has bytes (or EOF) we have not read */
	bool host_eof;                      /* it returned EOF: SHUTDOWN(SEND) owed or sent */
	bool host_hup;                      /* the host peer is gone both ways */
	uint32_t peer_buf_alloc, peer_fwd_cnt;   /* the guest's window, as it last told us */
	uint32_t tx_cnt;                    /* payload bytes sent to the guest */

	/* guest -> host */
	uint8_t peer_shut;                  /* SHUTDOWN flags the guest sent */
	bool wr_shut;                       /* shutdown(SHUT_WR) done on the socket */
	bool wr_dead;                       /* the socket takes no more bytes: discard */
	uint32_t rx_cnt;                    /* payload bytes the guest sent us */
	uint32_t fwd_cnt;                   /* ... of them written to the socket (or discarded) */
	uint32_t fwd_cnt_sent;              /* fwd_cnt as the guest last heard it */
	uint8_t *buf;                       /* ring of VSOCK_CONN_BUF bytes, only while needed */
	uint32_t buf_head, buf_len;

	char line[VSOCK_LINE_MAX];          /* CONN_LINE: the CONNECT line so far */
	uint32_t line_len;
};

/* What vsock_hdr_check makes of a guest packet. */
enum vsock_verdict {
	VSOCK_PKT_OK = 0,
	VSOCK_PKT_BAD_SRC,     /* src_cid is not the guest's: dropped */
	VSOCK_PKT_BAD_DST,     /* dst_cid is not the host: dropped */
	VSOCK_PKT_BAD_TYPE,    /* not a stream packet: dropped */
	VSOCK_PKT_BAD_OP,      /* unknown op: dropped */
	VSOCK_PKT_TOO_BIG,     /* len above VSOCK_MAX_PAYLOAD: dropped, connection reset */
	VSOCK_PKT_SHORT,       /* len beyond the bytes the chain holds: dropped, reset */
	VSOCK_PKT_NR_VERDICTS,
};

/* ---- vsock.c ---- */

/* Pure: decode / encode the 44-byte little-endian wire header. */
void vsock_hdr_decode(const uint8_t raw[VSOCK_HDR_LEN], struct vsock_hdr *h);
void vsock_hdr_encode(const struct vsock_hdr *h, uint8_t raw[VSOCK_HDR_LEN]);

/* Pure: judge a guest packet's header, `avail` being the payload bytes its
 * chain holds after the header. */
enum vsock_verdict vsock_hdr_check(const struct vsock_hdr *h, uint64_t guest_cid, uint32_t avail);

/* Up to `len` bytes of a chain's segments from byte `off` as iovecs (at
 * most VQ_MAX_SIZE); returns how many. The chain must hold off + len. */
int vsock_chain_iov(const struct vq_chain *c, uint32_t off, uint32_t len, struct iovec *iov);

/* Copy len bytes (at most VSOCK_HDR_LEN) to the start of a chain's
 * segments; the caller checked it has room. */
void vsock_chain_put(const struct vq_chain *c, const void *src, uint32_t len);

/* Write a packet header from the host (CID 2) to the guest into an rx
 * chain; the rx pump checked it has room. */
void vsock_put_hdr(struct virtio_vsock *v, struct vq_chain *c, uint32_t src_port,
		   uint32_t dst_port, uint16_t op, uint32_t flags, uint32_t len,
		   uint32_t buf_alloc, uint32_t fwd_cnt);

/* Owe the guest an RST for a packet on no connection (src/dst as the RST
 * carries them). Bounded: past VSOCK_RST_RING pending, dropped and logged. */
void vsock_queue_rst(struct virtio_vsock *v, uint32_t src_port, uint32_t dst_port);

/* Fill rx buffers with whatever is owed to the guest, until nothing is or
 * the guest has no buffers left; interrupt if the driver wants it. I/O
 * thread, lock held, and the last thing a caller does with connections:
 * it may free any of them. */
void vsock_rx_pump(struct virtio_vsock *v);

/* Wake the I/O thread (its wake callback applies a pending reset and takes
 * waiting local connections). Any thread. */
void vsock_wake_io(struct virtio_vsock *v);

/* The driver reset the device since the I/O thread last looked: close
 * every connection now. Returns true if it did (the caller's connection
 * may be gone). I/O thread, lock held. */
bool vsock_sync(struct virtio_vsock *v);

/* The guest broke the virtqueue protocol: fail the device (NEEDS_RESET)
 * and drop every connection. I/O thread, lock held. */
void vsock_fail(struct virtio_vsock *v, const char *why);

/* ---- vsock_snapshot.c ---- */

/* While a restored guest has not handled its TRANSPORT_RESET: true (and
 * c is parked, unwatched, its CONNECT line left in the socket). */
bool vsock_hold_line(struct vsock_conn *c);

/* The device's ops->save and ops->restore (see virtio_vsock in vsock.h
 * and struct virtio_device_ops). Lock held. */
int vsock_snapshot_save(void *dev, struct snap_out *o, const char **why);
int vsock_snapshot_restore(void *dev, struct snap_in *in, const char **why);

/* Send the TRANSPORT_RESET event a restore owes the guest, if the device
 * is live and the event queue has a buffer. I/O thread, lock held. */
void vsock_event_pump(struct virtio_vsock *v);

/* ---- vsock_host.c ---- */

/* Pure: the port of a host client's CONNECT line (len bytes, without its
 * newline), as Firecracker would read it. 0, or -EINVAL for anything else. */
int vsock_host_parse_connect(const char *line, size_t len, uint32_t *port);

/* Bind and listen on `path`, replacing a stale socket file. 0 or -errno
 * with *why. Before the loop runs. */
int vsock_host_listen(struct virtio_vsock *v, const char *path, const char **why);

/* Close the listener and remove the socket file if it is still ours. */
void vsock_host_unlisten(struct virtio_vsock *v);

/* Take the local connections waiting in v->local_fds, as many as the cap
 * allows, as the listener takes its clients. I/O thread, lock held. */
void vsock_host_take_local(struct virtio_vsock *v);

/* A connection slot freed: wake the I/O thread if local connections wait
 * for one. Lock held. */
void vsock_host_slot_freed(struct virtio_vsock *v);

/* Close the local connections still waiting (destroy), and local_lock. */
void vsock_host_drop_local(struct virtio_vsock *v);

/* event_fns (opaque: the device): a host client is waiting in the
 * listener's backlog; the connection timer fired. They take the lock. */
void vsock_listen_event(void *opaque, uint32_t events);
void vsock_timer_event(void *opaque, uint32_t events);

/* A LINE connection's socket is readable: take the CONNECT line, or what
 * there is of it so far. May free c. Lock held. */
void vsock_host_read_line(struct vsock_conn *c);

/* c must be handled within `ms`: the timer is armed for it if it is the
 * earliest. Lock held. */
void vsock_conn_set_deadline(struct vsock_conn *c, unsigned ms);

/* ---- vsock_conn.c (I/O thread, lock held, unless said otherwise) ---- */

/* A new connection on socket fd (owned from now on), counted against the
 * cap; NULL when out of memory. */
struct vsock_conn *vsock_conn_new(struct virtio_vsock *v, int fd, enum conn_state state);

/* Close and forget c at once, without a word to the guest. */
void vsock_conn_free(struct vsock_conn *c);

/* End c: close its socket and owe the guest an RST (c stays CLOSING until
 * it is sent), or free it if the guest never heard of it. */
void vsock_conn_reset(struct vsock_conn *c);

/* c's ports are set: find it by them from now on. */
void vsock_conn_hash(struct vsock_conn *c);

/* Watch c's socket for what its state needs. 0 or -errno. */
int vsock_conn_watch(struct vsock_conn *c);

/* Queue c for the rx pump if it owes the guest anything. */
void vsock_conn_mark(struct vsock_conn *c);

/* A validated guest packet (verdict VSOCK_PKT_OK). */
void vsock_conn_packet(struct virtio_vsock *v, const struct vsock_pkt *pkt);

/* A guest packet that failed with a resetting verdict: reset its
 * connection, or owe an RST if there is none. */
void vsock_conn_reject(struct virtio_vsock *v, const struct vsock_hdr *h);

/* Whether some connection owes the guest a packet. */
bool vsock_conn_rx_work(const struct virtio_vsock *v);

/* Write the next owed connection packet into an rx chain. Returns the bytes
 * written (header + payload), 0 when that connection had nothing after all
 * (the chain stays unused). Every call makes progress: it writes, or takes
 * a connection off the rx list. */
uint32_t vsock_conn_fill(struct virtio_vsock *v, struct vq_chain *c);

/* Close every connection without telling the guest (driver reset, device
 * failure, destroy). With v->loop NULL, sockets are closed without
 * leaving the loop (it is gone). */
void vsock_conn_close_all(struct virtio_vsock *v);

#endif
