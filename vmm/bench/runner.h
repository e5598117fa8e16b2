/* runner.h - mayfly bench's runs: each VM is one `mayfly run --json` process of this very binary, timed from just before its exec to its reaping. */
#ifndef MAYFLY_BENCH_RUNNER_H
#define MAYFLY_BENCH_RUNNER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bench/sample.h"

enum bench_mode {
	BENCH_SEQUENTIAL,   /* one VM after another */
	BENCH_STAGGERED,    /* one start every stagger_ms, whether or not the last ended */
	BENCH_BURST,        /* burst VMs at once; the next burst when they all ended */
};

#define BENCH_MAX_ACTIVE 256   /* VMs alive at once, whatever the mode asks */

struct bench_plan {
	char *const *argv;         /* a run's command line, NULL-terminated: argv[0] is run
	                            * by path (our own binary), argv[1] "run", with --json */
	unsigned runs, warmup;     /* the warm-up runs come first, one at a time */
	enum bench_mode mode;
	unsigned stagger_ms;       /* BENCH_STAGGERED */
	unsigned burst;            /* BENCH_BURST: 1 to BENCH_MAX_ACTIVE */
	/* NULL, or called on this thread just before each run starts
	 * (BENCH_SEQUENTIAL only): a step of its own (bench fork's fork),
	 * which may set the run's origin (CLOCK_MONOTONIC ns: what the run's
	 * points count from; 0: the run's exec) and points of s. 0, or -1
	 * with one line in err: the benchmark stops there. */
	int (*before)(void *opaque, struct bench_sample *s, uint64_t *origin, char *err,
		      size_t errlen);
	/* Called as each run ends, in the order they end (its index says
	 * which); ndone counts the runs ended so far, this one included. */
	void (*done)(void *opaque, const struct bench_sample *s, unsigned ndone, unsigned total);
	void *opaque;
};

/* Run the plan into samples[0 .. warmup + runs), by index. 0, or -1 with
 * one line in err: a run that failed (its exit code, and what its error
 * event said) or a process the system refused; no new run starts after
 * a failure, and the ones alive are ended. Every child is reaped before
 * it returns. */
int bench_run(const struct bench_plan *p, struct bench_sample *samples, char *err, size_t errlen);

/* Run argv (argv[0] by path) to its end, stdin and stdout /dev/null,
 * stderr ours: its exit code (128+N for signal N), or -errno when it
 * could not start. */
int bench_spawn_wait(char *const argv[]);
/* Start argv (the same streams; stderr to the file err_path unless it is
 * NULL) and leave it running: its pid in *pid. 0 or -errno. */
int bench_spawn(char *const argv[], const char *err_path, pid_t *pid);

#endif
