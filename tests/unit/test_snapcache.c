/* test_snapcache.c - the default snapshot cache stays bounded: the least recently used snapshots beyond the limit go, a recently used one, the one just made and anything that is not a snapshot stay. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "launch/snapcache.h"
#include "lib/fs_tree.h"

static char root[] = "/tmp/snapcache-XXXXXX";
static const time_t now = 1800000000;

static void setup(void)
{
	cr_assert_not_null(mkdtemp(root));
}

static void teardown(void)
{
	fs_remove_tree(root);
}

TestSuite(snapcache, .init = setup, .fini = teardown);

/* A key-shaped name: 32 hex digits, the last ones from i. */
static const char *key(int i)
{
	static char k[8][33];
	char *p = k[i % 8];

	snprintf(p, 33, "%032x", i + 0xa0);
	return p;
}

/* A snapshot directory with a state and a memory file, last used at `used`. */
static void make_snapshot(const char *name, time_t used)
{
	char path[512];
	struct timespec t[2] = { { used, 0 }, { used, 0 } };
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, name);
	cr_assert_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/%s/state", root, name);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs("state", f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/%s/memory", root, name);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/%s", root, name);
	cr_assert_eq(utimensat(AT_FDCWD, path, t, 0), 0);
}

static bool there(const char *name)
{
	char path[512];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", root, name);
	return lstat(path, &st) == 0;
}

Test(snapcache, the_least_recently_used_beyond_the_limit_are_removed)
{
	/* key(0) is the newest, key(5) the oldest; all well past the grace. */
	for (int i = 0; i < 6; i++)
		make_snapshot(key(i), now - 3600 - 60 * i);

	cr_assert_eq(snapcache_evict(root, NULL, 4, 600, now), 2);
	for (int i = 0; i < 4; i++)
		cr_assert(there(key(i)), "snapshot %d of the 4 newest was removed", i);
	cr_assert_not(there(key(4)));
	cr_assert_not(there(key(5)));
	cr_assert_eq(snapcache_evict(root, NULL, 4, 600, now), 0, "a second pass removes nothing");
}

Test(snapcache, the_one_just_made_counts_among_those_kept)
{
	for (int i = 0; i < 5; i++)
		make_snapshot(key(i), now - 3600 - 60 * i);
	/* Spared even though it is the oldest by its time stamp. */
	cr_assert_eq(snapcache_evict(root, key(4), 2, 600, now), 3);
	cr_assert(there(key(4)));
	cr_assert(there(key(0)));
	for (int i = 1; i < 4; i++)
		cr_assert_not(there(key(i)));
}

Test(snapcache, a_snapshot_used_within_the_grace_period_stays)
{
	for (int i = 0; i < 4; i++)
		make_snapshot(key(i), now - 10 * i);   /* all used in the last minute */

	cr_assert_eq(snapcache_evict(root, NULL, 1, 600, now), 0);
	for (int i = 0; i < 4; i++)
		cr_assert(there(key(i)));
}

Test(snapcache, what_is_not_a_snapshot_directory_is_left_alone)
{
	char path[512];
	FILE *f;

	make_snapshot("not-a-key", now - 7200);
	make_snapshot("0123456789ABCDEF0123456789ABCDEF", now - 7200);   /* upper case */
	snprintf(path, sizeof(path), "%s/.lock", root);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/%s", root, key(7));
	f = fopen(path, "w");   /* a key-shaped regular file */
	cr_assert_not_null(f);
	fclose(f);

	cr_assert_eq(snapcache_evict(root, NULL, 0, 600, now), 0);
	cr_assert(there("not-a-key"));
	cr_assert(there("0123456789ABCDEF0123456789ABCDEF"));
	cr_assert(there(".lock"));
	cr_assert(there(key(7)));
}

Test(snapcache, an_interrupted_eviction_is_finished)
{
	char name[300];

	snprintf(name, sizeof(name), ".evict-%s", key(1));
	make_snapshot(name, now);   /* even a recent one: it was already on its way out */
	make_snapshot(key(2), now - 7200);

	cr_assert_eq(snapcache_evict(root, NULL, 4, 600, now), 1);
	cr_assert_not(there(name));
	cr_assert(there(key(2)));
}

Test(snapcache, a_missing_cache_directory_is_an_error_not_a_crash)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/absent", root);
	cr_assert_lt(snapcache_evict(path, NULL, 4, 600, now), 0);
}

Test(snapcache, a_held_snapshot_stays_and_goes_once_released)
{
	char path[512];
	int held;

	for (int i = 0; i < 3; i++)
		make_snapshot(key(i), now - 3600 - 60 * i);
	snprintf(path, sizeof(path), "%s/%s", root, key(2));
	held = snapcache_hold(path);
	cr_assert_geq(held, 0);

	cr_assert_eq(snapcache_evict(root, NULL, 1, 600, now), 1, "only the unheld old one goes");
	cr_assert(there(key(0)));
	cr_assert_not(there(key(1)));
	cr_assert(there(key(2)), "a held snapshot was removed");

	close(held);
	cr_assert_eq(snapcache_evict(root, NULL, 1, 600, now), 1);
	cr_assert_not(there(key(2)));
}
