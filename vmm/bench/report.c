/* report.c - mayfly bench's table, summary lines, SVG and A/B verdicts, from its samples. */
#include "bench/report.h"
#include "bench/record.h"
#include "bench/stats.h"
#include "bench/svg.h"
#include "lib/atomic_file.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What a row of the report is: a point (ms since exec) or a cost. */
enum { ROW_CPU_USER = BENCH_POINTS, ROW_CPU_SYS, ROW_MINFLT, ROW_MAJFLT, ROW_VM_EXITS, ROWS };

static const char *row_name(int row)
{
	static const char *const costs[] = { "cpu_user_ms", "cpu_sys_ms", "minflt", "majflt",
					     "vm_exits" };

	return row < BENCH_POINTS ? bench_point_name(row) : costs[row - BENCH_POINTS];
}

static const char *row_unit(int row)
{
	return row < ROW_MINFLT ? "ms" : row == ROW_VM_EXITS ? "exits" : "faults";
}

/* The row's values over the runs that have it, into xs; how many. */
static size_t column(const struct bench_sample *s, size_t n, int row, double *xs)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		double v = row < BENCH_POINTS ? s[i].at[row] :
			   row == ROW_CPU_USER ? s[i].user_ms :
			   row == ROW_CPU_SYS  ? s[i].sys_ms :
			   row == ROW_MINFLT   ? (double)s[i].minflt :
			   row == ROW_MAJFLT   ? (double)s[i].majflt : bench_exits_total(&s[i]);

		if (v >= 0)
			xs[k++] = v;
	}
	return k;
}

int bench_report(FILE *out, FILE *json, const struct bench_sample *s, size_t n)
{
	double *xs = malloc((n ? n : 1) * sizeof(*xs));
	struct stats_summary sum;
	int rc = 0;

	if (!xs)
		return -ENOMEM;
	fprintf(out, "%-16s %5s %9s %9s %9s %9s %9s %9s\n", "ms since exec", "runs", "p50", "p90",
		"p95", "p99", "min", "max");
	for (int row = 0; row < ROWS && !rc; row++) {
		size_t k = column(s, n, row, xs);

		if (!k)
			continue;
		rc = stats_summarize(xs, k, &sum);
		if (rc)
			break;
		if (row == ROW_CPU_USER)
			fprintf(out, "%-16s\n", "cost per run");
		fprintf(out, "%-16s %5zu %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f\n", row_name(row), k,
			sum.p50, sum.p90, sum.p95, sum.p99, sum.min, sum.max);
		if (json)
			rc = bench_write_summary(json, row_name(row), row_unit(row), &sum);
	}
	free(xs);
	return rc;
}

/* Each step's median (a point reached, from the point before it that
 * the same run reached; "main" from exec), in point order: the stacked bar. */
static size_t median_steps(const struct bench_sample *s, size_t n, struct svg_phase *steps,
			   double *xs)
{
	size_t nsteps = 0;

	for (int p = 0; p < BENCH_POINTS; p++) {
		size_t k = 0;

		for (size_t i = 0; i < n; i++) {
			double from = 0;

			if (s[i].at[p] < 0)
				continue;
			for (int q = p - 1; q >= 0; q--)
				if (s[i].at[q] >= 0) {
					from = s[i].at[q];
					break;
				}
			/* Phases of one run can overlap (the guest's init is
			 * timed by its own clock): a step is never negative. */
			xs[k++] = s[i].at[p] > from ? s[i].at[p] - from : 0;
		}
		if (k) {
			struct stats_summary sum;

			if (stats_summarize(xs, k, &sum))
				return 0;
			steps[nsteps++] = (struct svg_phase){ bench_point_name(p), sum.p50 };
		}
	}
	return nsteps;
}

struct plot_job {
	const struct svg_plot *plot;
	int rc;
};

static int fill_svg(int fd, void *opaque, const char **why)
{
	struct plot_job *job = opaque;
	int dupfd = dup(fd);
	FILE *f = dupfd >= 0 ? fdopen(dupfd, "w") : NULL;

	if (!f) {
		if (dupfd >= 0)
			close(dupfd);
		*why = "cannot write the SVG";
		return -errno;
	}
	job->rc = svg_write(f, job->plot);
	if (fclose(f) && !job->rc)
		job->rc = -EIO;
	*why = job->rc == -EINVAL ? "nothing to plot" : "cannot write the SVG";
	return job->rc;
}

int bench_plot(const char *path, const char *title, const char *const names[],
	       const struct bench_sample *const s[], const size_t n[], size_t nsets, char *err,
	       size_t errlen)
{
	struct svg_series series[2];
	struct svg_phase steps[BENCH_POINTS];
	struct plot_job job = { 0 };
	double *totals[2] = { NULL, NULL }, *xs = NULL;
	const char *why = "";
	size_t nsteps = 0;
	int rc = -ENOMEM;

	if (nsets < 1 || nsets > 2 || !n[0])
		return snprintf(err, errlen, "nothing to plot"), -1;
	xs = malloc(n[0] * sizeof(*xs));
	for (size_t i = 0; i < nsets; i++) {
		totals[i] = malloc((n[i] ? n[i] : 1) * sizeof(double));
		if (!totals[i])
			goto out;
		series[i] = (struct svg_series){ names[i], totals[i],
						 column(s[i], n[i], BENCH_EXIT, totals[i]) };
	}
	if (!xs)
		goto out;
	nsteps = median_steps(s[0], n[0], steps, xs);
	job.plot = &(struct svg_plot){ title, series, nsets, steps, nsteps };
	rc = atomic_file_fill(path, fill_svg, &job, &why);
out:
	if (rc)
		snprintf(err, errlen, "--svg %s: %s%s%s", path, rc == -ENOMEM ? "out of memory" : why,
			 rc == -ENOMEM ? "" : ": ", rc == -ENOMEM ? "" : strerror(-rc));
	free(xs);
	free(totals[0]);
	free(totals[1]);
	return rc ? -1 : 0;
}

int bench_compare(FILE *out, const struct bench_sample *a, size_t na,
		  const struct bench_sample *b, size_t nb)
{
	double *xa = malloc((na ? na : 1) * sizeof(double)), *xb = malloc((nb ? nb : 1) * sizeof(double));
	struct stats_ab ab[ROWS];
	bool have[ROWS] = { false };
	int compared = 0, differ = 0;

	if (!xa || !xb) {
		free(xa);
		free(xb);
		return -ENOMEM;
	}
	for (int row = 0; row < ROWS; row++) {
		size_t ka = column(a, na, row, xa), kb = column(b, nb, row, xb);

		/* "mayfly" in ASCII: the same files give the same verdicts. */
		if (ka >= 2 && kb >= 2 &&
		    !stats_permutation_test(xa, ka, xb, kb, BENCH_RESAMPLES, 0x6d6179666c79ULL, &ab[row])) {
			have[row] = true;
			compared++;
		}
	}
	free(xa);
	free(xb);
	fprintf(out, "%-16s %9s %9s %8s %8s  %s (alpha %.2g over %d)\n", "ms since exec", "A p50",
		"B p50", "change", "p", "verdict", BENCH_ALPHA, compared);
	for (int row = 0; row < ROWS; row++) {
		const struct stats_ab *r = &ab[row];
		bool sig;

		if (!have[row])
			continue;
		sig = r->p_value < BENCH_ALPHA / compared;
		differ += sig;
		fprintf(out, "%-16s %9.2f %9.2f %+7.1f%% %8.4f  ", row_name(row), r->median_a,
			r->median_b, r->rel * 100, r->p_value);
		if (!sig)
			fprintf(out, "no significant difference\n");
		else
			fprintf(out, "B %s by %.1f%% (mean %.2f -> %.2f)\n",
				row < ROW_CPU_USER ? (r->diff > 0 ? "slower" : "faster") :
				(r->diff > 0 ? "more" : "less"), fabs(r->rel) * 100, r->mean_a,
				r->mean_b);
	}
	return differ;
}
