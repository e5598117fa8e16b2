/* boot_timer.h - MMIO page the guest writes once when boot is done; mayfly logs the time since its start. */
#ifndef MAYFLY_DEVICES_BOOT_TIMER_H
#define MAYFLY_DEVICES_BOOT_TIMER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snapshot/codec.h"

/* The byte value the guest writes to offset 0 (Firecracker uses the same). */
#define BOOT_TIMER_MAGIC 123

struct boot_timer {
	uint64_t start_ns;          /* CLOCK_MONOTONIC when mayfly started */
	_Atomic uint64_t fired_us;  /* 0 until the guest writes the magic */
};

void boot_timer_init(struct boot_timer *bt, uint64_t start_ns);

/* Bus handler: a byte write of BOOT_TIMER_MAGIC at offset 0 records and logs
 * (at info level) "boot timer: guest ready after N us" the first time;
 * anything else is ignored; reads return 0. */
void boot_timer_io(void *opaque, uint64_t offset, uint8_t *data, uint32_t len, bool is_write);

/* Microseconds from start to the guest's write, or 0 when it never wrote. */
uint64_t boot_timer_elapsed_us(const struct boot_timer *bt);

/* Snapshot: append the timer's state, 8 bytes: u64 microseconds the
 * snapshotted guest took to boot, 0 if it had not written yet. */
void boot_timer_save(const struct boot_timer *bt, struct snap_out *o);

/* Apply a saved state to a timer set up by boot_timer_init (start_ns the
 * restoring process's start). A guest that had written before the
 * snapshot will not write again, so the timer counts as fired now:
 * boot_timer_elapsed_us() is from start_ns to this call (at least 1), the
 * time the restore took to reach the guest's "ready", and a later write
 * is ignored. A saved 0 leaves the timer unfired: the guest writes after
 * the restore. -EBADMSG with *why unless the payload is 8 bytes. */
int boot_timer_restore(struct boot_timer *bt, const void *data, size_t len, const char **why)
	__attribute__((warn_unused_result));

#endif
