/* test_boot_timer.c - the guest's "ready" write is timed once and everything else ignored. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "devices/boot_timer.h"
#include "lib/log.h"

static struct boot_timer bt;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void write_byte(uint64_t offset, uint8_t val)
{
	boot_timer_io(&bt, offset, &val, 1, true);
}

/* Started 5 ms ago, so the recorded time has a known lower bound. */
static void setup(void)
{
	boot_timer_init(&bt, now_ns() - 5000000ULL);
}

TestSuite(boot_timer, .init = setup);

Test(boot_timer, zero_until_written)
{
	cr_assert_eq(boot_timer_elapsed_us(&bt), 0);
}

Test(boot_timer, magic_records_once)
{
	uint64_t first;

	write_byte(0, BOOT_TIMER_MAGIC);
	first = boot_timer_elapsed_us(&bt);
	cr_assert_geq(first, 5000);
	cr_assert_lt(first, 60ULL * 1000000, "a sane bound");

	write_byte(0, BOOT_TIMER_MAGIC);
	cr_assert_eq(boot_timer_elapsed_us(&bt), first, "second write changes nothing");
}

static void setup_logged(void)
{
	setup();
	log_init("t", LOG_INFO);
	cr_redirect_stderr();
}

Test(boot_timer, logs_one_info_line, .init = setup_logged)
{
	char line[256];
	unsigned long long us = 0;
	FILE *err;

	write_byte(0, BOOT_TIMER_MAGIC);
	write_byte(0, BOOT_TIMER_MAGIC);
	fflush(stderr);
	err = cr_get_redirected_stderr();
	cr_assert_not_null(fgets(line, sizeof(line), err));
	cr_assert_eq(sscanf(line, "mayfly[t] info: boot timer: guest ready after %llu us", &us), 1,
		     "line: %s", line);
	cr_assert_eq(us, boot_timer_elapsed_us(&bt));
	cr_assert_null(fgets(line, sizeof(line), err), "logged once");
}

Test(boot_timer, start_in_the_future_still_counts)
{
	boot_timer_init(&bt, now_ns() + 1000000000ULL);
	write_byte(0, BOOT_TIMER_MAGIC);
	cr_assert_gt(boot_timer_elapsed_us(&bt), 0, "0 is reserved for never");
}

Test(boot_timer, other_writes_ignored)
{
	uint8_t wide[4] = { BOOT_TIMER_MAGIC, 0, 0, 0 };

	write_byte(0, BOOT_TIMER_MAGIC + 1);
	write_byte(0, 0);
	write_byte(1, BOOT_TIMER_MAGIC);
	write_byte(0xfff, BOOT_TIMER_MAGIC);
	write_byte(UINT64_MAX, BOOT_TIMER_MAGIC);
	boot_timer_io(&bt, 0, wide, 4, true);
	boot_timer_io(&bt, 0, wide, 0, true);
	cr_assert_eq(boot_timer_elapsed_us(&bt), 0);
}

Test(boot_timer, reads_return_zero)
{
	uint8_t buf[9];

	for (uint32_t len = 1; len <= 8; len++) {
		memset(buf, 0xaa, sizeof(buf));
		boot_timer_io(&bt, 0, buf, len, false);
		for (uint32_t i = 0; i < len; i++)
			cr_assert_eq(buf[i], 0, "len %u byte %u", len, i);
		cr_assert_eq(buf[len], 0xaa, "no write past len %u", len);
	}
	write_byte(0, BOOT_TIMER_MAGIC);
	memset(buf, 0xaa, sizeof(buf));
	boot_timer_io(&bt, 0, buf, 8, false);
	for (int i = 0; i < 8; i++)
		cr_assert_eq(buf[i], 0, "still zero after firing");
}
