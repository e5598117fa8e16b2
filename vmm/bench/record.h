/* record.h - mayfly bench's JSON lines (docs/bench.md): a header with the host, one line per run, one per summary; and the runs read back for compare. */
#ifndef MAYFLY_BENCH_RECORD_H
#define MAYFLY_BENCH_RECORD_H

#include <stddef.h>
#include <stdio.h>

#include "bench/density.h"
#include "bench/sample.h"
#include "bench/stats.h"

#define BENCH_FORMAT 1

struct bench_header {
	const char *kind;          /* boot, restore, run */
	const char *mode;          /* sequential, staggered:MS, burst:N */
	unsigned runs, warmup;
	char *const *argv;         /* a run's command line, from "run" on, NULL-terminated */
	const char *version;       /* mayfly's */
	const char *kvm_device;    /* whose API version and limits the host record gives */
};

/* Each line is one JSON object (RFC 8259), written whole and flushed.
 * 0, or -EIO (a write failed) or -ENOMEM. */
int bench_write_header(FILE *f, const struct bench_header *h);
int bench_write_sample(FILE *f, const struct bench_sample *s);
/* A summary of `of` (a point's name, or cpu_user_ms, cpu_sys_ms, minflt, majflt). */
int bench_write_summary(FILE *f, const char *of, const char *unit, const struct stats_summary *sum);

/* bench density: one line per step, {"type":"density", ...} (the host
 * before the first VM, and at the step), and how many VMs answered. */
int bench_write_density(FILE *f, const struct density_step *before, const struct density_step *st);
int bench_write_answering(FILE *f, unsigned vms, unsigned answering);

/* A bench JSON file read back: its kind and its measured runs (warm-up
 * runs left out), in *out (malloc'd, the caller frees). 0, or -1 with one
 * line in err: unreadable, not mayfly bench's format, or no runs. */
int bench_read(const char *path, char *kind, size_t kindlen, struct bench_sample **out,
	       size_t *n, char *err, size_t errlen);

#endif
