/* stats.c - a benchmark's numbers: percentiles, a summary, and the permutation test of an A/B. */
#include "bench/stats.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Only fabs and isfinite come from math.h: compiler builtins, inlined (no libm is linked). */

uint64_t stats_splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [0, bound), bound >= 1: draws below 2^64 mod bound are rejected, so that the
 * modulo favours no value. */
static uint64_t below(uint64_t *state, uint64_t bound)
{
	uint64_t threshold = -bound % bound;

	for (;;) {
		uint64_t r = stats_splitmix64(state);

		if (r >= threshold)
			return r % bound;
	}
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return (a > b) - (a < b);
}

void stats_sort(double *xs, size_t n)
{
	qsort(xs, n, sizeof(*xs), cmp_double);
}

static bool all_finite(const double *xs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isfinite(xs[i]))
			return false;
	return true;
}

double stats_percentile_sorted(const double *sorted, size_t n, double q)
{
	double h;
	size_t lo;

	if (!(q > 0))
		q = 0;
	if (q > 100)
		q = 100;
	h = (double)(n - 1) * q / 100;
	lo = (size_t)h;
	if (lo >= n - 1)
		return sorted[n - 1];
	return sorted[lo] + (h - (double)lo) * (sorted[lo + 1] - sorted[lo]);
}

int stats_summarize(const double *xs, size_t n, struct stats_summary *out)
{
	double *s, sum = 0;

	if (n == 0 || !all_finite(xs, n))
		return -EINVAL;
	s = reallocarray(NULL, n, sizeof(*s));
	if (!s)
		return -ENOMEM;
	memcpy(s, xs, n * sizeof(*s));
	stats_sort(s, n);
	for (size_t i = 0; i < n; i++)
		sum += s[i];
	*out = (struct stats_summary){
		.n = n,
		.min = s[0],
		.p50 = stats_percentile_sorted(s, n, 50),
		.p90 = stats_percentile_sorted(s, n, 90),
		.p95 = stats_percentile_sorted(s, n, 95),
		.p99 = stats_percentile_sorted(s, n, 99),
		.max = s[n - 1],
		.mean = sum / (double)n,
	};
	free(s);
	return 0;
}

/* C(n, k), or limit + 1 once it exceeds limit. Step i holds C(n - k + i, i): exact after the
 * division, never decreasing, and below limit * n before it (no overflow within the bounds). */
static uint64_t choose_capped(uint64_t n, uint64_t k, uint64_t limit)
{
	uint64_t c = 1;

	for (uint64_t i = 1; i <= k; i++) {
		c = c * (n - k + i) / i;
		if (c > limit)
			return limit + 1;
	}
	return c;
}

/* A split is known by the sum of its smaller group (k of the n pooled values), which is a's
 * group when k == na: the statistic mean_b - mean_a of that split. */
struct split {
	size_t na, nb, k;
	bool k_is_a;
	double total;
	double observed, tie;	/* |observed| and how close counts as a tie */
};

static double split_stat(const struct split *sp, double sum_k)
{
	double sa = sp->k_is_a ? sum_k : sp->total - sum_k;

	return (sp->total - sa) / (double)sp->nb - sa / (double)sp->na;
}

static bool extreme(const struct split *sp, double sum_k)
{
	return fabs(split_stat(sp, sum_k)) >= sp->observed - sp->tie;
}

/* Every k-subset of x[0..n) in lexicographic order of indices. The count of extreme ones. */
static int count_exact(const struct split *sp, const double *x, size_t n, uint64_t *count)
{
	size_t k = sp->k, *idx = reallocarray(NULL, k, sizeof(*idx));
	uint64_t c = 0;

	if (!idx)
		return -ENOMEM;
	for (size_t i = 0; i < k; i++)
		idx[i] = i;
	for (;;) {
		double s = 0;
		size_t i;

		for (i = 0; i < k; i++)
			s += x[idx[i]];
		c += extreme(sp, s);
		/* The rightmost index that can still move right; its followers packed after it. */
		for (i = k; i-- > 0;)
			if (idx[i] < n - k + i)
				break;
		if (i == SIZE_MAX)
			break;
		idx[i]++;
		for (size_t j = i + 1; j < k; j++)
			idx[j] = idx[j - 1] + 1;
	}
	free(idx);
	*count = c;
	return 0;
}

/* resamples random relabelings: a partial Fisher-Yates shuffle of x in place puts a uniform
 * k-subset in x[0..k). Shuffling what an earlier draw left is as uniform as starting over. */
static uint64_t count_random(const struct split *sp, double *x, size_t n, size_t resamples,
			     uint64_t seed)
{
	uint64_t state = seed, c = 0;

	for (size_t r = 0; r < resamples; r++) {
		double s = 0;

		for (size_t i = 0; i < sp->k; i++) {
			size_t j = i + below(&state, n - i);
			double t = x[i];

			x[i] = x[j];
			x[j] = t;
			s += x[i];
		}
		c += extreme(sp, s);
	}
	return c;
}

static double sum_of(const double *x, size_t n)
{
	double s = 0;

	for (size_t i = 0; i < n; i++)
		s += x[i];
	return s;
}

int stats_permutation_test(const double *a, size_t na, const double *b, size_t nb,
			   size_t resamples, uint64_t seed, struct stats_ab *out)
{
	size_t n = na + nb;
	struct split sp = { .na = na, .nb = nb, .k = na <= nb ? na : nb, .k_is_a = na <= nb };
	struct stats_ab r;
	double *x, sum_a, sum_b, abs_sum = 0;
	uint64_t splits, count;
	int err = 0;

	if (!a || !b || !out || na < 2 || nb < 2 || na > STATS_MAX_SAMPLES ||
	    nb > STATS_MAX_SAMPLES - na || resamples < 1 || resamples > STATS_MAX_RESAMPLES)
		return -EINVAL;
	if (!all_finite(a, na) || !all_finite(b, nb))
		return -EINVAL;
	x = reallocarray(NULL, n, sizeof(*x));
	if (!x)
		return -ENOMEM;
	/* Each group sorted in place for its median; the pooled set is all the test needs. */
	memcpy(x, a, na * sizeof(*x));
	memcpy(x + na, b, nb * sizeof(*x));
	stats_sort(x, na);
	stats_sort(x + na, nb);
	for (size_t i = 0; i < n; i++)
		abs_sum += fabs(x[i]);
	/* Every subset's sum is then finite too. */
	if (!isfinite(abs_sum)) {
		err = -EINVAL;
		goto out_x;
	}
	sum_a = sum_of(x, na);
	sum_b = sum_of(x + na, nb);
	sp.total = sum_a + sum_b;
	sp.observed = fabs(split_stat(&sp, sp.k_is_a ? sum_a : sum_b));
	sp.tie = 1e-9 * (sp.observed + abs_sum / (double)n);
	r = (struct stats_ab){
		.mean_a = sum_a / (double)na,
		.mean_b = sum_b / (double)nb,
		.median_a = stats_percentile_sorted(x, na, 50),
		.median_b = stats_percentile_sorted(x + na, nb, 50),
	};
	r.diff = r.mean_b - r.mean_a;
	r.rel = r.mean_a == 0 ? 0 : r.diff / r.mean_a;

	splits = choose_capped(n, sp.k, resamples);
	if (splits <= resamples) {
		err = count_exact(&sp, x, n, &count);
		if (err)
			goto out_x;
		r.p_value = (double)count / (double)splits;
		r.resamples = (size_t)splits;
		r.exact = true;
	} else {
		count = count_random(&sp, x, n, resamples, seed);
		r.p_value = (double)(count + 1) / (double)(resamples + 1);
		r.resamples = resamples;
		r.exact = false;
	}
	*out = r;
out_x:
	free(x);
	return err;
}
