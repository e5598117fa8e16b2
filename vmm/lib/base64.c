/* base64.c - standard base64: the guest command on the kernel command line, binary output in JSON, binary files from MCP clients. */
#include "lib/base64.h"

#include <stdbool.h>

static const char alphabet[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t base64_encode(const uint8_t *src, size_t len, char *out)
{
	size_t o = 0;

	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)src[i] << 16;

		if (i + 1 < len)
			v |= (uint32_t)src[i + 1] << 8;
		if (i + 2 < len)
			v |= src[i + 2];
		out[o++] = alphabet[(v >> 18) & 63];
		out[o++] = alphabet[(v >> 12) & 63];
		out[o++] = i + 1 < len ? alphabet[(v >> 6) & 63] : '=';
		out[o++] = i + 2 < len ? alphabet[v & 63] : '=';
	}
	out[o] = '\0';
	return o;
}

static int sextet(char c)
{
	return c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? c - 'a' + 26 :
	       c >= '0' && c <= '9' ? c - '0' + 52 : c == '+' ? 62 : c == '/' ? 63 : -1;
}

long base64_decode(const char *src, size_t len, uint8_t *out)
{
	size_t o = 0;

	if (len % 4)
		return -1;
	for (size_t i = 0; i < len; i += 4) {
		bool last = i + 4 == len;
		int pad = last ? (src[i + 3] == '=') + (src[i + 2] == '=' && src[i + 3] == '=') : 0;
		uint32_t v = 0;

		for (int k = 0; k < 4 - pad; k++) {
			int x = sextet(src[i + k]);

			if (x < 0)
				return -1;
			v |= (uint32_t)x << (18 - 6 * k);
		}
		/* Canonical: the bits a pad leaves over are zero. */
		if ((pad == 1 && (v & 0xff)) || (pad == 2 && (v & 0xffff)))
			return -1;
		out[o++] = (uint8_t)(v >> 16);
		if (pad < 2)
			out[o++] = (uint8_t)(v >> 8);
		if (pad < 1)
			out[o++] = (uint8_t)v;
	}
	return (long)o;
}
