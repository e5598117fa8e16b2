/* test_device_snapshot.c - the UART, the i8042 and the boot timer saved mid-use and restored into fresh devices: they go on as if never stopped. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "devices/boot_timer.h"
#include "devices/i8042.h"
#include "devices/serial.h"
#include "uart_spec.h"

/* The serial payload as docs/snapshot.md lays it out. */
#define P_IER    0
#define P_MCR    2
#define P_FCR    6
#define P_FLAGS  7
#define P_COUNT  8
#define P_RX     9
#define P_LEN    25

/* One UART and what its callbacks saw. */
struct uart {
	struct serial s;
	atomic_int irq_calls, level, notifies;
};

static struct uart *a, *b;   /* the snapshotted UART, and the one restored from it */
static struct snap_out o;

static void rec_irq(void *opaque, int level)
{
	struct uart *u = opaque;

	atomic_fetch_add(&u->irq_calls, 1);
	atomic_store(&u->level, level);
}

static void rec_notify(void *opaque)
{
	struct uart *u = opaque;

	atomic_fetch_add(&u->notifies, 1);
}

static struct uart *uart_new(void)
{
	struct uart *u = calloc(1, sizeof(*u));

	cr_assert_not_null(u);
	serial_init(&u->s, rec_irq, rec_notify, u);
	return u;
}

static void setup(void)
{
	a = uart_new();
	b = uart_new();
	snap_out_init(&o);
}

static void teardown(void)
{
	serial_destroy(&a->s);
	serial_destroy(&b->s);
	free(a);
	free(b);
	snap_out_free(&o);
}

static void wr(struct uart *u, unsigned off, uint8_t val)
{
	serial_io(&u->s, off, &val, 1, true);
}

static uint8_t rd(struct uart *u, unsigned off)
{
	uint8_t val = 0x5a;

	serial_io(&u->s, off, &val, 1, false);
	return val;
}

/* Both UARTs read the same at `off` (reads have side effects: both get them). */
static uint8_t same(unsigned off)
{
	uint8_t va = rd(a, off), vb = rd(b, off);

	cr_assert_eq(vb, va, "register %u reads 0x%02x restored, 0x%02x before", off, vb, va);
	cr_assert_eq(atomic_load(&b->level), atomic_load(&a->level), "irq line differs after "
		     "reading register %u", off);
	return va;
}

/* A UART in the middle of things: divisor set, interrupts on, FIFO
 * enabled and wrapped round full, an overrun from loopback, THRE pending,
 * and the host holding bytes the FIFO turned away. */
static void drive(struct uart *u)
{
	const uint8_t *first = (const uint8_t *)"0123456789a", *second = (const uint8_t *)"bcdefghXYZ";

	wr(u, LCR, 0x80);
	wr(u, DLL, 0x34);
	wr(u, DLM, 0x12);
	wr(u, LCR, 0x1b);
	wr(u, FCR, 0xc1);
	wr(u, SCR, 0xa5);
	wr(u, MCR, MCR_LOOP);
	for (int i = 0; i < 17; i++)
		wr(u, THR, 'L');   /* 16 fit, the 17th overruns */
	wr(u, MCR, MCR_OUT2 | MCR_DTR | MCR_RTS);
	wr(u, FCR, 0xc3);      /* clears the looped-back bytes, keeps the overrun */
	cr_assert_eq(serial_receive(&u->s, first, 11), 11);
	for (int i = 0; i < 3; i++)
		rd(u, RBR);
	cr_assert_eq(serial_receive(&u->s, second, 10), 8, "the FIFO takes 8 more");
	wr(u, IER, IER_RDI | IER_THRI | IER_RLSI);
	wr(u, THR, '!');
	cr_assert_eq(atomic_load(&u->level), 1);
}

TestSuite(device_snapshot, .init = setup, .fini = teardown);

Test(device_snapshot, serial_goes_on_exactly)
{
	uint8_t out[8];
	const char *why = "";
	int irq_calls;

	drive(a);
	serial_save(&a->s, &o);
	cr_assert_eq(o.err, 0);
	cr_assert_eq(o.len, SERIAL_STATE_LEN);
	cr_assert_eq(serial_restore(&b->s, o.data, o.len, &why), 0, "%s", why);
	cr_assert_eq(atomic_load(&b->irq_calls), 0, "a restore signals nothing: the saved "
		     "interrupt controllers have the line");
	atomic_store(&b->level, atomic_load(&a->level));
	cr_assert_eq(serial_take_output(&b->s, out, sizeof(out)), 0, "output is not saved");

	/* Read back in an order that consumes each source of interrupt. */
	wr(a, LCR, 0x9b);
	wr(b, LCR, 0x9b);
	cr_assert_eq(same(DLL), 0x34);
	cr_assert_eq(same(DLM), 0x12);
	wr(a, LCR, 0x1b);
	wr(b, LCR, 0x1b);
	cr_assert_eq(same(IER), IER_RDI | IER_THRI | IER_RLSI);
	cr_assert_eq(same(LCR), 0x1b);
	cr_assert_eq(same(MCR), MCR_OUT2 | MCR_DTR | MCR_RTS);
	cr_assert_eq(same(SCR), 0xa5);
	same(MSR);
	cr_assert_eq(same(IIR), 0xc6, "overrun first, FIFO enabled");
	cr_assert_eq(same(LSR) & (LSR_OE | LSR_DR), LSR_OE | LSR_DR);
	cr_assert_eq(same(IIR), 0xc4, "then receive data");
	for (const char *want = "3456789abcdefgh"; *want; want++)
		cr_assert_eq(same(RBR), (uint8_t)*want);
	cr_assert_gt(atomic_load(&a->notifies), 0, "the old console held bytes back");
	cr_assert_eq(atomic_load(&b->notifies), 0, "the new console holds none");
	cr_assert_eq(same(RBR), 'X', "the 16th byte");
	cr_assert_eq(same(IIR), 0xc2, "then THRE");
	cr_assert_eq(same(IIR), 0xc1, "and nothing");
	cr_assert_eq(atomic_load(&b->level), 0);

	/* And on: a byte in raises the line on both. */
	irq_calls = atomic_load(&b->irq_calls);
	cr_assert_eq(serial_receive(&b->s, (const uint8_t *)"z", 1), 1);
	cr_assert_eq(atomic_load(&b->level), 1);
	cr_assert_eq(atomic_load(&b->irq_calls), irq_calls + 1);
	cr_assert_eq(rd(b, RBR), 'z');
	wr(b, THR, 'o');
	cr_assert_eq(serial_take_output(&b->s, out, sizeof(out)), 1);
	cr_assert_eq(out[0], 'o');
}

Test(device_snapshot, serial_saves_what_it_restored)
{
	struct snap_out again;
	const char *why = "";

	drive(a);
	serial_save(&a->s, &o);
	cr_assert_eq(serial_restore(&b->s, o.data, o.len, &why), 0, "%s", why);
	snap_out_init(&again);
	serial_save(&b->s, &again);
	cr_assert_eq(again.len, o.len);
	cr_assert_arr_eq(again.data, o.data, o.len);
	snap_out_free(&again);
}

Test(device_snapshot, serial_power_on_round_trips)
{
	const char *why = "";

	serial_save(&a->s, &o);
	cr_assert_eq(serial_restore(&b->s, o.data, o.len, &why), 0, "%s", why);
	cr_assert_eq(rd(b, IIR), 0x01);
	cr_assert_eq(rd(b, LSR) & (LSR_DR | LSR_OE), 0);
	cr_assert_eq(atomic_load(&b->irq_calls), 0);
}

/* A refused payload changes nothing: b still saves as a UART at power-on. */
static void expect_serial_refused(const uint8_t *p, size_t len, const char *what)
{
	struct snap_out fresh, now;
	const char *why = "";
	int rc = serial_restore(&b->s, p, len, &why);

	cr_assert_eq(rc, -EBADMSG, "%s: accepted (rc %d)", what, rc);
	cr_assert(strstr(why, "serial"), "%s: why '%s' does not name the device", what, why);
	snap_out_init(&fresh);
	snap_out_init(&now);
	serial_save(&a->s, &fresh);
	serial_save(&b->s, &now);
	cr_assert_arr_eq(now.data, fresh.data, fresh.len, "%s: refused, yet state changed", what);
	snap_out_free(&fresh);
	snap_out_free(&now);
}

Test(device_snapshot, serial_refuses_bad_payloads)
{
	static const struct {
		size_t off;
		uint8_t val;
		const char *what;
	} patches[] = {
		{ P_IER, 0x17, "IER bit 4" },
		{ P_MCR, 0x2b, "MCR bit 5" },
		{ P_FCR, 0xc3, "FCR's self-clearing bit" },
		{ P_FLAGS, 0x07, "an unknown flag" },
		{ P_COUNT, 17, "17 bytes in a 16-byte FIFO" },
		{ P_COUNT, 15, "a byte past the count" },
	};
	uint8_t good[P_LEN + 1], p[P_LEN + 1];
	struct uart *c = uart_new();

	drive(c);
	serial_save(&c->s, &o);
	serial_destroy(&c->s);
	free(c);
	cr_assert_eq(o.len, P_LEN);
	memcpy(good, o.data, P_LEN);
	for (size_t len = 0; len < P_LEN; len++)
		expect_serial_refused(good, len, "cut short");
	good[P_LEN] = 0;
	expect_serial_refused(good, P_LEN + 1, "a byte too many");

	for (size_t i = 0; i < sizeof(patches) / sizeof(patches[0]); i++) {
		memcpy(p, good, P_LEN);
		p[patches[i].off] = patches[i].val;
		expect_serial_refused(p, P_LEN, patches[i].what);
	}
	memcpy(p, good, P_LEN);
	p[P_COUNT] = 15;
	p[P_RX + 15] = 0;
	cr_assert_eq(serial_restore(&b->s, p, P_LEN, NULL), 0, "15 bytes and a zero after them");
}

/* ---- i8042 ---- */

static int resets;

static void count_reset(void *opaque)
{
	(void)opaque;
	resets++;
}

Test(device_snapshot, i8042_has_nothing_and_still_resets)
{
	struct i8042 x, y;
	uint8_t cmd = 0xfe, junk = 0;
	const char *why = "";

	i8042_init(&x, count_reset, NULL);
	i8042_init(&y, count_reset, NULL);
	i8042_save(&x, &o);
	cr_assert_eq(o.len, 0);
	cr_assert_eq(i8042_restore(&y, o.data, o.len, &why), 0, "%s", why);
	cr_assert_eq(i8042_restore(&y, &junk, 1, &why), -EBADMSG);
	cr_assert(strstr(why, "i8042"), "why: %s", why);
	resets = 0;
	i8042_cmd_io(&y, 0, &cmd, 1, true);
	cr_assert_eq(resets, 1);
}

/* ---- boot timer ---- */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void ready(struct boot_timer *bt)
{
	uint8_t magic = BOOT_TIMER_MAGIC;

	boot_timer_io(bt, 0, &magic, 1, true);
}

Test(device_snapshot, boot_timer_fired_counts_as_fired_at_restore)
{
	struct boot_timer x, y;
	const char *why = "";
	uint64_t us;

	boot_timer_init(&x, now_ns() - 2000000ULL);
	ready(&x);
	boot_timer_save(&x, &o);
	cr_assert_eq(o.len, 8);
	/* The restoring process started 5 s ago. */
	boot_timer_init(&y, now_ns() - 5000000000ULL);
	cr_assert_eq(boot_timer_restore(&y, o.data, o.len, &why), 0, "%s", why);
	us = boot_timer_elapsed_us(&y);
	cr_assert_geq(us, 5000000, "elapsed %llu us: not from this process's start",
		      (unsigned long long)us);
	cr_assert_lt(us, 65000000, "elapsed %llu us", (unsigned long long)us);
	ready(&y);   /* a guest that writes again is not the boot */
	cr_assert_eq(boot_timer_elapsed_us(&y), us);
}

Test(device_snapshot, boot_timer_not_fired_waits_for_the_guest)
{
	struct boot_timer x, y;
	const char *why = "";

	boot_timer_init(&x, now_ns());
	boot_timer_save(&x, &o);
	boot_timer_init(&y, now_ns() - 1000000ULL);
	cr_assert_eq(boot_timer_restore(&y, o.data, o.len, &why), 0, "%s", why);
	cr_assert_eq(boot_timer_elapsed_us(&y), 0);
	ready(&y);
	cr_assert_geq(boot_timer_elapsed_us(&y), 1000);
}

Test(device_snapshot, boot_timer_refuses_other_lengths)
{
	struct boot_timer y;
	uint8_t p[9] = { 1 };
	const char *why = "";

	boot_timer_init(&y, now_ns());
	for (size_t len = 0; len <= sizeof(p); len++) {
		if (len == 8)
			continue;
		cr_assert_eq(boot_timer_restore(&y, p, len, &why), -EBADMSG, "%zu bytes", len);
		cr_assert(strstr(why, "boot timer"), "why: %s", why);
		cr_assert_eq(boot_timer_elapsed_us(&y), 0);
	}
}
