/* image.h - the arm64 Linux `Image` boot protocol: its header checked, where it goes in RAM. */
#ifndef MAYFLY_ARM64_IMAGE_H
#define MAYFLY_ARM64_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#define ARM64_IMAGE_HEADER   64
#define ARM64_IMAGE_MAGIC    0x644d5241u     /* "ARM\x64" at offset 56 */
#define ARM64_IMAGE_ALIGN    0x200000ULL     /* the base the text offset counts from */

/* Where an Image goes in a RAM region and what it occupies. */
struct arm64_image {
	uint64_t entry;        /* guest-physical: the first byte, where the boot CPU starts */
	uint64_t end;          /* one past the last byte it may use (its image_size, bss included) */
	uint64_t text_offset;
	uint64_t image_size;
};

/* Check the header of data[0, size) (Documentation/arm64/booting.rst:
 * magic, little-endian, an image_size that covers the file, a text
 * offset below 2 MiB) and place it in RAM [ram_base, ram_base + ram_size)
 * at the first 2 MiB-aligned base plus its text offset. Copies nothing.
 * 0, or -EINVAL (not an Image, or a header that lies) / -ENOSPC (it
 * does not fit) with *why. */
int arm64_image_place(const uint8_t *data, size_t size, uint64_t ram_base, uint64_t ram_size,
		      struct arm64_image *out, const char **why) __attribute__((warn_unused_result));

#endif
