/* test_serial.c - the 16550A model against the register behaviour Linux's 8250 driver relies on. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "devices/serial.h"
#include "uart_spec.h"

#define MAX_IRQ_CALLS 64

struct rec {
	atomic_int irq_calls;
	atomic_int level;
	int levels[MAX_IRQ_CALLS];
	atomic_int notifies;
};

static struct serial *s;
static struct rec rec;

static void rec_irq(void *opaque, int level)
{
	struct rec *r = opaque;
	int n = atomic_fetch_add(&r->irq_calls, 1);

	if (n < MAX_IRQ_CALLS)
		r->levels[n] = level;
	atomic_store(&r->level, level);
}

static void rec_notify(void *opaque)
{
	struct rec *r = opaque;

	atomic_fetch_add(&r->notifies, 1);
}

static void setup(void)
{
	memset(&rec, 0, sizeof(rec));
	s = malloc(sizeof(*s));
	cr_assert_not_null(s);
	serial_init(s, rec_irq, rec_notify, &rec);
}

static void teardown(void)
{
	serial_destroy(s);
	free(s);
}

static void wr(unsigned off, uint8_t val)
{
	serial_io(s, off, &val, 1, true);
}

static uint8_t rd(unsigned off)
{
	uint8_t val = 0x5a;

	serial_io(s, off, &val, 1, false);
	return val;
}

static size_t take_all(uint8_t *buf, size_t max)
{
	return serial_take_output(s, buf, max);
}

TestSuite(serial, .init = setup, .fini = teardown);

Test(serial, power_on_state)
{
	cr_assert_eq(rd(IER), 0);
	cr_assert_eq(rd(IIR), 0x01);
	cr_assert_eq(rd(LCR), 0);
	cr_assert_eq(rd(MCR), 0);
	cr_assert_eq(rd(LSR), LSR_THRE | LSR_TEMT);
	cr_assert_eq(rd(MSR), 0xb0, "carrier, DSR and CTS asserted");
	cr_assert_eq(rd(RBR), 0, "empty receiver reads 0");
	cr_assert_eq(atomic_load(&rec.irq_calls), 0);
}

Test(serial, dlab_switches_divisor_latch)
{
	uint8_t out[4];

	wr(LCR, 0x83);
	wr(DLL, 0x01);
	wr(DLM, 0x02);
	cr_assert_eq(rd(DLL), 0x01);
	cr_assert_eq(rd(DLM), 0x02);
	cr_assert_eq(take_all(out, sizeof(out)), 0, "a DLL write is not output");
	cr_assert_eq(rd(LCR), 0x83);

	wr(LCR, 0x03);
	wr(IER, IER_RDI);
	cr_assert_eq(rd(IER), IER_RDI, "IER is separate from DLM");
	wr(THR, 'x');
	cr_assert_eq(take_all(out, sizeof(out)), 1);
	cr_assert_eq(out[0], 'x');

	wr(LCR, 0x83);
	cr_assert_eq(rd(DLL), 0x01, "divisor retained across DLAB off/on");
	cr_assert_eq(rd(DLM), 0x02);
	wr(LCR, 0x03);
	cr_assert_eq(rd(IER), IER_RDI, "IER retained across DLAB on/off");
}

Test(serial, scratch_register)
{
	wr(SCR, 0xa5);
	cr_assert_eq(rd(SCR), 0xa5);
	wr(SCR, 0x00);
	cr_assert_eq(rd(SCR), 0x00);
}

Test(serial, ier_keeps_low_four_bits)
{
	wr(IER, 0xff);
	cr_assert_eq(rd(IER), 0x0f);
	wr(IER, 0x00);
	cr_assert_eq(rd(IER), 0x00);
}

/* The sequence of drivers/tty/serial/8250 autoconfig() up to the type test. */
Test(serial, linux_autoconfig_finds_16550a)
{
	uint8_t save_mcr, iir;

	wr(IER, 0);
	cr_assert_eq(rd(IER) & 0x0f, 0);
	wr(IER, 0x0f);
	cr_assert_eq(rd(IER) & 0x0f, 0x0f);
	wr(IER, 0);

	save_mcr = rd(MCR);
	wr(MCR, MCR_LOOP | 0x0a);
	cr_assert_eq(rd(MSR) & 0xf0, 0x90, "loopback test");
	wr(MCR, save_mcr);

	wr(LCR, 0xbf);
	wr(2, 0);       /* EFR, which a 16550A does not have */
	wr(LCR, 0);
	wr(FCR, 0x01);
	iir = rd(IIR);
	cr_assert_eq(iir >> 6, 3, "FIFOs enabled");
	cr_assert_eq(iir & 0x30, 0, "no 64-byte FIFO, no EFR-like bits");

	/* 16650 check: with LCR 0xbf the EFR read must not be 0. */
	wr(LCR, 0xbf);
	cr_assert_neq(rd(2), 0);
	/* 16750 check: FCR bit 5 with DLAB must not show IIR bit 5. */
	wr(LCR, 0x80);
	wr(FCR, 0x21);
	cr_assert_eq(rd(IIR) & 0xe0, 0xc0);
	wr(LCR, 0);
}

/* size_fifo(): loopback 256 bytes, count how many come back. */
Test(serial, loopback_sizes_fifo_at_16)
{
	uint8_t out[4];
	int count;

	wr(FCR, 0x07);
	wr(MCR, MCR_LOOP);
	for (int i = 0; i < 256; i++)
		wr(THR, (uint8_t)i);
	for (count = 0; (rd(LSR) & LSR_DR) && count < 256; count++)
		cr_assert_eq(rd(RBR), count);
	cr_assert_eq(count, SERIAL_RX_FIFO);
	cr_assert_eq(take_all(out, sizeof(out)), 0, "loopback bytes never reach the host");
	cr_assert_eq(serial_dropped(s), 0);
}

Test(serial, iir_fifo_bits_follow_fcr)
{
	cr_assert_eq(rd(IIR), 0x01);
	wr(FCR, 0x01);
	cr_assert_eq(rd(IIR), 0xc1);
	wr(FCR, 0x00);
	cr_assert_eq(rd(IIR), 0x01);
	wr(FCR, 0xc1);
	wr(MCR, MCR_OUT2);
	wr(IER, IER_THRI);
	cr_assert_eq(rd(IIR), 0xc2);
	cr_assert_eq(rd(IIR), 0xc1);
}

Test(serial, thre_set_on_enable_cleared_by_iir_read)
{
	wr(MCR, MCR_OUT2);
	cr_assert_eq(atomic_load(&rec.irq_calls), 0);
	wr(IER, IER_THRI);
	cr_assert_eq(atomic_load(&rec.level), 1);
	cr_assert_eq(rd(IIR), 0x02);
	cr_assert_eq(atomic_load(&rec.level), 0, "IIR read acknowledges THRE");
	cr_assert_eq(rd(IIR), 0x01);

	wr(THR, 'a');
	cr_assert_eq(atomic_load(&rec.level), 1, "THR write re-raises THRE");
	cr_assert_eq(rd(IIR), 0x02);
	cr_assert_eq(rd(IIR), 0x01);

	/* Enabling an already-enabled THRI is no new edge. */
	wr(IER, IER_THRI);
	cr_assert_eq(rd(IIR), 0x01);
	cr_assert_eq(atomic_load(&rec.irq_calls), 4);
}

/* serial8250_do_startup: THRE must be reasserted when IER is toggled,
 * or Linux marks the port UART_BUG_THRE / UART_BUG_TXEN. */
Test(serial, linux_startup_thre_retest)
{
	uint8_t iir1, iir2, lsr;

	wr(IER, IER_THRI);
	iir1 = rd(IIR);
	wr(IER, 0);
	wr(IER, IER_THRI);
	iir2 = rd(IIR);
	wr(IER, 0);
	cr_assert_eq(iir1 & 0x01, 0);
	cr_assert_eq(iir2 & 0x01, 0);

	wr(IER, IER_THRI);
	lsr = rd(LSR);
	iir2 = rd(IIR);
	wr(IER, 0);
	cr_assert(lsr & LSR_TEMT);
	cr_assert_eq(iir2 & 0x0f, 0x02);
}

Test(serial, thre_masked_by_ier)
{
	wr(MCR, MCR_OUT2);
	wr(THR, 'a');
	cr_assert_eq(rd(IIR), 0x01, "THRI disabled: nothing reported");
	cr_assert_eq(atomic_load(&rec.irq_calls), 0);
	wr(IER, IER_THRI);
	wr(IER, 0);
	cr_assert_eq(atomic_load(&rec.level), 0);
	cr_assert_eq(rd(IIR), 0x01);
}

Test(serial, rx_interrupt_until_fifo_drained)
{
	const uint8_t in[] = "ab";

	wr(MCR, MCR_OUT2);
	wr(IER, IER_RDI);
	cr_assert_eq(atomic_load(&rec.irq_calls), 0);
	cr_assert_eq(serial_receive(s, in, 2), 2);
	cr_assert_eq(atomic_load(&rec.level), 1);
	cr_assert_eq(rd(IIR), 0x04);
	cr_assert_eq(rd(IIR), 0x04, "IIR read does not clear receive data");
	cr_assert(rd(LSR) & LSR_DR);
	cr_assert_eq(rd(RBR), 'a');
	cr_assert_eq(atomic_load(&rec.level), 1);
	cr_assert_eq(rd(RBR), 'b');
	cr_assert_eq(atomic_load(&rec.level), 0);
	cr_assert_eq(rd(IIR), 0x01);
	cr_assert_eq(rd(LSR) & LSR_DR, 0);
	cr_assert_eq(atomic_load(&rec.irq_calls), 2);
}

Test(serial, iir_priority_rx_over_thre)
{
	const uint8_t in = 'z';

	wr(FCR, 0x01);
	wr(IER, IER_RDI | IER_THRI);
	serial_receive(s, &in, 1);
	cr_assert_eq(rd(IIR), 0xc4);
	cr_assert_eq(rd(IIR), 0xc4, "THRE stays pending behind RX");
	cr_assert_eq(rd(RBR), 'z');
	cr_assert_eq(rd(IIR), 0xc2);
	cr_assert_eq(rd(IIR), 0xc1);
}

Test(serial, overrun_raises_line_status_until_lsr_read)
{
	wr(MCR, MCR_LOOP | MCR_OUT2);
	wr(IER, IER_RLSI | IER_RDI);
	for (int i = 0; i < SERIAL_RX_FIFO + 1; i++)
		wr(THR, (uint8_t)i);
	cr_assert_eq(rd(IIR), 0x06, "line status outranks data");
	cr_assert_eq(rd(LSR), LSR_OE | LSR_DR | LSR_THRE | LSR_TEMT);
	cr_assert_eq(rd(LSR) & LSR_OE, 0, "LSR read clears OE");
	cr_assert_eq(rd(IIR), 0x04);
}

Test(serial, lsr_bits)
{
	const uint8_t in = 1;

	cr_assert_eq(rd(LSR), LSR_THRE | LSR_TEMT);
	wr(THR, 'q');
	cr_assert_eq(rd(LSR), LSR_THRE | LSR_TEMT, "output is immediate");
	serial_receive(s, &in, 1);
	cr_assert_eq(rd(LSR), LSR_DR | LSR_THRE | LSR_TEMT);
	rd(RBR);
	cr_assert_eq(rd(LSR), LSR_THRE | LSR_TEMT);
}

Test(serial, rx_fifo_holds_16_and_reports_accepted)
{
	uint8_t in[20];

	for (int i = 0; i < 20; i++)
		in[i] = (uint8_t)('A' + i);
	cr_assert_eq(serial_receive(s, in, sizeof(in)), SERIAL_RX_FIFO);
	cr_assert_eq(serial_receive(s, in + 16, 4), 0);
	cr_assert_eq(atomic_load(&rec.notifies), 0);

	cr_assert_eq(rd(RBR), 'A');
	cr_assert_eq(atomic_load(&rec.notifies), 1, "room after a refusal wakes the host");
	cr_assert_eq(rd(RBR), 'B');
	cr_assert_eq(atomic_load(&rec.notifies), 1, "one wakeup per refusal");
	cr_assert_eq(serial_receive(s, in + 16, 4), 2);
	for (int i = 2; i < 18; i++)
		cr_assert_eq(rd(RBR), 'A' + i);
	cr_assert_eq(rd(LSR) & LSR_DR, 0);
	cr_assert_eq(atomic_load(&rec.notifies), 2);
}

Test(serial, receive_without_refusal_never_notifies)
{
	const uint8_t in[] = "hi";

	serial_receive(s, in, 2);
	rd(RBR);
	rd(RBR);
	cr_assert_eq(atomic_load(&rec.notifies), 0);
}

Test(serial, fcr_clears_rx)
{
	const uint8_t in[] = "hello";

	wr(FCR, 0x01);
	serial_receive(s, in, 5);
	wr(FCR, 0x01 | 0x04);
	cr_assert(rd(LSR) & LSR_DR, "clearing the transmit FIFO keeps RX");
	wr(FCR, 0x01 | 0x02);
	cr_assert_eq(rd(LSR) & LSR_DR, 0);

	serial_receive(s, in, 5);
	wr(FCR, 0x00);
	cr_assert_eq(rd(LSR) & LSR_DR, 0, "disabling the FIFOs resets them");
}

Test(serial, fcr_clear_lowers_rx_irq_and_wakes_host)
{
	uint8_t in[SERIAL_RX_FIFO + 1] = { 0 };

	wr(MCR, MCR_OUT2);
	wr(IER, IER_RDI);
	wr(FCR, 0x01);
	cr_assert_eq(serial_receive(s, in, sizeof(in)), SERIAL_RX_FIFO);
	cr_assert_eq(atomic_load(&rec.level), 1);
	wr(FCR, 0x03);
	cr_assert_eq(atomic_load(&rec.level), 0);
	cr_assert_eq(atomic_load(&rec.notifies), 1);
}

Test(serial, loopback_byte_goes_to_rx_not_output)
{
	uint8_t out[4];

	wr(MCR, MCR_LOOP);
	wr(THR, 'L');
	cr_assert(rd(LSR) & LSR_DR);
	cr_assert_eq(rd(RBR), 'L');
	cr_assert_eq(take_all(out, sizeof(out)), 0);
	cr_assert_eq(atomic_load(&rec.notifies), 0);

	wr(MCR, 0);
	wr(THR, 'N');
	cr_assert_eq(rd(LSR) & LSR_DR, 0);
	cr_assert_eq(take_all(out, sizeof(out)), 1);
	cr_assert_eq(out[0], 'N');
}

Test(serial, loopback_msr_mirrors_mcr)
{
	static const struct { uint8_t mcr, msr; } map[] = {
		{ MCR_DTR, 0x20 }, { MCR_RTS, 0x10 }, { MCR_OUT1, 0x40 },
		{ MCR_OUT2, 0x80 }, { 0, 0x00 }, { 0x0f, 0xf0 },
	};

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		wr(MCR, MCR_LOOP | map[i].mcr);
		cr_assert_eq(rd(MSR), map[i].msr, "MCR %#x", map[i].mcr);
	}
	wr(MCR, 0);
	cr_assert_eq(rd(MSR), 0xb0);
	wr(MCR, 0xff);
	cr_assert_eq(rd(MCR), 0x1f, "MCR bits 7:5 read as 0");
}

Test(serial, output_in_order)
{
	const char *msg = "hello, world\n";
	uint8_t out[64];
	size_t n;

	for (const char *p = msg; *p; p++)
		wr(THR, (uint8_t)*p);
	n = take_all(out, sizeof(out));
	cr_assert_eq(n, strlen(msg));
	cr_assert_arr_eq(out, msg, n);
	cr_assert_eq(take_all(out, sizeof(out)), 0, "take drains");
}

Test(serial, take_partial_and_wraparound)
{
	static uint8_t out[SERIAL_OUT_MAX];
	size_t n, total = 0;

	/* Push the ring head most of the way round, then wrap. */
	for (int i = 0; i < SERIAL_OUT_MAX - 3; i++)
		wr(THR, 0);
	cr_assert_eq(take_all(out, SERIAL_OUT_MAX), SERIAL_OUT_MAX - 3);
	for (int i = 0; i < 10; i++)
		wr(THR, (uint8_t)(100 + i));
	while ((n = serial_take_output(s, out + total, 4)) > 0) {
		cr_assert_leq(n, 4);
		total += n;
	}
	cr_assert_eq(total, 10);
	for (int i = 0; i < 10; i++)
		cr_assert_eq(out[i], 100 + i);
	cr_assert_eq(serial_take_output(s, out, 0), 0);
}

Test(serial, overflow_drops_and_counts_exactly)
{
	static uint8_t out[SERIAL_OUT_MAX + 16];

	for (int i = 0; i < SERIAL_OUT_MAX + 10; i++)
		wr(THR, (uint8_t)i);
	cr_assert_eq(serial_dropped(s), 10);
	cr_assert_eq(take_all(out, sizeof(out)), SERIAL_OUT_MAX);
	for (int i = 0; i < SERIAL_OUT_MAX; i++)
		cr_assert_eq(out[i], (uint8_t)i, "oldest bytes kept, at %d", i);
	wr(THR, 'x');
	cr_assert_eq(take_all(out, sizeof(out)), 1);
	cr_assert_eq(out[0], 'x');
	cr_assert_eq(serial_dropped(s), 10);
}

Test(serial, notify_on_empty_to_nonempty_only)
{
	uint8_t out[8];

	wr(THR, 'a');
	wr(THR, 'b');
	wr(THR, 'c');
	cr_assert_eq(atomic_load(&rec.notifies), 1);
	cr_assert_eq(serial_take_output(s, out, 1), 1);
	wr(THR, 'd');
	cr_assert_eq(atomic_load(&rec.notifies), 1, "still non-empty: no wakeup");
	cr_assert_eq(take_all(out, sizeof(out)), 3);
	wr(THR, 'e');
	cr_assert_eq(atomic_load(&rec.notifies), 2);
}

Test(serial, irq_only_on_level_change)
{
	const uint8_t in[] = "abc";

	wr(IER, IER_RDI);
	serial_receive(s, in, 1);
	cr_assert_eq(atomic_load(&rec.irq_calls), 0, "OUT2 clear: line gated");
	cr_assert_eq(rd(IIR), 0x04, "the source is still reported");
	wr(MCR, MCR_OUT2);
	cr_assert_eq(atomic_load(&rec.irq_calls), 1);
	serial_receive(s, in + 1, 1);
	serial_receive(s, in + 2, 1);
	rd(LSR);
	rd(IIR);
	cr_assert_eq(atomic_load(&rec.irq_calls), 1, "same level: no call");
	wr(MCR, 0);
	cr_assert_eq(atomic_load(&rec.irq_calls), 2, "clearing OUT2 lowers the line");
	wr(MCR, MCR_OUT2);
	rd(RBR);
	rd(RBR);
	rd(RBR);
	cr_assert_eq(atomic_load(&rec.irq_calls), 4);
	cr_assert_eq(rec.levels[0], 1);
	cr_assert_eq(rec.levels[1], 0);
	cr_assert_eq(rec.levels[2], 1);
	cr_assert_eq(rec.levels[3], 0);
}

Test(serial, bad_offsets_and_lengths_are_safe)
{
	uint8_t buf[8];
	uint8_t out[16];

	memset(buf, 0, sizeof(buf));
	serial_io(s, 8, buf, 1, false);
	cr_assert_eq(buf[0], 0xff);
	serial_io(s, UINT64_MAX, buf, 8, false);
	for (int i = 0; i < 8; i++)
		cr_assert_eq(buf[i], 0xff);
	serial_io(s, UINT64_MAX - 3, buf, 8, true);
	serial_io(s, 100, buf, 4, true);

	/* A word at LSR covers LSR and MSR. */
	serial_io(s, LSR, buf, 2, false);
	cr_assert_eq(buf[0], LSR_THRE | LSR_TEMT);
	cr_assert_eq(buf[1], 0xb0);
	/* A dword at MSR runs past the last register. */
	memset(buf, 0, sizeof(buf));
	serial_io(s, MSR, buf, 4, false);
	cr_assert_eq(buf[0], 0xb0);
	cr_assert_eq(buf[1], 0);      /* SCR */
	cr_assert_eq(buf[2], 0xff);
	cr_assert_eq(buf[3], 0xff);

	/* A word write at LCR sets LCR and MCR. */
	buf[0] = 0x03;
	buf[1] = MCR_OUT2;
	serial_io(s, LCR, buf, 2, true);
	cr_assert_eq(rd(LCR), 0x03);
	cr_assert_eq(rd(MCR), MCR_OUT2);

	serial_io(s, 0, buf, 0, true);
	serial_io(s, 0, buf, 0, false);
	cr_assert_eq(take_all(out, sizeof(out)), 0, "no stray output");
	cr_assert_eq(atomic_load(&rec.irq_calls), 0);
}

Test(serial, null_callbacks_allowed)
{
	struct serial *q = malloc(sizeof(*q));
	uint8_t v = MCR_OUT2;
	const uint8_t in = 'x';

	cr_assert_not_null(q);
	serial_init(q, NULL, NULL, NULL);
	serial_io(q, MCR, &v, 1, true);
	v = IER_RDI | IER_THRI;
	serial_io(q, IER, &v, 1, true);
	v = 'a';
	serial_io(q, THR, &v, 1, true);
	cr_assert_eq(serial_receive(q, &in, 1), 1);
	serial_destroy(q);
	free(q);
}

#define WRITES_PER_THREAD 100000

static atomic_bool writers_done;

static void *writer(void *arg)
{
	(void)arg;
	for (int i = 0; i < WRITES_PER_THREAD; i++)
		wr(THR, (uint8_t)i);
	return NULL;
}

static void *reader(void *arg)
{
	size_t *taken = arg;
	uint8_t buf[4096];
	size_t n;

	for (;;) {
		bool done = atomic_load(&writers_done);

		while ((n = serial_take_output(s, buf, sizeof(buf))) > 0)
			*taken += n;
		if (done)
			break;
	}
	return NULL;
}

Test(serial, concurrent_writers_lose_nothing, .timeout = 60)
{
	pthread_t w1, w2, r;
	size_t taken = 0;

	atomic_store(&writers_done, false);
	/* IRQs on, so the level bookkeeping runs under contention too. */
	wr(MCR, MCR_OUT2);
	wr(IER, IER_THRI);
	cr_assert_eq(pthread_create(&r, NULL, reader, &taken), 0);
	cr_assert_eq(pthread_create(&w1, NULL, writer, NULL), 0);
	cr_assert_eq(pthread_create(&w2, NULL, writer, NULL), 0);
	pthread_join(w1, NULL);
	pthread_join(w2, NULL);
	atomic_store(&writers_done, true);
	pthread_join(r, NULL);

	cr_assert_eq(taken + serial_dropped(s), 2 * WRITES_PER_THREAD,
		     "taken %zu + dropped %llu", taken,
		     (unsigned long long)serial_dropped(s));
	cr_assert_geq(atomic_load(&rec.notifies), 1);
}
