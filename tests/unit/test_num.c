/* test_num.c - the one number parser: digits only, bounded, suffixes for sizes. */
#include <criterion/criterion.h>
#include <errno.h>

#include "num.h"

Test(num, whole_numbers_in_range)
{
	uint64_t v = 7;

	cr_assert_eq(num_parse_u64("0", 0, 10, &v), 0);
	cr_assert_eq(v, 0);
	cr_assert_eq(num_parse_u64("18446744073709551615", 0, UINT64_MAX, &v), 0);
	cr_assert_eq(v, UINT64_MAX);
	cr_assert_eq(num_parse_u64("007", 1, 10, &v), 0);
	cr_assert_eq(v, 7);
}

Test(num, anything_else_is_refused_and_out_untouched)
{
	uint64_t v = 42;
	static const char *const not_numbers[] = { "", " 1", "1 ", "+1", "-1", "0x10", "1e3", "1.5",
						   "12M", "99999999999999999999x" };

	for (size_t i = 0; i < sizeof(not_numbers) / sizeof(not_numbers[0]); i++)
		cr_assert_eq(num_parse_u64(not_numbers[i], 0, UINT64_MAX, &v), -EINVAL, "'%s'",
			     not_numbers[i]);
	cr_assert_eq(num_parse_u64("18446744073709551616", 0, UINT64_MAX, &v), -ERANGE);
	cr_assert_eq(num_parse_u64("0", 1, 10, &v), -ERANGE);
	cr_assert_eq(num_parse_u64("11", 1, 10, &v), -ERANGE);
	cr_assert_eq(v, 42);
}

Test(num, sizes_take_binary_suffixes)
{
	uint64_t v;

	cr_assert_eq(num_parse_size("512", 1, UINT64_MAX, &v), 0);
	cr_assert_eq(v, 512);
	cr_assert_eq(num_parse_size("64K", 1, UINT64_MAX, &v), 0);
	cr_assert_eq(v, 64 << 10);
	cr_assert_eq(num_parse_size("3m", 1, UINT64_MAX, &v), 0);
	cr_assert_eq(v, 3 << 20);
	cr_assert_eq(num_parse_size("2G", 1, UINT64_MAX, &v), 0);
	cr_assert_eq(v, 2ULL << 30);
	cr_assert_eq(num_parse_size("1T", 1, UINT64_MAX, &v), 0);
	cr_assert_eq(v, 1ULL << 40);
	cr_assert_eq(num_parse_size("K", 1, UINT64_MAX, &v), -EINVAL);
	cr_assert_eq(num_parse_size("1KB", 1, UINT64_MAX, &v), -EINVAL);
	cr_assert_eq(num_parse_size("1X", 1, UINT64_MAX, &v), -EINVAL);
	cr_assert_eq(num_parse_size("16777216T", 1, UINT64_MAX, &v), -ERANGE);
	cr_assert_eq(num_parse_size("2K", 1, 1024, &v), -ERANGE);
}
