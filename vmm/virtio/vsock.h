/* vsock.h - the virtio-vsock device in user space, bridged to Unix sockets on the host ("hybrid vsock"). */
#ifndef MAYFLY_VIRTIO_VSOCK_H
#define MAYFLY_VIRTIO_VSOCK_H

#include <linux/virtio_vsock.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/un.h>

#include "lib/event.h"
#include "lib/log.h"
#include "virtio/mmio.h"
#include "virtio/queue.h"

#define VSOCK_QUEUE_SIZE      256
#define VSOCK_QUEUE_RX        0
#define VSOCK_QUEUE_TX        1
#define VSOCK_QUEUE_EVENT     2
#define VSOCK_HOST_CID        2            /* VMADDR_CID_HOST */
#define VSOCK_GUEST_CID       3            /* the only CID mayfly gives a guest, for now */
#define VSOCK_HDR_LEN         44           /* sizeof(struct virtio_vsock_hdr) */

/* Limits, per VM and per connection. */
#define VSOCK_MAX_CONNS       256          /* host- and guest-initiated together */
#define VSOCK_CONN_BUF        (256 * 1024) /* guest-to-host bytes held for a slow host socket */
#define VSOCK_MAX_PAYLOAD     (64 * 1024)  /* one packet's payload, either way */
#define VSOCK_LINE_MAX        64           /* "CONNECT <port>\n" from a host client */
#define VSOCK_LOCAL_BACKLOG   16           /* local connections not yet taken by the I/O thread */
#define VSOCK_HOST_PORT_BASE  (1u << 30)   /* local ports of host-initiated connections */
#define VSOCK_RST_RING        32           /* RSTs for packets on no connection, not yet sent;
                                              full, tx waits: never dropped */
#define VSOCK_HASH_BUCKETS    256

/* Timeouts in milliseconds (fields of struct virtio_vsock, so tests can
 * shorten them). */
#define VSOCK_RESPONSE_TIMEOUT_MS 2000     /* guest answers a host CONNECT */
#define VSOCK_LINE_TIMEOUT_MS     10000    /* host client sends its CONNECT line */
#define VSOCK_LINGER_MS           10000    /* a finished connection's last bytes reach the host */

struct vsock_conn;

/* The device. Who touches what:
 *  - vCPU threads only go through the transport: registers, config reads
 *    (guest_cid) and the driver's reset, all under mmio.lock. Reset only
 *    flags reset_pending and wakes the I/O thread; it closes nothing.
 *  - Everything else (connections, sockets, the rx/tx queues) belongs to
 *    the I/O thread, which holds mmio.lock whenever it touches it: queue
 *    kicks come in under the lock, and every socket, timer and wake
 *    callback takes it.
 *  - virtio_vsock_connect_local may run on any thread: it only queues the
 *    new socket under local_lock and wakes the I/O thread, which takes it
 *    (lock order: mmio.lock, then local_lock).
 *  - virtio_vsock_destroy runs after the I/O thread has stopped. */
struct virtio_vsock {
	struct virtio_mmio mmio;      /* the transport; its opaque is this struct */
	struct event_loop *loop;      /* the I/O thread's loop: sockets come and go there */
	struct virtio_vsock_config config;
	uint64_t guest_cid;

	/* The host side: the listening Unix socket, removed again at exit;
	 * path "" and listen_fd -1 without one. */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int listen_fd;
	bool listen_paused;           /* not watched: at the connection cap, or out of fds */
	unsigned held;                /* mmio.lock: virtio_vsock_hold count; clients wait in the backlog */
	dev_t sock_dev;               /* the socket file we bound: unlink only that one */
	ino_t sock_ino;
	int wake_fd;                  /* eventfd: reset_pending was set */
	int timer_fd;                 /* timerfd: the earliest connection deadline */
	uint64_t timer_at;            /* CLOCK_MONOTONIC ns it is armed for, 0: disarmed */
	bool reset_pending;           /* the driver reset the device: close everything */

	/* Local connections waiting for the I/O thread, like clients in the
	 * listener's backlog: the device's ends of their socketpairs. */
	pthread_mutex_t local_lock;
	int local_fds[VSOCK_LOCAL_BACKLOG];
	unsigned local_head, local_len;   /* local_lock */
	bool local_waiting;           /* I/O thread: some wait for a slot under the cap */

	/* Connections (I/O thread, lock held). */
	struct vsock_conn *buckets[VSOCK_HASH_BUCKETS];   /* by (local port, guest port) */
	struct vsock_conn *conns;     /* every connection, CONNECT line readers too */
	struct vsock_conn *rx_head, *rx_tail;   /* connections with a packet for the guest */
	unsigned nr_conns;
	uint32_t next_port;           /* next local port for a host-initiated connection */
	struct { uint32_t src, dst; } rsts[VSOCK_RST_RING];   /* RSTs owed for unknown connections */
	unsigned rst_head, rst_len;
	bool tx_paused;               /* tx waits for room in rsts: the rx pump resumes it */

	/* Queue scratch (I/O thread, lock held). An rx chain popped but not yet
	 * filled is kept for the next packet (a snapshot gives it back:
	 * vq_unpop). */
	bool rx_held;
	struct vq_chain rx_chain, tx_chain, event_chain;
	/* Restored from a snapshot: the guest is owed a TRANSPORT_RESET event,
	 * sent once the event queue has a buffer (I/O thread, lock held). */
	bool reset_event_owed;
	/* Delivered, and the driver has not yet refilled the event queue: its
	 * handling (resetting every connected socket) may still be running,
	 * so host connections wait, or it could reset them too. */
	bool reset_unacked;
	uint16_t reset_mark;          /* the event queue's avail.idx at delivery */

	/* Guest connections to host port net_port go to net_accept (I/O
	 * thread, lock held), which returns the socket to relay them to, or
	 * -errno (the guest gets a reset): the network proxy (net/proxy.h).
	 * NULL: that port is like any other. Set before the I/O thread runs. */
	uint32_t net_port;
	int (*net_accept)(void *opaque);
	void *net_opaque;

	/* Tunables, set by init; tests shorten them. */
	unsigned max_conns;
	unsigned response_timeout_ms, line_timeout_ms, linger_ms;

	/* A limit per kind of line the guest (or a host client) can cause,
	 * for the device's life: a reset does not clear them. */
	struct log_limit lim_pkt[8];  /* by enum vsock_verdict */
	struct log_limit lim_credit, lim_state, lim_guest_refused, lim_host_refused;
	struct log_limit lim_cap_guest, lim_cap_host, lim_silent, lim_line, lim_accept;
	struct log_limit lim_timer, lim_wake, lim_rst_ring;

	/* Statistics, for the log at exit. */
	uint64_t conns_host, conns_guest, conns_refused, pkts_dropped, rsts_sent;
	uint64_t bytes_to_guest, bytes_to_host;
};

/* Create the device for guest CID `guest_cid`: bind and listen on the Unix
 * socket `path` (a stale socket file there is replaced; any other file is
 * -EEXIST) and watch it, a wake eventfd and a timer in `loop`, which must
 * not be started yet. `path` NULL: no Unix listener and nothing in the file
 * system; host connections come only from virtio_vsock_connect_local, and a
 * guest connecting to the host (CID 2) gets RST, there being no PATH_<port>.
 * The struct must not move afterwards. 0 or -errno with *why saying what
 * failed; nothing is left behind on failure. */
int virtio_vsock_init(struct virtio_vsock *v, const char *path, uint64_t guest_cid,
		      const struct guest_mem *mem, struct event_loop *loop, const char **why)
	__attribute__((warn_unused_result));

/* Open a host connection without the file system: a socketpair whose one end
 * the device treats like a client accepted on the Unix listener (the caller
 * sends "CONNECT <port>\n" and reads "OK <port>\n", as any hybrid-vsock
 * client does), the other end returned to the caller (SOCK_CLOEXEC,
 * blocking). Callable from any thread, before or while the I/O thread runs;
 * the connection counts against the same cap. fd, or -errno.
 * -EAGAIN: VSOCK_LOCAL_BACKLOG connections already wait for the I/O thread
 * (at the cap they wait for a slot, as the listener's backlog does). */
int virtio_vsock_connect_local(struct virtio_vsock *v);

/* A snapshot of the device is its transport's: virtio_mmio_save and
 * virtio_mmio_restore on &v->mmio, whose payload ends with the device's
 * part (docs/snapshot.md, "Devices"): the guest CID, the next local port
 * and the RSTs owed to the guest. Connections cannot be saved: a save with
 * any open, closing or waiting to be taken is refused (-EBUSY), so the
 * guest agent closes them first (virtio_vsock_quiet tells when they are
 * gone). An rx buffer the device popped and holds is given back to the
 * ring, so the restored device pops it again. A restore checks the guest
 * CID is this device's (-EINVAL), and owes the guest a TRANSPORT_RESET
 * event: virtio_mmio_resume kicks the event queue, and the I/O thread
 * sends it as soon as the driver has an event buffer there (the guest's
 * sockets that were connected then reset, as after a Firecracker restore;
 * listeners stay). The Unix listener is this process's own: clients of
 * the snapshotted VM are not carried over. */

/* Whether the device has no connection left: none open, closing or
 * waiting for the I/O thread. Any thread (takes the device lock). */
bool virtio_vsock_quiet(struct virtio_vsock *v);

/* Stop taking clients from the Unix listener (they wait in its backlog;
 * local connections still come in) if no connection is open, being made
 * or waiting (closing ones do not count: their call ended): before a live
 * snapshot, and while a restored guest's agent is freshened. 0 held, or
 * -EBUSY (a call in flight: nothing changed). Any thread. Holds count:
 * the listener goes on once each is released (virtio_vsock_release). */
int virtio_vsock_hold(struct virtio_vsock *v);
void virtio_vsock_release(struct virtio_vsock *v);

/* Guest connections to host port `port` go to accept(opaque), on the I/O
 * thread: it returns the host end's fd, or -errno to refuse. One such
 * port per device; set before the device runs. */
void virtio_vsock_serve_port(struct virtio_vsock *v, uint32_t port, int (*accept)(void *opaque),
			     void *opaque);

/* Log the connection and byte statistics at info level. */
void virtio_vsock_log_stats(const struct virtio_vsock *v);

/* Once the I/O thread has stopped (or never started): close every
 * connection (local ones not yet taken included) and the listener, and
 * remove the socket file. Does not touch the event loop, which may already
 * be destroyed. */
void virtio_vsock_destroy(struct virtio_vsock *v);

#endif
