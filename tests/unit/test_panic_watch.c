/* test_panic_watch.c - the panic banner is found across chunks and not imagined. */
#include <criterion/criterion.h>
#include <string.h>

#include "panic_watch.h"

static bool feed_str(struct panic_watch *w, const char *s)
{
	return panic_watch_feed(w, (const uint8_t *)s, strlen(s));
}

Test(panic_watch, finds_banner_in_one_chunk)
{
	struct panic_watch w = { 0 };

	cr_assert(feed_str(&w, "[ 1.2] Kernel panic - not syncing: Attempted to kill init!\r\n"));
}

Test(panic_watch, finds_banner_split_byte_by_byte)
{
	struct panic_watch w = { 0 };
	const char *s = "noise KKernel panic - not syncing: VFS";
	bool seen = false;

	for (size_t i = 0; i < strlen(s); i++)
		seen = panic_watch_feed(&w, (const uint8_t *)s + i, 1);
	cr_assert(seen);
}

Test(panic_watch, ignores_near_misses)
{
	struct panic_watch w = { 0 };

	cr_assert_not(feed_str(&w, "Kernel panic - not syncin"));
	cr_assert_not(feed_str(&w, "k"));
	cr_assert_not(feed_str(&w, "Kernel panic - not sync\nKernel pan"));
	cr_assert_not(feed_str(&w, "ic is fine"));
	cr_assert_not(feed_str(&w, "kernel panic - not syncing"));
}

Test(panic_watch, stays_seen)
{
	struct panic_watch w = { 0 };

	cr_assert(feed_str(&w, "Kernel panic - not syncing"));
	cr_assert(feed_str(&w, "later output"));
}

Test(panic_watch, completes_across_a_chunk_boundary)
{
	struct panic_watch w = { 0 };

	cr_assert_not(feed_str(&w, "Kernel panic - not syncin"));
	cr_assert(feed_str(&w, "g: oops"));
}
