/* test_sparse.c - sparse_zero: the bytes come out as with memset, and a page whose bytes would not change is never written (read-only memory proves it). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "lib/sparse.h"

#define PAGE 4096u

static uint8_t *map(size_t pages, int prot)
{
	void *p = mmap(NULL, pages * PAGE, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	cr_assert_neq(p, MAP_FAILED);
	return p;
}

static bool zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

Test(sparse, zero_clears_every_byte_and_counts_the_pages_written)
{
	uint8_t *p = map(5, PROT_READ | PROT_WRITE);

	memset(p, 0xaa, 5 * PAGE);
	memset(p + PAGE, 0, 2 * PAGE);    /* pages 1 and 2 already zero */
	p[2 * PAGE + PAGE - 1] = 1;       /* but page 2's last byte */
	cr_assert_eq(sparse_zero(p, 5 * PAGE), 4);
	cr_assert(zero(p, 5 * PAGE));
	cr_assert_eq(sparse_zero(p, 5 * PAGE), 0, "zero already: nothing written");
	munmap(p, 5 * PAGE);
}

Test(sparse, zero_keeps_to_an_unaligned_range)
{
	uint8_t *p = map(3, PROT_READ | PROT_WRITE);

	memset(p, 0x55, 3 * PAGE);
	/* From the middle of page 0 to the middle of page 2: three pieces. */
	cr_assert_eq(sparse_zero(p + 100, 2 * PAGE), 3);
	cr_assert(zero(p + 100, 2 * PAGE));
	cr_assert(p[99] == 0x55 && p[100 + 2 * PAGE] == 0x55, "a byte outside was cleared");
	cr_assert_eq(sparse_zero(p + 7, 1), 1);
	cr_assert_eq(p[7], 0);
	cr_assert_eq(sparse_zero(p, 0), 0);
	munmap(p, 3 * PAGE);
}

Test(sparse, zero_never_writes_a_page_that_is_zero)
{
	/* Read-only: a write would be a SIGSEGV. */
	uint8_t *p = map(4, PROT_READ);

	cr_assert_eq(sparse_zero(p, 4 * PAGE), 0);
	cr_assert_eq(sparse_zero(p + 1, 4 * PAGE - 2), 0);
	munmap(p, 4 * PAGE);
}
