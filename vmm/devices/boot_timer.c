/* boot_timer.c - records and logs, once, how long the guest took to say it is ready. */
#include "boot_timer.h"
#include "log.h"

#include <string.h>
#include <time.h>

void boot_timer_init(struct boot_timer *bt, uint64_t start_ns)
{
	bt->start_ns = start_ns;
	atomic_init(&bt->fired_us, 0);
}

static uint64_t boot_timer_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void boot_timer_fire(struct boot_timer *bt)
{
	uint64_t now = boot_timer_now_ns();
	uint64_t us = now > bt->start_ns ? (now - bt->start_ns) / 1000 : 0;
	uint64_t expected = 0;

	/* 0 means "never fired", so a sub-microsecond boot still counts as 1. */
	if (us == 0)
		us = 1;
	/* vCPUs may race here; only the first write is the boot time. */
	if (!atomic_compare_exchange_strong(&bt->fired_us, &expected, us))
		return;
	log_info("boot timer: guest ready after %llu us", (unsigned long long)us);
}

void boot_timer_io(void *opaque, uint64_t offset, uint8_t *data, uint32_t len, bool is_write)
{
	struct boot_timer *bt = opaque;

	if (!is_write) {
		memset(data, 0, len);
		return;
	}
	if (offset == 0 && len == 1 && data[0] == BOOT_TIMER_MAGIC)
		boot_timer_fire(bt);
}

uint64_t boot_timer_elapsed_us(const struct boot_timer *bt)
{
	return atomic_load(&bt->fired_us);
}
