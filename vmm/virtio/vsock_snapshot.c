/* vsock_snapshot.c - virtio-vsock across a snapshot: its part of the payload, and the TRANSPORT_RESET a restored guest is owed. */
#include "virtio/vsock_conn.h"
#include "lib/errmsg.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

_Static_assert(sizeof(struct virtio_vsock_event) == 4, "the event is one le32 id");

/* Connections open (or closing) and host connections waiting for the I/O
 * thread. Lock held. */
static unsigned conns_left(struct virtio_vsock *v, unsigned *waiting)
{
	pthread_mutex_lock(&v->local_lock);
	*waiting = v->local_len;
	pthread_mutex_unlock(&v->local_lock);
	return v->nr_conns;
}

bool virtio_vsock_quiet(struct virtio_vsock *v)
{
	unsigned open, waiting;

	pthread_mutex_lock(&v->mmio.lock);
	open = conns_left(v, &waiting);
	pthread_mutex_unlock(&v->mmio.lock);
	return !open && !waiting;
}

int virtio_vsock_hold(struct virtio_vsock *v)
{
	unsigned busy, waiting;

	pthread_mutex_lock(&v->mmio.lock);
	busy = 0;
	for (const struct vsock_conn *c = v->conns; c; c = c->next)
		busy += c->state != CONN_CLOSING;
	conns_left(v, &waiting);
	busy += waiting;
	/* Accepting happens under this lock: once set, no client gets in. */
	if (!busy)
		v->held++;
	pthread_mutex_unlock(&v->mmio.lock);
	return busy ? -EBUSY : 0;
}

void virtio_vsock_release(struct virtio_vsock *v)
{
	pthread_mutex_lock(&v->mmio.lock);
	if (v->held)
		v->held--;
	pthread_mutex_unlock(&v->mmio.lock);
	/* The I/O thread watches the listener again (vsock_wake_event). */
	vsock_wake_io(v);
}

/*
 * A connection is a socket in this process and state on both sides of the
 * guest: nothing a file can carry. So a snapshot holds none, and the guest
 * agent closes them before one is taken.
 *
 * An rx buffer the device popped and holds (it waits for the next packet)
 * is given back instead of saved: vq_unpop moves last_avail_idx back over
 * it, so the saved queue looks as if it was never popped, and the restored
 * device pops it again from guest RAM, with every check. Saving the chain
 * itself would mean saving guest addresses to trust later without them.
 */
int vsock_snapshot_save(void *dev, struct snap_out *o, const char **why)
{
	struct virtio_vsock *v = dev;
	unsigned waiting, open = conns_left(v, &waiting);

	if (open || waiting)
		return errmsg_why(why, -EBUSY, "virtio-vsock %s: %u connections open and %u waiting: "
				"a snapshot holds none (the guest agent closes them first)",
				v->mmio.name, open, waiting);
	if (v->rx_held) {
		vq_unpop(&v->mmio.queues[VSOCK_QUEUE_RX]);
		v->rx_held = false;
	}
	snap_out_u64(o, v->guest_cid);
	snap_out_u32(o, v->next_port);
	snap_out_u32(o, v->rst_len);
	for (unsigned i = 0; i < v->rst_len; i++) {
		unsigned slot = (v->rst_head + i) % VSOCK_RST_RING;

		snap_out_u32(o, v->rsts[slot].src);
		snap_out_u32(o, v->rsts[slot].dst);
	}
	return 0;
}

int vsock_snapshot_restore(void *dev, struct snap_in *in, const char **why)
{
	struct virtio_vsock *v = dev;
	uint64_t cid = snap_in_u64(in);
	uint32_t next_port = snap_in_u32(in), nr_rsts = snap_in_u32(in);
	uint32_t rsts[VSOCK_RST_RING][2];

	if (nr_rsts > VSOCK_RST_RING)
		return errmsg_why(why, -EBADMSG, "virtio-vsock %s: corrupt snapshot state: %u RSTs "
				"owed, at most %u", v->mmio.name, nr_rsts, VSOCK_RST_RING);
	for (uint32_t i = 0; i < nr_rsts; i++) {
		rsts[i][0] = snap_in_u32(in);
		rsts[i][1] = snap_in_u32(in);
	}
	if (!snap_in_end(in))
		return errmsg_why(why, -EBADMSG, "virtio-vsock %s: corrupt snapshot state: its part is "
				"cut short or has bytes after it", v->mmio.name);
	if (cid != v->guest_cid)
		return errmsg_why(why, -EINVAL, "virtio-vsock %s: the snapshot's guest CID is %llu, "
				"this device's %llu", v->mmio.name, (unsigned long long)cid,
				(unsigned long long)v->guest_cid);
	/* The range vsock_host.c hands out local ports from. */
	if (next_port < VSOCK_HOST_PORT_BASE || next_port == 0xffffffffu)
		return errmsg_why(why, -EBADMSG, "virtio-vsock %s: corrupt snapshot state: next local "
				"port %u outside %u..%u", v->mmio.name, next_port,
				VSOCK_HOST_PORT_BASE, 0xfffffffeu);
	v->next_port = next_port;
	v->rst_head = 0;
	v->rst_len = nr_rsts;
	for (uint32_t i = 0; i < nr_rsts; i++) {
		v->rsts[i].src = rsts[i][0];
		v->rsts[i].dst = rsts[i][1];
	}
	v->rx_held = false;
	/* The guest's connected sockets talk to a host that is gone: the
	 * event makes its driver reset them (listeners stay). */
	v->reset_event_owed = true;
	return 0;
}

bool vsock_hold_line(struct vsock_conn *c)
{
	struct virtio_vsock *v = c->v;

	if (!v->reset_event_owed && !v->reset_unacked)
		return false;
	if (!c->line_held) {
		c->line_held = true;
		if (vsock_conn_watch(c))
			vsock_conn_free(c);
	}
	return true;
}

/* The guest handled its reset: the connections that waited go on. */
static void release_lines(struct virtio_vsock *v)
{
	struct vsock_conn *c, *next;

	for (c = v->conns; c; c = next) {
		next = c->next;
		if (c->state != CONN_LINE || !c->line_held)
			continue;
		c->line_held = false;
		if (vsock_conn_watch(c))
			vsock_conn_free(c);
	}
}

void vsock_event_pump(struct virtio_vsock *v)
{
	struct vq *q = &v->mmio.queues[VSOCK_QUEUE_EVENT];
	struct vq_chain *c = &v->event_chain;
	struct virtio_vsock_event ev = { .id = htole32(VIRTIO_VSOCK_EVENT_TRANSPORT_RESET) };
	const char *why = "";
	int rc;

	if (!virtio_mmio_live(&v->mmio) || !q->ready)
		return;
	/* Linux's event work resets the connected sockets, then puts the
	 * buffer back and kicks: a new entry means the reset is done. */
	if (v->reset_unacked) {
		if (vq_avail_moved(q, v->reset_mark)) {
			v->reset_unacked = false;
			release_lines(v);
		}
		return;
	}
	if (!v->reset_event_owed)
		return;
	rc = vq_pop(q, c, &why);
	if (rc < 0) {
		vsock_fail(v, why);
		return;
	}
	if (rc == 0)
		return;   /* no buffer yet: the driver kicks when it adds one */
	if (c->nr_readable || c->writable_len < sizeof(ev)) {
		vsock_fail(v, "event buffer with device-readable parts or under 4 bytes");
		return;
	}
	vsock_chain_put(c, &ev, sizeof(ev));
	vq_push(q, c->head, sizeof(ev));
	v->reset_event_owed = false;
	v->reset_unacked = true;
	v->reset_mark = vq_avail_mark(q);
	if (vq_should_interrupt(q))
		virtio_mmio_notify(&v->mmio);
}
