/* seccomp.h - each mayfly thread confines itself to its role's system calls; a forbidden one ends the process with one line. */
#ifndef MAYFLY_SECCOMP_SECCOMP_H
#define MAYFLY_SECCOMP_SECCOMP_H

#include <stdbool.h>

#include "seccomp/rules.h"

/* Filters are off until main.c turns them on (unit tests' threads stay
 * unfiltered); --no-seccomp leaves them off. Before any thread starts. */
void seccomp_enable(bool on);
bool seccomp_enabled(void);

/* A command that runs a VM, once after log_init and before any thread
 * starts: --no-seccomp (off) logs a warning and leaves filters off;
 * otherwise checks that the kernel can filter, settles what glibc's
 * malloc and jansson would otherwise do later from any thread with calls
 * a role lacks (one malloc arena; the JSON hash seed) and turns them on.
 * 0, or -errno after one line (the command then fails before building
 * anything). */
int seccomp_setup(bool off) __attribute__((warn_unused_result));

/* 0 when this kernel can filter system calls, else -errno (no
 * CONFIG_SECCOMP_FILTER): main checks once so that no thread fails later. */
int seccomp_available(void);

/* The calling thread takes `role`'s filter (and no_new_privs) as its first
 * act, so nothing it does after, guest-driven or not, can step outside.
 * Does nothing when filters are off. A thread that cannot be confined does
 * not run unconfined: it writes one line and ends the process
 * (EXIT_INTERNAL). */
void seccomp_enter(enum seccomp_role role);

/* Install `role`'s filter on the calling thread whether or not filters are
 * on (tests: a forked child). 0 or -errno. */
int seccomp_install(enum seccomp_role role) __attribute__((warn_unused_result));

/* "main", "vcpu"...; NULL for a number out of range. */
const char *seccomp_role_name(int role);

/* Test builds only (mayfly-selftest): the thread that enters `role`
 * issues one forbidden system call (syslog) right after its filter. */
void seccomp_selftest(int role);

#endif
