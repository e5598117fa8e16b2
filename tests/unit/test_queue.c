/* test_queue.c - the split virtqueue against a simulated driver, honest and hostile. */
#include <criterion/criterion.h>
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "virtio/queue.h"
#include "x86/layout.h"

static const struct mem_layout x86_ram = LAYOUT_RAM_SLOTS;

/* Ring layout and flags from the virtio 1.2 spec (2.7), spelled out here
 * rather than shared with queue.c so the tests check the spec. */
#define F_NEXT         1
#define F_WRITE        2
#define F_INDIRECT     4
#define NO_INTERRUPT   1
#define AVAIL_FLAGS(q)     ((q).avail_gpa)
#define AVAIL_IDX(q)       ((q).avail_gpa + 2)
#define AVAIL_RING(q, i)   ((q).avail_gpa + 4 + 2 * (uint64_t)(i))
#define USED_EVENT(q)      AVAIL_RING(q, (q).size)
#define USED_IDX(q)        ((q).used_gpa + 2)
#define USED_ID(q, i)      ((q).used_gpa + 4 + 8 * (uint64_t)(i))
#define USED_LEN(q, i)     (USED_ID(q, i) + 4)
#define AVAIL_EVENT(q)     USED_ID(q, (q).size)

/* Fake guest RAM with canaries either side: nothing may write outside it. */
#define RAM_SIZE   (1u << 20)
#define GUARD      4096
#define CANARY     0xa5
#define DESC_GPA   0x1000    /* 256 descriptors end at 0x2000 */
#define AVAIL_GPA  0x3000
#define USED_GPA   0x4000
#define BUF_GPA    0x10000   /* buf(i) for descriptor i, 2 KiB apart */

static uint8_t arena[GUARD + RAM_SIZE + GUARD] __attribute__((aligned(4096)));
static uint8_t *ram;        /* guest RAM as the driver helpers see it */
static struct guest_mem mem;
static struct vq q;
static struct vq_chain chain;
static const char *why;
static uint16_t drv_avail;   /* the driver's next avail index */

static void setup(void)
{
	ram = arena + GUARD;
	memset(arena, CANARY, sizeof(arena));
	memset(ram, 0, RAM_SIZE);
	mem_init_fake(&mem, ram, RAM_SIZE);
	vq_reset(&q);
	drv_avail = 0;
	why = NULL;
}

TestSuite(queue, .init = setup);

/* Driver-side accessors: single aligned stores, as the device thread in
 * the race test reads them concurrently. */
static void wr16(uint64_t gpa, uint16_t v) { __atomic_store_n((uint16_t *)(ram + gpa), htole16(v), __ATOMIC_RELAXED); }
static void wr32(uint64_t gpa, uint32_t v) { __atomic_store_n((uint32_t *)(ram + gpa), htole32(v), __ATOMIC_RELAXED); }
static void wr64(uint64_t gpa, uint64_t v) { __atomic_store_n((uint64_t *)(ram + gpa), htole64(v), __ATOMIC_RELAXED); }
static uint16_t rd16(uint64_t gpa) { return le16toh(__atomic_load_n((uint16_t *)(ram + gpa), __ATOMIC_RELAXED)); }
static uint32_t rd32(uint64_t gpa) { return le32toh(__atomic_load_n((uint32_t *)(ram + gpa), __ATOMIC_RELAXED)); }

static uint64_t buf(uint16_t i)
{
	return BUF_GPA + 0x800 * (uint64_t)i;
}

static void set_desc(uint16_t i, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next)
{
	uint64_t d = DESC_GPA + 16 * (uint64_t)i;

	wr64(d, addr);
	wr32(d + 8, len);
	wr16(d + 12, flags);
	wr16(d + 14, next);
}

/* A chain over descriptors first, first+1, ...: nr_read readable then
 * nr_write writable segments, segment k of length 0x100 + k. */
static void make_chain(uint16_t first, int nr_read, int nr_write)
{
	int n = nr_read + nr_write;

	for (int k = 0; k < n; k++) {
		uint16_t i = (uint16_t)(first + k);
		uint16_t flags = (k < n - 1 ? F_NEXT : 0) | (k >= nr_read ? F_WRITE : 0);

		set_desc(i, buf(i), 0x100 + k, flags, (uint16_t)(i + 1));
	}
}

/* Put head in the avail ring and publish it, entry before index. */
static void publish(uint16_t head)
{
	wr16(AVAIL_RING(q, drv_avail % q.size), head);
	drv_avail++;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	wr16(AVAIL_IDX(q), drv_avail);
}

static void configure(uint16_t size, bool event_idx)
{
	q.size = size;
	q.desc_gpa = DESC_GPA;
	q.avail_gpa = AVAIL_GPA;
	q.used_gpa = USED_GPA;
	q.event_idx = event_idx;
}

static void start(uint16_t size, bool event_idx)
{
	configure(size, event_idx);
	cr_assert_eq(vq_activate(&q, &mem, &why), 0, "activate: %s", why);
	cr_assert(q.ready);
}

static void check_guards(void)
{
	for (size_t i = 0; i < GUARD; i++) {
		cr_assert_eq(arena[i], CANARY, "canary below RAM overwritten at -%zu", GUARD - i);
		cr_assert_eq(arena[GUARD + RAM_SIZE + i], CANARY, "canary above RAM overwritten at +%zu", i);
	}
}

/* The next pop must fail with a message containing `what`, without
 * advancing the queue or writing outside guest RAM. */
static void expect_violation(const char *what)
{
	uint16_t last = q.last_avail_idx, used = q.used_idx;

	why = NULL;
	cr_assert_eq(vq_pop(&q, &chain, &why), -EINVAL);
	cr_assert_not_null(why);
	cr_assert(strstr(why, what), "expected \"%s\", got \"%s\"", what, why);
	cr_assert_eq(q.last_avail_idx, last);
	cr_assert_eq(q.used_idx, used);
	check_guards();
}

static void expect_activate_fails(void)
{
	why = NULL;
	cr_assert_eq(vq_activate(&q, &mem, &why), -EINVAL);
	cr_assert_not_null(why);
	cr_assert_not(q.ready);
	cr_assert_eq(vq_pop(&q, &chain, &why), 0, "a queue that is not ready pops nothing");
	check_guards();
}

/* ---- activation ---- */

Test(queue, activates_every_valid_size)
{
	for (unsigned size = 1; size <= VQ_MAX_SIZE; size *= 2) {
		configure((uint16_t)size, false);
		cr_assert_eq(vq_activate(&q, &mem, &why), 0, "size %u: %s", size, why);
		cr_assert(q.ready);
	}
}

Test(queue, rejects_size_zero)
{
	configure(0, false);
	expect_activate_fails();
}

Test(queue, rejects_size_not_power_of_two)
{
	static const uint16_t sizes[] = { 3, 6, 100, 255 };

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		configure(sizes[i], false);
		expect_activate_fails();
	}
}

Test(queue, rejects_size_above_max)
{
	static const uint16_t sizes[] = { VQ_MAX_SIZE * 2, 1024, 32768 };

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		configure(sizes[i], false);
		expect_activate_fails();
	}
}

Test(queue, rejects_misaligned_rings)
{
	configure(8, false);
	q.desc_gpa = DESC_GPA + 8;
	expect_activate_fails();
	configure(8, false);
	q.avail_gpa = AVAIL_GPA + 1;
	expect_activate_fails();
	configure(8, false);
	q.used_gpa = USED_GPA + 2;
	expect_activate_fails();
}

Test(queue, rings_must_fit_in_ram_with_their_event_fields)
{
	/* avail ring of 256 with used_event: 4 + 512 + 2 bytes, ending exactly at the top. */
	configure(256, false);
	q.avail_gpa = RAM_SIZE - 518;
	cr_assert_eq(vq_activate(&q, &mem, &why), 0, "%s", why);
	q.avail_gpa = RAM_SIZE - 516;   /* only used_event sticks out */
	expect_activate_fails();

	configure(256, false);
	q.used_gpa = RAM_SIZE - 2056;   /* 4 + 2048 + 2 bytes fit */
	cr_assert_eq(vq_activate(&q, &mem, &why), 0, "%s", why);
	q.used_gpa = RAM_SIZE - 2052;   /* only avail_event sticks out */
	expect_activate_fails();

	configure(256, false);
	q.desc_gpa = RAM_SIZE - 2048;   /* half the table outside */
	expect_activate_fails();
	configure(8, false);
	q.desc_gpa = UINT64_MAX - 15;   /* wraps past 2^64 */
	expect_activate_fails();
	configure(8, false);
	q.used_gpa = RAM_SIZE;
	expect_activate_fails();
}

Test(queue, not_ready_queue_is_inert)
{
	configure(8, false);
	make_chain(0, 1, 0);
	publish(0);
	cr_assert_eq(vq_pop(&q, &chain, &why), 0);
	vq_push(&q, 0, 1);
	cr_assert_not(vq_should_interrupt(&q));
	cr_assert_eq(rd16(USED_IDX(q)), 0);
	cr_assert_eq(rd32(USED_ID(q, 0)), 0);
}

Test(queue, reset_returns_to_initial_state)
{
	static const struct vq zero;

	start(8, true);
	make_chain(0, 1, 1);
	publish(0);
	cr_assert_eq(vq_pop(&q, &chain, &why), 1);
	vq_push(&q, 0, 1);
	vq_should_interrupt(&q);
	vq_reset(&q);
	cr_assert_eq(memcmp(&q, &zero, sizeof(q)), 0);
}

/* ---- the honest driver ---- */

Test(queue, pops_readable_then_writable_chain)
{
	start(8, false);
	cr_assert_eq(vq_pop(&q, &chain, &why), 0, "empty ring");
	set_desc(0, BUF_GPA, 16, F_NEXT, 1);
	set_desc(1, BUF_GPA + 0x1000, 512, F_WRITE, 0);
	publish(0);

	cr_assert_eq(vq_pop(&q, &chain, &why), 1, "%s", why);
	cr_assert_eq(chain.head, 0);
	cr_assert_eq(chain.nr_segs, 2);
	cr_assert_eq(chain.nr_readable, 1);
	cr_assert_eq(chain.readable_len, 16);
	cr_assert_eq(chain.writable_len, 512);
	cr_assert_eq(chain.segs[0].hva, ram + BUF_GPA);
	cr_assert_eq(chain.segs[0].len, 16);
	cr_assert_not(chain.segs[0].writable);
	cr_assert_eq(chain.segs[1].hva, ram + BUF_GPA + 0x1000);
	cr_assert_eq(chain.segs[1].len, 512);
	cr_assert(chain.segs[1].writable);
	cr_assert_eq(q.last_avail_idx, 1);
	cr_assert_eq(vq_pop(&q, &chain, &why), 0, "one chain, popped once");
}

Test(queue, pops_scattered_multi_segment_chain_in_order)
{
	static const uint16_t order[] = { 5, 2, 7, 0, 3 };

	start(8, false);
	for (int k = 0; k < 5; k++)
		set_desc(order[k], buf(order[k]), 0x10 * (k + 1),
			 (k < 4 ? F_NEXT : 0) | (k >= 3 ? F_WRITE : 0), k < 4 ? order[k + 1] : 0);
	publish(5);

	cr_assert_eq(vq_pop(&q, &chain, &why), 1, "%s", why);
	cr_assert_eq(chain.head, 5);
	cr_assert_eq(chain.nr_segs, 5);
	cr_assert_eq(chain.nr_readable, 3);
	cr_assert_eq(chain.readable_len, 0x10 + 0x20 + 0x30);
	cr_assert_eq(chain.writable_len, 0x40 + 0x50);
	for (int k = 0; k < 5; k++) {
		cr_assert_eq(chain.segs[k].hva, ram + buf(order[k]), "segment %d", k);
		cr_assert_eq(chain.segs[k].len, 0x10u * (k + 1));
		cr_assert_eq(chain.segs[k].writable, k >= 3);
	}
}

Test(queue, accepts_chain_using_every_descriptor)
{
	start(4, false);
	make_chain(0, 4, 0);
	publish(0);
	cr_assert_eq(vq_pop(&q, &chain, &why), 1, "%s", why);
	cr_assert_eq(chain.nr_segs, 4);
}

Test(queue, push_fills_used_ring_then_index)
{
	start(8, false);
	make_chain(2, 1, 1);
	make_chain(4, 1, 0);
	publish(2);
	publish(4);
	cr_assert_eq(vq_pop(&q, &chain, &why), 1);
	vq_push(&q, chain.head, 123);
	cr_assert_eq(rd32(USED_ID(q, 0)), 2);
	cr_assert_eq(rd32(USED_LEN(q, 0)), 123);
	cr_assert_eq(rd16(USED_IDX(q)), 1);
	cr_assert_eq(q.used_idx, 1);
	cr_assert_eq(vq_pop(&q, &chain, &why), 1);
	vq_push(&q, chain.head, 0);
	cr_assert_eq(rd32(USED_ID(q, 1)), 4);
	cr_assert_eq(rd32(USED_LEN(q, 1)), 0);
	cr_assert_eq(rd16(USED_IDX(q)), 2);
	cr_assert_eq(rd16(q.used_gpa), 0, "used.flags is the device's, left alone");
}

Test(queue, several_chains_pop_in_order_and_complete_in_any_order)
{
	static const uint16_t heads[] = { 3, 0, 6 };

	start(8, false);
	for (int k = 0; k < 3; k++) {
		make_chain(heads[k], 1, 1);
		publish(heads[k]);
	}
	for (int k = 0; k < 3; k++) {
		cr_assert_eq(vq_pop(&q, &chain, &why), 1, "%s", why);
		cr_assert_eq(chain.head, heads[k]);
		cr_assert_eq(chain.segs[0].hva, ram + buf(heads[k]));
	}
	cr_assert_eq(vq_pop(&q, &chain, &why), 0);
	for (int k = 2; k >= 0; k--)
		vq_push(&q, heads[k], 10u + heads[k]);
	for (int k = 0; k < 3; k++) {
		cr_assert_eq(rd32(USED_ID(q, k)), heads[2 - k]);
		cr_assert_eq(rd32(USED_LEN(q, k)), 10u + heads[2 - k]);
	}
	cr_assert_eq(rd16(USED_IDX(q)), 3);
}

Test(queue, head_may_come_back_after_it_was_used)
{
	start(8, false);
	make_chain(0, 1, 0);
	for (int round = 0; round < 3; round++) {
		publish(0);
		cr_assert_eq(vq_pop(&q, &chain, &why), 1, "round %d: %s", round, why);
		vq_push(&q, 0, 0);
	}
}

/* After 2^32 reads of avail.idx the batch counter wraps; heads popped
 * long ago must not then look popped in the current batch. (Pokes the
 * private counter: 2^32 real reads would take minutes.) */
Test(queue, batch_counter_wrap_causes_no_false_duplicate)
{
	start(8, false);
	make_chain(0, 1, 0);
	make_chain(1, 1, 0);
	q.epoch = UINT32_MAX;
	q.popped_in[1] = 1;
	publish(0);
	publish(1);
	cr_assert_eq(vq_pop(&q, &chain, &why), 1, "%s", why);
	cr_assert_eq(vq_pop(&q, &chain, &why), 1, "%s", why);
}

/* Full batches of `size` chains, past 65536 so both 16-bit indexes wrap. */
Test(queue, indexes_wrap_past_65536)
{
	const uint16_t size = 4;
	const unsigned rounds = 70000 / size;
	uint16_t reaped = 0;

	start(size, false);
	for (uint16_t i = 0; i < size; i++)
		make_chain(i, 0, 1);
	for (unsigned r = 0; r < rounds; r++) {
		for (uint16_t i = 0; i < size; i++)
			publish((uint16_t)(size - 1 - i));   /* reversed: avail slot != head */
		for (uint16_t i = 0; i < size; i++) {
			cr_assert_eq(vq_pop(&q, &chain, &why), 1, "round %u: %s", r, why);
			cr_assert_eq(chain.head, size - 1 - i);
			vq_push(&q, chain.head, r);
		}
		cr_assert_eq(vq_pop(&q, &chain, &why), 0);
		cr_assert_eq(rd16(USED_IDX(q)), (uint16_t)(reaped + size));
		for (uint16_t i = 0; i < size; i++, reaped++) {
			cr_assert_eq(rd32(USED_ID(q, reaped % size)), size - 1u - i);
			cr_assert_eq(rd32(USED_LEN(q, reaped % size)), r);
		}
	}
	cr_assert_eq(q.last_avail_idx, (uint16_t)(rounds * size));
	cr_assert_eq(q.used_idx, (uint16_t)(rounds * size));
	check_guards();
}

/* ---- notifications ---- */

/* The driver's side of EVENT_IDX (spec 2.7.10): notify when event is in [old, new). */
static bool need_event(uint16_t event, uint16_t new_idx, uint16_t old)
{
	return (uint16_t)(new_idx - event - 1) < (uint16_t)(new_idx - old);
}

Test(queue, event_idx_publishes_avail_event_when_empty)
{
	start(8, true);
	wr16(AVAIL_EVENT(q), 0xbeef);
	cr_assert_eq(vq_pop(&q, &chain, &why), 0);
	cr_assert_eq(rd16(AVAIL_EVENT(q)), 0);

	make_chain(0, 1, 0);
	make_chain(1, 1, 0);
	publish(0);
	publish(1);
	cr_assert_eq(vq_pop(&q, &chain, &why), 1);
	cr_assert_eq(vq_pop(&q, &chain, &why), 1);
	cr_assert_eq(vq_pop(&q, &chain, &why), 0);
	cr_assert_eq(rd16(AVAIL_EVENT(q)), 2);
	/* So the driver's next entry (2 -> 3) asks for a kick. */
	cr_assert(need_event(rd16(AVAIL_EVENT(q)), 3, 2));
}

Test(queue, event_idx_interrupts_as_used_event_asks)
{
	start(8, true);
	for (uint16_t i = 0; i < 8; i++)
		make_chain(i, 0, 1);
	for (uint16_t i = 0; i < 8; i++)
		publish(i);
	/* The driver's flag is ignored with EVENT_IDX (spec 2.7.10). */
	wr16(AVAIL_FLAGS(q), NO_INTERRUPT);
	/* With nothing signalled yet there is no old index to compare, so
	 * even a used_event far away gets the first interrupt. */
	wr16(USED_EVENT(q), 0x8000);

	cr_assert_eq(vq_pop(&q, &chain, &why), 1);
	vq_push(&q, chain.head, 0);
	cr_assert(vq_should_interrupt(&q), "the first interrupt is always sent");
	cr_assert_not(vq_should_interrupt(&q), "nothing new since");

	wr16(USED_EVENT(q), 2);   /* interrupt once entry 2 is used (used.idx 3) */
	cr_assert_eq(vq_pop(&q, &chain, &why), 1);
	vq_push(&q, chain.head, 0);   /* used.idx 2 */
	cr_assert_not(vq_should_interrupt(&q));
	cr_assert_eq(vq_pop(&q, &chain, &why), 1);
	vq_push(&q, chain.head, 0);   /* used.idx 3 */
	cr_assert(vq_should_interrupt(&q));
	cr_assert_eq(vq_pop(&q, &chain, &why), 1);
	vq_push(&q, chain.head, 0);   /* used.idx 4: event 2 already passed */
	cr_assert_not(vq_should_interrupt(&q));

	/* Several pushes at once: one interrupt if the event lies among them. */
	wr16(USED_EVENT(q), 5);
	for (int k = 0; k < 3; k++) {
		cr_assert_eq(vq_pop(&q, &chain, &why), 1);
		vq_push(&q, chain.head, 0);
	}
	cr_assert(vq_should_interrupt(&q));
}

Test(queue, no_interrupt_flag_without_event_idx)
{
	start(8, false);
	for (uint16_t i = 0; i < 3; i++) {
		make_chain(i, 0, 1);
		publish(i);
	}
	wr16(USED_EVENT(q), 100);   /* ignored without EVENT_IDX */
	cr_assert_eq(vq_pop(&q, &chain, &why), 1);
	vq_push(&q, chain.head, 0);
	cr_assert(vq_should_interrupt(&q));
	wr16(AVAIL_FLAGS(q), NO_INTERRUPT);
	cr_assert_eq(vq_pop(&q, &chain, &why), 1);
	vq_push(&q, chain.head, 0);
	cr_assert_not(vq_should_interrupt(&q));
	wr16(AVAIL_FLAGS(q), 0);
	cr_assert_eq(vq_pop(&q, &chain, &why), 1);
	vq_push(&q, chain.head, 0);
	cr_assert(vq_should_interrupt(&q));
	cr_assert_eq(rd16(AVAIL_EVENT(q)), 0, "avail_event is not written without EVENT_IDX");
}

/*
 * The dangerous moment, made deterministic: the used ring page is read-only,
 * so the device's avail_event store faults, and the handler plays a driver
 * that adds an entry right then. It reads the old avail_event and sends no
 * kick, so the device must find the entry by reading avail.idx again.
 */
static uint8_t *used_page;
static volatile sig_atomic_t faults;
static bool drv_kicked;

static void racing_driver(int sig, siginfo_t *si, void *uc)
{
	uint16_t old = drv_avail;

	(void)uc;
	if ((uint8_t *)si->si_addr < used_page || (uint8_t *)si->si_addr >= used_page + 4096) {
		signal(sig, SIG_DFL);   /* a real crash: let it happen */
		return;
	}
	faults++;
	publish(1);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	drv_kicked = need_event(rd16(AVAIL_EVENT(q)), drv_avail, old);
	mprotect(used_page, 4096, PROT_READ | PROT_WRITE);
}

Test(queue, event_idx_rechecks_after_publishing_avail_event)
{
	struct sigaction sa = { .sa_sigaction = racing_driver, .sa_flags = SA_SIGINFO }, old_sa;
	int r;

	start(8, true);
	make_chain(0, 1, 0);
	make_chain(1, 1, 0);
	publish(0);
	cr_assert_eq(vq_pop(&q, &chain, &why), 1);
	used_page = ram + USED_GPA;
	cr_assert_eq(sigaction(SIGSEGV, &sa, &old_sa), 0);
	cr_assert_eq(mprotect(used_page, 4096, PROT_READ), 0);
	r = vq_pop(&q, &chain, &why);
	mprotect(used_page, 4096, PROT_READ | PROT_WRITE);
	sigaction(SIGSEGV, &old_sa, NULL);
	cr_assert_eq(faults, 1, "the device stores avail_event once");
	cr_assert_not(drv_kicked, "the driver saw the old avail_event: no kick");
	cr_assert_eq(r, 1, "so the device must find the entry itself");
	cr_assert_eq(chain.head, 1);
	cr_assert_eq(rd16(AVAIL_EVENT(q)), 1);
}

/*
 * No kick lost, end to end: a driver thread adds one request at a time and
 * kicks only when avail_event asks; the device pops until empty, then sleeps
 * until a kick. A device that published avail_event wrongly, or went idle
 * without re-checking, could sleep through a request and time out here.
 */
#define RACE_ROUNDS 100000

static sem_t kick;
static int device_rc;        /* set once by the device thread when it stops early */
static unsigned device_done;

static void *race_device(void *arg)
{
	struct timespec deadline;
	const char *err = NULL;

	(void)arg;
	while (device_done < RACE_ROUNDS) {
		int r = vq_pop(&q, &chain, &err);

		if (r < 0) {
			__atomic_store_n(&device_rc, r, __ATOMIC_RELAXED);
			return NULL;
		}
		if (r) {
			vq_push(&q, chain.head, 0);
			__atomic_store_n(&device_done, device_done + 1, __ATOMIC_RELEASE);
			continue;
		}
		clock_gettime(CLOCK_REALTIME, &deadline);
		deadline.tv_sec += 5;
		if (sem_timedwait(&kick, &deadline)) {
			__atomic_store_n(&device_rc, -ETIMEDOUT, __ATOMIC_RELAXED);
			return NULL;
		}
	}
	return NULL;
}

Test(queue, event_idx_loses_no_kick_under_race, .timeout = 100)
{
	pthread_t dev;
	unsigned kicks = 0;

	start(4, true);
	make_chain(0, 1, 0);
	cr_assert_eq(sem_init(&kick, 0, 0), 0);
	cr_assert_eq(pthread_create(&dev, NULL, race_device, NULL), 0);
	for (unsigned i = 0; i < RACE_ROUNDS && !__atomic_load_n(&device_rc, __ATOMIC_RELAXED); i++) {
		uint16_t old = drv_avail;

		publish(0);
		/* Full fence (driver side): avail.idx out before reading avail_event. */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		if (need_event(rd16(AVAIL_EVENT(q)), drv_avail, old)) {
			sem_post(&kick);
			kicks++;
		}
		while (__atomic_load_n(&device_done, __ATOMIC_ACQUIRE) <= i &&
		       !__atomic_load_n(&device_rc, __ATOMIC_RELAXED))
			sched_yield();
	}
	pthread_join(dev, NULL);
	sem_destroy(&kick);
	cr_assert_eq(device_rc, 0, "device: %s", device_rc == -ETIMEDOUT ? "kick lost" : "violation");
	cr_assert_eq(device_done, RACE_ROUNDS);
	cr_assert_gt(kicks, 0);
}

/* ---- the hostile driver ---- */

Test(queue, rejects_descriptor_loop)
{
	start(8, false);
	set_desc(0, buf(0), 16, F_NEXT, 1);
	set_desc(1, buf(1), 16, F_NEXT, 0);   /* A -> B -> A */
	publish(0);
	expect_violation("longer than the queue");
}

Test(queue, rejects_chain_longer_than_queue)
{
	start(4, false);
	make_chain(0, 4, 0);
	set_desc(3, buf(3), 16, F_NEXT, 0);   /* all four, then round again */
	publish(0);
	expect_violation("longer than the queue");
}

Test(queue, rejects_head_out_of_range)
{
	start(8, false);
	make_chain(0, 1, 0);
	publish(8);
	expect_violation("head out of range");
	setup();
	start(8, false);
	publish(0xffff);
	expect_violation("head out of range");
}

Test(queue, rejects_next_out_of_range)
{
	start(8, false);
	set_desc(0, buf(0), 16, F_NEXT, 8);
	publish(0);
	expect_violation("next index out of range");
}

Test(queue, rejects_buffer_beyond_ram)
{
	start(8, false);
	set_desc(0, RAM_SIZE, 1, 0, 0);
	publish(0);
	expect_violation("outside guest RAM");
	setup();
	start(8, false);
	set_desc(0, RAM_SIZE - 10, 100, F_WRITE, 0);   /* straddles the top */
	publish(0);
	expect_violation("outside guest RAM");
}

Test(queue, rejects_buffer_wrapping_past_2_64)
{
	start(8, false);
	set_desc(0, UINT64_MAX - 10, 100, F_WRITE, 0);
	publish(0);
	expect_violation("outside guest RAM");
}

Test(queue, rejects_zero_length)
{
	start(8, false);
	set_desc(0, buf(0), 16, F_NEXT, 1);
	set_desc(1, buf(1), 0, F_WRITE, 0);
	publish(0);
	expect_violation("zero-length");
}

Test(queue, rejects_length_ffffffff)
{
	start(8, false);
	set_desc(0, BUF_GPA, 0xffffffff, F_WRITE, 0);
	publish(0);
	expect_violation("outside guest RAM");
}

/* Each segment fits in RAM, but together they reach 4 GiB: needs real RAM
 * that large (MAP_NORESERVE: only the touched ring pages cost anything). */
Test(queue, rejects_chain_total_of_4_gib)
{
	struct guest_mem big;

	cr_assert_eq(mem_init(&big, 3ULL << 30, &x86_ram), 0);
	ram = big.base;   /* the driver helpers now write the big RAM */
	configure(8, false);
	cr_assert_eq(vq_activate(&q, &big, &why), 0, "%s", why);
	set_desc(0, 0x100000, 0x80000000, F_NEXT, 1);
	set_desc(1, 0x100000, 0x80000000, F_WRITE, 0);
	publish(0);
	why = NULL;
	cr_assert_eq(vq_pop(&q, &chain, &why), -EINVAL);
	cr_assert(why && strstr(why, "4 GiB"), "got \"%s\"", why ? why : "(null)");
	cr_assert_eq(q.last_avail_idx, 0);
	/* One byte less is fine. */
	set_desc(1, 0x100000, 0x7fffffff, F_WRITE, 0);
	cr_assert_eq(vq_pop(&q, &chain, &why), 1, "%s", why);
	cr_assert_eq(chain.readable_len, 0x80000000u);
	cr_assert_eq(chain.writable_len, 0x7fffffffu);
	mem_free(&big);
}

Test(queue, rejects_avail_index_more_than_size_ahead)
{
	start(8, false);
	for (uint16_t i = 0; i < 8; i++)
		make_chain(i, 1, 0);
	wr16(AVAIL_IDX(q), 9);
	expect_violation("avail index");
	/* Exactly `size` ahead is a full ring, and fine. */
	setup();
	start(8, false);
	for (uint16_t i = 0; i < 8; i++) {
		make_chain(i, 1, 0);
		publish(i);
	}
	for (int k = 0; k < 8; k++)
		cr_assert_eq(vq_pop(&q, &chain, &why), 1, "%s", why);
}

Test(queue, rejects_avail_index_going_back)
{
	start(8, false);
	make_chain(0, 1, 0);
	make_chain(1, 1, 0);
	publish(0);
	publish(1);
	cr_assert_eq(vq_pop(&q, &chain, &why), 1);
	cr_assert_eq(vq_pop(&q, &chain, &why), 1);
	wr16(AVAIL_IDX(q), 1);
	expect_violation("avail index");
}

Test(queue, rejects_readable_after_writable)
{
	start(8, false);
	set_desc(0, buf(0), 16, F_NEXT | F_WRITE, 1);
	set_desc(1, buf(1), 16, 0, 0);
	publish(0);
	expect_violation("readable descriptor after a writable");
}

Test(queue, rejects_indirect_descriptor)
{
	start(8, false);
	set_desc(0, buf(0), 16, F_INDIRECT, 0);
	set_desc(8, buf(1), 16, 0, 0);   /* a plausible indirect table at buf(0) */
	memcpy(ram + buf(0), ram + DESC_GPA + 16 * 8, 16);
	publish(0);
	expect_violation("indirect");
}

Test(queue, rejects_same_head_twice_in_one_batch)
{
	start(8, false);
	make_chain(0, 1, 1);
	publish(0);
	publish(0);
	cr_assert_eq(vq_pop(&q, &chain, &why), 1, "%s", why);
	expect_violation("twice");
}

Test(queue, push_ignores_head_out_of_range)
{
	uint8_t before[4 + 8 * 8 + 2];

	start(8, false);
	memcpy(before, ram + USED_GPA, sizeof(before));
	vq_push(&q, 8, 1);
	vq_push(&q, 0xffff, 1);
	cr_assert_eq(q.used_idx, 0);
	cr_assert_eq(memcmp(before, ram + USED_GPA, sizeof(before)), 0);
	check_guards();
}
