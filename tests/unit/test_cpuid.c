/* test_cpuid.c - CPUID patching: APIC id, hypervisor bit, topology, no PMU. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "x86/cpu.h"
#include "x86/layout.h"

static struct kvm_cpuid2 *fake_table(void)
{
	static const struct kvm_cpuid_entry2 entries[] = {
		{ .function = 0, .eax = 0x1f },
		{ .function = 1, .eax = 0x806f8, .ebx = 0xff10800, .ecx = 0x7ed8320b, .edx = 0x178bfbff },
		{ .function = 4, .index = 0, .flags = KVM_CPUID_FLAG_SIGNIFCANT_INDEX, .eax = 0xfc004121 },
		{ .function = 4, .index = 3, .flags = KVM_CPUID_FLAG_SIGNIFCANT_INDEX, .eax = 0xfc01c163 },
		{ .function = 4, .index = 4, .flags = KVM_CPUID_FLAG_SIGNIFCANT_INDEX, .eax = 0 },
		{ .function = 6, .ecx = 0x9 },
		{ .function = 0xa, .eax = 0x7300404, .ebx = 0, .edx = 0x603 },
		{ .function = 0xb, .index = 0, .flags = KVM_CPUID_FLAG_SIGNIFCANT_INDEX },
		{ .function = 0xb, .index = 1, .flags = KVM_CPUID_FLAG_SIGNIFCANT_INDEX },
		{ .function = 0xb, .index = 2, .flags = KVM_CPUID_FLAG_SIGNIFCANT_INDEX, .eax = 7, .ebx = 7 },
		{ .function = 0x40000000, .eax = 0x40000001, .ebx = 0x4b4d564b },
		{ .function = 0x80000008, .eax = 0x3030, .ecx = 0x7007 },
	};
	size_t n = sizeof(entries) / sizeof(entries[0]);
	struct kvm_cpuid2 *c = calloc(1, sizeof(*c) + n * sizeof(c->entries[0]));

	c->nent = (uint32_t)n;
	memcpy(c->entries, entries, sizeof(entries));
	return c;
}

Test(cpuid, leaf1_apic_id_count_and_hypervisor_bit)
{
	struct kvm_cpuid2 *c = fake_table();
	struct kvm_cpuid_entry2 *e;

	cpuid_patch(c, 3, 4);
	e = cpuid_find(c, 1, 0);
	cr_assert_not_null(e);
	cr_assert_eq(e->ebx >> 24, 3, "initial APIC id");
	cr_assert_eq((e->ebx >> 16) & 0xff, 4, "logical processor count");
	cr_assert_eq(e->ebx & 0xffff, 0x0800, "CLFLUSH size kept");
	cr_assert(e->ecx & (1u << 31), "hypervisor bit");
	cr_assert(e->edx & (1u << 28), "HTT with more than one CPU");
	free(c);
}

Test(cpuid, single_cpu_clears_htt)
{
	struct kvm_cpuid2 *c = fake_table();

	cpuid_patch(c, 0, 1);
	cr_assert_not(cpuid_find(c, 1, 0)->edx & (1u << 28));
	cr_assert_eq(cpuid_find(c, 1, 0)->ebx >> 24, 0);
	free(c);
}

Test(cpuid, cache_leaf_topology)
{
	struct kvm_cpuid2 *c = fake_table();

	cpuid_patch(c, 0, 2);
	/* L1 (level 1): 2 cores per package, one thread per cache. */
	cr_assert_eq(cpuid_find(c, 4, 0)->eax >> 26, 1);
	cr_assert_eq((cpuid_find(c, 4, 0)->eax >> 14) & 0xfff, 0);
	cr_assert_eq(cpuid_find(c, 4, 0)->eax & 0x3fff, 0x0121);
	/* L3 (level 3): shared by both. */
	cr_assert_eq((cpuid_find(c, 4, 3)->eax >> 14) & 0xfff, 1);
	/* The null terminator leaf is left alone. */
	cr_assert_eq(cpuid_find(c, 4, 4)->eax, 0);
	free(c);
}

Test(cpuid, extended_topology_and_amd_core_count)
{
	struct kvm_cpuid2 *c = fake_table();

	cpuid_patch(c, 5, 6);
	cr_assert_eq(cpuid_find(c, 0xb, 0)->ebx, 1);
	cr_assert_eq(cpuid_find(c, 0xb, 0)->edx, 5);
	cr_assert_eq(cpuid_find(c, 0xb, 1)->eax, 3, "6 CPUs need 3 bits");
	cr_assert_eq(cpuid_find(c, 0xb, 1)->ebx, 6);
	cr_assert_eq(cpuid_find(c, 0xb, 1)->ecx, (2u << 8) | 1);
	cr_assert_eq(cpuid_find(c, 0xb, 2)->ebx, 0, "no level past core");
	cr_assert_eq(cpuid_find(c, 0xb, 2)->ecx, 2);
	cr_assert_eq(cpuid_find(c, 0x80000008, 0)->ecx & 0xff, 5);
	cr_assert_eq((cpuid_find(c, 0x80000008, 0)->ecx >> 12) & 0xf, 3);
	free(c);
}

Test(cpuid, no_pmu_and_kvm_leaves_kept)
{
	struct kvm_cpuid2 *c = fake_table();

	cpuid_patch(c, 0, 1);
	cr_assert_eq(cpuid_find(c, 0xa, 0)->eax, 0);
	cr_assert_eq(cpuid_find(c, 0xa, 0)->edx, 0);
	cr_assert_eq(cpuid_find(c, 0x40000000, 0)->ebx, 0x4b4d564b, "KVMK signature");
	cr_assert_eq(cpuid_find(c, 6, 0)->ecx & (1u << 3), 0);
	cr_assert_null(cpuid_find(c, 0x12345678, 0));
	free(c);
}

Test(cpuid, gdt_entry_encoding)
{
	/* The flat 64-bit code descriptor every x86-64 boot loader uses. */
	cr_assert_eq(regs_gdt_entry(0xa09b, 0, 0xfffff), 0x00af9b000000ffffULL);
	cr_assert_eq(regs_gdt_entry(0xc093, 0, 0xfffff), 0x00cf93000000ffffULL);
	cr_assert_eq(regs_gdt_entry(0x008b, 0x12345678, 0x67), 0x12008b3456780067ULL);
}

Test(cpuid, boot_tables_identity_map_and_gdt)
{
	static uint8_t ram[1 << 20];
	struct guest_mem mem;
	uint64_t e;

	mem_init_fake(&mem, ram, sizeof(ram));
	cr_assert_eq(regs_write_boot_tables(&mem, false), 0);
	memcpy(&e, ram + LAYOUT_PML4, 8);
	cr_assert_eq(e, 0, "no page tables for a PVH entry");
	memcpy(&e, ram + LAYOUT_GDT + LAYOUT_GDT_CODE64, 8);
	cr_assert_eq(e, 0x00af9b000000ffffULL);

	cr_assert_eq(regs_write_boot_tables(&mem, true), 0);
	memcpy(&e, ram + LAYOUT_PML4, 8);
	cr_assert_eq(e, LAYOUT_PDPT | 3);
	for (int i = 0; i < LAYOUT_PD_COUNT; i++) {
		memcpy(&e, ram + LAYOUT_PDPT + i * 8, 8);
		cr_assert_eq(e, (LAYOUT_PD + i * LAYOUT_PAGE_SIZE) | 3);
	}
	/* The last 2 MiB page of the last PD maps 4 GiB - 2 MiB. */
	memcpy(&e, ram + LAYOUT_PD + 3 * LAYOUT_PAGE_SIZE + 511 * 8, 8);
	cr_assert_eq(e, (0xffe00000ULL) | 0x83);

	/* RAM too small for the tables: an error, nothing written past it. */
	mem_init_fake(&mem, ram, LAYOUT_PD + 0x800);
	cr_assert_eq(regs_write_boot_tables(&mem, true), -EFAULT);
}

Test(cpuid, tsc_deadline_is_advertised_only_in_leaf_1)
{
	struct kvm_cpuid2 *c = fake_table();
	struct kvm_cpuid_entry2 *l1 = cpuid_find(c, 1, 0);
	uint32_t before = l1->ecx;

	cr_assert_not(before & (1u << 24));
	cpuid_enable_tsc_deadline(c);
	cr_assert_eq(l1->ecx, before | (1u << 24));
	free(c);
}
