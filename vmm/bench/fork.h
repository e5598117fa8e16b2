/* fork.h - mayfly bench fork: one parent VM (mayfly boot --vsock) that each run forks (mayfly fork) before its child restores the fork (mayfly run --snapshot). */
#ifndef MAYFLY_BENCH_FORK_H
#define MAYFLY_BENCH_FORK_H

#include <limits.h>
#include <stdint.h>

#include "bench/sample.h"
#include "bench/vm_proc.h"

struct bench_fork {
	char dir[PATH_MAX];            /* ours: the parent's socket and the forks */
	char out_arg[PATH_MAX + 16];   /* --out=DIR/fN, the next fork's */
	char snap_arg[PATH_MAX + 16];  /* --snapshot=DIR/fN: the run's argument */
	unsigned forks;                /* made so far */
	struct bench_vm parent;        /* --vsock=DIR/parent.sock */
};

/* Make the directory, start the parent, `self boot --vsock DIR/parent.sock`
 * with vm_opts (NULL-terminated), and wait until its agent answers (`self
 * exec -- true`). 0, or -1 after one line (nothing left behind). */
int bench_fork_start(struct bench_fork *f, const char *self, char *const vm_opts[]);

/* The runner's before hook (opaque: the bench_fork): the last fork removed,
 * the parent forked into DIR/fN (`self fork`), the run's origin its exec,
 * its point "forked" its end; f->snap_arg names the new fork. */
int bench_fork_before(struct bench_fork *f, const char *self, struct bench_sample *s,
		      uint64_t *origin, char *err, size_t errlen);

/* The parent ended (SIGTERM, reaped), the directory and every fork in it
 * removed. */
void bench_fork_stop(struct bench_fork *f);

#endif
