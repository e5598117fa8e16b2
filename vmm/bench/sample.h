/* sample.h - one VM of a benchmark as mayfly bench records it: its milestones in ms since exec, and what it cost the host. */
#ifndef MAYFLY_BENCH_SAMPLE_H
#define MAYFLY_BENCH_SAMPLE_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/phase.h"

/* The points of a run, in time order: a fork's parent saved (bench fork
 * only), main() entered (exec's cost), the VM's own milestones
 * (lib/phase.h), then the process reaped. */
enum bench_point {
	BENCH_FORKED = 0,
	BENCH_MAIN = 1,
	BENCH_PHASE0 = 2,                     /* BENCH_PHASE0 + enum phase */
	BENCH_EXIT = BENCH_PHASE0 + PHASE_NR,
	BENCH_POINTS
};

#define BENCH_MAX_RUNS 100000
#define BENCH_EXIT_KINDS 8     /* VM exit kinds kept per run (io, mmio, ...) */

struct bench_exit {
	char kind[24];
	uint64_t n;
};

struct bench_sample {
	unsigned index;            /* 0-based, warm-up runs first */
	bool warmup;               /* left out of every statistic */
	bool restored;             /* the VM came from a snapshot */
	int exit_code;             /* mayfly run's */
	double at[BENCH_POINTS];   /* ms since the parent took the clock before exec; -1: not reached */
	double user_ms, sys_ms;    /* CPU time of the run's processes, all of them */
	long minflt, majflt;       /* their page faults */
	struct bench_exit exits[BENCH_EXIT_KINDS];   /* VM exits to the VMM, by kind */
	unsigned nexits;
};

/* All its VM exits; -1 when the run said nothing of them. */
double bench_exits_total(const struct bench_sample *s);
/* Add n exits of kind (a new kind past BENCH_EXIT_KINDS, or a name too
 * long, goes under "other"). */
void bench_add_exits(struct bench_sample *s, const char *kind, uint64_t n);

/* "forked", "main", the phases' names, "exit". */
const char *bench_point_name(int point);
/* The point of that name, or -1. */
int bench_point_by_name(const char *name);

#endif
