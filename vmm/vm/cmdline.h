/* cmdline.h - the guest kernel's command line, built up a parameter at a time and bounded (pure). */
#ifndef MAYFLY_VM_CMDLINE_H
#define MAYFLY_VM_CMDLINE_H

#include <stdbool.h>
#include <stddef.h>

#include "vm/config.h"

struct cmdline {
	char buf[CONFIG_CMDLINE_MAX];
	size_t len;
	bool too_long;        /* something did not fit: the line must not be used */
};

/* Start with `base` (CONFIG_DEFAULT_CMDLINE when empty). */
void cmdline_init(struct cmdline *cl, const char *base);

/* Append " " and the formatted parameter; on overflow nothing is added
 * and too_long is set (a truncated command line is never booted). */
void cmdline_add(struct cmdline *cl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Append " key=" and value in base64: any shell command stays a single
 * parameter, with no spaces or quotes for the kernel's parser to split on. */
void cmdline_add_base64(struct cmdline *cl, const char *key, const char *value);

#endif
