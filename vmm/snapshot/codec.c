/* codec.c - bounded little-endian encoding and decoding of snapshot section payloads. */
#include "codec.h"
#include "lib/errmsg.h"

#include <endian.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

void snap_out_init(struct snap_out *o)
{
	memset(o, 0, sizeof(*o));
}

void snap_out_put(struct snap_out *o, const void *p, size_t n)
{
	if (o->err || n == 0)
		return;
	if (n > o->cap - o->len) {
		size_t want = o->cap ? o->cap : 4096;
		uint8_t *d;

		while (want - o->len < n) {
			if (want > SIZE_MAX / 2) {
				o->err = -ENOMEM;
				return;
			}
			want *= 2;
		}
		d = realloc(o->data, want);
		if (!d) {
			o->err = -ENOMEM;
			return;
		}
		o->data = d;
		o->cap = want;
	}
	memcpy(o->data + o->len, p, n);
	o->len += n;
}

void snap_out_u32(struct snap_out *o, uint32_t v)
{
	uint32_t le = htole32(v);

	snap_out_put(o, &le, sizeof(le));
}

void snap_out_u64(struct snap_out *o, uint64_t v)
{
	uint64_t le = htole64(v);

	snap_out_put(o, &le, sizeof(le));
}

void snap_out_free(struct snap_out *o)
{
	free(o->data);
	snap_out_init(o);
}

void snap_in_init(struct snap_in *in, const void *data, size_t len)
{
	in->p = data;
	in->left = data ? len : 0;
	in->bad = false;
}

bool snap_in_get(struct snap_in *in, void *dst, size_t n)
{
	if (in->bad || n > in->left) {
		in->bad = true;
		memset(dst, 0, n);
		return false;
	}
	if (n) {
		memcpy(dst, in->p, n);
		in->p += n;
		in->left -= n;
	}
	return true;
}

uint32_t snap_in_u32(struct snap_in *in)
{
	uint32_t le;

	snap_in_get(in, &le, sizeof(le));
	return le32toh(le);
}

uint64_t snap_in_u64(struct snap_in *in)
{
	uint64_t le;

	snap_in_get(in, &le, sizeof(le));
	return le64toh(le);
}

bool snap_in_end(const struct snap_in *in)
{
	return !in->bad && in->left == 0;
}

int snap_ioctl(int fd, unsigned long req, void *arg, const char *name, const char **why)
{
	if (ioctl(fd, req, arg) < 0) {
		int rc = -errno;

		return errmsg_why(why, rc, "%s: %s", name, strerror(-rc));
	}
	return 0;
}
