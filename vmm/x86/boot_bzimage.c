/* boot_bzimage.c - load a bzImage by the Linux x86 boot protocol (Documentation/arch/x86/boot.rst). */
#include "x86/boot.h"
#include "x86/layout.h"

#include <asm/bootparam.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>

/* The setup header sits in the file exactly where it sits in the zero
 * page, so struct boot_params gives every field's file offset. */
#define BZ_OFF(field) offsetof(struct boot_params, hdr.field)
#define BZ_HDR_START  BZ_OFF(setup_sects)                 /* 0x1f1 */
#define BZ_HDR_MIN_END (BZ_OFF(init_size) + 4)            /* 0x264 */

#define BZ_SECTOR_SIZE         512
#define BZ_DEFAULT_SETUP_SECTS 4          /* what setup_sects == 0 means */
#define BZ_SHORT_JMP           0xeb       /* header.S opens the header with "jmp start_of_setup" */
#define BZ_HDRS_MAGIC          0x53726448 /* "HdrS" */
/* 2.12 added xloadflags, the only way to know a 64-bit entry exists. */
#define BZ_MIN_VERSION         0x020c
#define BZ_ENTRY64_OFFSET      0x200      /* 64-bit entry past the load address */
#define BZ_DEFAULT_INITRD_MAX  0x37ffffff /* boot.rst, for kernels that leave it 0 */

_Static_assert(BZ_HDR_START == 0x1f1 && BZ_OFF(header) == 0x202 && BZ_OFF(init_size) == 0x260,
	       "asm/bootparam.h disagrees with boot.rst");

static uint16_t bz_le16(const uint8_t *image, size_t off)
{
	return (uint16_t)(image[off] | image[off + 1] << 8);
}

static uint32_t bz_le32(const uint8_t *image, size_t off)
{
	return (uint32_t)bz_le16(image, off) | (uint32_t)bz_le16(image, off + 2) << 16;
}

static uint64_t bz_le64(const uint8_t *image, size_t off)
{
	return (uint64_t)bz_le32(image, off) | (uint64_t)bz_le32(image, off + 4) << 32;
}

/*
 * The protected-mode kernel is loaded at 1 MiB (code32_start's default),
 * not at pref_address. What runs at the 64-bit entry is the decompressor,
 * and it extracts the kernel to pref_address (LOAD_PHYSICAL_ADDR) or a
 * KASLR slot by itself, moving its own code out of the way, whether the
 * kernel is relocatable or not; so 1 MiB works for every bzImage, as in
 * kvmtool and Firecracker. The kernel then claims init_size bytes from
 * that runtime address, which load_end covers so the initrd stays clear.
 */
int boot_load_bzimage(const struct guest_mem *mem, const uint8_t *image, size_t size,
		      struct kernel_image *out, const char **why)
{
	uint64_t low_end = mem_low_end(mem);
	uint64_t kernel_off, kernel_size, runtime, init_end, pref;
	uint32_t setup_sects, hdr_end, init_size, initrd_max;
	const char *unused;
	uint16_t version;

	if (!why)
		why = &unused;
	memset(out, 0, sizeof(*out));
	if (!image || size < BZ_OFF(version)) {
		*why = "bzImage is truncated inside its setup header";
		return -EINVAL;
	}
	if (bz_le32(image, BZ_OFF(header)) != BZ_HDRS_MAGIC) {
		*why = "bzImage has no HdrS signature";
		return -ENOEXEC;
	}
	if (size < BZ_HDR_MIN_END) {
		*why = "bzImage is truncated inside its setup header";
		return -EINVAL;
	}
	version = bz_le16(image, BZ_OFF(version));
	if (version < BZ_MIN_VERSION) {
		*why = "bzImage boot protocol is older than 2.12 (no 64-bit entry)";
		return -ENOEXEC;
	}
	if (!(bz_le16(image, BZ_OFF(xloadflags)) & XLF_KERNEL_64)) {
		*why = "bzImage kernel has no 64-bit entry (XLF_KERNEL_64 clear)";
		return -ENOEXEC;
	}
	if (!(image[BZ_OFF(loadflags)] & LOADED_HIGH)) {
		*why = "zImage (not loaded high) is not supported";
		return -ENOEXEC;
	}

	/* The header's length is the target of the short jump that opens it. */
	if (image[BZ_OFF(jump)] != BZ_SHORT_JMP) {
		*why = "bzImage setup header does not start with a short jump";
		return -EINVAL;
	}
	hdr_end = BZ_OFF(jump) + 2 + image[BZ_OFF(jump) + 1];
	if (hdr_end < BZ_HDR_MIN_END) {
		*why = "bzImage setup header is too short for its protocol version";
		return -EINVAL;
	}

	/* hdr_end is at most 0x301 and kernel_off at least 0x400: the header
	 * always ends inside the setup sectors, so inside the file below. */
	setup_sects = image[BZ_OFF(setup_sects)];
	if (setup_sects == 0)
		setup_sects = BZ_DEFAULT_SETUP_SECTS;
	kernel_off = (uint64_t)(setup_sects + 1) * BZ_SECTOR_SIZE;
	if (kernel_off >= size) {
		*why = "bzImage is truncated before its protected-mode kernel";
		return -EINVAL;
	}
	kernel_size = size - kernel_off;
	if (kernel_size <= BZ_ENTRY64_OFFSET) {
		*why = "bzImage kernel is too short to hold the 64-bit entry";
		return -EINVAL;
	}
	if (low_end < LAYOUT_HIMEM_START || kernel_size > low_end - LAYOUT_HIMEM_START) {
		*why = "bzImage kernel is larger than guest RAM";
		return -EINVAL;
	}

	init_size = bz_le32(image, BZ_OFF(init_size));
	pref = bz_le64(image, BZ_OFF(pref_address));
	runtime = pref > LAYOUT_HIMEM_START ? pref : LAYOUT_HIMEM_START;
	if (__builtin_add_overflow(runtime, init_size, &init_end) || init_end > low_end) {
		*why = "guest RAM is too small for the bzImage kernel's init_size";
		return -EINVAL;
	}

	/* Every check passed: only now touch guest RAM. */
	if (mem_write(mem, LAYOUT_HIMEM_START, image + kernel_off, kernel_size)) {
		*why = "bzImage kernel lies outside guest RAM";
		return -EINVAL;
	}

	out->format = KERNEL_BZIMAGE;
	out->entry = LAYOUT_HIMEM_START + BZ_ENTRY64_OFFSET;
	out->load_start = LAYOUT_HIMEM_START;
	out->load_end = LAYOUT_HIMEM_START + kernel_size;
	if (init_end > out->load_end)
		out->load_end = init_end;
	out->setup_header_len = hdr_end - BZ_HDR_START;
	if (out->setup_header_len > sizeof(out->setup_header))
		out->setup_header_len = sizeof(out->setup_header);
	memcpy(out->setup_header, image + BZ_HDR_START, out->setup_header_len);
	initrd_max = bz_le32(image, BZ_OFF(initrd_addr_max));
	out->initrd_addr_max = initrd_max ? initrd_max : BZ_DEFAULT_INITRD_MAX;
	return 0;
}
