/* test_mem.c - the checked guest-physical to host translation at its edges. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "mem/mem.h"
#include "x86/layout.h"

static const struct mem_layout x86_ram = LAYOUT_RAM_SLOTS;

#define FAKE_SIZE (1 << 20)

static uint8_t fake[FAKE_SIZE];

Test(mem, translates_inside_ram)
{
	struct guest_mem m;

	mem_init_fake(&m, fake, FAKE_SIZE);
	cr_assert_eq(mem_gpa_to_hva(&m, 0, 1), fake);
	cr_assert_eq(mem_gpa_to_hva(&m, 0, FAKE_SIZE), fake);
	cr_assert_eq(mem_gpa_to_hva(&m, FAKE_SIZE - 1, 1), fake + FAKE_SIZE - 1);
	cr_assert_eq(mem_gpa_to_hva(&m, 4096, 0), fake + 4096);
}

Test(mem, refuses_edges_and_overflow)
{
	struct guest_mem m;

	mem_init_fake(&m, fake, FAKE_SIZE);
	cr_assert_null(mem_gpa_to_hva(&m, FAKE_SIZE, 1));
	cr_assert_null(mem_gpa_to_hva(&m, FAKE_SIZE - 1, 2));
	cr_assert_null(mem_gpa_to_hva(&m, 0, FAKE_SIZE + 1));
	cr_assert_null(mem_gpa_to_hva(&m, 1, UINT64_MAX));
	cr_assert_null(mem_gpa_to_hva(&m, UINT64_MAX, 1));
	cr_assert_null(mem_gpa_to_hva(&m, UINT64_MAX - 10, 100));
	cr_assert_null(mem_gpa_to_hva(&m, FAKE_SIZE, 0));
}

Test(mem, read_write_copy_and_fail_cleanly)
{
	struct guest_mem m;
	uint8_t buf[4] = { 1, 2, 3, 4 }, out[4] = { 0 };

	mem_init_fake(&m, fake, FAKE_SIZE);
	cr_assert_eq(mem_write(&m, 100, buf, 4), 0);
	cr_assert_eq(mem_read(&m, 100, out, 4), 0);
	cr_assert_arr_eq(buf, out, 4);
	cr_assert_eq(mem_write(&m, FAKE_SIZE - 2, buf, 4), -EFAULT);
	cr_assert_eq(mem_read(&m, FAKE_SIZE - 2, out, 4), -EFAULT);
}

Test(mem, splits_around_the_mmio_hole)
{
	struct guest_mem m;
	uint64_t four_gib = 4ULL << 30;

	cr_assert_eq(mem_init(&m, four_gib, &x86_ram), 0);
	cr_assert_eq(m.nr_regions, 2);
	cr_assert_eq(mem_low_end(&m), LAYOUT_MMIO_HOLE_START);
	cr_assert_eq(m.regions[1].gpa, LAYOUT_HIGH_RAM_START);
	cr_assert_eq(m.regions[1].size, four_gib - LAYOUT_MMIO_HOLE_START);
	/* The hole itself is not RAM, and no access may straddle it. */
	cr_assert_null(mem_gpa_to_hva(&m, LAYOUT_MMIO_HOLE_START, 1));
	cr_assert_null(mem_gpa_to_hva(&m, LAYOUT_MMIO_HOLE_START - 4, 8));
	cr_assert_null(mem_gpa_to_hva(&m, LAYOUT_HIGH_RAM_START - 1, 2));
	cr_assert_eq(mem_gpa_to_hva(&m, LAYOUT_HIGH_RAM_START, 8),
		     m.base + LAYOUT_MMIO_HOLE_START);
	cr_assert_null(mem_gpa_to_hva(&m, LAYOUT_HIGH_RAM_START + m.regions[1].size, 1));
	mem_free(&m);
}

Test(mem, small_ram_is_one_region)
{
	struct guest_mem m;

	cr_assert_eq(mem_init(&m, 256ULL << 20, &x86_ram), 0);
	cr_assert_eq(m.nr_regions, 1);
	cr_assert_eq(mem_low_end(&m), 256ULL << 20);
	mem_free(&m);
}

Test(mem, rejects_zero_and_unaligned_sizes)
{
	struct guest_mem m;

	cr_assert_eq(mem_init(&m, 0, &x86_ram), -EINVAL);
	cr_assert_eq(mem_init(&m, 4097, &x86_ram), -EINVAL);
}

/* One slot at a base above 0, as on arm64 (RAM from 2 GiB). */
Test(mem, one_slot_at_a_base)
{
	static const struct mem_layout high = { 1, { { 0x80000000ULL, 0 } } };
	struct guest_mem m;

	cr_assert_eq(mem_init(&m, 64ULL << 20, &high), 0);
	cr_assert_eq(m.nr_regions, 1);
	cr_assert_eq(m.regions[0].gpa, 0x80000000ULL);
	cr_assert_eq(mem_low_end(&m), 0x80000000ULL + (64ULL << 20));
	cr_assert_null(mem_gpa_to_hva(&m, 0, 1));
	cr_assert_eq(mem_gpa_to_hva(&m, 0x80000000ULL, 8), m.base);
	mem_free(&m);
}

/* A layout that cannot hold the RAM, or is not one, maps nothing. */
Test(mem, rejects_bad_layouts)
{
	static const struct mem_layout small = { 1, { { 0, 1ULL << 20 } } };
	static const struct mem_layout overlap = { 2, { { 0, 2ULL << 20 }, { 1ULL << 20, 0 } } };
	static const struct mem_layout open_middle = { 2, { { 0, 0 }, { 4ULL << 30, 0 } } };
	static const struct mem_layout unaligned = { 1, { { 0x800, 0 } } };
	static const struct mem_layout none = { 0, { { 0, 0 } } };
	static const struct mem_layout wraps = { 1, { { ~0ULL & ~0xfffULL, 0 } } };
	struct guest_mem m;

	cr_assert_eq(mem_init(&m, 2ULL << 20, &small), -EINVAL);
	cr_assert_eq(mem_init(&m, 4ULL << 20, &overlap), -EINVAL);
	cr_assert_eq(mem_init(&m, 4ULL << 20, &open_middle), -EINVAL);
	cr_assert_eq(mem_init(&m, 4ULL << 20, &unaligned), -EINVAL);
	cr_assert_eq(mem_init(&m, 4ULL << 20, &none), -EINVAL);
	cr_assert_eq(mem_init(&m, 4ULL << 20, &wraps), -EINVAL);
	cr_assert_null(m.base);
	/* Exactly full is fine. */
	cr_assert_eq(mem_init(&m, 1ULL << 20, &small), 0);
	cr_assert_eq(m.nr_regions, 1);
	mem_free(&m);
}
