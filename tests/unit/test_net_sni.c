/* test_net_sni.c - the TLS server name: real ClientHellos from curl and openssl, then every truncation and every bad length. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/sni.h"

/* fixtures/tls/NAME.bin: the first bytes curl 7/8 and openssl s_client sent
 * to a plain TCP listener (captured once, kept byte for byte). */
static size_t load(const char *name, uint8_t *buf, size_t cap)
{
	char path[256];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "fixtures/tls/%s", name);
	f = fopen(path, "rb");
	cr_assert_not_null(f, "%s", path);
	n = fread(buf, 1, cap, f);
	fclose(f);
	cr_assert_gt(n, 5);
	return n;
}

static int parse(const uint8_t *buf, size_t len, char *sni)
{
	const char *why = "";

	return net_sni_parse(buf, len, sni, &why);
}

Test(net_sni, real_client_hellos)
{
	static const struct { const char *file, *name; } cases[] = {
		{ "hello-curl.bin", "files.example.org" },
		{ "hello-openssl.bin", "pypi.example.com" },
		{ "hello-openssl-tls12.bin", "a.example" },
	};
	uint8_t buf[NET_HELLO_MAX];
	char sni[NET_HOST_MAX + 1];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t n = load(cases[i].file, buf, sizeof(buf));

		cr_assert_eq(parse(buf, n, sni), 0, "%s", cases[i].file);
		cr_assert_str_eq(sni, cases[i].name);
	}
	cr_assert_eq(parse(buf, load("hello-openssl-nosni.bin", buf, sizeof(buf)), sni), -ENOENT);
}

Test(net_sni, every_truncation_waits_or_fails_cleanly)
{
	static const char *const files[] = { "hello-curl.bin", "hello-openssl.bin" };

	for (size_t f = 0; f < 2; f++) {
		uint8_t full[NET_HELLO_MAX];
		size_t n = load(files[f], full, sizeof(full));
		char sni[NET_HOST_MAX + 1];

		/* Each prefix in a buffer of its own size: ASan sees any read past it. */
		for (size_t len = 0; len < n; len++) {
			uint8_t *cut = malloc(len ? len : 1);

			memcpy(cut, full, len);
			cr_assert_eq(parse(cut, len, sni), -EAGAIN, "%s cut at %zu", files[f], len);
			free(cut);
		}
	}
}

/* Every length field of the curl hello, set one higher and one lower than
 * what holds it, and to 0 and 0xff..: refused or waited for, never read past. */
Test(net_sni, every_length_field_lied_about)
{
	uint8_t full[NET_HELLO_MAX];
	size_t n = load("hello-curl.bin", full, sizeof(full));
	char sni[NET_HOST_MAX + 1];

	for (size_t pos = 0; pos + 1 < n; pos++) {
		static const int deltas[] = { 1, -1, 0x80, -0x80 };

		for (size_t d = 0; d < 4; d++) {
			uint8_t *m = malloc(n);
			const char *why = "";
			int rc;

			memcpy(m, full, n);
			m[pos] = (uint8_t)(m[pos] + deltas[d]);
			rc = net_sni_parse(m, n, sni, &why);
			cr_assert(rc == 0 || rc == -EAGAIN || rc == -EINVAL || rc == -ENOENT,
				  "byte %zu: %d", pos, rc);
			if (rc == 0)
				cr_assert(strlen(sni) <= NET_HOST_MAX);
			free(m);
		}
	}
}

/* A minimal ClientHello around a given extensions block. */
static size_t hello(uint8_t *out, const uint8_t *ext, size_t ext_len)
{
	size_t body = 2 + 32 + 1 + 2 + 2 + 1 + 1 + 2 + ext_len, p = 0;

	out[p++] = 0x16; out[p++] = 3; out[p++] = 1;
	out[p++] = (uint8_t)((body + 4) >> 8); out[p++] = (uint8_t)(body + 4);
	out[p++] = 1; out[p++] = 0; out[p++] = (uint8_t)(body >> 8); out[p++] = (uint8_t)body;
	out[p++] = 3; out[p++] = 3;
	memset(out + p, 0xaa, 32); p += 32;
	out[p++] = 0;                               /* session id */
	out[p++] = 0; out[p++] = 2; out[p++] = 0x13; out[p++] = 0x01;
	out[p++] = 1; out[p++] = 0;                 /* compression: null */
	out[p++] = (uint8_t)(ext_len >> 8); out[p++] = (uint8_t)ext_len;
	memcpy(out + p, ext, ext_len);
	return p + ext_len;
}

Test(net_sni, crafted_extensions)
{
	uint8_t buf[512];
	char sni[NET_HOST_MAX + 1];
	const uint8_t one[] = { 0, 0, 0, 8, 0, 6, 0, 0, 3, 'a', '.', 'b' };
	const uint8_t two_names[] = { 0, 0, 0, 14, 0, 12, 0, 0, 3, 'a', '.', 'b', 0, 0, 3, 'c', '.', 'd' };
	const uint8_t two_exts[] = { 0, 0, 0, 8, 0, 6, 0, 0, 3, 'a', '.', 'b',
				     0, 0, 0, 8, 0, 6, 0, 0, 3, 'c', '.', 'd' };
	const uint8_t empty_name[] = { 0, 0, 0, 5, 0, 3, 0, 0, 0 };
	const uint8_t nul_name[] = { 0, 0, 0, 8, 0, 6, 0, 0, 3, 'a', 0, 'b' };
	const uint8_t bad_chars[] = { 0, 0, 0, 8, 0, 6, 0, 0, 3, 'a', '/', 'b' };
	const uint8_t list_long[] = { 0, 0, 0, 8, 0, 7, 0, 0, 3, 'a', '.', 'b' };
	const uint8_t name_long[] = { 0, 0, 0, 8, 0, 6, 0, 0, 4, 'a', '.', 'b' };
	const uint8_t ext_long[] = { 0, 0, 0, 9, 0, 6, 0, 0, 3, 'a', '.', 'b' };
	const uint8_t other_type[] = { 0, 0, 0, 8, 0, 6, 1, 0, 3, 'a', '.', 'b' };
	const uint8_t other_ext[] = { 0, 10, 0, 2, 0, 0 };

	cr_assert_eq(parse(buf, hello(buf, one, sizeof(one)), sni), 0);
	cr_assert_str_eq(sni, "a.b");
	cr_assert_eq(parse(buf, hello(buf, two_names, sizeof(two_names)), sni), -EINVAL);
	cr_assert_eq(parse(buf, hello(buf, two_exts, sizeof(two_exts)), sni), -EINVAL);
	cr_assert_eq(parse(buf, hello(buf, empty_name, sizeof(empty_name)), sni), -EINVAL);
	cr_assert_eq(parse(buf, hello(buf, nul_name, sizeof(nul_name)), sni), -EINVAL);
	cr_assert_eq(parse(buf, hello(buf, bad_chars, sizeof(bad_chars)), sni), -EINVAL);
	cr_assert_eq(parse(buf, hello(buf, list_long, sizeof(list_long)), sni), -EINVAL);
	cr_assert_eq(parse(buf, hello(buf, name_long, sizeof(name_long)), sni), -EINVAL);
	cr_assert_eq(parse(buf, hello(buf, ext_long, sizeof(ext_long)), sni), -EINVAL);
	cr_assert_eq(parse(buf, hello(buf, other_type, sizeof(other_type)), sni), -EINVAL);
	cr_assert_eq(parse(buf, hello(buf, other_ext, sizeof(other_ext)), sni), -ENOENT);
}

Test(net_sni, record_headers)
{
	uint8_t buf[NET_HELLO_MAX + 16] = { 0x16, 3, 1, 0x40, 0x01 };   /* 16385: too long */
	char sni[NET_HOST_MAX + 1];

	cr_assert_eq(parse(buf, 5, sni), -EINVAL);
	buf[0] = 0x17;
	cr_assert_eq(parse(buf, 1, sni), -EINVAL);        /* application data: not a hello */
	buf[0] = 'G';
	cr_assert_eq(parse(buf, 1, sni), -EINVAL);        /* plain HTTP on 443 */
	memcpy(buf, (uint8_t[]){ 0x16, 2, 0, 0, 4 }, 5);
	cr_assert_eq(parse(buf, 5, sni), -EINVAL);        /* SSL 2 */
	memcpy(buf, (uint8_t[]){ 0x16, 3, 1, 0, 8, 2, 0, 0, 4, 0, 0, 0, 0 }, 13);
	cr_assert_eq(parse(buf, 13, sni), -EINVAL);       /* a ServerHello */
	memcpy(buf, (uint8_t[]){ 0x16, 3, 1, 0, 8, 1, 0, 1, 0, 0, 0, 0, 0 }, 13);
	cr_assert_eq(parse(buf, 13, sni), -EINVAL);       /* split over records */
}
