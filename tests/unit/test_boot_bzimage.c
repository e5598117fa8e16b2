/* test_boot_bzimage.c - the bzImage loader: header checks, placement at 1 MiB, and a real kernel from MAYFLY_TEST_KERNEL. */
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <asm/bootparam.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boot_fixture.h"
#include "x86/layout.h"

/* ---- bzImage ---- */

Test(boot, bzimage_loads_at_1mib)
{
	struct kernel_image k = load_ok(make_bzimage(BZ_KERNEL_SIZE));

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
	size_t size = make_bzimage(BZ_KERNEL_SIZE);

	img[0x1f1] = 0;
	put32(0x22c, 0);
	k = load_ok(size);
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
	size_t size = make_bzimage(BZ_KERNEL_SIZE);

	/* The jump says 0x301; only the zero page's 0x1f1..0x290 is kept. */
	img[0x201] = 0xff;
	k = load_ok(size);
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
