/* cmdline.c - the guest kernel's command line, built up a parameter at a time and bounded (pure). */
#include "vm/cmdline.h"
#include "lib/base64.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

void cmdline_init(struct cmdline *cl, const char *base)
{
	memset(cl, 0, sizeof(*cl));
	if (!base || !*base)
		base = CONFIG_DEFAULT_CMDLINE;
	cl->len = strlen(base);
	if (cl->len >= sizeof(cl->buf)) {
		cl->len = 0;
		cl->too_long = true;
		return;
	}
	memcpy(cl->buf, base, cl->len + 1);
}

void cmdline_add(struct cmdline *cl, const char *fmt, ...)
{
	size_t room = sizeof(cl->buf) - cl->len;
	va_list ap;
	int n;

	if (cl->too_long)
		return;
	va_start(ap, fmt);
	n = vsnprintf(cl->buf + cl->len + 1, room > 1 ? room - 1 : 0, fmt, ap);
	va_end(ap);
	if (n < 0 || room < 2 || (size_t)n >= room - 1) {
		cl->buf[cl->len] = '\0';
		cl->too_long = true;
		return;
	}
	cl->buf[cl->len] = ' ';
	cl->len += (size_t)n + 1;
}

void cmdline_add_base64(struct cmdline *cl, const char *key, const char *value)
{
	size_t klen = strlen(key), vlen = strlen(value);
	size_t need = 1 + klen + 1 + BASE64_LEN(vlen);   /* " key=" + the encoding */

	if (cl->too_long)
		return;
	if (need >= sizeof(cl->buf) - cl->len) {
		cl->too_long = true;
		return;
	}
	cl->buf[cl->len++] = ' ';
	memcpy(cl->buf + cl->len, key, klen);
	cl->len += klen;
	cl->buf[cl->len++] = '=';
	cl->len += base64_encode((const uint8_t *)value, vlen, cl->buf + cl->len);
	cl->buf[cl->len] = '\0';
}
