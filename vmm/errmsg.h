/* errmsg.h - a caller's error buffer filled in one call: the message formatted, -EINVAL returned. */
#ifndef MAYFLY_ERRMSG_H
#define MAYFLY_ERRMSG_H

#include <stddef.h>

/* Format into err (len bytes, always terminated when len > 0) and return
 * -EINVAL: for parsers and validators whose caller prints err as one line. */
int errmsg_invalid(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
