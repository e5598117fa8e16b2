/* test_mptable.c - the MP table a guest parses to find CPUs and the IOAPIC. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "x86/cpu.h"
#include "x86/layout.h"

#define RAM (2 << 20)

static uint8_t *ram;
static struct guest_mem mem;

static void setup(void)
{
	ram = calloc(1, RAM);
	mem_init_fake(&mem, ram, RAM);
}

static void teardown(void)
{
	free(ram);
}

TestSuite(mptable, .init = setup, .fini = teardown);

static uint8_t sum(const uint8_t *p, size_t n)
{
	uint8_t s = 0;

	while (n--)
		s += *p++;
	return s;
}

/* Walk the table as Linux's mpparse does; return processor count. */
static int parse(unsigned *ioapic_id, int *bsp_count, int *intsrc)
{
	const uint8_t *mpf = ram + LAYOUT_MPTABLE;
	uint32_t phys;
	const uint8_t *mpc, *p, *end;
	int cpus = 0;

	cr_assert_eq(memcmp(mpf, "_MP_", 4), 0);
	cr_assert_eq(sum(mpf, 16), 0, "floating pointer checksum");
	cr_assert_eq(mpf[8], 1);
	memcpy(&phys, mpf + 4, 4);
	cr_assert_lt(phys, RAM);
	mpc = ram + phys;
	cr_assert_eq(memcmp(mpc, "PCMP", 4), 0);
	uint16_t len;
	memcpy(&len, mpc + 4, 2);
	cr_assert_eq(sum(mpc, len), 0, "config table checksum");
	uint32_t lapic;
	memcpy(&lapic, mpc + 36, 4);
	cr_assert_eq(lapic, LAYOUT_LAPIC);
	*bsp_count = 0;
	*intsrc = 0;
	for (p = mpc + 44, end = mpc + len; p < end;) {
		switch (p[0]) {
		case 0:
			cr_assert_eq(p[1], cpus, "APIC ids are 0..n-1");
			cr_assert(p[3] & 1, "enabled");
			*bsp_count += !!(p[3] & 2);
			cpus++;
			p += 20;
			break;
		case 2:
			*ioapic_id = p[1];
			p += 8;
			break;
		case 3:
			(*intsrc)++;
			p += 8;
			break;
		case 1:
		case 4:
			p += 8;
			break;
		default:
			cr_assert_fail("unknown entry type %u", p[0]);
		}
	}
	cr_assert_eq(p, end);
	return cpus;
}

Test(mptable, one_cpu)
{
	unsigned ioapic = 0;
	int bsp, intsrc;

	cr_assert_eq(mptable_write(&mem, 1), 0);
	cr_assert_eq(parse(&ioapic, &bsp, &intsrc), 1);
	cr_assert_eq(bsp, 1);
	cr_assert_eq(ioapic, 1);
	cr_assert_eq(intsrc, 24);
}

Test(mptable, many_cpus_up_to_the_limit)
{
	unsigned ioapic = 0;
	int bsp, intsrc;

	cr_assert_eq(mptable_write(&mem, 4), 0);
	cr_assert_eq(parse(&ioapic, &bsp, &intsrc), 4);
	cr_assert_eq(bsp, 1, "exactly one boot processor");
	cr_assert_eq(ioapic, 4, "IOAPIC id after the CPUs");
	memset(ram, 0, RAM);
	cr_assert_eq(mptable_write(&mem, 254), 0);
	cr_assert_eq(parse(&ioapic, &bsp, &intsrc), 254);
	cr_assert_eq(mptable_write(&mem, 255), -E2BIG);
	cr_assert_eq(mptable_write(&mem, 0), -E2BIG);
}

Test(mptable, ram_too_small_is_an_error_not_a_crash)
{
	struct guest_mem tiny;

	mem_init_fake(&tiny, ram, LAYOUT_MPTABLE + 8);
	cr_assert_eq(mptable_write(&tiny, 2), -EFAULT);
}
