/* queue.h - the split virtqueue: the one place that reads and writes ring memory (no KVM). */
#ifndef MAYFLY_VIRTIO_QUEUE_H
#define MAYFLY_VIRTIO_QUEUE_H

#include <stdbool.h>
#include <stdint.h>

#include "mem/mem.h"
#include "snapshot/codec.h"

/* Largest queue any mayfly device offers (QueueNumMax). A chain never has
 * more segments than the queue has descriptors. */
#define VQ_MAX_SIZE 256

/* One descriptor of a popped chain, already translated and bounds-checked:
 * [hva, hva+len) lies wholly inside guest RAM. */
struct vq_seg {
	uint8_t *hva;
	uint32_t len;
	bool writable;       /* VRING_DESC_F_WRITE: the device writes it */
};

/* A popped descriptor chain. Segments are in chain order. */
struct vq_chain {
	uint16_t head;           /* give back to vq_push */
	uint16_t nr_segs;
	uint16_t nr_readable;    /* device-readable segments, all before the writable ones */
	uint32_t readable_len;   /* bytes in the readable segments */
	uint32_t writable_len;   /* bytes in the writable segments */
	struct vq_seg segs[VQ_MAX_SIZE];
};

/* One split virtqueue. The first block is what the driver configures through
 * the transport; the second is the device's progress. Both are plain values
 * so a snapshot can save and restore them (the host pointers are derived
 * again by vq_activate). */
struct vq {
	/* driver-configured */
	uint16_t size;           /* QueueNum */
	uint64_t desc_gpa;       /* descriptor table */
	uint64_t avail_gpa;      /* driver area */
	uint64_t used_gpa;       /* device area */
	bool event_idx;          /* VIRTIO_RING_F_EVENT_IDX negotiated */

	/* device progress */
	bool ready;              /* activated: the pointers below are valid */
	uint16_t last_avail_idx; /* next avail ring slot to pop */
	uint16_t used_idx;       /* next used ring slot to fill (as published) */
	uint16_t signalled_used; /* used_idx at the last interrupt (EVENT_IDX) */
	bool signalled_valid;    /* signalled_used means something */

	/* derived by vq_activate; private to queue.c */
	uint8_t *desc;
	uint8_t *avail;
	uint8_t *used;
	const struct guest_mem *mem;
	uint16_t shadow_avail_idx;         /* avail.idx as last read: the current batch ends here */
	uint32_t epoch;                    /* bumped each time avail.idx is read */
	uint32_t popped_in[VQ_MAX_SIZE];   /* epoch in which each head was last popped */
};

/* Back to the state after device reset: not ready, size 0, addresses 0. */
void vq_reset(struct vq *q);

/* Validate the driver's configuration and derive host pointers: size a
 * power of two in 1..VQ_MAX_SIZE, descriptor table 16-byte, avail ring
 * 2-byte and used ring 4-byte aligned, and every ring (with its event
 * field) wholly inside guest RAM. Returns 0, or -EINVAL with *why set (then
 * the queue stays not ready). */
int vq_activate(struct vq *q, const struct guest_mem *mem, const char **why);

/* Take the next available chain. Returns 1 with *chain filled, 0 when the
 * ring is empty, -EINVAL when the guest broke the ring (*why says how; the
 * caller marks its device NEEDS_RESET and stops using the queue). Checks:
 * avail.idx at most `size` ahead of the last popped index, head and every
 * `next` below size, chain length at most size (so loops end), no zero
 * length, every [addr, addr+len) inside guest RAM, readable segments before
 * writable ones, total length below 4 GiB, the same head not popped twice
 * from one reading of avail.idx, no INDIRECT descriptors (not offered).
 * With EVENT_IDX, on finding the ring empty it publishes avail_event and
 * checks once more, so no kick is lost. */
int vq_pop(struct vq *q, struct vq_chain *chain, const char **why);

/* Return a chain to the driver with `written` bytes written into its
 * writable segments (the used ring entry, then used.idx with release order). */
void vq_push(struct vq *q, uint16_t head, uint32_t written);

/* The driver's avail.idx now, on a ready queue, asking (with EVENT_IDX)
 * for a kick when it adds another entry; vq_avail_moved tells whether it
 * has since. For a device that must know when the driver has handled
 * something it was given and refilled (vsock's TRANSPORT_RESET). */
uint16_t vq_avail_mark(struct vq *q);
bool vq_avail_moved(const struct vq *q, uint16_t mark);

/* After one or more vq_push calls: whether the driver wants an interrupt
 * now (used_event with EVENT_IDX, else VRING_AVAIL_F_NO_INTERRUPT). */
bool vq_should_interrupt(struct vq *q);

/* Give back the chain popped last, which the device has not pushed and
 * will not touch: the next vq_pop reads it from the ring again, with every
 * check. For a device holding a chain it cannot keep across a snapshot.
 * Only on a ready queue, right after a vq_pop that returned 1 (no other pop
 * in between). */
void vq_unpop(struct vq *q);

/* Snapshot payload of one queue, in bytes. */
#define VQ_STATE_LEN 44

/* Append the queue's configuration and progress (VQ_STATE_LEN bytes; the
 * layout is in docs/snapshot.md, "Devices"). Not the batch bookkeeping:
 * a restored queue starts a new batch. */
void vq_save(const struct vq *q, struct snap_out *o);

/* Read one queue's saved state from `in` (untrusted) into *q, a queue
 * that is not live (it is reset first), and check it: a ready queue gets
 * vq_activate's checks against `mem` (size a power of two, rings aligned
 * and inside guest RAM), a size at most queue_max, and no more chains in
 * flight (popped, not yet used) than its size; a queue that is not ready
 * has no progress. 0, or -EINVAL with *why a fixed string (no device
 * name: the caller adds it) and *q not ready. */
int vq_restore(struct vq *q, struct snap_in *in, const struct guest_mem *mem,
	       uint16_t queue_max, const char **why) __attribute__((warn_unused_result));

#endif
