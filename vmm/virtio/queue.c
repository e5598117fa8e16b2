/* queue.c - the split virtqueue, device side: every ring field the guest writes is checked here. */
#include "virtio/queue.h"

#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <linux/virtio_ring.h>

/*
 * Ring memory is shared with a guest that may change it at any moment, so
 * every access is a single __atomic load or store of a naturally aligned
 * field (alignment: the ring addresses are checked in vq_activate, and guest
 * regions start page-aligned in host memory). Relaxed order is enough for
 * the accesses themselves; the fences below give the ordering the virtio
 * protocol needs.
 */
static uint16_t load16(const uint8_t *p)
{
	return le16toh(__atomic_load_n((const uint16_t *)p, __ATOMIC_RELAXED));
}

static uint32_t load32(const uint8_t *p)
{
	return le32toh(__atomic_load_n((const uint32_t *)p, __ATOMIC_RELAXED));
}

static uint64_t load64(const uint8_t *p)
{
	return le64toh(__atomic_load_n((const uint64_t *)p, __ATOMIC_RELAXED));
}

static void store16(uint8_t *p, uint16_t v)
{
	__atomic_store_n((uint16_t *)p, htole16(v), __ATOMIC_RELAXED);
}

static void store32(uint8_t *p, uint32_t v)
{
	__atomic_store_n((uint32_t *)p, htole32(v), __ATOMIC_RELAXED);
}

/* Offsets into the rings (virtio 1.2, 2.7.6 and 2.7.8). */
#define AVAIL_FLAGS   offsetof(struct vring_avail, flags)
#define AVAIL_IDX     offsetof(struct vring_avail, idx)
#define AVAIL_RING(i) (offsetof(struct vring_avail, ring) + 2 * (size_t)(i))
#define USED_IDX      offsetof(struct vring_used, idx)
#define USED_RING(i)  (offsetof(struct vring_used, ring) + sizeof(struct vring_used_elem) * (size_t)(i))

/* used_event sits after the avail ring entries, avail_event after the used ones. */
static uint8_t *used_event(const struct vq *q)
{
	return q->avail + AVAIL_RING(q->size);
}

static uint8_t *avail_event(const struct vq *q)
{
	return q->used + USED_RING(q->size);
}

static int fail(const char **why, const char *msg)
{
	if (why)
		*why = msg;
	return -EINVAL;
}

void vq_reset(struct vq *q)
{
	memset(q, 0, sizeof(*q));
}

int vq_activate(struct vq *q, const struct guest_mem *mem, const char **why)
{
	uint8_t *desc, *avail, *used;

	q->ready = false;
	if (q->size == 0 || q->size > VQ_MAX_SIZE || (q->size & (q->size - 1)))
		return fail(why, "queue size not a power of two in 1..VQ_MAX_SIZE");
	if (q->desc_gpa % 16 || q->avail_gpa % 2 || q->used_gpa % 4)
		return fail(why, "virtqueue ring misaligned");
	/* Sizes include the event fields, used with EVENT_IDX or not, so no
	 * later access needs its own bounds check. */
	desc = mem_gpa_to_hva(mem, q->desc_gpa, sizeof(struct vring_desc) * (uint64_t)q->size);
	avail = mem_gpa_to_hva(mem, q->avail_gpa, AVAIL_RING(q->size) + 2);
	used = mem_gpa_to_hva(mem, q->used_gpa, USED_RING(q->size) + 2);
	if (!desc || !avail || !used)
		return fail(why, "virtqueue ring outside guest RAM");

	q->desc = desc;
	q->avail = avail;
	q->used = used;
	q->mem = mem;
	/* last_avail_idx and used_idx are kept (a restored snapshot carries
	 * them); the batch bookkeeping starts afresh, forcing a read of avail.idx. */
	q->shadow_avail_idx = q->last_avail_idx;
	q->epoch = 0;
	memset(q->popped_in, 0, sizeof(q->popped_in));
	q->ready = true;
	return 0;
}

/* Read avail.idx and start a new batch. Returns how many entries it holds,
 * or -EINVAL when the index is not within `size` of what we popped: a
 * driver that jumps ahead or goes back has corrupted its ring. */
static int read_avail_idx(struct vq *q, const char **why)
{
	uint16_t idx = load16(q->avail + AVAIL_IDX);
	uint16_t pending = (uint16_t)(idx - q->last_avail_idx);

	if (pending > q->size)
		return fail(why, "avail index moved back or more than queue size ahead");
	q->shadow_avail_idx = idx;
	/* A new batch: heads popped before may legitimately come again. On
	 * wrap, forget all of them rather than mistake an old epoch for this one. */
	if (++q->epoch == 0) {
		memset(q->popped_in, 0, sizeof(q->popped_in));
		q->epoch = 1;
	}
	return pending;
}

uint16_t vq_avail_mark(struct vq *q)
{
	uint16_t idx = load16(q->avail + AVAIL_IDX);

	if (q->event_idx) {
		/* Ask for a kick when the driver adds past what it has added now. */
		store16(avail_event(q), idx);
		/* Full fence: the avail_event store before the re-read (as in
		 * avail_pending: store-to-load order, else a lost kick). */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		idx = load16(q->avail + AVAIL_IDX);
	}
	return idx;
}

bool vq_avail_moved(const struct vq *q, uint16_t mark)
{
	return load16(q->avail + AVAIL_IDX) != mark;
}

/* Whether an entry is waiting: 1, 0, or -EINVAL. */
static int avail_pending(struct vq *q, const char **why)
{
	int n;

	if (q->last_avail_idx != q->shadow_avail_idx)
		return 1;   /* still inside the batch we already read */
	n = read_avail_idx(q, why);
	if (n == 0 && q->event_idx) {
		/* Ask for a kick once the driver makes entry last_avail_idx available. */
		store16(avail_event(q), q->last_avail_idx);
		/* Full fence: the avail_event store must be visible to the driver
		 * before we read avail.idx again. Otherwise the driver may add an
		 * entry, read the old avail_event and skip the kick, while we read
		 * the old avail.idx and go idle: a lost kick (store-to-load order,
		 * which only a full fence gives). */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		n = read_avail_idx(q, why);
	}
	if (n <= 0)
		return n;
	/* Acquire: read the ring entries and descriptors only after avail.idx,
	 * pairing with the driver's write barrier before it publishes avail.idx. */
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return 1;
}

/* One descriptor, read once: the guest may rewrite the table while we walk it. */
struct desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags;
	uint16_t next;
};

static struct desc read_desc(const struct vq *q, uint16_t i)
{
	const uint8_t *d = q->desc + sizeof(struct vring_desc) * i;

	return (struct desc){
		.addr = load64(d + offsetof(struct vring_desc, addr)),
		.len = load32(d + offsetof(struct vring_desc, len)),
		.flags = load16(d + offsetof(struct vring_desc, flags)),
		.next = load16(d + offsetof(struct vring_desc, next)),
	};
}

/* Walk the chain from `head` into *chain, checking every descriptor. */
static int walk_chain(const struct vq *q, uint16_t head, struct vq_chain *chain,
		      const char **why)
{
	uint16_t i = head;
	uint32_t total = 0;

	memset(chain, 0, offsetof(struct vq_chain, segs));
	chain->head = head;
	for (;;) {
		struct desc d;
		struct vq_seg *seg;
		uint8_t *hva;

		/* A chain visits each descriptor at most once, so more than
		 * `size` of them means a loop: this bound makes every walk end. */
		if (chain->nr_segs == q->size)
			return fail(why, "descriptor chain longer than the queue (loop?)");
		d = read_desc(q, i);
		if (d.flags & VRING_DESC_F_INDIRECT)
			return fail(why, "indirect descriptor (not offered)");
		if (d.len == 0)
			return fail(why, "zero-length descriptor");
		hva = mem_gpa_to_hva(q->mem, d.addr, d.len);
		if (!hva)
			return fail(why, "descriptor buffer outside guest RAM");
		/* Bounding the total bounds both per-direction sums below. */
		if (__builtin_add_overflow(total, d.len, &total))
			return fail(why, "descriptor chain 4 GiB or longer");
		seg = &chain->segs[chain->nr_segs];
		*seg = (struct vq_seg){ hva, d.len, d.flags & VRING_DESC_F_WRITE };
		if (seg->writable) {
			chain->writable_len += d.len;
		} else {
			/* Spec 2.7.4.2: device-writable descriptors come last, so a
			 * device finds its request before room for the response. */
			if (chain->nr_readable != chain->nr_segs)
				return fail(why, "readable descriptor after a writable one");
			chain->nr_readable++;
			chain->readable_len += d.len;
		}
		chain->nr_segs++;
		if (!(d.flags & VRING_DESC_F_NEXT))
			return 0;
		if (d.next >= q->size)
			return fail(why, "descriptor next index out of range");
		i = d.next;
	}
}

int vq_pop(struct vq *q, struct vq_chain *chain, const char **why)
{
	uint16_t head;
	int r;

	if (!q->ready)
		return 0;
	r = avail_pending(q, why);
	if (r <= 0)
		return r;
	head = load16(q->avail + AVAIL_RING(q->last_avail_idx & (q->size - 1)));
	if (head >= q->size)
		return fail(why, "avail ring head out of range");
	/* The driver cannot reuse a head before we return it, and we can only
	 * return it after reading it, so it cannot appear twice in one batch. */
	if (q->popped_in[head] == q->epoch)
		return fail(why, "same head made available twice");
	r = walk_chain(q, head, chain, why);
	if (r)
		return r;
	q->popped_in[head] = q->epoch;
	q->last_avail_idx++;
	return 1;
}

void vq_push(struct vq *q, uint16_t head, uint32_t written)
{
	uint8_t *elem;

	/* Heads come from vq_pop, so one out of range is a device bug: drop it
	 * rather than write outside the ring. */
	if (!q->ready || head >= q->size)
		return;
	elem = q->used + USED_RING(q->used_idx & (q->size - 1));
	store32(elem + offsetof(struct vring_used_elem, id), head);
	store32(elem + offsetof(struct vring_used_elem, len), written);
	/* Release: the driver must see the used entry before the used.idx
	 * that covers it (pairs with its read barrier after reading used.idx). */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	q->used_idx++;
	store16(q->used + USED_IDX, q->used_idx);
}

bool vq_should_interrupt(struct vq *q)
{
	uint16_t old = q->signalled_used, now = q->used_idx;
	bool valid = q->signalled_valid;

	if (!q->ready)
		return false;
	/* Full fence: our used.idx store must be visible before we read
	 * used_event or the flags. Otherwise the driver may read the old
	 * used.idx, re-enable interrupts and sleep, while we read its old
	 * used_event and skip the interrupt: a lost interrupt. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!q->event_idx)
		return !(load16(q->avail + AVAIL_FLAGS) & VRING_AVAIL_F_NO_INTERRUPT);
	q->signalled_used = now;
	q->signalled_valid = true;
	/* Without a previous interrupt there is no "old" to compare with. */
	return !valid || vring_need_event(load16(used_event(q)), now, old);
}

void vq_unpop(struct vq *q)
{
	q->last_avail_idx--;
	/* A new batch: the head comes back from a fresh read of avail.idx,
	 * so it is not taken for the same head made available twice. */
	q->shadow_avail_idx = q->last_avail_idx;
}

/* The flags word of a saved queue. */
#define VQ_SNAP_READY     (1u << 0)
#define VQ_SNAP_EVENT_IDX (1u << 1)
#define VQ_SNAP_SIGNALLED (1u << 2)

void vq_save(const struct vq *q, struct snap_out *o)
{
	snap_out_u64(o, q->desc_gpa);
	snap_out_u64(o, q->avail_gpa);
	snap_out_u64(o, q->used_gpa);
	snap_out_u32(o, q->size);
	snap_out_u32(o, q->last_avail_idx);
	snap_out_u32(o, q->used_idx);
	snap_out_u32(o, q->signalled_used);
	snap_out_u32(o, (q->ready ? VQ_SNAP_READY : 0) | (q->event_idx ? VQ_SNAP_EVENT_IDX : 0) |
			(q->signalled_valid ? VQ_SNAP_SIGNALLED : 0));
}

int vq_restore(struct vq *q, struct snap_in *in, const struct guest_mem *mem,
	       uint16_t queue_max, const char **why)
{
	uint32_t size, last_avail, used, signalled, flags;
	int rc;

	vq_reset(q);
	q->desc_gpa = snap_in_u64(in);
	q->avail_gpa = snap_in_u64(in);
	q->used_gpa = snap_in_u64(in);
	size = snap_in_u32(in);
	last_avail = snap_in_u32(in);
	used = snap_in_u32(in);
	signalled = snap_in_u32(in);
	flags = snap_in_u32(in);
	if (in->bad)
		return fail(why, "queue state cut short");
	if ((size | last_avail | used | signalled) > 0xffff)
		return fail(why, "queue size or index above 65535");
	if (flags & ~(VQ_SNAP_READY | VQ_SNAP_EVENT_IDX | VQ_SNAP_SIGNALLED))
		return fail(why, "unknown queue flags");
	q->size = (uint16_t)size;
	q->event_idx = flags & VQ_SNAP_EVENT_IDX;
	if (!(flags & VQ_SNAP_READY)) {
		/* Progress is made only while ready, and a reset clears it. */
		if (last_avail || used || signalled || (flags & VQ_SNAP_SIGNALLED))
			return fail(why, "progress on a queue that is not ready");
		return 0;
	}
	if (size > queue_max)
		return fail(why, "queue size above QueueNumMax");
	/* The device pushes only what it popped, at most `size` apart. */
	if ((uint16_t)(last_avail - used) > size)
		return fail(why, "more chains in flight than the queue holds");
	q->last_avail_idx = (uint16_t)last_avail;
	q->used_idx = (uint16_t)used;
	q->signalled_used = (uint16_t)signalled;
	q->signalled_valid = flags & VQ_SNAP_SIGNALLED;
	rc = vq_activate(q, mem, why);
	if (rc)
		vq_reset(q);
	return rc;
}
