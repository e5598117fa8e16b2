/* errmsg.h - one-line error messages: into a caller's buffer, or into a per-thread one a `why` pointer names. */
#ifndef MAYFLY_LIB_ERRMSG_H
#define MAYFLY_LIB_ERRMSG_H

#include <stddef.h>

/* Format into err (len bytes, always terminated when len > 0) and return
 * -EINVAL: for parsers and validators whose caller prints err as one line. */
int errmsg_invalid(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Format a one-line reason into a per-thread buffer and point *why at it;
 * returns `rc` so a caller can `return errmsg_why(why, -EINVAL, "...")`.
 * The text stays valid until this thread's next call, so no argument may
 * be an earlier *why. why may be NULL. */
int errmsg_why(const char **why, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
