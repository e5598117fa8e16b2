/* svg.c - one benchmark's picture as SVG 1.1: CDFs of the totals, a stacked bar of the phases. */
#include "bench/svg.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench/stats.h"

/* The page: the CDF panel (plot area, legend on its right), then the bar and its legend. */
enum {
	WIDTH = 900, MIN_HEIGHT = 560,
	PX0 = 70, PX1 = 660, PY0 = 50, PY1 = 320,	/* plot area: y of fraction 1, of 0 */
	LX = 680,					/* series legend */
	BX0 = 70, BW = 760, BY = 400, BH = 30,		/* the phase bar */
	LEG_Y0 = 456, LEG_COLS = 4, LEG_COL_W = 205, LEG_ROW_H = 16,
};

/* Okabe and Ito's palette, told apart by colour-blind readers too. */
static const char *const series_colours[SVG_MAX_SERIES] = {
	"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#f0e442", "#000000",
};
/* Tableau 10: neighbours on the bar always differ. */
static const char *const phase_colours[] = {
	"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
	"#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
};
#define NPHASE_COLOURS (sizeof(phase_colours) / sizeof(phase_colours[0]))

/* The length of the UTF-8 sequence at p and its code point in *cp, or 0 when it is not
 * valid (truncated, overlong, a surrogate, past U+10FFFF). Here rather than mbrtowc, which
 * follows the locale, and mayfly stays in "C". */
static int utf8_char(const unsigned char *p, uint32_t *cp)
{
	static const uint32_t least[] = { 0, 0, 0x80, 0x800, 0x10000 };
	int len = p[0] < 0x80 ? 1 : p[0] >= 0xc2 && p[0] <= 0xdf ? 2 :
		  p[0] >= 0xe0 && p[0] <= 0xef ? 3 : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : 0;
	uint32_t c = len == 1 ? p[0] : p[0] & (0x7f >> len);

	for (int i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (p[i] & 0x3f);
	}
	if (len == 0 || c < least[len] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return len;
}

/* Valid UTF-8 without a control character (C0, DEL, C1) or what XML refuses (U+FFFE/F). */
static bool text_ok(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p) {
		uint32_t c;
		int len = utf8_char(p, &c);

		if (!len || c < 0x20 || (c >= 0x7f && c <= 0x9f) || c == 0xfffe || c == 0xffff)
			return false;
		p += len;
	}
	return true;
}

/* NaN fails both comparisons. */
static bool ms_ok(double v)
{
	return v >= 0 && v <= SVG_MAX_MS;
}

static int check_plot(const struct svg_plot *p)
{
	size_t points = 0;

	if (!p || !p->series || p->nseries == 0 || p->nseries > SVG_MAX_SERIES ||
	    p->nphases > SVG_MAX_PHASES || (p->nphases && !p->phases))
		return -EINVAL;
	if (p->title && !text_ok(p->title))
		return -EINVAL;
	for (size_t i = 0; i < p->nseries; i++) {
		const struct svg_series *s = &p->series[i];

		if (!s->name || !text_ok(s->name) || !s->ms || s->n == 0 ||
		    s->n > SVG_MAX_POINTS - points)
			return -EINVAL;
		points += s->n;
		for (size_t k = 0; k < s->n; k++)
			if (!ms_ok(s->ms[k]))
				return -EINVAL;
	}
	for (size_t i = 0; i < p->nphases; i++)
		if (!p->phases[i].name || !text_ok(p->phases[i].name) || !ms_ok(p->phases[i].ms))
			return -EINVAL;
	return 0;
}

static void put_text(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&apos;", f); break;
		default: putc(*s, f);
		}
	}
}

/* The x axis: ticks at i * step for i in [first, last], step 1, 2 or 5 x 10^k. */
struct axis {
	long long first, last;
	double step;
	int decimals;	/* to print a tick exactly */
};

/* floor and ceil of v >= 0 (no libm is linked). */
static long long floor_pos(double v)
{
	return (long long)v;
}

static long long ceil_pos(double v)
{
	long long i = (long long)v;

	return (double)i < v ? i + 1 : i;
}

/* The smallest nice step that covers [lo, hi] in at most 7 intervals, then at least 4
 * (5 to 8 labels): one more below while that stays >= 0, else above. A single value is
 * drawn from 0. lo >= 0. */
static void axis_nice(struct axis *ax, double lo, double hi)
{
	static const double mult[] = { 1, 2, 5 };
	double p = 1, span;
	int e = 0;

	if (hi <= lo) {
		lo = 0;
		hi = hi > 0 ? hi : 1;
	}
	span = hi - lo;
	/* The decade below span / 8, where the search starts: at least 8 intervals. */
	while (p > span / 8) {
		p /= 10;
		e--;
	}
	while (p * 10 <= span / 8) {
		p *= 10;
		e++;
	}
	for (int i = 0;; i++) {
		ax->step = mult[i % 3] * p;
		ax->first = floor_pos(lo / ax->step);
		ax->last = ceil_pos(hi / ax->step);
		ax->decimals = e < 0 ? -e : 0;
		if (ax->last - ax->first <= 7)
			break;
		if (i % 3 == 2) {
			p *= 10;
			e++;
		}
	}
	while (ax->last - ax->first < 4) {
		if (ax->first > 0)
			ax->first--;
		else
			ax->last++;
	}
}

static double x_of(const struct axis *ax, double ms)
{
	double lo = (double)ax->first * ax->step, hi = (double)ax->last * ax->step;

	return PX0 + (ms - lo) / (hi - lo) * (PX1 - PX0);
}

static double y_of(double fraction)
{
	return PY1 - fraction * (PY1 - PY0);
}

/* To the thousandth, as printed: segments placed at rounded edges sum to the bar exactly. */
static double round3(double v)
{
	return (double)(long long)(v * 1000 + 0.5) / 1000;
}

static void put_head(FILE *f, const char *title, int height)
{
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\""
		" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\""
		" font-family=\"sans-serif\" font-size=\"12\">\n",
		WIDTH, height, WIDTH, height);
	if (title) {
		fputs("<title>", f);
		put_text(f, title);
		fputs("</title>\n", f);
	}
	fputs("<rect class=\"background\" width=\"100%\" height=\"100%\" fill=\"white\"/>\n", f);
	if (title) {
		fputs("<text class=\"title\" x=\"20\" y=\"30\" font-size=\"16\">", f);
		put_text(f, title);
		fputs("</text>\n", f);
	}
}

static void put_axes(FILE *f, const struct axis *ax)
{
	for (long long i = ax->first; i <= ax->last; i++) {
		double v = (double)i * ax->step, x = x_of(ax, v);

		fprintf(f, "<line class=\"xgrid\" data-ms=\"%.*f\" x1=\"%.3f\" y1=\"%d\""
			" x2=\"%.3f\" y2=\"%d\" stroke=\"#dddddd\"/>\n",
			ax->decimals, v, x, PY0, x, PY1);
		fprintf(f, "<text x=\"%.3f\" y=\"%d\" text-anchor=\"middle\">%.*f</text>\n",
			x, PY1 + 18, ax->decimals, v);
	}
	for (int i = 0; i <= 4; i++) {
		double fraction = i / 4.0, y = y_of(fraction);

		fprintf(f, "<line class=\"ygrid\" data-fraction=\"%g\" x1=\"%d\" y1=\"%.3f\""
			" x2=\"%d\" y2=\"%.3f\" stroke=\"#dddddd\"/>\n", fraction, PX0, y, PX1, y);
		fprintf(f, "<text x=\"%d\" y=\"%.3f\" text-anchor=\"end\">%g</text>\n",
			PX0 - 6, y + 4, fraction);
	}
	fprintf(f, "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\""
		" stroke=\"black\"/>\n<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\""
		" stroke=\"black\"/>\n",
		PX0, PY1, PX1, PY1, PX0, PY0, PX0, PY1);
	fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">ms</text>\n"
		"<text x=\"22\" y=\"%d\" text-anchor=\"middle\" transform=\"rotate(-90 22 %d)\">"
		"fraction of runs</text>\n",
		(PX0 + PX1) / 2, PY1 + 38, (PY0 + PY1) / 2, (PY0 + PY1) / 2);
}

/* The empirical CDF of sorted[0..n) as a step line, each sample a point on it. */
static void put_series(FILE *f, const struct axis *ax, size_t idx, const double *sorted, size_t n)
{
	const char *colour = series_colours[idx];

	fprintf(f, "<path class=\"cdf\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\""
		" d=\"M%d %.3f",
		colour, PX0, y_of(0));
	for (size_t i = 0; i < n; i++)
		fprintf(f, " H%.3f V%.3f", x_of(ax, sorted[i]), y_of((double)(i + 1) / (double)n));
	fprintf(f, " H%d\"/>\n", PX1);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "<circle class=\"pt\" data-series=\"%zu\" data-ms=\"%.3f\" cx=\"%.3f\""
			" cy=\"%.3f\" r=\"2\" fill=\"%s\"/>\n", idx, sorted[i], x_of(ax, sorted[i]),
			y_of((double)(i + 1) / (double)n), colour);
}

static void put_series_legend(FILE *f, size_t idx, const char *name, const double *sorted,
			      size_t n)
{
	int y = PY0 + 8 + (int)idx * 36;

	fprintf(f, "<line class=\"legend\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\""
		" stroke-width=\"3\"/>\n", LX, y, LX + 18, y, series_colours[idx]);
	fprintf(f, "<text class=\"legend\" x=\"%d\" y=\"%d\">", LX + 24, y + 4);
	put_text(f, name);
	fprintf(f, "</text>\n<text class=\"legend\" x=\"%d\" y=\"%d\" font-size=\"11\">"
		"p50 %.3f ms, p99 %.3f ms</text>\n", LX + 24, y + 19,
		stats_percentile_sorted(sorted, n, 50), stats_percentile_sorted(sorted, n, 99));
}

static void put_phase_legend(FILE *f, size_t i, const struct svg_phase *ph)
{
	int x = BX0 + (int)(i % LEG_COLS) * LEG_COL_W, y = LEG_Y0 + (int)(i / LEG_COLS) * LEG_ROW_H;

	fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"10\" height=\"10\" fill=\"%s\"/>\n",
		x, y - 9, phase_colours[i % NPHASE_COLOURS]);
	fprintf(f, "<text class=\"legend\" x=\"%d\" y=\"%d\" font-size=\"11\">", x + 14, y);
	put_text(f, ph->name);
	fprintf(f, " %.3f ms</text>\n", ph->ms);
}

/* One bar, each phase a segment as wide as its share of the sum. */
static void put_phases(FILE *f, const struct svg_plot *p)
{
	double total = 0, cum = 0, x = BX0;

	if (!p->nphases)
		return;
	for (size_t i = 0; i < p->nphases; i++)
		total += p->phases[i].ms;
	fprintf(f, "<text x=\"%d\" y=\"%d\">median phases of ", BX0, BY - 10);
	put_text(f, p->series[0].name);
	fprintf(f, " (sum %.3f ms)</text>\n", total);
	for (size_t i = 0; i < p->nphases; i++) {
		const struct svg_phase *ph = &p->phases[i];
		double next;

		cum += ph->ms;
		next = total > 0 ? round3(BX0 + BW * cum / total) : BX0;
		fprintf(f, "<rect class=\"phase\" data-ms=\"%.3f\" x=\"%.3f\" y=\"%d\""
			" width=\"%.3f\" height=\"%d\" fill=\"%s\"><title>",
			ph->ms, x, BY, next - x, BH, phase_colours[i % NPHASE_COLOURS]);
		put_text(f, ph->name);
		fputs("</title></rect>\n", f);
		x = next;
	}
	fprintf(f, "<rect class=\"bar\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\""
		" stroke=\"#999999\"/>\n", BX0, BY, BW, BH);
	for (size_t i = 0; i < p->nphases; i++)
		put_phase_legend(f, i, &p->phases[i]);
}

static double *sorted_copy(const double *xs, size_t n)
{
	double *s = reallocarray(NULL, n, sizeof(*s));

	if (!s)
		return NULL;
	memcpy(s, xs, n * sizeof(*s));
	stats_sort(s, n);
	return s;
}

int svg_write(FILE *out, const struct svg_plot *p)
{
	double *sorted[SVG_MAX_SERIES] = { 0 }, lo, hi;
	size_t rows;
	struct axis ax;
	int height, err = check_plot(p);

	if (err)
		return err;
	for (size_t i = 0; i < p->nseries; i++) {
		sorted[i] = sorted_copy(p->series[i].ms, p->series[i].n);
		if (!sorted[i]) {
			err = -ENOMEM;
			goto out_sorted;
		}
	}
	lo = sorted[0][0];
	hi = sorted[0][p->series[0].n - 1];
	for (size_t i = 1; i < p->nseries; i++) {
		lo = sorted[i][0] < lo ? sorted[i][0] : lo;
		hi = sorted[i][p->series[i].n - 1] > hi ? sorted[i][p->series[i].n - 1] : hi;
	}
	axis_nice(&ax, lo, hi);

	rows = (p->nphases + LEG_COLS - 1) / LEG_COLS;
	height = LEG_Y0 + (int)rows * LEG_ROW_H + 14;
	put_head(out, p->title, height > MIN_HEIGHT ? height : MIN_HEIGHT);
	put_axes(out, &ax);
	for (size_t i = 0; i < p->nseries; i++) {
		put_series(out, &ax, i, sorted[i], p->series[i].n);
		put_series_legend(out, i, p->series[i].name, sorted[i], p->series[i].n);
	}
	put_phases(out, p);
	fputs("</svg>\n", out);
	if (fflush(out) != 0 || ferror(out))
		err = -EIO;
out_sorted:
	for (size_t i = 0; i < p->nseries; i++)
		free(sorted[i]);
	return err;
}
