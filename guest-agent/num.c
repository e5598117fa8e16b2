/* num.c - the one number parser of mayfly and its agent: decimal, bounded, no sign, no junk. */
#include "num.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

/* Digits of s[0..len): -EINVAL unless all are digits, -ERANGE on overflow. */
static int parse_digits(const char *s, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	bool overflow = false;

	if (len == 0)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		if (__builtin_mul_overflow(v, 10, &v) ||
		    __builtin_add_overflow(v, (uint64_t)(s[i] - '0'), &v))
			overflow = true;   /* keep going: "99999999999999999999x" is not a number */
	}
	if (overflow)
		return -ERANGE;
	*out = v;
	return 0;
}

int num_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t v;
	int rc = parse_digits(s, strlen(s), &v);

	if (rc)
		return rc;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int num_parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	static const char suffixes[] = "kmgt";
	size_t len = strlen(s);
	unsigned shift = 0;
	const char *suf;
	uint64_t v;
	int rc;

	if (len > 1 && s[len - 1] >= 'A' && (suf = strchr(suffixes, s[len - 1] | 0x20))) {
		shift = 10 * (unsigned)(suf - suffixes + 1);
		len--;
	}
	rc = parse_digits(s, len, &v);
	if (rc)
		return rc;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	v <<= shift;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}
