/* test_boot_params.c - what the kernel finds at entry: the e820 map, the initrd's place, the zero page and the PVH start info. */
#include <criterion/criterion.h>

#include <asm/bootparam.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "boot_fixture.h"
#include "x86/layout.h"

/* ---- e820 ---- */

static void expect_e820(const struct e820_entry *e, uint64_t addr, uint64_t size, uint32_t type)
{
	cr_expect_eq(e->addr, addr, "addr %#llx != %#llx", (unsigned long long)e->addr,
		     (unsigned long long)addr);
	cr_expect_eq(e->size, size, "size %#llx != %#llx", (unsigned long long)e->size,
		     (unsigned long long)size);
	cr_expect_eq(e->type, type);
}

Test(boot, e820_small_ram)
{
	struct e820_entry map[E820_MAX];
	int n = boot_e820_build(&mem, map, E820_MAX);

	cr_assert_eq(n, 4);
	expect_e820(&map[0], 0, LAYOUT_EBDA_START, E820_RAM);
	expect_e820(&map[1], LAYOUT_EBDA_START, LAYOUT_LOW_RAM_END - LAYOUT_EBDA_START, E820_RESERVED);
	expect_e820(&map[2], LAYOUT_BIOS_START, MIB - LAYOUT_BIOS_START, E820_RESERVED);
	expect_e820(&map[3], MIB, RAM_SIZE - MIB, E820_RAM);
}

Test(boot, e820_ram_ending_at_hole)
{
	struct guest_mem m = { .total = 3 * GIB, .nr_regions = 1,
			       .regions = { { 0, LAYOUT_MMIO_HOLE_START, ram } } };
	struct e820_entry map[E820_MAX];
	int n = boot_e820_build(&m, map, E820_MAX);

	cr_assert_eq(n, 4);
	expect_e820(&map[3], MIB, LAYOUT_MMIO_HOLE_START - MIB, E820_RAM);
}

Test(boot, e820_ram_above_4g)
{
	struct guest_mem m = { .total = 4 * GIB, .nr_regions = 2,
			       .regions = { { 0, LAYOUT_MMIO_HOLE_START, ram },
					    { LAYOUT_HIGH_RAM_START, GIB, ram } } };
	struct e820_entry map[E820_MAX];
	int n = boot_e820_build(&m, map, E820_MAX);

	cr_assert_eq(n, 5);
	expect_e820(&map[0], 0, LAYOUT_EBDA_START, E820_RAM);
	expect_e820(&map[3], MIB, LAYOUT_MMIO_HOLE_START - MIB, E820_RAM);
	expect_e820(&map[4], LAYOUT_HIGH_RAM_START, GIB, E820_RAM);
}

Test(boot, e820_tiny_ram_and_short_array)
{
	struct guest_mem m;
	struct e820_entry map[E820_MAX];

	mem_init_fake(&m, ram, 512 * 1024);
	cr_assert_eq(boot_e820_build(&m, map, E820_MAX), 3);
	expect_e820(&map[0], 0, 512 * 1024, E820_RAM);
	cr_assert_eq(boot_e820_build(&mem, map, 2), -ENOSPC);
}

/* ---- initrd ---- */

Test(boot, initrd_placed_high_and_page_aligned)
{
	struct kernel_image k = load_elf_kernel();
	static uint8_t initrd[0x1800];
	const char *why = NULL;
	uint64_t gpa = 0;

	memset(initrd, 0x42, sizeof(initrd));
	cr_assert_eq(boot_load_initrd(&mem, &k, initrd, sizeof(initrd), &gpa, &why), 0, "%s", why);
	cr_assert_eq(gpa % LAYOUT_PAGE_SIZE, 0);
	cr_assert_eq(gpa, RAM_SIZE - 0x2000);
	cr_assert(gpa >= k.load_end);
	cr_assert_eq(memcmp(ram + gpa, initrd, sizeof(initrd)), 0);
}

Test(boot, initrd_below_initrd_addr_max)
{
	struct kernel_image k = load_elf_kernel();
	static uint8_t initrd[0x3000];
	const char *why = NULL;
	uint64_t gpa = 0;

	k.initrd_addr_max = 0x1ffffff;   /* 32 MiB - 1 */
	cr_assert_eq(boot_load_initrd(&mem, &k, initrd, sizeof(initrd), &gpa, &why), 0, "%s", why);
	cr_assert_eq(gpa, 0x2000000 - 0x3000);
	cr_assert(gpa + sizeof(initrd) - 1 <= k.initrd_addr_max);
	/* initrd_addr_max not page aligned: still entirely below it. */
	k.initrd_addr_max = 0x1fff7ff;
	cr_assert_eq(boot_load_initrd(&mem, &k, initrd, 0x1000, &gpa, &why), 0, "%s", why);
	cr_assert_eq(gpa % LAYOUT_PAGE_SIZE, 0);
	cr_assert(gpa + 0x1000 - 1 <= k.initrd_addr_max);
}

Test(boot, reject_initrd_too_big_or_empty)
{
	struct kernel_image k = load_elf_kernel();
	size_t big = RAM_SIZE - 0x400000;   /* would overlap the kernel */
	uint8_t *initrd = calloc(1, big);
	const char *why = NULL;
	uint64_t gpa = 0;

	cr_assert_eq(boot_load_initrd(&mem, &k, initrd, big, &gpa, &why), -ENOMEM);
	cr_assert_not_null(why);
	why = NULL;
	cr_assert_eq(boot_load_initrd(&mem, &k, initrd, RAM_SIZE + 1, &gpa, &why), -ENOMEM);
	cr_assert_not_null(why);
	why = NULL;
	cr_assert_eq(boot_load_initrd(&mem, &k, initrd, 0, &gpa, &why), -EINVAL);
	cr_assert_not_null(why);
	/* Largest that fits: everything from the kernel's end up. */
	cr_assert_eq(boot_load_initrd(&mem, &k, initrd, RAM_SIZE - 0x401000, &gpa, &why), 0);
	cr_assert_eq(gpa, 0x401000);
	free(initrd);
}

/* ---- zero page ---- */

static struct boot_params *zero_page(void)
{
	return (struct boot_params *)(ram + LAYOUT_ZERO_PAGE);
}

Test(boot, zero_page_for_elf64)
{
	struct kernel_image k = load_elf_kernel();
	static const char cmdline[] = "console=ttyS0 reboot=k panic=1";
	static uint8_t initrd[0x2345];
	struct boot_params *bp = zero_page();
	const char *why = NULL;
	uint64_t gpa;

	cr_assert_eq(boot_load_initrd(&mem, &k, initrd, sizeof(initrd), &gpa, &why), 0);
	cr_assert_eq(boot_write_params(&mem, &k, cmdline, gpa, sizeof(initrd), &why), 0, "%s", why);
	cr_assert_eq(bp->hdr.boot_flag, 0xaa55);
	cr_assert_eq(bp->hdr.header, 0x53726448);
	cr_assert_eq(bp->hdr.type_of_loader, 0xff);
	cr_assert_eq(bp->hdr.kernel_alignment, 0x01000000);
	cr_assert(bp->hdr.loadflags & LOADED_HIGH);
	cr_assert_eq(bp->hdr.cmd_line_ptr, LAYOUT_CMDLINE);
	cr_assert_eq(bp->ext_cmd_line_ptr, 0);
	cr_assert_str_eq((char *)ram + LAYOUT_CMDLINE, cmdline);
	cr_assert_eq(bp->hdr.ramdisk_image, gpa);
	cr_assert_eq(bp->hdr.ramdisk_size, sizeof(initrd));
	cr_assert_eq(bp->ext_ramdisk_image, 0);
	cr_assert_eq(bp->ext_ramdisk_size, 0);
	cr_assert_eq(bp->e820_entries, 4);
	cr_assert_eq(bp->e820_table[0].addr, 0);
	cr_assert_eq(bp->e820_table[0].size, LAYOUT_EBDA_START);
	cr_assert_eq(bp->e820_table[0].type, E820_RAM);
	cr_assert_eq(bp->e820_table[1].type, E820_RESERVED);
	cr_assert_eq(bp->e820_table[3].addr, MIB);
	cr_assert_eq(bp->e820_table[3].size, RAM_SIZE - MIB);
	cr_assert_eq(bp->sentinel, 0);
	/* ELF has no hvm_start_info. */
	cr_assert(ram_zero(LAYOUT_PVH_START_INFO, 0x1000));
}

Test(boot, zero_page_without_initrd_and_null_cmdline)
{
	struct kernel_image k = load_elf_kernel();
	const char *why = NULL;

	cr_assert_eq(boot_write_params(&mem, &k, NULL, 0, 0, &why), 0, "%s", why);
	cr_assert_eq(zero_page()->hdr.ramdisk_image, 0);
	cr_assert_eq(zero_page()->hdr.ramdisk_size, 0);
	cr_assert_eq(ram[LAYOUT_CMDLINE], 0);
}

Test(boot, zero_page_for_bzimage_keeps_setup_header)
{
	struct kernel_image k = load_ok(make_bzimage(BZ_KERNEL_SIZE));
	struct boot_params *bp = zero_page();
	const char *why = NULL;

	cr_assert_eq(boot_write_params(&mem, &k, "root=/dev/vda", 0, 0, &why), 0, "%s", why);
	cr_assert_eq(bp->hdr.setup_sects, BZ_SETUP_SECTS);
	cr_assert_eq(bp->hdr.version, 0x020f);
	cr_assert_eq(bp->hdr.xloadflags, XLF_KERNEL_64 | XLF_CAN_BE_LOADED_ABOVE_4G);
	cr_assert_eq(bp->hdr.init_size, BZ_INIT_SIZE);
	cr_assert_eq(bp->hdr.pref_address, 0x1000000);
	cr_assert_eq(bp->hdr.cmdline_size, 0x7ff);
	cr_assert_eq(bp->hdr.kernel_alignment, 0x200000);   /* the kernel's, not ours */
	cr_assert_eq(bp->hdr.kernel_info_offset, 0x4242);
	cr_assert_eq(bp->hdr.relocatable_kernel, 1);
	cr_assert_eq(bp->hdr.type_of_loader, 0xff);
	cr_assert_eq(bp->hdr.boot_flag, 0xaa55);
	cr_assert_eq(bp->hdr.loadflags, LOADED_HIGH | CAN_USE_HEAP);
	cr_assert_eq(bp->hdr.heap_end_ptr, 0xfe00);
	cr_assert_eq(bp->hdr.cmd_line_ptr, LAYOUT_CMDLINE);
	cr_assert_eq(bp->e820_entries, 4);
	cr_assert_str_eq((char *)ram + LAYOUT_CMDLINE, "root=/dev/vda");
	/* Nothing past the header leaked in from the file. */
	cr_assert(ram_zero(LAYOUT_ZERO_PAGE + 0x26c, 0x290 - 0x26c));
}

Test(boot, zero_page_initrd_above_4g_uses_ext_fields)
{
	uint8_t *high = calloc(1, 0x10000);
	struct guest_mem m = { .total = RAM_SIZE + 0x10000, .nr_regions = 2,
			       .regions = { { 0, RAM_SIZE, ram }, { LAYOUT_HIGH_RAM_START, 0x10000, high } } };
	struct kernel_image k = load_elf_kernel();
	const char *why = NULL;

	cr_assert_eq(boot_write_params(&m, &k, "", LAYOUT_HIGH_RAM_START + 0x1000, 0x2000, &why), 0,
		     "%s", why);
	cr_assert_eq(zero_page()->hdr.ramdisk_image, 0x1000);
	cr_assert_eq(zero_page()->ext_ramdisk_image, 1);
	cr_assert_eq(zero_page()->hdr.ramdisk_size, 0x2000);
	cr_assert_eq(zero_page()->e820_entries, 5);
	cr_assert_eq(zero_page()->e820_table[4].addr, LAYOUT_HIGH_RAM_START);
	free(high);
}

Test(boot, reject_cmdline_too_long_and_bad_initrd)
{
	struct kernel_image k = load_elf_kernel();
	char *cmdline = malloc(LAYOUT_CMDLINE_MAX + 1);
	const char *why = NULL;

	memset(cmdline, 'a', LAYOUT_CMDLINE_MAX);
	cmdline[LAYOUT_CMDLINE_MAX] = 0;
	cr_assert_eq(boot_write_params(&mem, &k, cmdline, 0, 0, &why), -E2BIG);
	cr_assert_not_null(why);
	/* 2047 bytes + NUL is the most that fits. */
	cmdline[LAYOUT_CMDLINE_MAX - 1] = 0;
	cr_assert_eq(boot_write_params(&mem, &k, cmdline, 0, 0, &why), 0, "%s", why);
	cr_assert_eq(strlen((char *)ram + LAYOUT_CMDLINE), LAYOUT_CMDLINE_MAX - 1);
	why = NULL;
	cr_assert_eq(boot_write_params(&mem, &k, "", RAM_SIZE - 0x1000, 0x2000, &why), -EINVAL);
	cr_assert_not_null(why);
	free(cmdline);
}

Test(boot, reject_cmdline_longer_than_bzimage_cmdline_size)
{
	struct kernel_image k;
	char cmdline[0x900];
	const char *why = NULL;
	size_t size = make_bzimage(BZ_KERNEL_SIZE);

	k = load_ok(size);
	memset(cmdline, 'b', sizeof(cmdline));
	cmdline[0x800] = 0;                      /* 2048 > cmdline_size 2047 */
	cr_assert_eq(boot_write_params(&mem, &k, cmdline, 0, 0, &why), -E2BIG);
	cr_assert_not_null(why);
	cmdline[0x7ff] = 0;
	cr_assert_eq(boot_write_params(&mem, &k, cmdline, 0, 0, &why), 0, "%s", why);
}

/* ---- PVH start info ---- */

struct test_start_info {
	uint32_t magic, version, flags, nr_modules;
	uint64_t modlist_paddr, cmdline_paddr, rsdp_paddr, memmap_paddr;
	uint32_t memmap_entries, reserved;
};
struct test_memmap { uint64_t addr, size; uint32_t type, reserved; };
struct test_mod { uint64_t paddr, size, cmdline_paddr, reserved; };

Test(boot, pvh_start_info)
{
	struct kernel_image k;
	static uint8_t initrd[0x1234];
	const char *why = NULL;
	size_t size = make_elf64(8);
	struct test_start_info si;
	struct test_memmap mm[5];
	struct test_mod mod;
	uint64_t gpa;

	k = load_ok(size);
	cr_assert_eq(boot_load_initrd(&mem, &k, initrd, sizeof(initrd), &gpa, &why), 0);
	cr_assert_eq(boot_write_params(&mem, &k, "console=hvc0", gpa, sizeof(initrd), &why), 0,
		     "%s", why);
	memcpy(&si, ram + LAYOUT_PVH_START_INFO, sizeof(si));
	cr_assert_eq(si.magic, 0x336ec578);
	cr_assert_eq(si.version, 1);
	cr_assert_eq(si.flags, 0);
	cr_assert_eq(si.nr_modules, 1);
	cr_assert_eq(si.modlist_paddr, LAYOUT_PVH_MODLIST);
	cr_assert_eq(si.cmdline_paddr, LAYOUT_CMDLINE);
	cr_assert_eq(si.rsdp_paddr, 0);
	cr_assert_eq(si.memmap_paddr, LAYOUT_PVH_MEMMAP);
	cr_assert_eq(si.memmap_entries, 4);
	cr_assert_eq(si.reserved, 0);
	memcpy(mm, ram + LAYOUT_PVH_MEMMAP, sizeof(mm));
	cr_assert_eq(mm[0].addr, 0);
	cr_assert_eq(mm[0].size, LAYOUT_EBDA_START);
	cr_assert_eq(mm[0].type, E820_RAM);
	cr_assert_eq(mm[1].type, E820_RESERVED);
	cr_assert_eq(mm[2].addr, LAYOUT_BIOS_START);
	cr_assert_eq(mm[3].addr, MIB);
	cr_assert_eq(mm[3].size, RAM_SIZE - MIB);
	cr_assert_eq(mm[3].reserved, 0);
	cr_assert_eq(mm[4].type, 0, "only 4 entries written");
	memcpy(&mod, ram + LAYOUT_PVH_MODLIST, sizeof(mod));
	cr_assert_eq(mod.paddr, gpa);
	cr_assert_eq(mod.size, sizeof(initrd));
	cr_assert_eq(mod.cmdline_paddr, 0);
	cr_assert_str_eq((char *)ram + LAYOUT_CMDLINE, "console=hvc0");
	/* A PVH kernel gets no zero page. */
	cr_assert(ram_zero(LAYOUT_ZERO_PAGE, 0x1000));
}

Test(boot, pvh_start_info_without_initrd)
{
	struct kernel_image k = load_ok(make_elf32(NOTE_SEGMENT));
	const char *why = NULL;
	struct test_start_info si;

	cr_assert_eq(boot_write_params(&mem, &k, "", 0, 0, &why), 0, "%s", why);
	memcpy(&si, ram + LAYOUT_PVH_START_INFO, sizeof(si));
	cr_assert_eq(si.magic, 0x336ec578);
	cr_assert_eq(si.nr_modules, 0);
	cr_assert_eq(si.modlist_paddr, 0);
	cr_assert(ram_zero(LAYOUT_PVH_MODLIST, 32));
}
