/* base64.c - standard base64 encoding: the guest command on the kernel command line, binary output in JSON. */
#include "base64.h"

size_t base64_encode(const uint8_t *src, size_t len, char *out)
{
	static const char alphabet[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
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
