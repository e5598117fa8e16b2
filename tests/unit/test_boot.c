/* test_boot.c - kernel loaders (ELF64, PVH, bzImage), initrd placement, e820, zero page and PVH start info. */
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <asm/bootparam.h>
#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"
#include "x86/boot.h"
#include "x86/layout.h"

#define RAM_SIZE (64ULL << 20)
#define MIB      (1ULL << 20)
#define GIB      (1ULL << 30)

static uint8_t *ram;
static struct guest_mem mem;

/* Images are built here, then copied into an exact-size heap block before
 * loading so ASan catches any read past the end of the file. */
#define IMG_CAP 0x10000
static uint8_t img[IMG_CAP] __attribute__((aligned(16)));

static void ram_setup(void)
{
	ram = calloc(1, RAM_SIZE);
	cr_assert_not_null(ram);
	mem_init_fake(&mem, ram, RAM_SIZE);
	memset(img, 0, sizeof(img));
}

static void ram_teardown(void)
{
	free(ram);
}

TestSuite(boot, .init = ram_setup, .fini = ram_teardown);

static int load_exact(const uint8_t *src, size_t size, struct kernel_image *k, const char **why)
{
	uint8_t *copy = malloc(size ? size : 1);
	int ret;

	cr_assert_not_null(copy);
	memcpy(copy, src, size);
	ret = boot_load_kernel(&mem, copy, size, k, why);
	free(copy);
	return ret;
}

static bool ram_zero(uint64_t gpa, uint64_t len)
{
	for (uint64_t i = 0; i < len; i++)
		if (ram[gpa + i])
			return false;
	return true;
}

/* A rejected file must say why, with one of the two codes, and leave
 * guest RAM untouched (everything is validated before the first write). */
static void expect_reject(const uint8_t *src, size_t size)
{
	struct kernel_image k;
	const char *why = NULL;
	int ret = load_exact(src, size, &k, &why);

	cr_assert(ret == -EINVAL || ret == -ENOEXEC, "ret %d", ret);
	cr_assert_not_null(why);
	cr_assert(strlen(why) > 0 && !strchr(why, '\n'));
	cr_log_info("rejected: %s", why);
	cr_assert(ram_zero(MIB, 8 * MIB), "a rejected kernel wrote guest RAM");
}

/* ---- image builders ---- */

static size_t put_note(uint8_t *p, const char *name, uint32_t type, const void *desc,
		       uint32_t descsz)
{
	uint32_t namesz = (uint32_t)strlen(name) + 1;
	size_t off;

	memcpy(p, &namesz, 4);
	memcpy(p + 4, &descsz, 4);
	memcpy(p + 8, &type, 4);
	memcpy(p + 12, name, namesz);
	off = 12 + ((namesz + 3) & ~3u);
	memcpy(p + off, desc, descsz);
	return off + ((descsz + 3) & ~3u);
}

/* A GNU build id and an unrelated Xen note ahead of PHYS32_ENTRY, as in a
 * real vmlinux; the entry is 4 or 8 bytes wide. */
static size_t put_pvh_notes(uint8_t *p, uint64_t entry, uint32_t width)
{
	static const uint8_t build_id[20] = { 1, 2, 3 };
	size_t n = 0;

	n += put_note(p + n, "GNU", 3, build_id, sizeof(build_id));
	n += put_note(p + n, "Xen", 5, "xen-3.0", 8);
	n += put_note(p + n, "Xen", 18, &entry, width);
	return n;
}

#define E64 ((Elf64_Ehdr *)img)
#define P64(i) ((Elf64_Phdr *)(img + sizeof(Elf64_Ehdr)) + (i))
#define E32 ((Elf32_Ehdr *)img)
#define P32(i) ((Elf32_Phdr *)(img + sizeof(Elf32_Ehdr)) + (i))

#define SEG0_OFF   0x1000
#define SEG0_PADDR 0x200000ULL
#define SEG0_VADDR 0xffffffff80200000ULL
#define SEG0_FILE  0x1000
#define SEG0_MEM   0x3000
#define SEG1_OFF   0x2000
#define SEG1_PADDR 0x400000ULL
#define SEG1_FILE  0x800
#define NOTE_OFF   0x2800

static void fill_ident(int cls)
{
	memcpy(img, ELFMAG, SELFMAG);
	img[EI_CLASS] = (uint8_t)cls;
	img[EI_DATA] = ELFDATA2LSB;
	img[EI_VERSION] = EV_CURRENT;
}

/* vmlinux-alike: text+bss at 2 MiB, data at 4 MiB, optional PVH note. */
static size_t make_elf64(int note_width)
{
	size_t size = SEG1_OFF + SEG1_FILE;

	memset(img, 0, sizeof(img));
	fill_ident(ELFCLASS64);
	E64->e_type = ET_EXEC;
	E64->e_machine = EM_X86_64;
	E64->e_version = EV_CURRENT;
	E64->e_entry = SEG0_PADDR + 0x100;
	E64->e_phoff = sizeof(Elf64_Ehdr);
	E64->e_ehsize = sizeof(Elf64_Ehdr);
	E64->e_phentsize = sizeof(Elf64_Phdr);
	E64->e_phnum = 2;
	*P64(0) = (Elf64_Phdr){ .p_type = PT_LOAD, .p_offset = SEG0_OFF, .p_vaddr = SEG0_VADDR,
				.p_paddr = SEG0_PADDR, .p_filesz = SEG0_FILE, .p_memsz = SEG0_MEM,
				.p_align = 0x1000 };
	*P64(1) = (Elf64_Phdr){ .p_type = PT_LOAD, .p_offset = SEG1_OFF,
				.p_vaddr = SEG0_VADDR + (SEG1_PADDR - SEG0_PADDR),
				.p_paddr = SEG1_PADDR, .p_filesz = SEG1_FILE, .p_memsz = SEG1_FILE,
				.p_align = 0x1000 };
	for (int i = 0; i < SEG0_FILE; i++)
		img[SEG0_OFF + i] = (uint8_t)(i * 7 + 1);
	for (int i = 0; i < SEG1_FILE; i++)
		img[SEG1_OFF + i] = (uint8_t)(i * 13 + 5);
	if (note_width) {
		size_t n = put_pvh_notes(img + NOTE_OFF, SEG0_PADDR + 0x200, (uint32_t)note_width);

		E64->e_phnum = 3;
		*P64(2) = (Elf64_Phdr){ .p_type = PT_NOTE, .p_offset = NOTE_OFF,
					.p_vaddr = SEG0_VADDR + 0x800, .p_paddr = SEG0_PADDR + 0x800,
					.p_filesz = n, .p_memsz = n, .p_align = 4 };
		size = NOTE_OFF + n;
	}
	return size;
}

/* A 32-bit PVH kernel at 1 MiB; the note in a PT_NOTE, in a SHT_NOTE
 * section only, or absent. */
enum note_where { NOTE_NONE, NOTE_SEGMENT, NOTE_SECTION };

static size_t make_elf32(enum note_where where)
{
	size_t n;

	memset(img, 0, sizeof(img));
	fill_ident(ELFCLASS32);
	E32->e_type = ET_EXEC;
	E32->e_machine = EM_386;
	E32->e_version = EV_CURRENT;
	E32->e_entry = 0x100000;
	E32->e_phoff = sizeof(Elf32_Ehdr);
	E32->e_ehsize = sizeof(Elf32_Ehdr);
	E32->e_phentsize = sizeof(Elf32_Phdr);
	E32->e_phnum = 1;
	*P32(0) = (Elf32_Phdr){ .p_type = PT_LOAD, .p_offset = 0x1000, .p_vaddr = 0x100000,
				.p_paddr = 0x100000, .p_filesz = 0x1000, .p_memsz = 0x1800,
				.p_align = 0x1000 };
	memset(img + 0x1000, 0xc3, 0x1000);
	if (where == NOTE_NONE)
		return 0x2000;
	n = put_pvh_notes(img + 0x2000, 0x100040, 4);
	if (where == NOTE_SEGMENT) {
		E32->e_phnum = 2;
		*P32(1) = (Elf32_Phdr){ .p_type = PT_NOTE, .p_offset = 0x2000, .p_filesz = (uint32_t)n,
					.p_memsz = (uint32_t)n, .p_align = 4 };
		return 0x2000 + n;
	}
	E32->e_shoff = 0x3000;
	E32->e_shentsize = sizeof(Elf32_Shdr);
	E32->e_shnum = 2;
	((Elf32_Shdr *)(img + 0x3000))[1] = (Elf32_Shdr){ .sh_type = SHT_NOTE, .sh_offset = 0x2000,
							  .sh_size = (uint32_t)n, .sh_addralign = 4 };
	return 0x3000 + 2 * sizeof(Elf32_Shdr);
}

#define BZ_SETUP_SECTS 4
#define BZ_KERNEL_OFF  ((BZ_SETUP_SECTS + 1) * 512)
#define BZ_KERNEL_SIZE 0x1000
#define BZ_INIT_SIZE   0x200000

static void put16(size_t off, uint16_t v)
{
	memcpy(img + off, &v, 2);
}

static void put32(size_t off, uint32_t v)
{
	memcpy(img + off, &v, 4);
}

static void put64(size_t off, uint64_t v)
{
	memcpy(img + off, &v, 8);
}

/* A bzImage with a protocol 2.15 header laid out as Linux 6.1's. */
static size_t make_bzimage(size_t kernel_size)
{
	memset(img, 0, sizeof(img));
	img[0x1f1] = BZ_SETUP_SECTS;
	put16(0x1fe, 0xaa55);
	img[0x200] = 0xeb;
	img[0x201] = 0x6a;           /* header ends at 0x26c */
	memcpy(img + 0x202, "HdrS", 4);
	put16(0x206, 0x020f);
	img[0x211] = LOADED_HIGH;
	put32(0x214, 0x100000);      /* code32_start */
	put32(0x22c, 0x7fffffff);    /* initrd_addr_max */
	put32(0x230, 0x200000);      /* kernel_alignment */
	img[0x234] = 1;              /* relocatable_kernel */
	put16(0x236, XLF_KERNEL_64 | XLF_CAN_BE_LOADED_ABOVE_4G);
	put32(0x238, 0x7ff);         /* cmdline_size */
	put64(0x258, 0x1000000);     /* pref_address */
	put32(0x260, BZ_INIT_SIZE);
	put32(0x268, 0x4242);        /* kernel_info_offset: last header field */
	for (size_t i = 0; i < kernel_size && BZ_KERNEL_OFF + i < IMG_CAP; i++)
		img[BZ_KERNEL_OFF + i] = (uint8_t)(i * 3 + 11);
	return BZ_KERNEL_OFF + kernel_size;
}

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

/* ---- ELF64 / PVH happy paths ---- */

Test(boot, elf64_loads_segments_and_zeroes_bss)
{
	struct kernel_image k;
	const char *why = NULL;
	size_t size = make_elf64(0);

	/* Stale bytes where bss goes must be cleared by the loader. */
	memset(ram + SEG0_PADDR + SEG0_FILE, 0xaa, SEG0_MEM - SEG0_FILE);
	cr_assert_eq(load_exact(img, size, &k, &why), 0, "%s", why);
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
	const char *why = NULL;
	size_t size = make_elf64(0);

	E64->e_entry = SEG0_VADDR + 0x180;
	cr_assert_eq(load_exact(img, size, &k, &why), 0, "%s", why);
	cr_assert_eq(k.entry, SEG0_PADDR + 0x180);
}

Test(boot, pvh_elf64_with_xen_note)
{
	struct kernel_image k;
	const char *why = NULL;
	size_t size = make_elf64(8);   /* .quad, as Linux 6.1 emits it */

	cr_assert_eq(load_exact(img, size, &k, &why), 0, "%s", why);
	cr_assert_eq(k.format, KERNEL_PVH);
	cr_assert_eq(k.entry, SEG0_PADDR + 0x200);

	size = make_elf64(4);
	memset(ram, 0, RAM_SIZE);
	cr_assert_eq(load_exact(img, size, &k, &why), 0, "%s", why);
	cr_assert_eq(k.format, KERNEL_PVH);
	cr_assert_eq(k.entry, SEG0_PADDR + 0x200);
}

Test(boot, pvh_elf32_note_in_segment)
{
	struct kernel_image k;
	const char *why = NULL;
	size_t size = make_elf32(NOTE_SEGMENT);

	cr_assert_eq(load_exact(img, size, &k, &why), 0, "%s", why);
	cr_assert_eq(k.format, KERNEL_PVH);
	cr_assert_eq(k.entry, 0x100040);
	cr_assert_eq(k.load_start, 0x100000);
	cr_assert_eq(k.load_end, 0x101800);
	cr_assert_eq(ram[0x100000], 0xc3);
	cr_assert_eq(ram[0x101000], 0);
}

Test(boot, pvh_elf32_note_in_section_only)
{
	struct kernel_image k;
	const char *why = NULL;
	size_t size = make_elf32(NOTE_SECTION);

	cr_assert_eq(load_exact(img, size, &k, &why), 0, "%s", why);
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

/* ---- bzImage ---- */

Test(boot, bzimage_loads_at_1mib)
{
	struct kernel_image k;
	const char *why = NULL;
	size_t size = make_bzimage(BZ_KERNEL_SIZE);

	cr_assert_eq(load_exact(img, size, &k, &why), 0, "%s", why);
	cr_assert_eq(k.format, KERNEL_BZIMAGE);
	cr_assert_eq(k.entry, LAYOUT_HIMEM_START + 0x200);
	cr_assert_eq(k.load_start, LAYOUT_HIMEM_START);
	/* init_size counts from pref_address, where the kernel decompresses. */
	cr_assert_eq(k.load_end, 0x1000000 + BZ_INIT_SIZE);
	cr_assert_eq(memcmp(ram + LAYOUT_HIMEM_START, img + BZ_KERNEL_OFF, BZ_KERNEL_SIZE), 0);
	cr_assert_eq(k.setup_header_len, 0x26c - 0x1f1);
	cr_assert_eq(memcmp(k.setup_header, img + 0x1f1, k.setup_header_len), 0);
	cr_assert_eq(k.initrd_addr_max, 0x7fffffff);
}

Test(boot, bzimage_setup_sects_zero_means_four_and_default_initrd_max)
{
	struct kernel_image k;
	const char *why = NULL;
	size_t size = make_bzimage(BZ_KERNEL_SIZE);

	img[0x1f1] = 0;
	put32(0x22c, 0);
	cr_assert_eq(load_exact(img, size, &k, &why), 0, "%s", why);
	cr_assert_eq(memcmp(ram + LAYOUT_HIMEM_START, img + BZ_KERNEL_OFF, BZ_KERNEL_SIZE), 0);
	cr_assert_eq(k.initrd_addr_max, 0x37ffffff);
}

Test(boot, reject_bzimage_truncated)
{
	const char *why = NULL;
	struct kernel_image k;

	make_bzimage(BZ_KERNEL_SIZE);
	expect_reject(img, 0x230);               /* inside the header */
	expect_reject(img, BZ_KERNEL_OFF - 1);   /* before the kernel */
	expect_reject(img, BZ_KERNEL_OFF + 0x100);
	cr_assert_eq(boot_load_bzimage(&mem, img, 0x100, &k, &why), -EINVAL);
	cr_assert_not_null(why);
}

Test(boot, reject_bzimage_bad_header)
{
	size_t size = make_bzimage(BZ_KERNEL_SIZE);
	const char *why = NULL;
	struct kernel_image k;

	memcpy(img + 0x202, "HdrX", 4);
	expect_reject(img, size);
	cr_assert_eq(boot_load_bzimage(&mem, img, size, &k, &why), -ENOEXEC);
	cr_assert_str_eq(why, "bzImage has no HdrS signature");

	make_bzimage(BZ_KERNEL_SIZE);
	img[0x201] = 0x10;                       /* header too short for 2.12 */
	expect_reject(img, size);
	make_bzimage(BZ_KERNEL_SIZE);
	img[0x200] = 0x90;                       /* no short jump to size it */
	expect_reject(img, size);
}

Test(boot, bzimage_longest_header_is_bounded)
{
	struct kernel_image k;
	const char *why = NULL;
	size_t size = make_bzimage(BZ_KERNEL_SIZE);

	/* The jump says 0x301; only the zero page's 0x1f1..0x290 is kept. */
	img[0x201] = 0xff;
	cr_assert_eq(load_exact(img, size, &k, &why), 0, "%s", why);
	cr_assert_eq(k.setup_header_len, sizeof(k.setup_header));
	cr_assert_eq(memcmp(k.setup_header, img + 0x1f1, sizeof(k.setup_header)), 0);
}

Test(boot, reject_bzimage_old_protocol_or_no_64bit)
{
	size_t size = make_bzimage(BZ_KERNEL_SIZE);

	put16(0x206, 0x0206);
	expect_reject(img, size);
	make_bzimage(BZ_KERNEL_SIZE);
	put16(0x206, 0x020b);
	expect_reject(img, size);
	make_bzimage(BZ_KERNEL_SIZE);
	put16(0x236, XLF_CAN_BE_LOADED_ABOVE_4G);
	expect_reject(img, size);
	make_bzimage(BZ_KERNEL_SIZE);
	img[0x211] = 0;
	expect_reject(img, size);
}

Test(boot, reject_bzimage_larger_than_ram)
{
	size_t size = make_bzimage(0x9000);
	uint8_t *small = calloc(1, MIB + 0x8000);
	struct guest_mem sm;
	struct kernel_image k;
	const char *why = NULL;

	mem_init_fake(&sm, small, MIB + 0x8000);
	cr_assert_eq(boot_load_bzimage(&sm, img, size, &k, &why), -EINVAL);
	cr_assert_not_null(why);
	free(small);

	/* init_size beyond the 64 MiB guest. */
	make_bzimage(BZ_KERNEL_SIZE);
	put32(0x260, 0x8000000);
	expect_reject(img, BZ_KERNEL_OFF + BZ_KERNEL_SIZE);
	make_bzimage(BZ_KERNEL_SIZE);
	put64(0x258, UINT64_MAX - 0x1000);
	expect_reject(img, BZ_KERNEL_OFF + BZ_KERNEL_SIZE);
}

/* ---- initrd ---- */

static struct kernel_image load_elf_kernel(void)
{
	struct kernel_image k;
	const char *why = NULL;
	size_t size = make_elf64(0);

	cr_assert_eq(load_exact(img, size, &k, &why), 0, "%s", why);
	return k;
}

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
	struct kernel_image k;
	struct boot_params *bp = zero_page();
	const char *why = NULL;
	size_t size = make_bzimage(BZ_KERNEL_SIZE);

	cr_assert_eq(load_exact(img, size, &k, &why), 0, "%s", why);
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

	cr_assert_eq(load_exact(img, size, &k, &why), 0, "%s", why);
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

	cr_assert_eq(load_exact(img, size, &k, &why), 0, "%s", why);
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
	struct kernel_image k;
	const char *why = NULL;
	size_t size = make_elf32(NOTE_SEGMENT);
	struct test_start_info si;

	cr_assert_eq(load_exact(img, size, &k, &why), 0, "%s", why);
	cr_assert_eq(boot_write_params(&mem, &k, "", 0, 0, &why), 0, "%s", why);
	memcpy(&si, ram + LAYOUT_PVH_START_INFO, sizeof(si));
	cr_assert_eq(si.magic, 0x336ec578);
	cr_assert_eq(si.nr_modules, 0);
	cr_assert_eq(si.modlist_paddr, 0);
	cr_assert(ram_zero(LAYOUT_PVH_MODLIST, 32));
}

/* ---- a real kernel, when one is given ---- */

Test(boot, real_kernel_from_env)
{
	const char *path = getenv("MAYFLY_TEST_KERNEL");
	const uint64_t ram_size = 512 * MIB;
	struct kernel_image k;
	struct guest_mem big;
	const char *why = NULL;
	uint8_t *kernel, *bigram;
	FILE *f;
	long len;
	int ret;

	if (!path || !*path)
		cr_skip_test("MAYFLY_TEST_KERNEL is not set");
	f = fopen(path, "rb");
	cr_assert_not_null(f, "cannot open %s", path);
	cr_assert_eq(fseek(f, 0, SEEK_END), 0);
	len = ftell(f);
	cr_assert(len > 0);
	rewind(f);
	kernel = malloc((size_t)len);
	cr_assert_not_null(kernel);
	cr_assert_eq(fread(kernel, 1, (size_t)len, f), (size_t)len);
	fclose(f);

	bigram = calloc(1, ram_size);
	cr_assert_not_null(bigram);
	mem_init_fake(&big, bigram, ram_size);
	ret = boot_load_kernel(&big, kernel, (size_t)len, &k, &why);
	cr_assert_eq(ret, 0, "%s: %s", path, why);
	cr_log_info("%s: format %d entry %#llx load [%#llx, %#llx) initrd_addr_max %#llx",
		    path, (int)k.format, (unsigned long long)k.entry,
		    (unsigned long long)k.load_start, (unsigned long long)k.load_end,
		    (unsigned long long)k.initrd_addr_max);
	cr_assert(k.entry >= k.load_start && k.entry < k.load_end);
	if (k.format == KERNEL_BZIMAGE) {
		struct setup_header hdr;

		memcpy(&hdr, k.setup_header, sizeof(hdr) < k.setup_header_len ? sizeof(hdr)
									  : k.setup_header_len);
		cr_assert_eq(hdr.header, 0x53726448);
		cr_assert(hdr.xloadflags & XLF_KERNEL_64);
	}
	cr_assert_eq(boot_write_params(&big, &k, "console=ttyS0", 0, 0, &why), 0, "%s", why);
	free(bigram);
	free(kernel);
}
