/* test_base64.c - base64 encoding against RFC 4648's test vectors, and bytes a string cannot hold. */
#include <criterion/criterion.h>
#include <string.h>

#include "lib/base64.h"

static void expect(const char *in, const char *want)
{
	char out[64];
	size_t n = base64_encode((const uint8_t *)in, strlen(in), out);

	cr_assert_str_eq(out, want, "base64(\"%s\")", in);
	cr_assert_eq(n, strlen(want));
	cr_assert_eq(n, BASE64_LEN(strlen(in)));
}

Test(base64, rfc4648_vectors)
{
	expect("", "");
	expect("f", "Zg==");
	expect("fo", "Zm8=");
	expect("foo", "Zm9v");
	expect("foob", "Zm9vYg==");
	expect("fooba", "Zm9vYmE=");
	expect("foobar", "Zm9vYmFy");
}

Test(base64, binary_bytes_and_the_last_letters)
{
	const uint8_t in[] = { 0x00, 0xff, 0xfe, 0xfb, 0xef, 0x80 };
	char out[16];

	base64_encode(in, sizeof(in), out);
	cr_assert_str_eq(out, "AP/++++A");
}
