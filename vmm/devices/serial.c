/* serial.c - a 16550A UART: enough of the chip for Linux's 8250 driver to probe it and run in interrupt mode. */
#include "serial.h"
#include "lib/errmsg.h"
#include "lib/sparse.h"

#include <errno.h>
#include <string.h>

/* Register offsets; DLAB (LCR bit 7) turns 0 and 1 into the divisor latch. */
enum {
	UART_RBR = 0,   /* read; THR on write, DLL with DLAB */
	UART_IER = 1,   /* DLM with DLAB */
	UART_IIR = 2,   /* read; FCR on write */
	UART_LCR = 3,
	UART_MCR = 4,
	UART_LSR = 5,
	UART_MSR = 6,
	UART_SCR = 7,
	UART_NR_REGS = 8,
};

#define IER_RDI          0x01   /* receive data available */
#define IER_THRI         0x02   /* transmit holding register empty */
#define IER_RLSI         0x04   /* receiver line status */
#define IER_MASK         0x0f   /* bits 7:4 read as 0 on a 16550A */

#define IIR_NO_INT       0x01
#define IIR_THRI         0x02
#define IIR_RDI          0x04
#define IIR_RLSI         0x06
#define IIR_FIFO_ENABLED 0xc0

#define FCR_ENABLE_FIFO  0x01
#define FCR_CLEAR_RCVR   0x02
#define FCR_KEEP         0xc9   /* enable, DMA mode, trigger: what a 16550A latches */

#define LCR_DLAB         0x80

#define MCR_DTR          0x01
#define MCR_RTS          0x02
#define MCR_OUT1         0x04
#define MCR_OUT2         0x08
#define MCR_LOOP         0x10
#define MCR_MASK         0x1f   /* bits 7:5 read as 0 on a 16550A */

#define LSR_DR           0x01
#define LSR_OE           0x02
#define LSR_THRE         0x20
#define LSR_TEMT         0x40

#define MSR_CTS          0x10
#define MSR_DSR          0x20
#define MSR_RI           0x40
#define MSR_DCD          0x80

/* Outside loopback the modem lines are a cable that is always plugged in:
 * carrier and handshake asserted, so a tty opened without CLOCAL or with
 * CRTSCTS never waits. They never change, hence no modem-status interrupt. */
#define MSR_IDLE         (MSR_DCD | MSR_DSR | MSR_CTS)

/* Register side effects that need a callback once the lock is dropped. */
#define EV_NOTIFY        0x1

void serial_init(struct serial *s, serial_irq_fn set_irq, serial_notify_fn notify, void *opaque)
{
	/* The 64 KiB output ring is only written as the guest prints. */
	sparse_zero(s, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
	/* Any nonzero divisor (12: 9600 baud at 1.8432 MHz), so a guest that
	 * derives the current baud rate never divides by zero. The rate has
	 * no effect: bytes move at memory speed. */
	s->dll = 12;
	s->set_irq = set_irq;
	s->notify = notify;
	s->opaque = opaque;
}

void serial_destroy(struct serial *s)
{
	pthread_mutex_destroy(&s->lock);
}

/* The highest-priority enabled source, as IIR bits 3:0 report it. Receive
 * data is reported from the first byte on: no trigger level or character
 * timeout, since every byte is already there when the guest looks. */
static uint8_t serial_pending(const struct serial *s)
{
	if ((s->ier & IER_RLSI) && s->overrun)
		return IIR_RLSI;
	if ((s->ier & IER_RDI) && s->rx_count)
		return IIR_RDI;
	if ((s->ier & IER_THRI) && s->thr_ipending)
		return IIR_THRI;
	return IIR_NO_INT;
}

/*
 * On a PC the UART's interrupt output reaches the PIC through a buffer
 * enabled by OUT2, and Linux's 8250 driver sets OUT2 whenever the port has
 * an IRQ ("Most PC uarts need OUT2 raised to enable interrupts") and clears
 * it at shutdown. Gating on it matches the hardware (kvmtool ignores it) and
 * keeps a port the guest has shut down or never opened quiet, so no
 * stray edges reach an unhandled IRQ 4. (A real chip in loopback also
 * drives its OUT2 pin inactive; we follow the register bit, which differs
 * only for a guest wanting interrupts while looped back.)
 */
static int serial_line(const struct serial *s)
{
	return (s->mcr & MCR_OUT2) && serial_pending(s) != IIR_NO_INT;
}

/* Runs with the lock held: computing the level and signalling it under one
 * lock means two threads can never deliver their levels in the opposite
 * order, which would leave an edge-triggered line high with nothing
 * pending and the port deaf for good. */
static void serial_update_irq(struct serial *s)
{
	int level = serial_line(s);

	if (level == s->irq_level)
		return;
	s->irq_level = level;
	if (s->set_irq)
		s->set_irq(s->opaque, level);
}

/* Room appeared in the receive FIFO: wake the host only if it is holding
 * bytes we turned away, which is the only time it is waiting. */
static unsigned serial_rx_room(struct serial *s)
{
	if (!s->rx_waiting)
		return 0;
	s->rx_waiting = false;
	return EV_NOTIFY;
}

static bool serial_rx_push(struct serial *s, uint8_t byte)
{
	if (s->rx_count == SERIAL_RX_FIFO)
		return false;
	s->rx[(s->rx_head + s->rx_count) % SERIAL_RX_FIFO] = byte;
	s->rx_count++;
	return true;
}

static unsigned serial_rx_clear(struct serial *s)
{
	s->rx_head = 0;
	s->rx_count = 0;
	return serial_rx_room(s);
}

/* Transmission is instant, so THR is empty again at once: that re-raises
 * THRE, and the guest's handler sees the room it expects. */
static unsigned serial_write_thr(struct serial *s, uint8_t byte)
{
	unsigned ev = 0;

	s->thr_ipending = true;
	if (s->mcr & MCR_LOOP) {
		/* Linux sizes the FIFO this way: 16 fit, the rest overrun. */
		if (!serial_rx_push(s, byte))
			s->overrun = true;
		return 0;
	}
	if (s->out_count == SERIAL_OUT_MAX) {
		s->out_dropped++;
		return 0;
	}
	if (s->out_count == 0)
		ev = EV_NOTIFY;
	s->out[(s->out_head + s->out_count) % SERIAL_OUT_MAX] = byte;
	s->out_count++;
	return ev;
}

static unsigned serial_write_ier(struct serial *s, uint8_t val)
{
	uint8_t old = s->ier;

	s->ier = val & IER_MASK;
	/* Enabling THRI while THR is empty raises THRE even if an IIR read
	 * cleared it before (Linux's startup test toggles IER to check). */
	if (!(old & IER_THRI) && (s->ier & IER_THRI))
		s->thr_ipending = true;
	return 0;
}

/* FCR sits at offset 2 whatever DLAB says; Linux's 16750 probe writes it
 * with DLAB set and then looks for IIR bit 5 (64-byte FIFO), which we
 * never show, so the probe settles on 16550A. */
static unsigned serial_write_fcr(struct serial *s, uint8_t val)
{
	unsigned ev = 0;

	/* Toggling the FIFO enable resets the FIFOs on the real chip. */
	if (((val ^ s->fcr) & FCR_ENABLE_FIFO) || (val & FCR_CLEAR_RCVR))
		ev = serial_rx_clear(s);
	s->fcr = val & FCR_KEEP;
	return ev;
}

static unsigned serial_write(struct serial *s, unsigned reg, uint8_t val)
{
	bool dlab = s->lcr & LCR_DLAB;

	switch (reg) {
	case UART_RBR:
		if (dlab) {
			s->dll = val;
			return 0;
		}
		return serial_write_thr(s, val);
	case UART_IER:
		if (dlab) {
			s->dlm = val;
			return 0;
		}
		return serial_write_ier(s, val);
	case UART_IIR:
		return serial_write_fcr(s, val);
	case UART_LCR:
		s->lcr = val;
		return 0;
	case UART_MCR:
		s->mcr = val & MCR_MASK;
		return 0;
	case UART_SCR:
		s->scr = val;
		return 0;
	default:
		/* LSR and MSR writes are factory-test only. */
		return 0;
	}
}

/* In loopback the modem outputs feed the modem inputs; Linux's probe sets
 * MCR = LOOP|OUT2|RTS and expects MSR[7:4] = DCD|CTS (0x90). */
static uint8_t serial_msr(const struct serial *s)
{
	uint8_t msr = 0;

	if (!(s->mcr & MCR_LOOP))
		return MSR_IDLE;
	if (s->mcr & MCR_DTR)
		msr |= MSR_DSR;
	if (s->mcr & MCR_RTS)
		msr |= MSR_CTS;
	if (s->mcr & MCR_OUT1)
		msr |= MSR_RI;
	if (s->mcr & MCR_OUT2)
		msr |= MSR_DCD;
	return msr;
}

static uint8_t serial_read_rbr(struct serial *s, unsigned *ev)
{
	uint8_t byte;

	if (s->rx_count == 0)
		return 0;
	byte = s->rx[s->rx_head];
	s->rx_head = (s->rx_head + 1) % SERIAL_RX_FIFO;
	s->rx_count--;
	*ev |= serial_rx_room(s);
	return byte;
}

/* Reading IIR acknowledges THRE only when THRE is what it reports; the
 * other sources clear when their condition goes away. */
static uint8_t serial_read_iir(struct serial *s)
{
	uint8_t iir = serial_pending(s);

	if (iir == IIR_THRI)
		s->thr_ipending = false;
	if (s->fcr & FCR_ENABLE_FIFO)
		iir |= IIR_FIFO_ENABLED;
	return iir;
}

/* THRE and TEMT are always set: a written byte has already left. */
static uint8_t serial_read_lsr(struct serial *s)
{
	uint8_t lsr = LSR_THRE | LSR_TEMT;

	if (s->rx_count)
		lsr |= LSR_DR;
	if (s->overrun)
		lsr |= LSR_OE;
	s->overrun = false;
	return lsr;
}

static uint8_t serial_read(struct serial *s, unsigned reg, unsigned *ev)
{
	bool dlab = s->lcr & LCR_DLAB;

	switch (reg) {
	case UART_RBR:
		return dlab ? s->dll : serial_read_rbr(s, ev);
	case UART_IER:
		return dlab ? s->dlm : s->ier;
	case UART_IIR:
		return serial_read_iir(s);
	case UART_LCR:
		return s->lcr;
	case UART_MCR:
		return s->mcr;
	case UART_LSR:
		return serial_read_lsr(s);
	case UART_MSR:
		return serial_msr(s);
	default:
		return s->scr;
	}
}

void serial_io(void *opaque, uint64_t offset, uint8_t *data, uint32_t len, bool is_write)
{
	struct serial *s = opaque;
	unsigned ev = 0;

	pthread_mutex_lock(&s->lock);
	for (uint32_t i = 0; i < len; i++) {
		/* Written so that a huge offset cannot wrap into range. */
		if (offset >= UART_NR_REGS || i >= UART_NR_REGS - offset) {
			if (!is_write)
				data[i] = 0xff;
			continue;
		}
		if (is_write)
			ev |= serial_write(s, (unsigned)offset + i, data[i]);
		else
			data[i] = serial_read(s, (unsigned)offset + i, &ev);
	}
	serial_update_irq(s);
	pthread_mutex_unlock(&s->lock);

	/* After unlock: the host side may call straight back into us. */
	if ((ev & EV_NOTIFY) && s->notify)
		s->notify(s->opaque);
}

/* Host input is accepted in loopback too: the guest only loops back for a
 * moment while probing, and turning input away would need a wakeup when
 * loopback ends. The FIFO holds 16 bytes even with FIFOs disabled, so a
 * guest polling in 16450 mode just finds DR still set. */
size_t serial_receive(struct serial *s, const uint8_t *buf, size_t len)
{
	size_t n = 0;

	pthread_mutex_lock(&s->lock);
	while (n < len && serial_rx_push(s, buf[n]))
		n++;
	if (n < len)
		s->rx_waiting = true;
	serial_update_irq(s);
	pthread_mutex_unlock(&s->lock);
	return n;
}

size_t serial_take_output(struct serial *s, uint8_t *buf, size_t max)
{
	size_t n, first;

	pthread_mutex_lock(&s->lock);
	n = max < s->out_count ? max : s->out_count;
	if (n == 0) {
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	first = SERIAL_OUT_MAX - s->out_head;
	if (first > n)
		first = n;
	memcpy(buf, s->out + s->out_head, first);
	memcpy(buf + first, s->out, n - first);
	s->out_head = (s->out_head + n) % SERIAL_OUT_MAX;
	s->out_count -= n;
	pthread_mutex_unlock(&s->lock);
	return n;
}

uint64_t serial_dropped(struct serial *s)
{
	uint64_t n;

	pthread_mutex_lock(&s->lock);
	n = s->out_dropped;
	pthread_mutex_unlock(&s->lock);
	return n;
}

/* Snapshot payload: register bytes, then flags, then the FIFO. */
enum {
	SNAP_IER, SNAP_LCR, SNAP_MCR, SNAP_SCR, SNAP_DLL, SNAP_DLM, SNAP_FCR,
	SNAP_FLAGS, SNAP_RX_COUNT, SNAP_RX,
};
#define SNAP_THR_IPENDING 0x01
#define SNAP_OVERRUN      0x02

_Static_assert(SNAP_RX + SERIAL_RX_FIFO == SERIAL_STATE_LEN, "serial payload layout");

void serial_save(struct serial *s, struct snap_out *o)
{
	uint8_t b[SERIAL_STATE_LEN] = { 0 };

	pthread_mutex_lock(&s->lock);
	b[SNAP_IER] = s->ier;
	b[SNAP_LCR] = s->lcr;
	b[SNAP_MCR] = s->mcr;
	b[SNAP_SCR] = s->scr;
	b[SNAP_DLL] = s->dll;
	b[SNAP_DLM] = s->dlm;
	b[SNAP_FCR] = s->fcr;
	b[SNAP_FLAGS] = (uint8_t)((s->thr_ipending ? SNAP_THR_IPENDING : 0) |
				  (s->overrun ? SNAP_OVERRUN : 0));
	b[SNAP_RX_COUNT] = (uint8_t)s->rx_count;
	for (unsigned i = 0; i < s->rx_count; i++)
		b[SNAP_RX + i] = s->rx[(s->rx_head + i) % SERIAL_RX_FIFO];
	pthread_mutex_unlock(&s->lock);
	snap_out_put(o, b, sizeof(b));
}

/* Why a payload is no 16550A state, or NULL. */
static const char *serial_check(const uint8_t *b)
{
	if (b[SNAP_IER] & ~IER_MASK)
		return "IER bits a 16550A does not have";
	if (b[SNAP_MCR] & ~MCR_MASK)
		return "MCR bits a 16550A does not have";
	if (b[SNAP_FCR] & ~FCR_KEEP)
		return "FCR bits a 16550A does not latch";
	if (b[SNAP_FLAGS] & ~(SNAP_THR_IPENDING | SNAP_OVERRUN))
		return "unknown flags";
	if (b[SNAP_RX_COUNT] > SERIAL_RX_FIFO)
		return "more bytes in the receive FIFO than it holds";
	for (unsigned i = b[SNAP_RX_COUNT]; i < SERIAL_RX_FIFO; i++)
		if (b[SNAP_RX + i])
			return "bytes past the end of the receive FIFO";
	return NULL;
}

int serial_restore(struct serial *s, const void *data, size_t len, const char **why)
{
	const uint8_t *b = data;
	const char *bad;

	if (len != SERIAL_STATE_LEN)
		return errmsg_why(why, -EBADMSG, "corrupt serial section: %zu bytes, want %u", len,
				SERIAL_STATE_LEN);
	bad = serial_check(b);
	if (bad)
		return errmsg_why(why, -EBADMSG, "corrupt serial section: %s", bad);
	pthread_mutex_lock(&s->lock);
	s->ier = b[SNAP_IER];
	s->lcr = b[SNAP_LCR];
	s->mcr = b[SNAP_MCR];
	s->scr = b[SNAP_SCR];
	s->dll = b[SNAP_DLL];
	s->dlm = b[SNAP_DLM];
	s->fcr = b[SNAP_FCR];
	s->thr_ipending = b[SNAP_FLAGS] & SNAP_THR_IPENDING;
	s->overrun = b[SNAP_FLAGS] & SNAP_OVERRUN;
	s->rx_head = 0;
	s->rx_count = b[SNAP_RX_COUNT];
	memcpy(s->rx, b + SNAP_RX, SERIAL_RX_FIFO);
	/* The host's console is new: it holds no bytes we turned away. */
	s->rx_waiting = false;
	/* Every register access ends in serial_update_irq, so at the pause
	 * the line was at exactly this level, and the controllers saw it. */
	s->irq_level = serial_line(s);
	pthread_mutex_unlock(&s->lock);
	return 0;
}
