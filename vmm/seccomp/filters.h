/* filters.h - the BPF programs vmm/seccomp/gen made from rules.c at build time (filters.c is generated). */
#ifndef MAYFLY_SECCOMP_FILTERS_H
#define MAYFLY_SECCOMP_FILTERS_H

#include <linux/filter.h>
#include <stddef.h>

#include "seccomp/rules.h"

struct seccomp_filter_prog {
	const struct sock_filter *insns;
	unsigned short len;
};

/* One program per role, index enum seccomp_role: checks the architecture
 * (x86-64, no x32), allows the role's rules, traps (SIGSYS) on the rest. */
extern const struct seccomp_filter_prog seccomp_filters[SECCOMP_ROLE_COUNT];

/* System call names by x86-64 number, for the SIGSYS line (NULL: unknown). */
#define SECCOMP_NAMES 512
extern const char *const seccomp_syscall_names[SECCOMP_NAMES];

/* 1 when the filters carry the sanitizer group (an ASan/UBSan build). */
extern const int seccomp_filters_sanitizer;

#endif
