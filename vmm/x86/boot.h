/* boot.h - the x86-64 Linux boot protocol: load vmlinux/bzImage/PVH ELF, initrd, zero page or PVH start info. */
#ifndef MAYFLY_X86_BOOT_H
#define MAYFLY_X86_BOOT_H

#include <stddef.h>
#include <stdint.h>

#include "mem/mem.h"

enum kernel_format {
	KERNEL_ELF64,    /* uncompressed vmlinux: 64-bit entry, zero page in RSI */
	KERNEL_BZIMAGE,  /* bzImage: 64-bit entry at code32_start + 0x200 */
	KERNEL_PVH,      /* ELF with a XEN_ELFNOTE_PHYS32_ENTRY note: 32-bit entry, start info in EBX */
};

/* What a loaded kernel needs from the rest of boot setup. */
struct kernel_image {
	enum kernel_format format;
	uint64_t entry;        /* guest-physical entry point */
	uint64_t load_start;   /* lowest guest-physical byte the image occupies */
	uint64_t load_end;     /* one past the highest */
	/* bzImage only: its setup header, copied verbatim into the zero page. */
	uint8_t setup_header[0x290 - 0x1f1];
	uint32_t setup_header_len;
	uint64_t initrd_addr_max;  /* highest initrd byte the kernel accepts */
};

/* An e820 entry as Linux and PVH both take it. */
struct e820_entry {
	uint64_t addr;
	uint64_t size;
	uint32_t type;   /* E820_RAM or E820_RESERVED */
};
#define E820_RAM      1
#define E820_RESERVED 2
#define E820_MAX      16

/* Recognise the format of `image` (ELF64 or ELF32 with a PVH note, ELF64
 * vmlinux, or bzImage) and copy it into guest RAM. A malformed file
 * (truncated, bad magic, a segment outside RAM, overlapping segments, sizes
 * that overflow) returns -EINVAL or -ENOEXEC with *why set to a one-line
 * reason; nothing outside guest RAM is ever written. */
int boot_load_kernel(const struct guest_mem *mem, const uint8_t *image, size_t size,
		     struct kernel_image *out, const char **why)
	__attribute__((warn_unused_result));

/* The two halves boot_load_kernel dispatches to, same contract, once it has
 * seen the ELF magic or the bzImage "HdrS" signature. */
int boot_load_elf(const struct guest_mem *mem, const uint8_t *image, size_t size,
		  struct kernel_image *out, const char **why)
	__attribute__((warn_unused_result));
int boot_load_bzimage(const struct guest_mem *mem, const uint8_t *image, size_t size,
		      struct kernel_image *out, const char **why)
	__attribute__((warn_unused_result));

/* Place the initrd page-aligned as high in low RAM as the kernel allows and
 * above the kernel image. Returns 0 with *gpa set, or -ENOMEM / -EINVAL with
 * *why set when it does not fit. */
int boot_load_initrd(const struct guest_mem *mem, const struct kernel_image *kernel,
		     const uint8_t *initrd, size_t size, uint64_t *gpa, const char **why)
	__attribute__((warn_unused_result));

/* The guest's memory map: usable RAM below the EBDA, from 1 MiB to the MMIO
 * hole and above 4 GiB; the EBDA and BIOS area reserved. Returns the count. */
int boot_e820_build(const struct guest_mem *mem, struct e820_entry *out, int max);

/* Write the boot structures the entry point expects, at layout.h's addresses:
 * for KERNEL_ELF64/BZIMAGE a zero page (boot_params with e820 map, cmdline
 * pointer, initrd, setup header), for KERNEL_PVH an hvm_start_info with a
 * memmap, cmdline and one module (the initrd). cmdline must fit
 * LAYOUT_CMDLINE_MAX. initrd_size 0 means no initrd. Returns 0 or -errno. */
int boot_write_params(const struct guest_mem *mem, const struct kernel_image *kernel,
		      const char *cmdline, uint64_t initrd_gpa, uint64_t initrd_size,
		      const char **why) __attribute__((warn_unused_result));

#endif
