/* errmsg.c - one-line error messages: into a caller's buffer, or into a per-thread one a `why` pointer names. */
#include "lib/errmsg.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

int errmsg_invalid(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

int errmsg_why(const char **why, int rc, const char *fmt, ...)
{
	static __thread char buf[256];
	va_list ap;

	if (!why)
		return rc;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	*why = buf;
	return rc;
}
