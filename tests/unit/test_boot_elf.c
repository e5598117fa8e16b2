/* test_boot_elf.c - the ELF64 and PVH loader: segments, bss, notes, and every malformed ELF refused before RAM is touched. */
#include <criterion/criterion.h>

#include <elf.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "boot_fixture.h"
#include "x86/layout.h"

/* ---- ELF64 / PVH happy paths ---- */

Test(boot, elf64_loads_segments_and_zeroes_bss)
{
	struct kernel_image k;
	size_t size = make_elf64(0);

	/* Stale bytes where bss goes must be cleared by the loader. */
	memset(ram + SEG0_PADDR + SEG0_FILE, 0xaa, SEG0_MEM - SEG0_FILE);
	k = load_ok(size);
	cr_assert_eq(k.format, KERNEL_ELF64);
	cr_assert_eq(k.entry, SEG0_PADDR + 0x100);
	cr_assert_eq(k.load_start, SEG0_PADDR);
	cr_assert_eq(k.load_end, SEG1_PADDR + SEG1_FILE);
	cr_assert_eq(memcmp(ram + SEG0_PADDR, img + SEG0_OFF, SEG0_FILE), 0);
	cr_assert_eq(memcmp(ram + SEG1_PADDR, img + SEG1_OFF, SEG1_FILE), 0);
	cr_assert(ram_zero(SEG0_PADDR + SEG0_FILE, SEG0_MEM - SEG0_FILE));
	cr_assert(k.initrd_addr_max >= RAM_SIZE - 1);
}

Test(boot, elf64_virtual_entry_is_translated)
{
	struct kernel_image k;
	size_t size = make_elf64(0);

	E64->e_entry = SEG0_VADDR + 0x180;
	k = load_ok(size);
	cr_assert_eq(k.entry, SEG0_PADDR + 0x180);
}

Test(boot, pvh_elf64_with_xen_note)
{
	struct kernel_image k;
	size_t size = make_elf64(8);   /* .quad, as Linux 6.1 emits it */

	k = load_ok(size);
	cr_assert_eq(k.format, KERNEL_PVH);
	cr_assert_eq(k.entry, SEG0_PADDR + 0x200);

	size = make_elf64(4);
	memset(ram, 0, RAM_SIZE);
	k = load_ok(size);
	cr_assert_eq(k.format, KERNEL_PVH);
	cr_assert_eq(k.entry, SEG0_PADDR + 0x200);
}

Test(boot, pvh_elf32_note_in_segment)
{
	struct kernel_image k = load_ok(make_elf32(NOTE_SEGMENT));

	cr_assert_eq(k.format, KERNEL_PVH);
	cr_assert_eq(k.entry, 0x100040);
	cr_assert_eq(k.load_start, 0x100000);
	cr_assert_eq(k.load_end, 0x101800);
	cr_assert_eq(ram[0x100000], 0xc3);
	cr_assert_eq(ram[0x101000], 0);
}

Test(boot, pvh_elf32_note_in_section_only)
{
	struct kernel_image k = load_ok(make_elf32(NOTE_SECTION));

	cr_assert_eq(k.format, KERNEL_PVH);
	cr_assert_eq(k.entry, 0x100040);
}

/* ---- malformed ELF ---- */

Test(boot, reject_empty_and_garbage)
{
	struct kernel_image k;
	const char *why = NULL;

	cr_assert_eq(boot_load_kernel(&mem, img, 0, &k, &why), -ENOEXEC);
	cr_assert_not_null(why);
	expect_reject(img, 1);
	memset(img, 0x5a, 4096);
	expect_reject(img, 4096);
}

Test(boot, reject_truncated_elf_header)
{
	make_elf64(0);
	expect_reject(img, 20);
	expect_reject(img, sizeof(Elf64_Ehdr) - 1);
	make_elf32(NOTE_SEGMENT);
	expect_reject(img, sizeof(Elf32_Ehdr) - 1);
}

Test(boot, reject_bad_magic_class_machine)
{
	size_t size = make_elf64(0);
	const char *why = NULL;
	struct kernel_image k;

	img[1] = 'X';
	cr_assert_eq(boot_load_elf(&mem, img, size, &k, &why), -ENOEXEC);
	cr_assert_not_null(why);
	expect_reject(img, size);

	make_elf64(0);
	img[EI_CLASS] = 7;
	expect_reject(img, size);
	make_elf64(0);
	img[EI_DATA] = ELFDATA2MSB;
	expect_reject(img, size);
	make_elf64(0);
	E64->e_machine = EM_AARCH64;
	expect_reject(img, size);
	make_elf64(0);
	E64->e_type = ET_DYN;
	expect_reject(img, size);
}

Test(boot, reject_elf32_without_pvh_note)
{
	size_t size = make_elf32(NOTE_NONE);

	expect_reject(img, size);
	make_elf32(NOTE_SEGMENT);
	E32->e_machine = EM_X86_64;
	expect_reject(img, size);
}

Test(boot, reject_program_headers_outside_file)
{
	size_t size = make_elf64(0);

	E64->e_phoff = size;
	expect_reject(img, size);
	/* phoff + phnum * phentsize wraps 2^64. */
	E64->e_phoff = UINT64_MAX - 8;
	expect_reject(img, size);
	E64->e_phoff = sizeof(Elf64_Ehdr);
	E64->e_phnum = 0xffff;
	expect_reject(img, size);
	E64->e_phnum = 0x7fff;
	expect_reject(img, size);
	E64->e_phnum = 2;
	E64->e_phentsize = 0xffff;
	expect_reject(img, size);
	E64->e_phentsize = sizeof(Elf64_Phdr);
	E64->e_phnum = 0;
	expect_reject(img, size);
}

Test(boot, reject_segment_file_range_past_eof)
{
	size_t size = make_elf64(0);

	P64(1)->p_filesz = P64(1)->p_memsz = 0x10000;
	expect_reject(img, size);
	make_elf64(0);
	P64(1)->p_offset = UINT64_MAX - 0x10;
	expect_reject(img, size);
}

Test(boot, reject_filesz_larger_than_memsz)
{
	size_t size = make_elf64(0);

	P64(1)->p_memsz = P64(1)->p_filesz - 1;
	expect_reject(img, size);
}

Test(boot, reject_segment_outside_ram)
{
	struct kernel_image k;
	const char *why = NULL;
	size_t size = make_elf64(0);

	P64(1)->p_paddr = RAM_SIZE - 0x100;   /* straddles the end of RAM */
	cr_assert_eq(load_exact(img, size, &k, &why), -EINVAL);
	cr_assert_str_eq(why, "ELF segment 1 lies outside guest RAM");
	P64(1)->p_paddr = 0x80000000ULL;
	expect_reject(img, size);
	P64(1)->p_paddr = 0x7000;             /* on top of the zero page */
	expect_reject(img, size);
}

Test(boot, reject_segment_above_4g)
{
	uint8_t *high = calloc(1, 0x10000);
	struct guest_mem m = { .total = RAM_SIZE + 0x10000, .nr_regions = 2,
			       .regions = { { 0, RAM_SIZE, ram }, { LAYOUT_HIGH_RAM_START, 0x10000, high } } };
	struct kernel_image k;
	const char *why = NULL;
	size_t size = make_elf64(0);

	/* RAM is there, but the boot page tables only map the low 4 GiB. */
	P64(1)->p_paddr = LAYOUT_HIGH_RAM_START;
	cr_assert_eq(boot_load_elf(&m, img, size, &k, &why), -EINVAL);
	cr_assert_not_null(why);
	cr_assert(ram_zero(0, RAM_SIZE) && high[0] == 0);
	free(high);
}

Test(boot, reject_segment_wrapping_address_space)
{
	size_t size = make_elf64(0);

	P64(1)->p_paddr = 0xfffffffffffff000ULL;
	P64(1)->p_memsz = 0x2000;
	P64(1)->p_filesz = 0x800;
	expect_reject(img, size);
}

Test(boot, reject_overlapping_segments)
{
	size_t size = make_elf64(0);

	/* Inside seg0's bss, so only memsz (not filesz) overlaps. */
	P64(1)->p_paddr = SEG0_PADDR + SEG0_MEM - 0x10;
	expect_reject(img, size);
	P64(1)->p_paddr = SEG0_PADDR - 0x100;
	expect_reject(img, size);
}

Test(boot, reject_huge_memsz)
{
	size_t size = make_elf64(0);

	P64(0)->p_memsz = 0xffffffffffffULL;
	expect_reject(img, size);
	make_elf64(0);
	P64(0)->p_memsz = UINT64_MAX;
	expect_reject(img, size);
}

Test(boot, reject_notes_running_past_segment)
{
	size_t size = make_elf64(4);
	uint32_t v;

	/* First note's namesz past the segment (and the file's end). */
	v = 0x1000;
	memcpy(img + NOTE_OFF, &v, 4);
	expect_reject(img, size);
	make_elf64(4);
	v = 0xffffffff;
	memcpy(img + NOTE_OFF + 4, &v, 4);
	expect_reject(img, size);
	/* Segment one byte short of the PHYS32_ENTRY desc. */
	make_elf64(4);
	P64(2)->p_filesz -= 4;
	expect_reject(img, size - 4);
	/* A note segment outside the file. */
	make_elf64(4);
	P64(2)->p_offset = size;
	expect_reject(img, size);
}

Test(boot, reject_bad_pvh_note_values)
{
	size_t size = make_elf64(4);
	uint32_t v = 2;

	/* Rewrite the PHYS32_ENTRY descsz (the last note) to 2. */
	memcpy(img + size - 16, &v, 4);
	expect_reject(img, size);
	/* A 64-bit PHYS32 entry above 4 GiB. */
	size = make_elf64(0);
	{
		uint64_t entry = 0x100200000ULL;
		size_t n = put_note(img + NOTE_OFF, "Xen", 18, &entry, 8);

		E64->e_phnum = 3;
		*P64(2) = (Elf64_Phdr){ .p_type = PT_NOTE, .p_offset = NOTE_OFF, .p_filesz = n,
					.p_memsz = n, .p_align = 4 };
		expect_reject(img, NOTE_OFF + n);
	}
}

Test(boot, reject_entry_outside_segments)
{
	size_t size = make_elf64(0);

	E64->e_entry = 0x300000;   /* between the two segments */
	expect_reject(img, size);
	E64->e_entry = 0;
	expect_reject(img, size);
	/* PVH entry is physical: a note pointing past every segment fails. */
	size = make_elf32(NOTE_SEGMENT);
	P32(0)->p_memsz = 0x40;
	P32(0)->p_filesz = 0x40;
	expect_reject(img, size);
}

Test(boot, reject_no_loadable_segment)
{
	size_t size = make_elf64(0);

	P64(0)->p_type = PT_NULL;
	P64(1)->p_type = PT_NULL;
	expect_reject(img, size);
}
