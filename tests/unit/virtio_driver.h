/* virtio_driver.h - a simulated virtio-mmio guest driver over fake RAM, shared by the virtio device tests. */
#ifndef MAYFLY_TEST_VIRTIO_DRIVER_H
#define MAYFLY_TEST_VIRTIO_DRIVER_H

#include <criterion/criterion.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "disk/disk.h"
#include "disk_image.h"
#include "mem/mem.h"
#include "virtio/blk.h"
#include "virtio/mmio.h"

/* Register offsets, status bits and ring layout as the virtio 1.2 spec
 * (4.2.2, 2.1, 2.7) gives them, spelled out rather than taken from the
 * headers the device uses, so the tests check the spec. */
#define R_MAGIC        0x000
#define R_VERSION      0x004
#define R_DEVICE_ID    0x008
#define R_VENDOR_ID    0x00c
#define R_DEV_FEAT     0x010
#define R_DEV_FEAT_SEL 0x014
#define R_DRV_FEAT     0x020
#define R_DRV_FEAT_SEL 0x024
#define R_QUEUE_SEL    0x030
#define R_QUEUE_MAX    0x034
#define R_QUEUE_NUM    0x038
#define R_QUEUE_READY  0x044
#define R_QUEUE_NOTIFY 0x050
#define R_INT_STATUS   0x060
#define R_INT_ACK      0x064
#define R_STATUS       0x070
#define R_DESC_LO      0x080
#define R_DESC_HI      0x084
#define R_AVAIL_LO     0x090
#define R_AVAIL_HI     0x094
#define R_USED_LO      0x0a0
#define R_USED_HI      0x0a4
#define R_CONFIG       0x100

#define S_ACK          1
#define S_DRIVER       2
#define S_DRIVER_OK    4
#define S_FEATURES_OK  8
#define S_NEEDS_RESET  0x40
#define S_FAILED       0x80
#define S_ALL_OK       (S_ACK | S_DRIVER | S_FEATURES_OK | S_DRIVER_OK)

#define INT_VRING      1
#define INT_CONFIG     2

#define F_NEXT         1
#define F_WRITE        2
#define NO_INTERRUPT   1

#define FEAT_BLK_SEG_MAX  (1ULL << 2)
#define FEAT_BLK_RO       (1ULL << 5)
#define FEAT_BLK_SIZE     (1ULL << 6)
#define FEAT_BLK_FLUSH    (1ULL << 9)
#define FEAT_INDIRECT     (1ULL << 28)
#define FEAT_EVENT_IDX    (1ULL << 29)
#define FEAT_VERSION_1    (1ULL << 32)
#define FEAT_BASIC        (FEAT_VERSION_1 | FEAT_BLK_FLUSH)

#define BLK_T_IN       0
#define BLK_T_OUT      1
#define BLK_T_FLUSH    4
#define BLK_T_GET_ID   8
#define BLK_S_OK       0
#define BLK_S_IOERR    1
#define BLK_S_UNSUPP   2
#define STATUS_UNSET   0xee    /* pre-filled status byte: the device never wrote it */

/* Fake guest RAM with canary pages either side: nothing may write outside. */
#ifndef RAM_SIZE             /* a test may want more, defined before the include */
#define RAM_SIZE   (1u << 20)
#endif
#define GUARD      8192
#define CANARY     0xa5
#define QSIZE      256
#define DESC_GPA   0x1000    /* 256 descriptors end at 0x2000 */
#define AVAIL_GPA  0x2000
#define USED_GPA   0x3000
#define HEAP_GPA   0x8000    /* request headers and buffers from here up */

/* 0x123 sectors: every byte of the le64 capacity is distinct from its
 * neighbours, and the size is not a multiple of 4 KiB (a short last
 * copy-on-write block). */
#define DISK_SECTORS 0x123
#define DISK_SIZE    (DISK_SECTORS * 512)

static uint8_t vd_arena[GUARD + RAM_SIZE + GUARD] __attribute__((aligned(4096)));

/* The driver's side of one device with one queue. */
struct vdrv {
	struct virtio_blk blk;
	struct virtio_mmio *m;
	struct guest_mem mem;
	uint8_t *ram;
	uint16_t qsize;
	uint64_t desc, avail, used;   /* ring gpas the driver configured */
	uint16_t avail_idx;           /* next avail index to publish */
	uint16_t used_seen;           /* used entries consumed */
	uint16_t next_desc;           /* descriptor allocator */
	uint64_t heap;                /* buffer allocator */
	char path[PATH_MAX];          /* the disk image, removed by vd_teardown */
};

static inline void vd_wr16(struct vdrv *d, uint64_t gpa, uint16_t v)
{
	__atomic_store_n((uint16_t *)(d->ram + gpa), htole16(v), __ATOMIC_RELAXED);
}

static inline void vd_wr32(struct vdrv *d, uint64_t gpa, uint32_t v)
{
	__atomic_store_n((uint32_t *)(d->ram + gpa), htole32(v), __ATOMIC_RELAXED);
}

static inline void vd_wr64(struct vdrv *d, uint64_t gpa, uint64_t v)
{
	__atomic_store_n((uint64_t *)(d->ram + gpa), htole64(v), __ATOMIC_RELAXED);
}

static inline uint16_t vd_rd16(struct vdrv *d, uint64_t gpa)
{
	return le16toh(__atomic_load_n((uint16_t *)(d->ram + gpa), __ATOMIC_RELAXED));
}

static inline uint32_t vd_rd32(struct vdrv *d, uint64_t gpa)
{
	return le32toh(__atomic_load_n((uint32_t *)(d->ram + gpa), __ATOMIC_RELAXED));
}

/* ---- registers ---- */

static inline uint32_t vd_reg(struct vdrv *d, uint64_t off)
{
	uint32_t v = 0xdeadbeef;

	virtio_mmio_io(d->m, off, (uint8_t *)&v, 4, false);
	return v;
}

static inline void vd_set(struct vdrv *d, uint64_t off, uint32_t v)
{
	virtio_mmio_io(d->m, off, (uint8_t *)&v, 4, true);
}

static inline uint32_t vd_status(struct vdrv *d)
{
	return vd_reg(d, R_STATUS);
}

static inline uint64_t vd_device_features(struct vdrv *d)
{
	uint64_t f;

	vd_set(d, R_DEV_FEAT_SEL, 0);
	f = vd_reg(d, R_DEV_FEAT);
	vd_set(d, R_DEV_FEAT_SEL, 1);
	return f | (uint64_t)vd_reg(d, R_DEV_FEAT) << 32;
}

/* Interrupts raised since the last call (drains the eventfd). */
static inline uint64_t vd_irqs(struct vdrv *d)
{
	uint64_t n = 0;

	if (read(d->m->irq_fd, &n, sizeof(n)) != sizeof(n))
		return 0;
	return n;
}

/* Reset, ACK, DRIVER, accept `features`, ask for FEATURES_OK; the status read back. */
static inline uint32_t vd_negotiate(struct vdrv *d, uint64_t features)
{
	vd_set(d, R_STATUS, 0);
	vd_set(d, R_STATUS, S_ACK);
	vd_set(d, R_STATUS, S_ACK | S_DRIVER);
	vd_set(d, R_DRV_FEAT_SEL, 0);
	vd_set(d, R_DRV_FEAT, (uint32_t)features);
	vd_set(d, R_DRV_FEAT_SEL, 1);
	vd_set(d, R_DRV_FEAT, (uint32_t)(features >> 32));
	vd_set(d, R_STATUS, S_ACK | S_DRIVER | S_FEATURES_OK);
	return vd_status(d);
}

/* Write queue 0's registers (no QueueReady); the driver forgets old ring state. */
static inline void vd_queue_regs(struct vdrv *d, uint32_t size, uint64_t desc, uint64_t avail,
				 uint64_t used)
{
	d->qsize = (uint16_t)size;
	d->desc = desc;
	d->avail = avail;
	d->used = used;
	d->avail_idx = d->used_seen = d->next_desc = 0;
	vd_set(d, R_QUEUE_SEL, 0);
	vd_set(d, R_QUEUE_NUM, size);
	vd_set(d, R_DESC_LO, (uint32_t)desc);
	vd_set(d, R_DESC_HI, (uint32_t)(desc >> 32));
	vd_set(d, R_AVAIL_LO, (uint32_t)avail);
	vd_set(d, R_AVAIL_HI, (uint32_t)(avail >> 32));
	vd_set(d, R_USED_LO, (uint32_t)used);
	vd_set(d, R_USED_HI, (uint32_t)(used >> 32));
}

/* Zero the rings and make queue 0 live at the standard addresses. */
static inline void vd_queue_setup(struct vdrv *d)
{
	memset(d->ram + DESC_GPA, 0, HEAP_GPA - DESC_GPA);
	vd_queue_regs(d, QSIZE, DESC_GPA, AVAIL_GPA, USED_GPA);
	vd_set(d, R_QUEUE_READY, 1);
	cr_assert_eq(vd_reg(d, R_QUEUE_READY), 1, "queue 0 did not become ready");
}

/* The whole init sequence (virtio 1.2, 3.1.1) ending in DRIVER_OK. */
static inline void vd_init(struct vdrv *d, uint64_t features)
{
	cr_assert_eq(vd_negotiate(d, features), S_ACK | S_DRIVER | S_FEATURES_OK,
		     "FEATURES_OK refused for 0x%llx", (unsigned long long)features);
	vd_queue_setup(d);
	vd_set(d, R_STATUS, S_ALL_OK);
	cr_assert_eq(vd_status(d), S_ALL_OK);
}

/* ---- rings ---- */

static inline uint64_t vd_alloc(struct vdrv *d, uint32_t len)
{
	uint64_t gpa = d->heap;

	d->heap = (d->heap + len + 15) & ~15ULL;
	cr_assert_leq(d->heap, RAM_SIZE, "test heap exhausted");
	return gpa;
}

struct vseg {
	uint64_t gpa;
	uint32_t len;
	bool write;
};

static inline void vd_desc(struct vdrv *d, uint16_t i, uint64_t addr, uint32_t len, uint16_t flags,
			   uint16_t next)
{
	uint64_t p = d->desc + 16 * (uint64_t)i;

	vd_wr64(d, p, addr);
	vd_wr32(d, p + 8, len);
	vd_wr16(d, p + 12, flags);
	vd_wr16(d, p + 14, next);
}

/* Lay `n` segments out as one chain of fresh descriptors; returns its head. */
static inline uint16_t vd_chain(struct vdrv *d, const struct vseg *s, int n)
{
	uint16_t head;

	if (d->next_desc + n > d->qsize)
		d->next_desc = 0;
	head = d->next_desc;
	for (int k = 0; k < n; k++) {
		uint16_t i = (uint16_t)(head + k);

		vd_desc(d, i, s[k].gpa, s[k].len,
			(uint16_t)((k < n - 1 ? F_NEXT : 0) | (s[k].write ? F_WRITE : 0)),
			(uint16_t)(i + 1));
	}
	d->next_desc = (uint16_t)(head + n);
	return head;
}

static inline void vd_publish_idx(struct vdrv *d, uint16_t idx)
{
	/* Release: the ring entry before the index that covers it. */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	vd_wr16(d, d->avail + 2, idx);
}

/* Put `head` in the avail ring without publishing the index. */
static inline void vd_stage(struct vdrv *d, uint16_t head)
{
	vd_wr16(d, d->avail + 4 + 2 * (uint64_t)(d->avail_idx % d->qsize), head);
	d->avail_idx++;
}

static inline void vd_post(struct vdrv *d, uint16_t head)
{
	vd_stage(d, head);
	vd_publish_idx(d, d->avail_idx);
}

/* QueueNotify only signals the kick eventfd; run the I/O thread's part. */
static inline void vd_kick(struct vdrv *d)
{
	vd_set(d, R_QUEUE_NOTIFY, 0);
	virtio_mmio_kick(d->m, 0);
}

static inline uint16_t vd_used_idx(struct vdrv *d)
{
	return vd_rd16(d, d->used + 2);
}

/* Take the next used entry, if any. */
static inline bool vd_get_used(struct vdrv *d, uint32_t *id, uint32_t *len)
{
	uint64_t e;

	if (vd_used_idx(d) == d->used_seen)
		return false;
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	e = d->used + 4 + 8 * (uint64_t)(d->used_seen % d->qsize);
	*id = vd_rd32(d, e);
	*len = vd_rd32(d, e + 4);
	d->used_seen++;
	return true;
}

static inline void vd_set_used_event(struct vdrv *d, uint16_t v)
{
	vd_wr16(d, d->avail + 4 + 2 * (uint64_t)d->qsize, v);
}

static inline uint16_t vd_avail_event(struct vdrv *d)
{
	return vd_rd16(d, d->used + 4 + 8 * (uint64_t)d->qsize);
}

/* ---- snapshots ---- */

/* The transport refuses a snapshot payload with rc, *why naming the device
 * (`who`: "virtio-blk vda"), and the device stays as fresh as it was. */
static inline void vd_expect_restore_refused(struct vdrv *d, const void *p, size_t len, int rc,
					     const char *who, const char *what)
{
	const char *why = "";
	int got = virtio_mmio_restore(d->m, p, len, &why);

	cr_assert_eq(got, rc, "%s: rc %d, expected %d (%s)", what, got, rc, why);
	cr_assert(strstr(why, who), "%s: why '%s' does not name %s", what, why, who);
	cr_assert_eq(vd_status(d), 0, "%s: refused, yet the status changed", what);
	cr_assert_eq(vd_reg(d, R_INT_STATUS), 0, "%s: refused, yet the ISR changed", what);
	for (unsigned i = 0; i < d->m->ops->nr_queues; i++)
		cr_assert_not(d->m->queues[i].ready, "%s: refused, yet queue %u is ready", what, i);
}

/* Every cut of a good payload, and the payload with a byte more, refused
 * as corrupt. */
static inline void vd_expect_cuts_refused(struct vdrv *d, const uint8_t *good, size_t len,
					  const char *who)
{
	uint8_t *more = malloc(len + 1);

	cr_assert_not_null(more);
	for (size_t n = 0; n < len; n++)
		vd_expect_restore_refused(d, good, n, -EBADMSG, who, "cut short");
	memcpy(more, good, len);
	more[len] = 0;
	vd_expect_restore_refused(d, more, len + 1, -EBADMSG, who, "a byte after the end");
	free(more);
}

/* ---- devices with several queues (virtio-vsock) ---- */

/* The driver's side of one queue of several. Descriptors come from a free
 * list, so chains (rx buffers) can stay posted while others come and go. */
struct vdq {
	unsigned index;
	uint16_t qsize;
	uint64_t desc, avail, used;        /* gpas: desc at base, avail +4 KiB, used +8 KiB */
	uint16_t avail_idx, used_seen;
	uint16_t nr_free;
	uint16_t free[VQ_MAX_SIZE];
	uint16_t chain_len[VQ_MAX_SIZE];   /* by head: descriptors to free when it returns */
};

/* Fresh fake RAM with canaries and no device: the test creates its own and
 * points d->m at its transport. */
static inline void vd_setup_ram(struct vdrv *d)
{
	memset(d, 0, sizeof(*d));
	memset(vd_arena, CANARY, sizeof(vd_arena));
	d->ram = vd_arena + GUARD;
	memset(d->ram, 0, RAM_SIZE);
	mem_init_fake(&d->mem, d->ram, RAM_SIZE);
	d->heap = HEAP_GPA;
}

/* Make queue `index` live with `size` entries, its rings from gpa `base`
 * (12 KiB). Between FEATURES_OK and DRIVER_OK. */
static inline void vdq_setup(struct vdrv *d, struct vdq *q, unsigned index, uint16_t size,
			     uint64_t base)
{
	memset(q, 0, sizeof(*q));
	q->index = index;
	q->qsize = size;
	q->desc = base;
	q->avail = base + 0x1000;
	q->used = base + 0x2000;
	memset(d->ram + base, 0, 0x3000);
	for (uint16_t i = 0; i < size; i++)
		q->free[q->nr_free++] = (uint16_t)(size - 1 - i);
	vd_set(d, R_QUEUE_SEL, index);
	vd_set(d, R_QUEUE_NUM, size);
	vd_set(d, R_DESC_LO, (uint32_t)q->desc);
	vd_set(d, R_DESC_HI, (uint32_t)(q->desc >> 32));
	vd_set(d, R_AVAIL_LO, (uint32_t)q->avail);
	vd_set(d, R_AVAIL_HI, (uint32_t)(q->avail >> 32));
	vd_set(d, R_USED_LO, (uint32_t)q->used);
	vd_set(d, R_USED_HI, (uint32_t)(q->used >> 32));
	vd_set(d, R_QUEUE_READY, 1);
	cr_assert_eq(vd_reg(d, R_QUEUE_READY), 1, "queue %u did not become ready", index);
}

static inline void vdq_desc(struct vdrv *d, struct vdq *q, uint16_t i, uint64_t addr,
			    uint32_t len, uint16_t flags, uint16_t next)
{
	uint64_t p = q->desc + 16 * (uint64_t)i;

	vd_wr64(d, p, addr);
	vd_wr32(d, p + 8, len);
	vd_wr16(d, p + 12, flags);
	vd_wr16(d, p + 14, next);
}

/* Lay `n` segments out as one chain of free descriptors; returns its head. */
static inline uint16_t vdq_chain(struct vdrv *d, struct vdq *q, const struct vseg *s, int n)
{
	uint16_t idx[VQ_MAX_SIZE];

	cr_assert(n > 0 && n <= q->nr_free, "queue %u: %d descriptors wanted, %u free", q->index,
		  n, q->nr_free);
	for (int k = 0; k < n; k++)
		idx[k] = q->free[--q->nr_free];
	for (int k = 0; k < n; k++)
		vdq_desc(d, q, idx[k], s[k].gpa, s[k].len,
			 (uint16_t)((k < n - 1 ? F_NEXT : 0) | (s[k].write ? F_WRITE : 0)),
			 k < n - 1 ? idx[k + 1] : 0);
	q->chain_len[idx[0]] = (uint16_t)n;
	return idx[0];
}

/* Put head in the avail ring and publish it. */
static inline void vdq_post(struct vdrv *d, struct vdq *q, uint16_t head)
{
	vd_wr16(d, q->avail + 4 + 2 * (uint64_t)(q->avail_idx % q->qsize), head);
	q->avail_idx++;
	/* Release: the ring entry before the index that covers it. */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	vd_wr16(d, q->avail + 2, q->avail_idx);
}

/* QueueNotify, then the I/O thread's part, as vd_kick. */
static inline void vdq_kick(struct vdrv *d, struct vdq *q)
{
	vd_set(d, R_QUEUE_NOTIFY, q->index);
	virtio_mmio_kick(d->m, q->index);
}

/* Take the next used entry, if any, and free its chain's descriptors. */
static inline bool vdq_get_used(struct vdrv *d, struct vdq *q, uint32_t *id, uint32_t *len)
{
	uint64_t e;
	uint16_t i;

	if (vd_rd16(d, q->used + 2) == q->used_seen)
		return false;
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	e = q->used + 4 + 8 * (uint64_t)(q->used_seen % q->qsize);
	*id = vd_rd32(d, e);
	*len = vd_rd32(d, e + 4);
	q->used_seen++;
	cr_assert_lt(*id, q->qsize, "used id %u out of range", *id);
	cr_assert_gt(q->chain_len[*id], 0, "used id %u was not posted", *id);
	i = (uint16_t)*id;
	for (uint16_t k = q->chain_len[*id]; k; k--) {
		q->free[q->nr_free++] = i;
		i = vd_rd16(d, q->desc + 16 * (uint64_t)i + 14);
	}
	q->chain_len[*id] = 0;
	return true;
}

/* ---- virtio-blk requests ---- */

/* A request's outcome as the driver sees it. */
struct vres {
	bool done;          /* a used entry came back for it */
	uint32_t len;       /* used len */
	uint8_t status;     /* the status byte (STATUS_UNSET if never written) */
};

/* Build header + data + status for one request; returns the head. The
 * status byte's gpa goes to *status_gpa. */
static inline uint16_t vd_blk_build(struct vdrv *d, uint32_t type, uint64_t sector,
				    const struct vseg *data, int n, uint64_t *status_gpa)
{
	struct vseg s[VQ_MAX_SIZE];
	uint64_t hdr = vd_alloc(d, 16);

	cr_assert_leq(n + 2, VQ_MAX_SIZE);
	vd_wr32(d, hdr, type);
	vd_wr32(d, hdr + 4, 0);
	vd_wr64(d, hdr + 8, sector);
	*status_gpa = vd_alloc(d, 1);
	d->ram[*status_gpa] = STATUS_UNSET;
	s[0] = (struct vseg){ hdr, 16, false };
	for (int k = 0; k < n; k++)
		s[k + 1] = data[k];
	s[n + 1] = (struct vseg){ *status_gpa, 1, true };
	return vd_chain(d, s, n + 2);
}

/* Submit one request, kick, and collect its completion. */
static inline struct vres vd_blk(struct vdrv *d, uint32_t type, uint64_t sector,
				 const struct vseg *data, int n)
{
	struct vres r = { .status = STATUS_UNSET };
	uint64_t st;
	uint16_t head = vd_blk_build(d, type, sector, data, n, &st);
	uint32_t id;

	vd_post(d, head);
	vd_kick(d);
	r.done = vd_get_used(d, &id, &r.len);
	if (r.done)
		cr_assert_eq(id, head, "used id %u, expected head %u", id, head);
	r.status = d->ram[st];
	return r;
}

/* One-segment read or write of `len` bytes at gpa. */
static inline struct vres vd_blk1(struct vdrv *d, uint32_t type, uint64_t sector, uint64_t gpa,
				  uint32_t len)
{
	struct vseg s = { gpa, len, type != BLK_T_OUT };

	return vd_blk(d, type, sector, &s, 1);
}

/* ---- fixture ---- */

static inline void vd_make_image(struct vdrv *d)
{
	const char *t = getenv("TMPDIR");
	uint8_t buf[4096];
	int fd;

	snprintf(d->path, sizeof(d->path), "%s/mayfly-test-vblk-XXXXXX", t && *t ? t : "/tmp");
	fd = mkstemp(d->path);
	cr_assert_geq(fd, 0, "mkstemp %s: %s", d->path, strerror(errno));
	for (uint64_t off = 0; off < DISK_SIZE; off += sizeof(buf)) {
		size_t n = DISK_SIZE - off < sizeof(buf) ? DISK_SIZE - off : sizeof(buf);

		for (size_t i = 0; i < n; i++)
			buf[i] = image_pat(off + i);
		cr_assert_eq(pwrite(fd, buf, n, (off_t)off), (ssize_t)n);
	}
	close(fd);
}

enum vd_disk_kind { VD_RAW, VD_RAW_RO, VD_COW };

/* The device destroyed and its image file removed; nothing once done. */
static inline void vd_teardown(struct vdrv *d)
{
	if (d->m)
		virtio_blk_destroy(&d->blk);
	d->m = NULL;
	if (d->path[0])
		unlink(d->path);
	d->path[0] = 0;
}

/* Fresh fake RAM with canaries, a new image file, and a virtio-blk over it. */
static inline void vd_setup(struct vdrv *d, enum vd_disk_kind kind)
{
	struct disk disk;
	const char *why = "";
	int rc;

	/* Criterion runs a suite's .init before a test's own: a second setup
	 * undoes the first (its image file included). d is static: zero, or
	 * set up before. */
	vd_teardown(d);
	vd_setup_ram(d);
	vd_make_image(d);
	rc = kind == VD_COW ? disk_open_cow(&disk, d->path, &why)
			    : disk_open_raw(&disk, d->path, kind == VD_RAW_RO, &why);
	cr_assert_eq(rc, 0, "open %s: %s", d->path, why);
	cr_assert_eq(virtio_blk_init(&d->blk, &disk, &d->mem, "vda"), 0);
	d->m = &d->blk.mmio;
}

/* The image file's bytes, read behind the device's back. */
static inline void vd_file(struct vdrv *d, uint64_t off, void *buf, size_t len)
{
	int fd = open(d->path, O_RDONLY);

	cr_assert_geq(fd, 0);
	cr_assert_eq(pread(fd, buf, len, (off_t)off), (ssize_t)len);
	close(fd);
}

/* Whether the image file still holds exactly what vd_make_image wrote. */
static inline bool vd_file_pristine(struct vdrv *d)
{
	static uint8_t buf[DISK_SIZE];

	vd_file(d, 0, buf, DISK_SIZE);
	for (uint64_t i = 0; i < DISK_SIZE; i++)
		if (buf[i] != image_pat(i))
			return false;
	return true;
}

static inline void vd_check_guards(void)
{
	for (size_t i = 0; i < GUARD; i++) {
		cr_assert_eq(vd_arena[i], CANARY, "canary below RAM overwritten at -%zu", GUARD - i);
		cr_assert_eq(vd_arena[GUARD + RAM_SIZE + i], CANARY,
			     "canary above RAM overwritten at +%zu", i);
	}
}

#endif
