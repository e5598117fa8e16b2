/* bus.h - the port-I/O and MMIO buses: devices register ranges, exits are dispatched to them. */
#ifndef MAYFLY_VM_BUS_H
#define MAYFLY_VM_BUS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/log.h"

#define BUS_MAX_RANGES     64
#define BUS_MAX_UNCLAIMED  64   /* distinct unclaimed addresses remembered for logging */

/* Called on a vCPU thread. `offset` is relative to the range base; `data`
 * holds `len` (1..8) bytes: filled by the device on a read, read by it on a
 * write. A device serialises its own state (vCPUs dispatch concurrently). */
typedef void (*bus_handler)(void *opaque, uint64_t offset, uint8_t *data,
			    uint32_t len, bool is_write);

struct bus_range {
	uint64_t base;
	uint64_t len;
	bus_handler fn;
	void *opaque;
	const char *name;
	_Atomic uint64_t hits;        /* accesses dispatched here, for exit statistics */
};

struct bus {
	const char *name;             /* "pio" or "mmio", for log lines */
	int nr_ranges;
	struct bus_range ranges[BUS_MAX_RANGES];   /* sorted by base */
	pthread_mutex_t unclaimed_lock;
	int nr_unclaimed;
	uint64_t unclaimed[BUS_MAX_UNCLAIMED];
	struct log_limit lim_unclaimed;   /* a guest probing many addresses */
	_Atomic uint64_t unclaimed_hits;
};

void bus_init(struct bus *bus, const char *name);
void bus_destroy(struct bus *bus);

/* Claim [base, base+len). Returns 0, -EINVAL for len 0 or a wrapping range,
 * -EEXIST when it overlaps a registered range, -ENOSPC when full.
 * Only before vCPUs start: dispatch reads the table without a lock. */
int bus_register(struct bus *bus, uint64_t base, uint64_t len, bus_handler fn,
		 void *opaque, const char *name) __attribute__((warn_unused_result));

/* Send an access to the device owning addr. Returns false when no range
 * claims [addr, addr+len); then a read is answered with all ones, the
 * access is logged (info) the first time its address is seen, within
 * the bus's log limit, and the guest goes on. */
bool bus_dispatch(struct bus *bus, uint64_t addr, uint8_t *data, uint32_t len,
		  bool is_write);

/* Append "name count, ..." of every range that was hit, and the unclaimed
 * count, to buf (for the exit-statistics log line). */
void bus_format_hits(struct bus *bus, char *buf, size_t len);

#endif
