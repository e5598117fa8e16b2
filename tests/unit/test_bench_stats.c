/* test_bench_stats.c - percentiles against numpy's, and the A/B permutation test against cases worked by hand and by brute force. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#include "bench/stats.h"

#define EPS 1e-12

static double uniform(uint64_t *st)
{
	return (double)(stats_splitmix64(st) >> 11) * 0x1p-53;
}

/* Roughly normal (Irwin-Hall: the sum of four uniforms), mean 0, sd 0.58, within +-2. */
static double noise(uint64_t *st)
{
	return uniform(st) + uniform(st) + uniform(st) + uniform(st) - 2;
}

static void fill(double *xs, size_t n, double centre, uint64_t *st)
{
	for (size_t i = 0; i < n; i++)
		xs[i] = centre + noise(st);
}

Test(bench_stats, percentiles_are_numpys_default)
{
	const double four[] = { 1, 2, 3, 4 }, five[] = { 15, 20, 35, 40, 50 }, one[] = { 7.5 };

	/* numpy.percentile([1, 2, 3, 4], q) */
	cr_assert_float_eq(stats_percentile_sorted(four, 4, 0), 1, EPS);
	cr_assert_float_eq(stats_percentile_sorted(four, 4, 25), 1.75, EPS);
	cr_assert_float_eq(stats_percentile_sorted(four, 4, 50), 2.5, EPS);
	cr_assert_float_eq(stats_percentile_sorted(four, 4, 90), 3.7, EPS);
	cr_assert_float_eq(stats_percentile_sorted(four, 4, 99), 3.97, EPS);
	cr_assert_float_eq(stats_percentile_sorted(four, 4, 100), 4, EPS);
	/* numpy.percentile([15, 20, 35, 40, 50], [40, 50]) */
	cr_assert_float_eq(stats_percentile_sorted(five, 5, 40), 29, EPS);
	cr_assert_float_eq(stats_percentile_sorted(five, 5, 50), 35, EPS);
	/* Out of range clamps; one value is every percentile. */
	cr_assert_float_eq(stats_percentile_sorted(four, 4, -5), 1, EPS);
	cr_assert_float_eq(stats_percentile_sorted(four, 4, 250), 4, EPS);
	cr_assert_float_eq(stats_percentile_sorted(one, 1, 0), 7.5, EPS);
	cr_assert_float_eq(stats_percentile_sorted(one, 1, 50), 7.5, EPS);
	cr_assert_float_eq(stats_percentile_sorted(one, 1, 99), 7.5, EPS);
}

Test(bench_stats, summarize_sorts_a_copy)
{
	double xs[] = { 4, 1, 10, 3, 2 };
	const double before[] = { 4, 1, 10, 3, 2 };
	struct stats_summary s;

	cr_assert_eq(stats_summarize(xs, 5, &s), 0);
	cr_assert_eq(memcmp(xs, before, sizeof(xs)), 0, "the input is not modified");
	cr_assert_eq(s.n, 5);
	cr_assert_float_eq(s.min, 1, EPS);
	cr_assert_float_eq(s.max, 10, EPS);
	cr_assert_float_eq(s.mean, 4, EPS);
	/* numpy.percentile([1, 2, 3, 4, 10], [50, 90, 95, 99]) */
	cr_assert_float_eq(s.p50, 3, EPS);
	cr_assert_float_eq(s.p90, 7.6, EPS);
	cr_assert_float_eq(s.p95, 8.8, EPS);
	cr_assert_float_eq(s.p99, 9.76, EPS);

	cr_assert_eq(stats_summarize((double[]){ 42 }, 1, &s), 0);
	cr_assert(s.min == 42 && s.p50 == 42 && s.p99 == 42 && s.max == 42 && s.mean == 42);
}

Test(bench_stats, summarize_refuses_nothing_and_non_finite)
{
	struct stats_summary s;

	cr_assert_eq(stats_summarize((double[]){ 1 }, 0, &s), -EINVAL);
	cr_assert_eq(stats_summarize((double[]){ 1, NAN, 3 }, 3, &s), -EINVAL);
	cr_assert_eq(stats_summarize((double[]){ 1, INFINITY }, 2, &s), -EINVAL);
	cr_assert_eq(stats_summarize((double[]){ -INFINITY, 1 }, 2, &s), -EINVAL);
}

Test(bench_stats, identical_samples_are_not_different)
{
	uint64_t st = 1;
	double a[20];
	struct stats_ab r;

	fill(a, 20, 100, &st);
	cr_assert_eq(stats_permutation_test(a, 20, a, 20, 9999, 7, &r), 0);
	cr_assert_float_eq(r.diff, 0, EPS);
	cr_assert_float_eq(r.rel, 0, EPS);
	cr_assert_float_eq(r.mean_a, r.mean_b, EPS);
	cr_assert_float_eq(r.median_a, r.median_b, EPS);
	cr_assert_gt(r.p_value, 0.5, "p = %g", r.p_value);
	cr_assert(!r.exact);
	cr_assert_eq(r.resamples, 9999);
}

Test(bench_stats, a_shift_of_twenty_percent_is_found)
{
	uint64_t st = 2;
	double a[20], b[20];
	struct stats_ab r, back;

	fill(a, 20, 100, &st);
	fill(b, 20, 120, &st);
	cr_assert_eq(stats_permutation_test(a, 20, b, 20, 9999, 7, &r), 0);
	cr_assert_lt(r.p_value, 0.001, "p = %g", r.p_value);
	/* No relabeling is as extreme: the smallest p 9999 draws can give. */
	cr_assert_float_eq(r.p_value, 1.0 / 10000, EPS);
	cr_assert_float_eq(r.diff, 20, 1);
	cr_assert_float_eq(r.rel, 0.2, 0.01);
	cr_assert_float_eq(r.median_a, 100, 1);
	cr_assert_float_eq(r.median_b, 120, 1);
	cr_assert_float_eq(r.diff, r.mean_b - r.mean_a, EPS);

	cr_assert_eq(stats_permutation_test(b, 20, a, 20, 9999, 7, &back), 0);
	cr_assert_float_eq(back.diff, -r.diff, EPS);
	cr_assert_lt(back.p_value, 0.001);
}

Test(bench_stats, two_draws_of_one_distribution_are_not_different)
{
	uint64_t st = 3;
	double a[20], b[20];
	struct stats_ab r;

	fill(a, 20, 100, &st);
	fill(b, 20, 100, &st);
	cr_assert_eq(stats_permutation_test(a, 20, b, 20, 9999, 11, &r), 0);
	cr_assert_gt(r.p_value, 0.01, "p = %g", r.p_value);
	cr_assert_float_eq(r.diff, 0, 0.6);
}

Test(bench_stats, exact_when_the_splits_are_few)
{
	struct stats_ab r;

	/* C(4, 2) = 6 splits; |diff| = 2 for {1,2 | 3,4} and {3,4 | 1,2} alone. */
	cr_assert_eq(stats_permutation_test((double[]){ 1, 2 }, 2, (double[]){ 3, 4 }, 2, 9999, 0,
					    &r), 0);
	cr_assert(r.exact);
	cr_assert_eq(r.resamples, 6);
	cr_assert_eq(r.p_value, 2.0 / 6.0);
	cr_assert_float_eq(r.diff, 2, EPS);
	cr_assert_float_eq(r.rel, 2 / 1.5, EPS);
	cr_assert_float_eq(r.median_a, 1.5, EPS);
	cr_assert_float_eq(r.median_b, 3.5, EPS);

	/* C(8, 3) = 56, from either side (the smaller group is a, then b). */
	const double lo[] = { 1, 2, 3 }, hi[] = { 4, 5, 6, 7, 8 };

	cr_assert_eq(stats_permutation_test(lo, 3, hi, 5, 56, 0, &r), 0);
	cr_assert(r.exact);
	cr_assert_eq(r.resamples, 56);
	cr_assert_eq(r.p_value, 2.0 / 56.0);
	cr_assert_float_eq(r.diff, 4, EPS);
	cr_assert_eq(stats_permutation_test(hi, 5, lo, 3, 56, 0, &r), 0);
	cr_assert(r.exact);
	cr_assert_eq(r.p_value, 2.0 / 56.0);
	cr_assert_float_eq(r.diff, -4, EPS);
	cr_assert_float_eq(r.rel, -4.0 / 6, EPS);

	/* One split fewer allowed than there are: drawn, not enumerated. */
	cr_assert_eq(stats_permutation_test(lo, 3, hi, 5, 55, 0, &r), 0);
	cr_assert(!r.exact);
	cr_assert_eq(r.resamples, 55);
}

/* Every split of a ++ b as a bitmask with na bits set: the exact p, counted independently. */
static double brute_force_p(const double *a, size_t na, const double *b, size_t nb)
{
	double x[16], total = 0, obs = 0;
	size_t n = na + nb, extreme = 0, splits = 0;

	memcpy(x, a, na * sizeof(*x));
	memcpy(x + na, b, nb * sizeof(*x));
	for (size_t i = 0; i < n; i++)
		total += x[i];
	for (size_t i = 0; i < na; i++)
		obs += x[i];
	obs = fabs((total - obs) / (double)nb - obs / (double)na);
	for (unsigned m = 0; m < 1u << n; m++) {
		double sa = 0;

		if ((size_t)__builtin_popcount(m) != na)
			continue;
		for (size_t i = 0; i < n; i++)
			if (m & 1u << i)
				sa += x[i];
		splits++;
		extreme += fabs((total - sa) / (double)nb - sa / (double)na) >= obs - 1e-9;
	}
	return (double)extreme / (double)splits;
}

Test(bench_stats, exact_p_is_the_brute_force_count)
{
	uint64_t st = 4;

	for (int round = 0; round < 20; round++) {
		size_t na = 2 + round % 5, nb = 2 + round % 7;
		double a[8], b[8];
		struct stats_ab r;

		fill(a, na, 10, &st);
		fill(b, nb, 10 + round % 3, &st);
		cr_assert_eq(stats_permutation_test(a, na, b, nb, 1000000, 0, &r), 0);
		cr_assert(r.exact);
		cr_assert_float_eq(r.p_value, brute_force_p(a, na, b, nb), EPS,
				   "na %zu nb %zu", na, nb);
	}
}

Test(bench_stats, drawn_p_is_near_the_exact_one_and_reproducible)
{
	uint64_t st = 5;
	double a[6], b[6];
	struct stats_ab exact, drawn, again, other;

	fill(a, 6, 10, &st);
	fill(b, 6, 10.4, &st);
	/* C(12, 6) = 924 */
	cr_assert_eq(stats_permutation_test(a, 6, b, 6, 924, 1, &exact), 0);
	cr_assert(exact.exact);
	cr_assert_eq(stats_permutation_test(a, 6, b, 6, 900, 1, &drawn), 0);
	cr_assert(!drawn.exact);
	cr_assert_float_eq(drawn.p_value, exact.p_value, 0.05, "drawn %g exact %g", drawn.p_value,
			   exact.p_value);
	cr_assert_eq(stats_permutation_test(a, 6, b, 6, 900, 1, &again), 0);
	cr_assert_eq(again.p_value, drawn.p_value, "the same seed, the same p");
	cr_assert_eq(stats_permutation_test(a, 6, b, 6, 900, 2, &other), 0);
	cr_assert_float_eq(other.p_value, exact.p_value, 0.05);
}

Test(bench_stats, permutation_test_refuses_bad_inputs)
{
	const double two[] = { 1, 2 }, three[] = { 1, 2, 3 }, nan3[] = { 1, NAN, 3 };
	const double huge[] = { 1e308, 1e308 };
	struct stats_ab r;

	cr_assert_eq(stats_permutation_test(two, 1, three, 3, 99, 0, &r), -EINVAL);
	cr_assert_eq(stats_permutation_test(three, 3, two, 1, 99, 0, &r), -EINVAL);
	cr_assert_eq(stats_permutation_test(three, 3, two, 2, 0, 0, &r), -EINVAL);
	cr_assert_eq(stats_permutation_test(three, 3, two, 2, STATS_MAX_RESAMPLES + 1, 0, &r),
		     -EINVAL);
	cr_assert_eq(stats_permutation_test(nan3, 3, two, 2, 99, 0, &r), -EINVAL);
	cr_assert_eq(stats_permutation_test(two, 2, (double[]){ 1, INFINITY }, 2, 99, 0, &r),
		     -EINVAL);
	cr_assert_eq(stats_permutation_test(huge, 2, huge, 2, 99, 0, &r), -EINVAL,
		     "sums that overflow");
	cr_assert_eq(stats_permutation_test(NULL, 2, two, 2, 99, 0, &r), -EINVAL);
	/* Refused by the bound before anything is read. */
	cr_assert_eq(stats_permutation_test(two, STATS_MAX_SAMPLES, two, 2, 99, 0, &r), -EINVAL);
	cr_assert_eq(stats_permutation_test(two, SIZE_MAX, two, 2, 99, 0, &r), -EINVAL);
}

Test(bench_stats, splitmix64_is_the_reference_sequence)
{
	/* Vigna's splitmix64.c from state 0: its first three outputs. */
	uint64_t st = 0;

	cr_assert_eq(stats_splitmix64(&st), 0xe220a8397b1dcdafull);
	cr_assert_eq(stats_splitmix64(&st), 0x6e789e6aa1b965f4ull);
	cr_assert_eq(stats_splitmix64(&st), 0x06c45d188009454full);
}
