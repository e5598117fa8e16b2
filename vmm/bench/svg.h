/* svg.h - one benchmark's picture as SVG 1.1: CDFs of the totals, a stacked bar of the phases. */
#ifndef MAYFLY_BENCH_SVG_H
#define MAYFLY_BENCH_SVG_H

#include <stddef.h>
#include <stdio.h>

/* What one picture holds at most, and the largest duration it draws (about 11.6 days). */
#define SVG_MAX_SERIES 8
#define SVG_MAX_PHASES 32
#define SVG_MAX_POINTS 1000000	/* all series together */
#define SVG_MAX_MS 1e9

/* Samples of a total, in ms, any order. */
struct svg_series {
	const char *name;
	const double *ms;
	size_t n;
};

/* A phase's median duration, in ms; phases in their order. */
struct svg_phase {
	const char *name;
	double ms;
};

struct svg_plot {
	const char *title;			/* "mayfly bench restore: 20 runs"; NULL: none */
	const struct svg_series *series;	/* 1, or 2 for an A/B: the CDFs of the total */
	size_t nseries;
	const struct svg_phase *phases;		/* the stacked bar of the first series' medians */
	size_t nphases;				/* 0: no bar */
};

/* Write the plot to out: at the top the empirical CDF of each series (a step line, and each
 * sample a <circle class="pt" data-ms=...>), a legend with each name, p50 and p99; below, one
 * horizontal bar of <rect class="phase" data-ms=...> segments proportional to the phases.
 * Names and the title must be valid UTF-8 without control characters; every text is
 * escaped. Nothing is written unless the plot is valid. 0, or -EINVAL (no series or a
 * series with n == 0, more than the bounds above, a NULL name, a value that is NaN, negative
 * or above SVG_MAX_MS, a bad name or title), -ENOMEM, -EIO (a write or the flush failed). */
int svg_write(FILE *out, const struct svg_plot *p);

#endif
