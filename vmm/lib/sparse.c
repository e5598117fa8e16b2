/* sparse.c - zeroing that writes only the pages whose bytes change: what stays zero stays the kernel's shared zero page. */
#include "lib/sparse.h"

#include <stdint.h>
#include <string.h>

#define SPARSE_PIECE 4096u

/* Bytes from p to the end of its page, at most left. */
static size_t piece_len(const void *p, size_t left)
{
	size_t n = SPARSE_PIECE - (size_t)((uintptr_t)p % SPARSE_PIECE);

	return n < left ? n : left;
}

static int all_zero(const unsigned char *p, size_t n)
{
	return p[0] == 0 && (n == 1 || memcmp(p, p + 1, n - 1) == 0);
}

size_t sparse_zero(void *p, size_t len)
{
	unsigned char *b = p;
	size_t written = 0;

	while (len) {
		size_t n = piece_len(b, len);

		if (!all_zero(b, n)) {
			memset(b, 0, n);
			written++;
		}
		b += n;
		len -= n;
	}
	return written;
}
