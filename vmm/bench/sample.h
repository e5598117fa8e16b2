/* sample.h - one VM of a benchmark as mayfly bench records it: its milestones in ms since exec, and what it cost the host. */
#ifndef MAYFLY_BENCH_SAMPLE_H
#define MAYFLY_BENCH_SAMPLE_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/phase.h"

/* The points of a run, in time order: main() entered (exec's cost), the
 * VM's own milestones (lib/phase.h), then the process reaped. */
enum bench_point {
	BENCH_MAIN = 0,
	BENCH_PHASE0 = 1,                     /* BENCH_PHASE0 + enum phase */
	BENCH_EXIT = BENCH_PHASE0 + PHASE_NR,
	BENCH_POINTS
};

#define BENCH_MAX_RUNS 100000

struct bench_sample {
	unsigned index;            /* 0-based, warm-up runs first */
	bool warmup;               /* left out of every statistic */
	bool restored;             /* the VM came from a snapshot */
	int exit_code;             /* mayfly run's */
	double at[BENCH_POINTS];   /* ms since the parent took the clock before exec; -1: not reached */
	double user_ms, sys_ms;    /* CPU time of the run's processes, all of them */
	long minflt, majflt;       /* their page faults */
};

/* "main", the phases' names, "exit". */
const char *bench_point_name(int point);
/* The point of that name, or -1. */
int bench_point_by_name(const char *name);

#endif
