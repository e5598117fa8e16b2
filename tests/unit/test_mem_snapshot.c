/* test_mem_snapshot.c - the snapshot memory file: sparse, exact, mapped copy-on-write, never written. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mem/mem.h"
#include "x86/layout.h"

static const struct mem_layout x86_ram = LAYOUT_RAM_SLOTS;

#define MiB (1024ull * 1024)
#define PAGE 4096ull

static char dir[64];
static char path[96];

static void setup(void)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(dir, sizeof(dir), "%s/mayfly-memsnap.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/memory", dir);
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(mem_snapshot, .init = setup, .fini = teardown);

/* A page's pattern: its guest-physical address and a seed, never all zero. */
static void fill_page(uint8_t *p, uint64_t gpa, uint8_t seed)
{
	for (uint64_t i = 0; i < PAGE; i += 8) {
		uint64_t v = (gpa + i) * 0x9e3779b97f4a7c15ull + seed + 1;

		memcpy(p + i, &v, 8);
	}
}

static bool page_matches(const uint8_t *p, uint64_t gpa, uint8_t seed)
{
	uint8_t want[PAGE];

	fill_page(want, gpa, seed);
	return memcmp(p, want, PAGE) == 0;
}

/* A 256 MiB guest that wrote 40 MiB (and zeros into 8 MiB more) makes a
 * 256 MiB file with about 40 MiB of blocks. */
Test(mem_snapshot, file_is_sparse)
{
	struct guest_mem m;
	struct mem_save_stats st;
	const char *why = NULL;
	struct stat sb;

	cr_assert_eq(mem_init(&m, 256 * MiB, &x86_ram), 0);
	/* 40 MiB of data in 10 runs of 4 MiB, 20 MiB apart, from 1 MiB. */
	for (uint64_t run = 0; run < 10; run++)
		for (uint64_t p = 0; p < 4 * MiB / PAGE; p++) {
			uint64_t gpa = 1 * MiB + run * 24 * MiB + p * PAGE;

			fill_page(mem_gpa_to_hva(&m, gpa, PAGE), gpa, 0);
		}
	/* 8 MiB the guest zeroed: resident, but no data. */
	memset(mem_gpa_to_hva(&m, 248 * MiB, 8 * MiB), 0, 8 * MiB);

	cr_assert_eq(mem_save(&m, path, &st, &why), 0, "%s", why);
	cr_assert_eq(st.data_bytes, 40 * MiB);
	cr_assert_geq(st.zero_bytes, 8 * MiB);
	cr_assert_eq(st.data_bytes + st.zero_bytes + st.absent_bytes, 256 * MiB);
	cr_assert_eq(stat(path, &sb), 0);
	cr_assert_eq((uint64_t)sb.st_size, 256 * MiB);
	cr_assert_geq((uint64_t)sb.st_blocks * 512, 40 * MiB);
	cr_assert_leq((uint64_t)sb.st_blocks * 512, 41 * MiB, "%llu bytes allocated",
		      (unsigned long long)sb.st_blocks * 512);
	cr_assert_eq(sb.st_mode & 0777, 0600);
	mem_free(&m);
}

/* RAM on both sides of the MMIO hole comes back byte for byte; the file is
 * the low region then the high one. */
Test(mem_snapshot, content_round_trip_across_the_hole)
{
	const uint64_t total = LAYOUT_MMIO_HOLE_START + 64 * MiB;
	const uint64_t gpas[] = { 0, 0x7000, 1 * MiB, LAYOUT_MMIO_HOLE_START - PAGE,
				  LAYOUT_HIGH_RAM_START, LAYOUT_HIGH_RAM_START + 63 * MiB };
	struct guest_mem m, r;
	const char *why = NULL;
	uint8_t buf[PAGE];
	int fd;

	cr_assert_eq(mem_init(&m, total, &x86_ram), 0);
	cr_assert_eq(m.nr_regions, 2);
	for (size_t i = 0; i < sizeof(gpas) / sizeof(gpas[0]); i++)
		fill_page(mem_gpa_to_hva(&m, gpas[i], PAGE), gpas[i], 3);
	cr_assert_eq(mem_save(&m, path, NULL, &why), 0, "%s", why);
	mem_free(&m);

	/* The file offset of the first high page is the size of the low region. */
	fd = open(path, O_RDONLY);
	cr_assert_eq(pread(fd, buf, PAGE, (off_t)LAYOUT_MMIO_HOLE_START), (ssize_t)PAGE);
	cr_assert(page_matches(buf, LAYOUT_HIGH_RAM_START, 3));
	close(fd);

	cr_assert_eq(mem_restore(&r, total, &x86_ram, path, &why), 0, "%s", why);
	cr_assert(r.file_backed);
	cr_assert_eq(r.nr_regions, 2);
	for (size_t i = 0; i < sizeof(gpas) / sizeof(gpas[0]); i++)
		cr_assert(page_matches(mem_gpa_to_hva(&r, gpas[i], PAGE), gpas[i], 3),
			  "page at %#llx", (unsigned long long)gpas[i]);
	/* A page never written reads as zeros. */
	cr_assert_eq(*(uint64_t *)mem_gpa_to_hva(&r, 2 * MiB, 8), 0);
	mem_free(&r);
}

static void read_file(const char *p, uint8_t *buf, size_t len)
{
	int fd = open(p, O_RDONLY);

	cr_assert_geq(fd, 0);
	cr_assert_eq(pread(fd, buf, len, 0), (ssize_t)len);
	close(fd);
}

/* Two VMs restored from one file: each one's writes stay its own, and the
 * file never changes. */
Test(mem_snapshot, restored_copies_are_private_and_the_file_unchanged)
{
	const uint64_t total = 8 * MiB;
	struct guest_mem m, a, b;
	const char *why = NULL;
	uint8_t *before = malloc(total), *after = malloc(total);

	cr_assert_eq(mem_init(&m, total, &x86_ram), 0);
	for (uint64_t gpa = 0; gpa < total; gpa += 2 * PAGE)
		fill_page(mem_gpa_to_hva(&m, gpa, PAGE), gpa, 5);
	cr_assert_eq(mem_save(&m, path, NULL, &why), 0, "%s", why);
	mem_free(&m);
	read_file(path, before, total);

	cr_assert_eq(mem_restore(&a, total, &x86_ram, path, &why), 0, "%s", why);
	cr_assert_eq(mem_restore(&b, total, &x86_ram, path, &why), 0, "%s", why);
	memset(mem_gpa_to_hva(&a, 0, total), 0xaa, total);          /* every page of a */
	fill_page(mem_gpa_to_hva(&b, PAGE, PAGE), PAGE, 9);          /* a hole of the file */
	cr_assert(page_matches(mem_gpa_to_hva(&b, 0, PAGE), 0, 5), "b does not see a's writes");
	cr_assert_eq(*(uint8_t *)mem_gpa_to_hva(&a, PAGE, 1), 0xaa, "a does not see b's");

	read_file(path, after, total);
	cr_assert_eq(memcmp(before, after, total), 0, "the memory file was written");
	mem_free(&a);
	mem_free(&b);
	free(before);
	free(after);
}

/* Saving RAM that was itself restored must not take file pages that are not
 * in the page cache for untouched ones: they are read, not skipped. */
Test(mem_snapshot, resave_of_restored_ram_keeps_pages_not_in_the_page_cache)
{
	const uint64_t total = 4 * MiB;
	char path2[128];
	struct guest_mem m, r;
	struct mem_save_stats st;
	const char *why = NULL;
	uint8_t *one = malloc(total), *two = malloc(total);
	int fd;

	cr_assert_eq(mem_init(&m, total, &x86_ram), 0);
	for (uint64_t gpa = 0; gpa < total; gpa += PAGE)
		fill_page(mem_gpa_to_hva(&m, gpa, PAGE), gpa, 7);
	cr_assert_eq(mem_save(&m, path, NULL, &why), 0, "%s", why);
	mem_free(&m);

	cr_assert_eq(mem_restore(&r, total, &x86_ram, path, &why), 0, "%s", why);
	fill_page(mem_gpa_to_hva(&r, 0, PAGE), 0, 8);   /* one page the guest changed */
	fd = open(path, O_RDONLY);
	cr_assert_eq(fdatasync(fd), 0);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);     /* evict what is not mapped */
	close(fd);
	snprintf(path2, sizeof(path2), "%s/memory2", dir);
	cr_assert_eq(mem_save(&r, path2, &st, &why), 0, "%s", why);
	cr_assert_eq(st.data_bytes, total);
	read_file(path2, two, total);
	read_file(path, one, total);
	cr_assert(page_matches(two, 0, 8));
	cr_assert_eq(memcmp(one + PAGE, two + PAGE, total - PAGE), 0);
	mem_free(&r);
	free(one);
	free(two);
}

Test(mem_snapshot, restore_refuses_wrong_size_and_non_files)
{
	struct guest_mem m;
	const char *why = NULL;

	cr_assert_eq(mem_init(&m, 1 * MiB, &x86_ram), 0);
	cr_assert_eq(mem_save(&m, path, NULL, &why), 0, "%s", why);
	mem_free(&m);
	cr_assert_eq(mem_restore(&m, 2 * MiB, &x86_ram, path, &why), -EINVAL);
	cr_assert(strstr(why, "1048576 bytes") && strstr(why, "2097152 bytes"), "%s", why);
	cr_assert_null(m.base);
	cr_assert_eq(mem_restore(&m, 1 * MiB + 100, &x86_ram, path, &why), -EINVAL);
	cr_assert_eq(mem_restore(&m, 1 * MiB, &x86_ram, dir, &why), -EINVAL);
	cr_assert_eq(mem_restore(&m, 1 * MiB, &x86_ram, "/nonexistent/memory", &why), -ENOENT);
	cr_assert(strstr(why, "/nonexistent/memory"), "%s", why);
}

Test(mem_snapshot, failed_save_leaves_nothing)
{
	struct guest_mem m;
	const char *why = NULL;
	char bad[128];

	cr_assert_eq(mem_init(&m, 1 * MiB, &x86_ram), 0);
	snprintf(bad, sizeof(bad), "%s/missing/memory", dir);
	cr_assert_eq(mem_save(&m, bad, NULL, &why), -ENOENT);
	cr_assert(strstr(why, bad), "%s", why);
	/* A path that is a directory: the rename fails; the temp file goes. */
	cr_assert_eq(mkdir(path, 0700), 0);
	cr_assert_neq(mem_save(&m, path, NULL, &why), 0);
	cr_assert_eq(rmdir(path), 0, "only the directory was there");
	cr_assert_eq(rmdir(dir), 0, "nothing else left in %s", dir);
	cr_assert_eq(mkdir(dir, 0700), 0);
	mem_free(&m);
}
