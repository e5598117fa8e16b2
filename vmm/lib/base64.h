/* base64.h - standard base64 (RFC 4648, with '=' padding), both ways. */
#ifndef MAYFLY_LIB_BASE64_H
#define MAYFLY_LIB_BASE64_H

#include <stddef.h>
#include <stdint.h>

/* Characters base64 makes of n bytes, without the NUL. */
#define BASE64_LEN(n) (((n) + 2) / 3 * 4)

/* Encode src[0..len) into out, which holds BASE64_LEN(len) + 1 bytes;
 * NUL-terminated. Returns BASE64_LEN(len). */
size_t base64_encode(const uint8_t *src, size_t len, char *out);

/* Decode the len characters of src (padded, no whitespace) into out,
 * which holds len / 4 * 3 bytes. The byte count, or -1 when src is not
 * canonical base64. */
long base64_decode(const char *src, size_t len, uint8_t *out);

#endif
