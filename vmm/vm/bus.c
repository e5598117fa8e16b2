/* bus.c - sorted range table for PIO and MMIO dispatch, with overlap refusal. */
#include "vm/bus.h"
#include "lib/log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

void bus_init(struct bus *bus, const char *name)
{
	memset(bus, 0, sizeof(*bus));
	bus->name = name;
	pthread_mutex_init(&bus->unclaimed_lock, NULL);
}

void bus_destroy(struct bus *bus)
{
	pthread_mutex_destroy(&bus->unclaimed_lock);
}

int bus_register(struct bus *bus, uint64_t base, uint64_t len, bus_handler fn,
		 void *opaque, const char *name)
{
	uint64_t end;
	int i;

	if (len == 0 || !fn || __builtin_add_overflow(base, len - 1, &end))
		return -EINVAL;
	for (i = 0; i < bus->nr_ranges; i++) {
		const struct bus_range *r = &bus->ranges[i];

		if (base <= r->base + (r->len - 1) && r->base <= end)
			return -EEXIST;
	}
	if (bus->nr_ranges == BUS_MAX_RANGES)
		return -ENOSPC;
	for (i = bus->nr_ranges; i > 0 && bus->ranges[i - 1].base > base; i--)
		bus->ranges[i] = bus->ranges[i - 1];
	bus->ranges[i] = (struct bus_range){ .base = base, .len = len, .fn = fn,
					     .opaque = opaque, .name = name };
	bus->nr_ranges++;
	return 0;
}

static struct bus_range *bus_find(struct bus *bus, uint64_t addr)
{
	int lo = 0, hi = bus->nr_ranges - 1;

	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2;
		struct bus_range *r = &bus->ranges[mid];

		if (addr < r->base)
			hi = mid - 1;
		else if (addr - r->base >= r->len)
			lo = mid + 1;
		else
			return r;
	}
	return NULL;
}

/* Log an unclaimed address the first time it is seen; the set is bounded
 * so a guest scanning every port cannot grow VMM memory, and the lines
 * are limited so that it cannot flood the log either. */
static void bus_note_unclaimed(struct bus *bus, uint64_t addr, bool is_write)
{
	bool first = true;

	pthread_mutex_lock(&bus->unclaimed_lock);
	for (int i = 0; i < bus->nr_unclaimed; i++)
		if (bus->unclaimed[i] == addr)
			first = false;
	if (first && bus->nr_unclaimed < BUS_MAX_UNCLAIMED)
		bus->unclaimed[bus->nr_unclaimed++] = addr;
	else if (first)
		first = false;  /* set full: stay quiet rather than flood */
	pthread_mutex_unlock(&bus->unclaimed_lock);
	if (first)
		log_limited(&bus->lim_unclaimed, LOG_INFO, "unclaimed %s %s at 0x%llx", bus->name,
			    is_write ? "write" : "read", (unsigned long long)addr);
}

bool bus_dispatch(struct bus *bus, uint64_t addr, uint8_t *data, uint32_t len,
		  bool is_write)
{
	struct bus_range *r = bus_find(bus, addr);

	/* The whole access must fit in the range it starts in. */
	if (r && len <= r->len && addr - r->base <= r->len - len) {
		/* The table is immutable while vCPUs run; only the counter moves. */
		atomic_fetch_add_explicit(&r->hits, 1, memory_order_relaxed);
		r->fn(r->opaque, addr - r->base, data, len, is_write);
		return true;
	}
	atomic_fetch_add_explicit(&bus->unclaimed_hits, 1, memory_order_relaxed);
	if (!is_write)
		memset(data, 0xff, len);
	bus_note_unclaimed(bus, addr, is_write);
	return false;
}

void bus_format_hits(struct bus *bus, char *buf, size_t len)
{
	size_t used = strlen(buf);

	for (int i = 0; i < bus->nr_ranges && used < len; i++) {
		uint64_t n = atomic_load(&bus->ranges[i].hits);

		if (n)
			used += (size_t)snprintf(buf + used, len - used, " %s=%llu",
						 bus->ranges[i].name, (unsigned long long)n);
	}
	if (used < len && atomic_load(&bus->unclaimed_hits))
		snprintf(buf + used, len - used, " unclaimed-%s=%llu", bus->name,
			 (unsigned long long)atomic_load(&bus->unclaimed_hits));
}
