/* errmsg.c - a caller's error buffer filled in one call: the message formatted, -EINVAL returned. */
#include "errmsg.h"

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
