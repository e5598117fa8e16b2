/* bench_queue.c - host-only cost of one virtio-blk-shaped request through the virtqueue (no KVM). */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/virtio_ring.h>

#include "virtio/queue.h"

#define RAM_SIZE  (1u << 20)
#define QSIZE     256
#define DESC_GPA  0x0000
#define AVAIL_GPA 0x1000
#define USED_GPA  0x2000
#define HDR_GPA   0x4000
#define DATA_GPA  0x5000
#define STAT_GPA  0x6000
#define RUNS      5

static uint8_t ram[RAM_SIZE] __attribute__((aligned(4096)));

/* The simulated driver, Linux-like: publishes with release order and asks
 * for an interrupt on every completion (used_event = what it has reaped). */
struct driver {
	struct vring vr;
	uint16_t avail_idx;
	uint16_t last_used;
};

static void driver_add(struct driver *d, uint16_t base)
{
	struct vring_desc *desc = d->vr.desc;

	desc[base] = (struct vring_desc){ htole64(HDR_GPA), htole32(16),
		htole16(VRING_DESC_F_NEXT), htole16(base + 1) };
	desc[base + 1] = (struct vring_desc){ htole64(DATA_GPA), htole32(4096),
		htole16(VRING_DESC_F_WRITE | VRING_DESC_F_NEXT), htole16(base + 2) };
	desc[base + 2] = (struct vring_desc){ htole64(STAT_GPA), htole32(1),
		htole16(VRING_DESC_F_WRITE), 0 };
	d->vr.avail->ring[d->avail_idx % QSIZE] = htole16(base);
	d->avail_idx++;
	/* Release: descriptors and ring entry before the index that publishes them. */
	__atomic_store_n(&d->vr.avail->idx, htole16(d->avail_idx), __ATOMIC_RELEASE);
}

static int driver_reap(struct driver *d, uint16_t want)
{
	uint16_t idx = le16toh(__atomic_load_n(&d->vr.used->idx, __ATOMIC_ACQUIRE));
	struct vring_used_elem *e = &d->vr.used->ring[d->last_used % QSIZE];

	if (idx == d->last_used || le32toh(e->id) != want || le32toh(e->len) != 4097)
		return -1;
	d->last_used++;
	vring_used_event(&d->vr) = htole16(d->last_used);
	return 0;
}

/* One run of n requests; returns ns per request, or a negative on a bug. */
static double run(uint64_t n, uint64_t *irqs)
{
	static struct vq_chain chain;
	struct guest_mem mem;
	struct driver d = { 0 };
	struct vq q;
	struct timespec t0, t1;
	const char *why = "";

	memset(ram, 0, RAM_SIZE);
	mem_init_fake(&mem, ram, RAM_SIZE);
	d.vr.num = QSIZE;
	d.vr.desc = (void *)(ram + DESC_GPA);
	d.vr.avail = (void *)(ram + AVAIL_GPA);
	d.vr.used = (void *)(ram + USED_GPA);
	/* Configured as the virtio-mmio transport does: reset, then the registers. */
	vq_reset(&q);
	q.size = QSIZE;
	q.desc_gpa = DESC_GPA;
	q.avail_gpa = AVAIL_GPA;
	q.used_gpa = USED_GPA;
	q.event_idx = true;
	if (vq_activate(&q, &mem, &why)) {
		fprintf(stderr, "bench-queue: activate: %s\n", why);
		return -1;
	}
	*irqs = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (uint64_t i = 0; i < n; i++) {
		uint16_t base = (uint16_t)(i % (QSIZE / 3) * 3);

		driver_add(&d, base);
		if (vq_pop(&q, &chain, &why) != 1 || chain.head != base || chain.nr_segs != 3) {
			fprintf(stderr, "bench-queue: pop failed at %" PRIu64 ": %s\n", i, why);
			return -1;
		}
		*chain.segs[2].hva = 0;   /* VIRTIO_BLK_S_OK */
		vq_push(&q, chain.head, chain.writable_len);
		*irqs += vq_should_interrupt(&q);
		if (driver_reap(&d, base)) {
			fprintf(stderr, "bench-queue: wrong used entry at %" PRIu64 "\n", i);
			return -1;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / (double)n;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	uint64_t n = 10000000, irqs = 0;
	double ns[RUNS];
	char *end;
	int opt;

	while ((opt = getopt(argc, argv, "n:h")) != -1) {
		switch (opt) {
		case 'n':
			errno = 0;
			n = strtoull(optarg, &end, 10);
			if (errno || *end || n == 0 || optarg[0] == '-') {
				fprintf(stderr, "bench-queue: -n wants a positive count\n");
				return 2;
			}
			break;
		default:
			fprintf(stderr, "usage: bench-queue [-n requests]   (default 10000000)\n"
				"  median ns per request (pop, push, interrupt check, reap) of %d runs\n",
				RUNS);
			return opt == 'h' ? 0 : 2;
		}
	}
	for (int r = 0; r < RUNS; r++) {
		ns[r] = run(n, &irqs);
		if (ns[r] < 0)
			return 1;
		fprintf(stderr, "bench-queue: run %d/%d: %.1f ns/request (%" PRIu64 " interrupts)\n",
			r + 1, RUNS, ns[r], irqs);
	}
	qsort(ns, RUNS, sizeof(ns[0]), cmp_double);
	printf("bench-queue: %" PRIu64 " requests x %d runs, median %.1f ns/request\n",
	       n, RUNS, ns[RUNS / 2]);
	return 0;
}
