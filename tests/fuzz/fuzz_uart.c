/* fuzz_uart.c - libFuzzer target: a hostile guest's port reads and writes on the 16550A UART and the i8042, against a model of what must come out. */
#include "devices/i8042.h"
#include "devices/serial.h"
#include "fuzz_common.h"

#include <stdio.h>

/*
 * Input: a script of at most MAX_OPS operations, one opcode byte (modulo 8)
 * then operands; a script cut short reads zeros (tests/fuzz/make-uart-seeds
 * writes the seeds):
 *   0 uart write   off:u8 len:u8 bytes[len]   an access of 1..8 bytes at
 *                                            offset off % 16 (past the
 *                                            eight registers: dropped)
 *   1 uart read    off:u8 len:u8
 *   2 host input   n:u8 bytes[n % 32]         serial_receive
 *   3 host output  max:u16                    serial_take_output
 *   4 burst        n:u8 byte:u8               n THR writes of one byte (the
 *                                            output ring filling; that it
 *                                            drops past SERIAL_OUT_MAX is
 *                                            test_serial's, too slow here)
 *   5 snapshot     -                          save, restore into a fresh
 *                                            UART, which must save the same
 *   6 i8042 data   off:u8 len:u8 w:u8 val:u8  port 0x60 (offset off % 4)
 *   7 i8042 cmd    off:u8 len:u8 w:u8 val:u8  port 0x64
 *
 * Every access goes through a buffer of exactly its length, so a device
 * writing past it is caught. Checks besides the sanitizers, against a model
 * kept here from what the guest and host did, not from the device's code:
 *  - the interrupt callback only ever reports a change of level;
 *  - every byte the guest writes to THR outside DLAB and loopback comes out
 *    of serial_take_output, in order, unless counted as dropped (only when
 *    SERIAL_OUT_MAX bytes wait), and nothing else comes out;
 *  - every byte the host's input or loopback put into the receive FIFO is
 *    read from RBR in order, and RBR reads nothing else while LSR says data
 *    ready (DR);
 *  - the i8042 asks for a reset exactly once per 0xFE written to the
 *    command port, and its status never has bit 1 (input full) set.
 */
#define MAX_OPS     256u

#define LCR_DLAB    0x80
#define MCR_LOOP    0x10
#define LSR_DR      0x01
#define FCR_ENABLE  0x01
#define FCR_CLEAR_RCVR 0x02

static struct serial uart;
static int irq_level;
static unsigned resets;
static bool verbose;

/* What must come out, kept from what the guest and host did: the
 * registers that decide where a byte goes, the bytes written to THR not yet
 * taken or dropped, and the bytes the receive FIFO holds. */
static struct {
	uint8_t lcr, mcr, fcr;
	uint8_t out[SERIAL_OUT_MAX];
	size_t out_head, out_len;
	uint64_t dropped;
	uint8_t rx[SERIAL_RX_FIFO];      /* what RBR must return, oldest first */
	unsigned rx_head, rx_len;
	unsigned thr_writes;
} model;

static void set_irq(void *opaque, int level)
{
	(void)opaque;
	if (level == irq_level)
		fuzz_broken("the interrupt callback reported no change of level", NULL);
	irq_level = level;
}

static void reset_requested(void *opaque)
{
	(void)opaque;
	resets++;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	verbose = fuzz_log_init();
	return 0;
}

static void model_rx_push(uint8_t b)
{
	if (model.rx_len < SERIAL_RX_FIFO)
		model.rx[(model.rx_head + model.rx_len++) % SERIAL_RX_FIFO] = b;
}

/* The guest wrote byte b to register reg (16550A datasheet: DLAB turns 0
 * into the divisor latch; loopback turns THR into the receive FIFO; FCR
 * clears the receive FIFO when its enable bit flips or bit 1 is set). */
static void model_write(unsigned reg, uint8_t b)
{
	switch (reg) {
	case 0:
		if (model.lcr & LCR_DLAB)
			return;
		model.thr_writes++;
		if (model.mcr & MCR_LOOP)
			model_rx_push(b);
		else if (model.out_len == SERIAL_OUT_MAX)
			model.dropped++;
		else
			model.out[(model.out_head + model.out_len++) % SERIAL_OUT_MAX] = b;
		return;
	case 2:
		if (((b ^ model.fcr) & FCR_ENABLE) || (b & FCR_CLEAR_RCVR))
			model.rx_len = 0;
		model.fcr = b;
		return;
	case 3:
		model.lcr = b;
		return;
	case 4:
		model.mcr = b;
		return;
	}
}

/* A guest access of `len` bytes at `off`, as the bus passes it: the
 * device must treat it as byte accesses at off, off + 1, ... */
static void uart_write(unsigned off, const uint8_t *bytes, unsigned len)
{
	uint8_t *buf = malloc(len);

	if (!buf)
		return;
	memcpy(buf, bytes, len);
	serial_io(&uart, off, buf, len, true);
	for (unsigned i = 0; i < len; i++)
		model_write(off + i, bytes[i]);
	free(buf);
}

static void uart_read(unsigned off, unsigned len)
{
	uint8_t *buf = malloc(len);
	uint8_t lsr = 0;

	if (!buf)
		return;
	if (off == 0 && !(model.lcr & LCR_DLAB)) {
		serial_io(&uart, 5, &lsr, 1, false);
		if (!!(lsr & LSR_DR) != (model.rx_len > 0))
			fuzz_broken("LSR data-ready disagrees with the bytes received", NULL);
	}
	serial_io(&uart, off, buf, len, false);
	for (unsigned i = 0; i < len; i++) {
		if (off + i >= 8 && buf[i] != 0xff)
			fuzz_broken("a read past the eight registers did not give 0xff", NULL);
		if (off + i != 0 || (model.lcr & LCR_DLAB) || !model.rx_len)
			continue;
		if (buf[i] != model.rx[model.rx_head])
			fuzz_broken("RBR returned another byte than the next one received", NULL);
		model.rx_head = (model.rx_head + 1) % SERIAL_RX_FIFO;
		model.rx_len--;
	}
	free(buf);
}

static void host_input(const uint8_t *p, size_t n)
{
	size_t took = serial_receive(&uart, p, n);

	if (took > n || took > SERIAL_RX_FIFO)
		fuzz_broken("serial_receive took more than it was given or the FIFO holds", NULL);
	if (model.rx_len + took > SERIAL_RX_FIFO || (took < n && model.rx_len + took < SERIAL_RX_FIFO))
		fuzz_broken("serial_receive took other than the room in the FIFO", NULL);
	for (size_t i = 0; i < took; i++)
		model_rx_push(p[i]);
}

static void host_output(size_t max)
{
	uint8_t *buf = malloc(max ? max : 1);
	size_t n;

	if (!buf)
		return;
	n = serial_take_output(&uart, buf, max);
	if (n > max || n != (max < model.out_len ? max : model.out_len))
		fuzz_broken("serial_take_output gave other than the bytes waiting", NULL);
	for (size_t i = 0; i < n; i++)
		if (buf[i] != model.out[(model.out_head + i) % SERIAL_OUT_MAX])
			fuzz_broken("output bytes out of order or changed", NULL);
	model.out_head = (model.out_head + n) % SERIAL_OUT_MAX;
	model.out_len -= n;
	free(buf);
}

static void burst(unsigned n, uint8_t b)
{
	for (unsigned i = 0; i < n; i++) {
		uint8_t byte = b;

		serial_io(&uart, 0, &byte, 1, true);
		model_write(0, b);
	}
}

static void snapshot(void)
{
	struct serial copy;
	struct snap_out a, b;
	const char *why = NULL;

	snap_out_init(&a);
	snap_out_init(&b);
	serial_save(&uart, &a);
	serial_init(&copy, NULL, NULL, NULL);
	if (a.err || serial_restore(&copy, a.data, a.len, &why))
		fuzz_broken("a UART's own snapshot does not restore", NULL);
	serial_save(&copy, &b);
	if (b.err || b.len != a.len || memcmp(a.data, b.data, a.len))
		fuzz_broken("a restored UART saves other bytes", NULL);
	serial_destroy(&copy);
	snap_out_free(&a);
	snap_out_free(&b);
}

static void i8042_access(struct i8042 *kbd, bool cmd, struct cursor *c)
{
	unsigned off = take8(c) % 4, len = 1 + (take8(c) & 3);
	bool write = take8(c) & 1;
	uint8_t val = take8(c);
	uint8_t *buf = malloc(len);
	unsigned before = resets;

	if (!buf)
		return;
	memset(buf, val, len);
	(cmd ? i8042_cmd_io : i8042_data_io)(kbd, off, buf, len, write);
	if (cmd && write && off == 0 && val == 0xfe) {
		if (resets != before + 1)
			fuzz_broken("0xFE on the command port did not ask for one reset", NULL);
	} else if (resets != before) {
		fuzz_broken("the i8042 asked for a reset for another access", NULL);
	}
	if (!write && cmd && (buf[0] & 0x02))
		fuzz_broken("i8042 status has input-full set: a rebooting guest would spin", NULL);
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cursor c = { data, size };
	struct i8042 kbd;

	memset(&model, 0, sizeof(model));
	irq_level = 0;
	resets = 0;
	serial_init(&uart, set_irq, NULL, NULL);
	i8042_init(&kbd, reset_requested, NULL);
	for (unsigned n = 0; n < MAX_OPS && c.left; n++) {
		uint8_t op = take8(&c) & 7;
		const uint8_t *p;
		size_t got;
		unsigned off, len;

		switch (op) {
		case 0:
			off = take8(&c) % 16;
			len = 1 + (take8(&c) & 7);
			p = take_bytes(&c, len, &got);
			if (got)
				uart_write(off, p, (unsigned)got);
			break;
		case 1:
			off = take8(&c) % 16;
			uart_read(off, 1 + (take8(&c) & 7));
			break;
		case 2:
			len = take8(&c) % 32;
			p = take_bytes(&c, len, &got);
			host_input(p, got);
			break;
		case 3:
			host_output(take16(&c));
			break;
		case 4:
			len = take8(&c);
			burst(len, take8(&c));
			break;
		case 5:
			snapshot();
			break;
		default:
			i8042_access(&kbd, op == 7, &c);
		}
	}
	if (serial_dropped(&uart) != model.dropped)
		fuzz_broken("the dropped count is not the bytes written to a full output ring", NULL);
	host_output(SERIAL_OUT_MAX);
	if (verbose)
		fprintf(stderr, "fuzz_uart: %u THR writes, %llu dropped, %u resets\n",
			model.thr_writes, (unsigned long long)model.dropped, resets);
	serial_destroy(&uart);
	return 0;
}
