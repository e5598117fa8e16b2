/* report.h - what mayfly bench makes of its samples: the percentile table, the summary lines, the SVG, the A/B verdicts. */
#ifndef MAYFLY_BENCH_REPORT_H
#define MAYFLY_BENCH_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include "bench/sample.h"

/* The A/B's family-wise significance level, split over the points
 * compared (Bonferroni), and the test's random relabelings. */
#define BENCH_ALPHA 0.01
#define BENCH_RESAMPLES 9999

/* Print the table (each point's p50, p90, p95, p99, min, max in ms since
 * exec; then CPU time and page faults) to out, and, with json, the
 * summary lines. s[0..n): measured runs only. 0, or -errno. */
int bench_report(FILE *out, FILE *json, const struct bench_sample *s, size_t n);

/* The SVG (bench/svg.h) of one or two benchmarks at path, atomically:
 * each one's CDF of its total (exit), and a stacked bar of the first
 * one's median steps. 0, or -1 with one line in err. */
int bench_plot(const char *path, const char *title, const char *const names[],
	       const struct bench_sample *const s[], const size_t n[], size_t nsets, char *err,
	       size_t errlen);

/* For each point both A and B reached in at least two runs: their
 * medians, B's change, the permutation test's p, and a verdict, printed
 * to out. Returns how many points differ significantly, or -errno. */
int bench_compare(FILE *out, const struct bench_sample *a, size_t na,
		  const struct bench_sample *b, size_t nb);

#endif
