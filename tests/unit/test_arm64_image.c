/* test_arm64_image.c - the arm64 Image header: where a kernel goes in RAM, and every header that lies refused. */
#include <criterion/criterion.h>
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "arm64/image.h"

#define RAM_BASE 0x80000000ULL
#define RAM_SIZE (256ULL << 20)

static uint8_t image[4096];

/* A header as Linux's head.S writes it: text offset, image size, flags. */
static void header(uint64_t text_offset, uint64_t image_size, uint64_t flags)
{
	uint64_t v;
	uint32_t magic = htole32(ARM64_IMAGE_MAGIC);

	memset(image, 0, sizeof(image));
	v = htole64(text_offset);
	memcpy(image + 8, &v, 8);
	v = htole64(image_size);
	memcpy(image + 16, &v, 8);
	v = htole64(flags);
	memcpy(image + 24, &v, 8);
	memcpy(image + 56, &magic, 4);
}

static int place(uint64_t ram_base, uint64_t ram_size, struct arm64_image *out, const char **why)
{
	*why = "";
	return arm64_image_place(image, sizeof(image), ram_base, ram_size, out, why);
}

Test(arm64_image, placed_at_the_aligned_base_plus_its_text_offset)
{
	struct arm64_image img;
	const char *why;

	header(0, 40 << 20, 0xa);   /* 4K pages, anywhere in RAM: Debian's kernel */
	cr_assert_eq(place(RAM_BASE, RAM_SIZE, &img, &why), 0, "%s", why);
	cr_assert_eq(img.entry, RAM_BASE);
	cr_assert_eq(img.end, RAM_BASE + (40 << 20), "bss counts: image_size, not the file");

	header(0x80000, 40 << 20, 0);
	cr_assert_eq(place(RAM_BASE + 0x1000, RAM_SIZE, &img, &why), 0, "%s", why);
	cr_assert_eq(img.entry, RAM_BASE + 0x200000 + 0x80000, "the next 2 MiB base, then the offset");
}

Test(arm64_image, an_old_kernel_without_image_size_gets_the_old_text_offset)
{
	struct arm64_image img;
	const char *why;

	header(0x1234, 0, 0);   /* before 3.17: text_offset unreliable, image_size 0 */
	cr_assert_eq(place(RAM_BASE, RAM_SIZE, &img, &why), 0, "%s", why);
	cr_assert_eq(img.entry, RAM_BASE + 0x80000);
	cr_assert_eq(img.image_size, sizeof(image));
}

Test(arm64_image, headers_that_lie_are_refused)
{
	struct arm64_image img;
	const char *why;

	header(0, 1 << 20, 0);
	image[56] = 'X';
	cr_assert_eq(place(RAM_BASE, RAM_SIZE, &img, &why), -EINVAL);
	cr_assert(strstr(why, "magic"), "%s", why);
	header(0, 1 << 20, 1);
	cr_assert_eq(place(RAM_BASE, RAM_SIZE, &img, &why), -EINVAL);
	cr_assert(strstr(why, "big-endian"), "%s", why);
	header(0, 100, 0);   /* smaller than the file */
	cr_assert_eq(place(RAM_BASE, RAM_SIZE, &img, &why), -EINVAL);
	header(0x80001, 1 << 20, 0);   /* not page-aligned */
	cr_assert_eq(place(RAM_BASE, RAM_SIZE, &img, &why), -EINVAL);
	header(0x200000, 1 << 20, 0);  /* not below 2 MiB */
	cr_assert_eq(place(RAM_BASE, RAM_SIZE, &img, &why), -EINVAL);
	cr_assert_eq(arm64_image_place(image, 63, RAM_BASE, RAM_SIZE, &img, &why), -EINVAL,
		     "shorter than the header");
}

Test(arm64_image, a_kernel_larger_than_ram_never_wraps)
{
	struct arm64_image img;
	const char *why;

	header(0, RAM_SIZE + 1, 0);
	cr_assert_eq(place(RAM_BASE, RAM_SIZE, &img, &why), -ENOSPC);
	header(0x1000, UINT64_MAX - 0x800, 0);   /* offset + size would wrap */
	cr_assert_eq(place(RAM_BASE, RAM_SIZE, &img, &why), -ENOSPC);
	header(0, 1 << 20, 0);
	cr_assert_eq(place(RAM_BASE + 0x1000, 0x1000, &img, &why), -ENOSPC,
		     "no 2 MiB base inside RAM at all");
	cr_assert_eq(place(UINT64_MAX - 0x1000, 0x1000, &img, &why), -ENOSPC,
		     "an aligned base past the end of the address space");
}
