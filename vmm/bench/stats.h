/* stats.h - a benchmark's numbers: percentiles, a summary, and the permutation test of an A/B. */
#ifndef MAYFLY_BENCH_STATS_H
#define MAYFLY_BENCH_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bounds on what the permutation test takes: na + nb, and resamples. */
#define STATS_MAX_SAMPLES 1000000
#define STATS_MAX_RESAMPLES 10000000

struct stats_summary {
	size_t n;
	double min, p50, p90, p95, p99, max, mean;
};

/* Sort xs[0..n) ascending, in place; no NaN among them. */
void stats_sort(double *xs, size_t n);

/* Percentile q in [0,100] (clamped) of sorted[0..n), n >= 1: linear interpolation between
 * closest ranks (Hyndman & Fan type 7, numpy's default), so p50 of an even count is the mean
 * of the two middle values. */
double stats_percentile_sorted(const double *sorted, size_t n, double q);

/* Summary of xs[0..n) (not modified; sorted in a copy). 0, or -EINVAL (n == 0, or a NaN or
 * an infinity among xs), -ENOMEM. */
int stats_summarize(const double *xs, size_t n, struct stats_summary *out);

/* A/B: a two-sided permutation test of mean(b) - mean(a), as Firecracker's A/B tool does
 * (scipy.stats.permutation_test on the difference of means). */
struct stats_ab {
	double mean_a, mean_b, median_a, median_b;
	double diff;		/* mean_b - mean_a */
	double rel;		/* diff / mean_a (0 when mean_a == 0) */
	double p_value;		/* two-sided */
	size_t resamples;	/* permutations drawn, or all of them when enumerated */
	bool exact;		/* every split of the pooled samples was enumerated */
};

/* na, nb >= 2, na + nb <= STATS_MAX_SAMPLES, 1 <= resamples <= STATS_MAX_RESAMPLES: how many
 * random relabelings when the number of distinct splits C(na + nb, na) exceeds it, else every
 * split is enumerated. Same inputs and seed give the same p. A split's statistic counts as
 * extreme when |stat| >= |observed| less a tie tolerance (1e-9 of the data's scale: float
 * sums of the same values in another order). Random: p = (extreme + 1) / (resamples + 1);
 * exact: p = extreme / C, the observed split among them. 0, or -EINVAL (bounds, a NaN or an
 * infinity, sums that overflow), -ENOMEM. */
int stats_permutation_test(const double *a, size_t na, const double *b, size_t nb,
			   size_t resamples, uint64_t seed, struct stats_ab *out);

/* splitmix64 (Steele, Lea and Flood, 2014; Vigna's public-domain reference): the next of a
 * small deterministic sequence from *state, which it advances. Not for secrets. */
uint64_t stats_splitmix64(uint64_t *state);

#endif
