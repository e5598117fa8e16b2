/* serial.h - a 16550A UART (COM1): guest console out to the host, host input to the guest. */
#ifndef MAYFLY_DEVICES_SERIAL_H
#define MAYFLY_DEVICES_SERIAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snapshot/codec.h"

#define SERIAL_RX_FIFO   16      /* the 16550A receive FIFO */
#define SERIAL_OUT_MAX   65536   /* host-side output buffer; beyond it bytes are dropped */

/* Raise (1) or lower (0) the UART's interrupt line. Called with the
 * device lock held, only when the level changes, so levels arrive in the
 * order the device state changed. It must not block and must not call
 * back into this UART (KVM_IRQ_LINE is the intended implementation). */
typedef void (*serial_irq_fn)(void *opaque, int level);
/* Called with the device lock not held, from the thread that caused it
 * (a vCPU), when output goes from empty to non-empty, or when the guest
 * makes receive FIFO room after serial_receive turned bytes away. It
 * must not block. */
typedef void (*serial_notify_fn)(void *opaque);

struct serial {
	pthread_mutex_t lock;
	/* registers the guest reads back; LSR, MSR and IIR are computed */
	uint8_t ier, lcr, mcr, scr, dll, dlm, fcr;
	bool thr_ipending;            /* THRE interrupt pending until IIR read or THR write */
	bool overrun;                 /* LSR OE: a loopback byte met a full FIFO */
	bool rx_waiting;              /* serial_receive turned bytes away: notify on room */
	int irq_level;                /* last level signalled */
	/* receive FIFO */
	uint8_t rx[SERIAL_RX_FIFO];
	unsigned rx_head, rx_count;
	/* bounded output ring: a slow or stopped reader never blocks a vCPU */
	uint8_t out[SERIAL_OUT_MAX];
	size_t out_head, out_count;
	uint64_t out_dropped;
	serial_irq_fn set_irq;        /* either callback may be NULL */
	serial_notify_fn notify;
	void *opaque;
};

/* Power-on state: FIFOs off and empty, interrupts masked, line low (the
 * caller's line starts low; set_irq is not called here). */
void serial_init(struct serial *s, serial_irq_fn set_irq, serial_notify_fn notify, void *opaque);
void serial_destroy(struct serial *s);

/* Bus handler for the 8 registers at COM1. A wider access is split into
 * byte accesses at consecutive offsets, as the ISA bus does; bytes past
 * the eighth register read 0xff and writes to them are dropped. */
void serial_io(void *opaque, uint64_t offset, uint8_t *data, uint32_t len, bool is_write);

/* Host -> guest: queue up to len bytes into the receive FIFO. Returns how
 * many were accepted (0 when the FIFO is full; the caller retries when
 * notified). */
size_t serial_receive(struct serial *s, const uint8_t *buf, size_t len);

/* Guest -> host: move up to max pending output bytes into buf, oldest
 * first. Notify fires only on empty -> non-empty, so a reader drains
 * until this returns 0. */
size_t serial_take_output(struct serial *s, uint8_t *buf, size_t max);

/* Output bytes dropped because the host reader fell behind. */
uint64_t serial_dropped(struct serial *s);

/* Snapshot payload size: registers, flags and the receive FIFO. */
#define SERIAL_STATE_LEN (9 + SERIAL_RX_FIFO)

/* Append the UART's state to `o` (SERIAL_STATE_LEN bytes; the layout is in
 * docs/snapshot.md, "Devices"): every register the guest can read back,
 * the divisor latch, the pending THRE interrupt and overrun, and the bytes
 * in the receive FIFO, oldest first. Not saved: the output ring (the
 * console drains it before a snapshot; a byte still there is lost, never
 * written twice) and the statistics. Takes the device lock. Failures are
 * left in o->err. */
void serial_save(struct serial *s, struct snap_out *o);

/* Apply a saved state (untrusted bytes) to a UART set up by serial_init.
 * Checks the whole payload before changing anything: exactly
 * SERIAL_STATE_LEN bytes, IER/MCR/FCR bits a 16550A cannot hold clear, no
 * unknown flag, at most SERIAL_RX_FIFO bytes queued and zeros past them;
 * else -EBADMSG with *why naming the device. The interrupt line's level
 * is recomputed from the registers but not signalled: whatever the line
 * did before the snapshot reached the interrupt controllers, whose saved
 * state carries it. Takes the device lock. */
int serial_restore(struct serial *s, const void *data, size_t len, const char **why)
	__attribute__((warn_unused_result));

#endif
