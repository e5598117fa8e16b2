/* boot_params.c - what the kernel finds at entry: e820 map, initrd, command line, zero page or PVH start info. */
#include "x86/boot.h"
#include "x86/layout.h"

#include <asm/bootparam.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>

/* Xen's public/arch-x86/hvm/start_info.h, version 1 (the one with a memmap). */
#define HVM_START_MAGIC_VALUE 0x336ec578

struct hvm_start_info {
	uint32_t magic;
	uint32_t version;
	uint32_t flags;
	uint32_t nr_modules;
	uint64_t modlist_paddr;
	uint64_t cmdline_paddr;
	uint64_t rsdp_paddr;
	uint64_t memmap_paddr;
	uint32_t memmap_entries;
	uint32_t reserved;
};

struct hvm_modlist_entry {
	uint64_t paddr;
	uint64_t size;
	uint64_t cmdline_paddr;
	uint64_t reserved;
};

struct hvm_memmap_table_entry {
	uint64_t addr;
	uint64_t size;
	uint32_t type;      /* e820 types */
	uint32_t reserved;
};

#define ZP_BOOT_FLAG        0xaa55
#define ZP_HDRS_MAGIC       0x53726448  /* "HdrS" */
#define ZP_LOADER_UNDEFINED 0xff        /* type_of_loader: no assigned id */
#define ZP_KERNEL_ALIGN     0x01000000  /* what an ELF kernel is linked for */
/* End of the real-mode heap, relative to the setup segment: the setup
 * code's own 0x8000 + 0x7e00 convention that kvmtool also uses. */
#define ZP_HEAP_END         0xfe00

_Static_assert(sizeof(struct hvm_start_info) == 56 && sizeof(struct hvm_modlist_entry) == 32 &&
	       sizeof(struct hvm_memmap_table_entry) == 24, "Xen start_info ABI");
_Static_assert(LAYOUT_PVH_START_INFO + sizeof(struct hvm_start_info) <= LAYOUT_PVH_MEMMAP,
	       "start info runs into the memmap");
_Static_assert(LAYOUT_PVH_MEMMAP + LAYOUT_PVH_MEMMAP_MAX * sizeof(struct hvm_memmap_table_entry)
	       <= LAYOUT_PVH_MODLIST, "memmap runs into the module list");
_Static_assert(LAYOUT_PVH_MODLIST + sizeof(struct hvm_modlist_entry) <= LAYOUT_ZERO_PAGE,
	       "module list runs into the zero page");
_Static_assert(E820_MAX <= LAYOUT_PVH_MEMMAP_MAX && E820_MAX <= E820_MAX_ENTRIES_ZEROPAGE,
	       "e820 map does not fit the boot structures");
_Static_assert(sizeof(struct boot_params) == 4096 && offsetof(struct boot_params, hdr) == 0x1f1,
	       "zero page ABI");
_Static_assert(sizeof(((struct kernel_image *)0)->setup_header) <=
	       sizeof(struct boot_params) - offsetof(struct boot_params, hdr),
	       "saved setup header larger than its zero page slot");
_Static_assert(LAYOUT_CMDLINE + LAYOUT_CMDLINE_MAX <= LAYOUT_EBDA_START && LAYOUT_CMDLINE_MAX == 2048,
	       "cmdline area (and the 2047 in its error message)");

static uint64_t bp_min(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

int boot_e820_build(const struct guest_mem *mem, struct e820_entry *out, int max)
{
	struct e820_entry map[E820_MAX];
	uint64_t low_end = mem_low_end(mem);
	int n = 0;

	/* Conventional memory up to the EBDA, which Linux expects to be
	 * reserved, as is the BIOS area where the MP table lives. */
	map[n++] = (struct e820_entry){ 0, bp_min(low_end, LAYOUT_EBDA_START), E820_RAM };
	map[n++] = (struct e820_entry){ LAYOUT_EBDA_START, LAYOUT_LOW_RAM_END - LAYOUT_EBDA_START,
					E820_RESERVED };
	map[n++] = (struct e820_entry){ LAYOUT_BIOS_START, LAYOUT_HIMEM_START - LAYOUT_BIOS_START,
					E820_RESERVED };
	if (low_end > LAYOUT_HIMEM_START)
		map[n++] = (struct e820_entry){ LAYOUT_HIMEM_START, low_end - LAYOUT_HIMEM_START,
						E820_RAM };
	/* Region 0 is low RAM; any other is above the MMIO hole. */
	for (int i = 1; i < mem->nr_regions && i < MEM_MAX_REGIONS && n < E820_MAX; i++)
		if (mem->regions[i].size)
			map[n++] = (struct e820_entry){ mem->regions[i].gpa, mem->regions[i].size,
							E820_RAM };
	if (n > max)
		return -ENOSPC;
	memcpy(out, map, n * sizeof(map[0]));
	return n;
}

int boot_load_initrd(const struct guest_mem *mem, const struct kernel_image *kernel,
		     const uint8_t *initrd, size_t size, uint64_t *gpa, const char **why)
{
	uint64_t top = mem_low_end(mem), bottom, addr;
	const char *unused;

	if (!why)
		why = &unused;
	if (!initrd || size == 0) {
		*why = "initrd is empty";
		return -EINVAL;
	}
	if (kernel->initrd_addr_max < UINT64_MAX && kernel->initrd_addr_max + 1 < top)
		top = kernel->initrd_addr_max + 1;
	bottom = kernel->load_end > LAYOUT_HIMEM_START ? kernel->load_end : LAYOUT_HIMEM_START;
	if (__builtin_add_overflow(bottom, LAYOUT_PAGE_SIZE - 1, &bottom)) {
		*why = "kernel image ends past the address space";
		return -EINVAL;
	}
	bottom &= ~(LAYOUT_PAGE_SIZE - 1);
	/* As high as allowed: the decompressor and early allocations grow
	 * upwards from the kernel, and high placement keeps out of their way. */
	if (size > top || ((top - size) & ~(LAYOUT_PAGE_SIZE - 1)) < bottom) {
		*why = "initrd does not fit in low RAM between the kernel and initrd_addr_max";
		return -ENOMEM;
	}
	addr = (top - size) & ~(LAYOUT_PAGE_SIZE - 1);
	if (mem_write(mem, addr, initrd, size)) {
		*why = "initrd lies outside guest RAM";
		return -EINVAL;
	}
	*gpa = addr;
	return 0;
}

static int boot_write_zero_page(const struct guest_mem *mem, const struct kernel_image *kernel,
				size_t cmdline_len, uint64_t initrd_gpa, uint64_t initrd_size,
				const struct e820_entry *map, int nr, const char **why)
{
	struct boot_params bp;

	memset(&bp, 0, sizeof(bp));
	if (kernel->format == KERNEL_BZIMAGE) {
		/* The kernel's own header, so the fields it owns (version,
		 * xloadflags, init_size, cmdline_size...) reach it unchanged. */
		size_t len = bp_min(kernel->setup_header_len, sizeof(kernel->setup_header));

		memcpy((uint8_t *)&bp + offsetof(struct boot_params, hdr), kernel->setup_header, len);
		if (bp.hdr.cmdline_size && cmdline_len > bp.hdr.cmdline_size) {
			*why = "kernel command line is longer than the kernel's cmdline_size";
			return -E2BIG;
		}
	} else {
		bp.hdr.cmdline_size = LAYOUT_CMDLINE_MAX - 1;
	}
	bp.hdr.type_of_loader = ZP_LOADER_UNDEFINED;
	bp.hdr.boot_flag = ZP_BOOT_FLAG;
	bp.hdr.header = ZP_HDRS_MAGIC;
	if (!bp.hdr.kernel_alignment)
		bp.hdr.kernel_alignment = ZP_KERNEL_ALIGN;
	bp.hdr.loadflags |= LOADED_HIGH | CAN_USE_HEAP;
	bp.hdr.heap_end_ptr = ZP_HEAP_END;
	bp.hdr.cmd_line_ptr = (uint32_t)LAYOUT_CMDLINE;
	bp.ext_cmd_line_ptr = (uint32_t)(LAYOUT_CMDLINE >> 32);
	if (initrd_size) {
		bp.hdr.ramdisk_image = (uint32_t)initrd_gpa;
		bp.ext_ramdisk_image = (uint32_t)(initrd_gpa >> 32);
		bp.hdr.ramdisk_size = (uint32_t)initrd_size;
		bp.ext_ramdisk_size = (uint32_t)(initrd_size >> 32);
	}
	bp.e820_entries = (uint8_t)nr;
	for (int i = 0; i < nr; i++)
		bp.e820_table[i] = (struct boot_e820_entry){ map[i].addr, map[i].size, map[i].type };
	if (mem_write(mem, LAYOUT_ZERO_PAGE, &bp, sizeof(bp))) {
		*why = "zero page lies outside guest RAM";
		return -EFAULT;
	}
	return 0;
}

static int boot_write_pvh(const struct guest_mem *mem, uint64_t initrd_gpa, uint64_t initrd_size,
			  const struct e820_entry *map, int nr, const char **why)
{
	struct hvm_memmap_table_entry memmap[E820_MAX];
	struct hvm_start_info si = {
		.magic = HVM_START_MAGIC_VALUE,
		.version = 1,
		.cmdline_paddr = LAYOUT_CMDLINE,
		.memmap_paddr = LAYOUT_PVH_MEMMAP,
		.memmap_entries = (uint32_t)nr,
	};

	memset(memmap, 0, sizeof(memmap));
	for (int i = 0; i < nr; i++)
		memmap[i] = (struct hvm_memmap_table_entry){ map[i].addr, map[i].size, map[i].type, 0 };
	if (mem_write(mem, LAYOUT_PVH_MEMMAP, memmap, nr * sizeof(memmap[0])))
		goto err_fault;
	if (initrd_size) {
		struct hvm_modlist_entry mod = { .paddr = initrd_gpa, .size = initrd_size };

		if (mem_write(mem, LAYOUT_PVH_MODLIST, &mod, sizeof(mod)))
			goto err_fault;
		si.nr_modules = 1;
		si.modlist_paddr = LAYOUT_PVH_MODLIST;
	}
	if (mem_write(mem, LAYOUT_PVH_START_INFO, &si, sizeof(si)))
		goto err_fault;
	return 0;

err_fault:
	*why = "PVH start info lies outside guest RAM";
	return -EFAULT;
}

int boot_write_params(const struct guest_mem *mem, const struct kernel_image *kernel,
		      const char *cmdline, uint64_t initrd_gpa, uint64_t initrd_size,
		      const char **why)
{
	struct e820_entry map[E820_MAX];
	const char *unused;
	size_t len;
	int nr, err;

	if (!why)
		why = &unused;
	if (!cmdline)
		cmdline = "";
	len = strnlen(cmdline, LAYOUT_CMDLINE_MAX);
	if (len > LAYOUT_CMDLINE_MAX - 1) {
		*why = "kernel command line is longer than 2047 bytes";
		return -E2BIG;
	}
	if (initrd_size && !mem_gpa_to_hva(mem, initrd_gpa, initrd_size)) {
		*why = "initrd lies outside guest RAM";
		return -EINVAL;
	}
	nr = boot_e820_build(mem, map, E820_MAX);
	if (nr < 0) {
		*why = "guest memory map has too many entries";
		return nr;
	}

	if (kernel->format == KERNEL_PVH)
		err = boot_write_pvh(mem, initrd_gpa, initrd_size, map, nr, why);
	else
		err = boot_write_zero_page(mem, kernel, len, initrd_gpa, initrd_size, map, nr, why);
	if (err)
		return err;
	if (mem_write(mem, LAYOUT_CMDLINE, cmdline, len) ||
	    mem_write(mem, LAYOUT_CMDLINE + len, "", 1)) {
		*why = "command line area lies outside guest RAM";
		return -EFAULT;
	}
	return 0;
}
