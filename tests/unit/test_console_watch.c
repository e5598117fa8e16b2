/* test_console_watch.c - the panic banner and init's status line are found across chunks and not imagined. */
#include <criterion/criterion.h>
#include <string.h>

#include "vm/console_watch.h"

static void feed_str(struct console_watch *w, const char *s)
{
	console_watch_feed(w, (const uint8_t *)s, strlen(s));
}

static bool panicked(const char *s)
{
	struct console_watch w = { 0 };

	feed_str(&w, s);
	return w.panicked;
}

/* Feed s one byte at a time: every chunk boundary there is. */
static void feed_bytewise(struct console_watch *w, const char *s)
{
	for (size_t i = 0; i < strlen(s); i++)
		console_watch_feed(w, (const uint8_t *)s + i, 1);
}

/* The status a console stream reports, or -1 for none. */
static int status_of(const char *s)
{
	struct console_watch w = { 0 };

	feed_str(&w, s);
	return w.status_seen ? w.status : -1;
}

Test(console_watch, patterns_first_byte_is_unique)
{
	static const char banner[] = PANIC_BANNER, prefix[] = INIT_STATUS_PREFIX;

	/* The matcher's restart rule holds only for such patterns. */
	cr_assert_null(strchr(&banner[1], banner[0]));
	cr_assert_null(strchr(&prefix[1], prefix[0]));
}

/* ---- the panic banner ---- */

Test(console_watch, finds_banner_in_one_chunk)
{
	cr_assert(panicked("[ 1.2] Kernel panic - not syncing: Attempted to kill init!\r\n"));
}

Test(console_watch, finds_banner_split_byte_by_byte)
{
	struct console_watch w = { 0 };

	feed_bytewise(&w, "noise KKernel panic - not syncing: VFS");
	cr_assert(w.panicked);
}

Test(console_watch, ignores_banner_near_misses)
{
	struct console_watch w = { 0 };

	feed_str(&w, "Kernel panic - not syncin");
	feed_str(&w, "k");
	feed_str(&w, "Kernel panic - not sync\nKernel pan");
	feed_str(&w, "ic is fine");
	feed_str(&w, "kernel panic - not syncing");
	cr_assert_not(w.panicked);
}

Test(console_watch, banner_stays_seen)
{
	struct console_watch w = { 0 };

	feed_str(&w, "Kernel panic - not syncing");
	feed_str(&w, "later output");
	cr_assert(w.panicked);
}

Test(console_watch, banner_completes_across_a_chunk_boundary)
{
	struct console_watch w = { 0 };

	feed_str(&w, "Kernel panic - not syncin");
	cr_assert_not(w.panicked);
	feed_str(&w, "g: oops");
	cr_assert(w.panicked);
}

/* ---- init's status line ---- */

Test(console_watch, status_line_as_init_prints_it)
{
	cr_assert_eq(status_of("hello\r\nmayfly: exit status 7\r\n"), 7);
	cr_assert_eq(status_of("mayfly: exit status 0\n"), 0);
	cr_assert_eq(status_of("mayfly: exit status 255\r\n[ 2.0] reboot: Restarting system\r\n"), 255);
}

Test(console_watch, status_split_byte_by_byte)
{
	struct console_watch w = { 0 };

	feed_bytewise(&w, "mmayfly: exit status 42\r\n");
	cr_assert(w.status_seen);
	cr_assert_eq(w.status, 42);
}

Test(console_watch, status_only_once_the_number_ends)
{
	struct console_watch w = { 0 };

	/* "1" could still become "12" or "123". */
	feed_str(&w, "mayfly: exit status 1");
	cr_assert_not(w.status_seen);
	feed_str(&w, "2");
	cr_assert_not(w.status_seen);
	feed_str(&w, "\r\n");
	cr_assert(w.status_seen);
	cr_assert_eq(w.status, 12);
}

Test(console_watch, status_appended_to_a_line_without_newline)
{
	/* printf without a newline, then init's own line: the last one wins. */
	cr_assert_eq(status_of("partial outputmayfly: exit status 3\r\n"), 3);
	cr_assert_eq(status_of("mayfly: exit status 5mayfly: exit status 3\r\n"), 3);
}

Test(console_watch, the_last_status_line_wins)
{
	cr_assert_eq(status_of("mayfly: exit status 9\r\nmore\r\nmayfly: exit status 1\r\n"), 1);
	/* A malformed later line does not undo an earlier good one. */
	cr_assert_eq(status_of("mayfly: exit status 9\r\nmayfly: exit status x\r\n"), 9);
}

Test(console_watch, not_a_status_line)
{
	cr_assert_eq(status_of("mayfly: exit status \r\n"), -1, "no digits");
	cr_assert_eq(status_of("mayfly: exit status 256\r\n"), -1, "above 255");
	cr_assert_eq(status_of("mayfly: exit status 1000\r\n"), -1, "four digits");
	cr_assert_eq(status_of("mayfly: exit status 99999999999999999999\r\n"), -1, "no overflow");
	cr_assert_eq(status_of("mayfly: exit status -1\r\n"), -1);
	cr_assert_eq(status_of("mayfly: exit  status 1\r\n"), -1);
	cr_assert_eq(status_of("Mayfly: exit status 1\r\n"), -1);
	cr_assert_eq(status_of("mayfly: command finished (status 4); starting a shell\r\n"), -1);
	cr_assert_eq(status_of("mayfly: exit status 7"), -1, "the stream ended inside the number");
}

Test(console_watch, status_and_banner_are_independent)
{
	struct console_watch w = { 0 };

	feed_str(&w, "mayfly: exit status 4\r\nKernel panic - not syncing: Attempted to kill init!\r\n");
	cr_assert(w.panicked);
	cr_assert(w.status_seen);
	cr_assert_eq(w.status, 4);
}
