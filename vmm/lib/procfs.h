/* procfs.h - one field of a /proc file made of "Key: value" lines (meminfo, status, smaps_rollup, cpuinfo). */
#ifndef MAYFLY_LIB_PROCFS_H
#define MAYFLY_LIB_PROCFS_H

#include <stddef.h>

/* The value of the first line whose key is `key` (then blanks and a ':',
 * as cpuinfo's "model name\t: ..."), without the blanks before it or its
 * newline, into out. 0, or -1 (out "") when the file or the key is not
 * there. */
int procfs_field(const char *path, const char *key, char *out, size_t len);

/* That value's leading whole number (meminfo's "N kB": N); -1 when the
 * key is not there or its value is not a number. */
long long procfs_number(const char *path, const char *key);

#endif
