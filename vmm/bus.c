/* bus.c - sorted range table for PIO and MMIO dispatch, with overlap refusal. */
#include "bus.h"
#include "log.h"

#include <errno.h>
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
	bus->ranges[i] = (struct bus_range){ base, len, fn, opaque, name };
	bus->nr_ranges++;
	return 0;
}

static const struct bus_range *bus_find(const struct bus *bus, uint64_t addr)
{
	int lo = 0, hi = bus->nr_ranges - 1;

	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2;
		const struct bus_range *r = &bus->ranges[mid];

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
 * so a guest scanning every port cannot grow VMM memory. */
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
		log_info("unclaimed %s %s at 0x%llx (logged once)", bus->name,
			 is_write ? "write" : "read", (unsigned long long)addr);
}

bool bus_dispatch(struct bus *bus, uint64_t addr, uint8_t *data, uint32_t len,
		  bool is_write)
{
	const struct bus_range *r = bus_find(bus, addr);

	/* The whole access must fit in the range it starts in. */
	if (r && len <= r->len && addr - r->base <= r->len - len) {
		r->fn(r->opaque, addr - r->base, data, len, is_write);
		return true;
	}
	if (!is_write)
		memset(data, 0xff, len);
	bus_note_unclaimed(bus, addr, is_write);
	return false;
}
