/* boot_timer.c - records and logs, once, how long the guest took to say it is ready. */
#include "boot_timer.h"
#include "lib/errmsg.h"
#include "lib/log.h"

#include <errno.h>
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

/* Microseconds since start, at least 1: 0 means "never fired", so a
 * sub-microsecond boot still counts. */
static uint64_t boot_timer_since_start_us(const struct boot_timer *bt)
{
	uint64_t now = boot_timer_now_ns();
	uint64_t us = now > bt->start_ns ? (now - bt->start_ns) / 1000 : 0;

	return us ? us : 1;
}

static void boot_timer_fire(struct boot_timer *bt)
{
	uint64_t us = boot_timer_since_start_us(bt);
	uint64_t expected = 0;

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

void boot_timer_save(const struct boot_timer *bt, struct snap_out *o)
{
	snap_out_u64(o, atomic_load(&bt->fired_us));
}

int boot_timer_restore(struct boot_timer *bt, const void *data, size_t len, const char **why)
{
	struct snap_in in;
	uint64_t saved;

	snap_in_init(&in, data, len);
	saved = snap_in_u64(&in);
	if (!snap_in_end(&in))
		return errmsg_why(why, -EBADMSG, "corrupt boot timer section: %zu bytes, want 8", len);
	if (saved) {
		atomic_store(&bt->fired_us, boot_timer_since_start_us(bt));
		log_debug("boot timer: restored; the snapshot's guest was ready after %llu us",
			  (unsigned long long)saved);
	}
	return 0;
}
