/* image.c - the arm64 Linux `Image` header checked and the image placed in guest RAM. */
#include "arm64/image.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

#define FLAG_BIG_ENDIAN 0x1ULL   /* flags bit 0: the kernel's endianness */

static uint64_t le64_at(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

int arm64_image_place(const uint8_t *data, size_t size, uint64_t ram_base, uint64_t ram_size,
		      struct arm64_image *out, const char **why)
{
	uint32_t magic;
	uint64_t text_offset, image_size, flags, base, room;

	if (size < ARM64_IMAGE_HEADER)
		return *why = "shorter than an arm64 Image header", -EINVAL;
	memcpy(&magic, data + 56, sizeof(magic));
	if (le32toh(magic) != ARM64_IMAGE_MAGIC)
		return *why = "not an arm64 Image (no ARM\\x64 magic at offset 56)", -EINVAL;
	text_offset = le64_at(data + 8);
	image_size = le64_at(data + 16);
	flags = le64_at(data + 24);
	if (flags & FLAG_BIG_ENDIAN)
		return *why = "a big-endian kernel", -EINVAL;
	/* image_size 0 is a kernel older than 3.17: text offset 0x80000 then. */
	if (image_size == 0) {
		text_offset = 0x80000;
		image_size = size;
	}
	if (text_offset >= ARM64_IMAGE_ALIGN || text_offset % 4096)
		return *why = "the Image's text offset is not page-aligned below 2 MiB", -EINVAL;
	if (image_size < size)
		return *why = "the Image's header says it is smaller than the file", -EINVAL;
	base = (ram_base + ARM64_IMAGE_ALIGN - 1) & ~(ARM64_IMAGE_ALIGN - 1);
	room = base >= ram_base && base - ram_base <= ram_size ? ram_size - (base - ram_base) : 0;
	if (text_offset > room || image_size > room - text_offset)
		return *why = "the kernel does not fit in guest RAM", -ENOSPC;
	*out = (struct arm64_image){ .entry = base + text_offset,
				     .end = base + text_offset + image_size,
				     .text_offset = text_offset, .image_size = image_size };
	return 0;
}
