/* boot_fixture.c - the boot tests' fake guest RAM and kernel image builders (see boot_fixture.h). */
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <asm/bootparam.h>
#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "boot_fixture.h"

uint8_t *ram;
struct guest_mem mem;

uint8_t img[IMG_CAP] __attribute__((aligned(16)));

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

int load_exact(const uint8_t *src, size_t size, struct kernel_image *k, const char **why)
{
	uint8_t *copy = malloc(size ? size : 1);
	int ret;

	cr_assert_not_null(copy);
	memcpy(copy, src, size);
	ret = boot_load_kernel(&mem, copy, size, k, why);
	free(copy);
	return ret;
}

bool ram_zero(uint64_t gpa, uint64_t len)
{
	for (uint64_t i = 0; i < len; i++)
		if (ram[gpa + i])
			return false;
	return true;
}

void expect_reject(const uint8_t *src, size_t size)
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

size_t put_note(uint8_t *p, const char *name, uint32_t type, const void *desc, uint32_t descsz)
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

static void fill_ident(int cls)
{
	memcpy(img, ELFMAG, SELFMAG);
	img[EI_CLASS] = (uint8_t)cls;
	img[EI_DATA] = ELFDATA2LSB;
	img[EI_VERSION] = EV_CURRENT;
}

size_t make_elf64(int note_width)
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

size_t make_elf32(enum note_where where)
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

void put16(size_t off, uint16_t v)
{
	memcpy(img + off, &v, 2);
}

void put32(size_t off, uint32_t v)
{
	memcpy(img + off, &v, 4);
}

void put64(size_t off, uint64_t v)
{
	memcpy(img + off, &v, 8);
}

size_t make_bzimage(size_t kernel_size)
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

struct kernel_image load_ok(size_t size)
{
	struct kernel_image k;
	const char *why = NULL;

	cr_assert_eq(load_exact(img, size, &k, &why), 0, "%s", why);
	return k;
}

struct kernel_image load_elf_kernel(void)
{
	return load_ok(make_elf64(0));
}
