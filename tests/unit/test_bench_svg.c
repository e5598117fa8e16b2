/* test_bench_svg.c - the bench picture read back by expat: each point a sample, the bar the phases, all text escaped. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_EXPAT
#include <expat.h>
#endif

#include "bench/stats.h"
#include "bench/svg.h"

#define SVG_NS "http://www.w3.org/2000/svg|"
#define MAX_PTS 256
#define MAX_TICKS 16

/* What the checks need of a parsed picture. */
struct doc {
	char root[64];
	size_t npt, nphase, nxgrid;
	double pt_ms[MAX_PTS], pt_cx[MAX_PTS], pt_cy[MAX_PTS];
	int pt_series[MAX_PTS];
	double phase_ms[SVG_MAX_PHASES], phase_x[SVG_MAX_PHASES], phase_w[SVG_MAX_PHASES];
	double bar_x, bar_w;
	double xgrid_ms[MAX_TICKS], xgrid_x[MAX_TICKS];
	double y_zero, y_one;	/* the y of fraction 0, of 1 */
	char title[256];	/* the text of <text class="title"> */
	char legend[1024];	/* the texts of the legends, joined by '\n' */
	char *text;		/* where character data goes now, or NULL */
	size_t text_size;
};

static uint64_t rng = 42;

static double uniform(void)
{
	return (double)(stats_splitmix64(&rng) >> 11) * 0x1p-53;
}

static int render(const struct svg_plot *p, char **buf, size_t *len)
{
	FILE *f = open_memstream(buf, len);
	int rc;

	cr_assert_not_null(f);
	rc = svg_write(f, p);
	cr_assert_eq(fclose(f), 0);
	return rc;
}

#ifdef HAVE_EXPAT
static const char *attr(const char **atts, const char *name)
{
	for (; *atts; atts += 2)
		if (!strcmp(atts[0], name))
			return atts[1];
	return NULL;
}

static double num(const char **atts, const char *name)
{
	const char *v = attr(atts, name);
	char *end;
	double d;

	cr_assert_not_null(v, "attribute %s", name);
	d = strtod(v, &end);
	cr_assert(end != v && !*end, "%s=\"%s\" is a number", name, v);
	return d;
}

static void on_start(void *data, const char *name, const char **atts)
{
	struct doc *d = data;
	const char *cls = attr(atts, "class");

	if (!d->root[0])
		snprintf(d->root, sizeof(d->root), "%s", name);
	if (!strcmp(name, SVG_NS "circle") && cls && !strcmp(cls, "pt")) {
		cr_assert_lt(d->npt, MAX_PTS);
		d->pt_ms[d->npt] = num(atts, "data-ms");
		d->pt_cx[d->npt] = num(atts, "cx");
		d->pt_cy[d->npt] = num(atts, "cy");
		d->pt_series[d->npt++] = (int)num(atts, "data-series");
	} else if (!strcmp(name, SVG_NS "rect") && cls && !strcmp(cls, "phase")) {
		cr_assert_lt(d->nphase, SVG_MAX_PHASES);
		d->phase_ms[d->nphase] = num(atts, "data-ms");
		d->phase_x[d->nphase] = num(atts, "x");
		d->phase_w[d->nphase++] = num(atts, "width");
	} else if (!strcmp(name, SVG_NS "rect") && cls && !strcmp(cls, "bar")) {
		d->bar_x = num(atts, "x");
		d->bar_w = num(atts, "width");
	} else if (!strcmp(name, SVG_NS "line") && cls && !strcmp(cls, "xgrid")) {
		cr_assert_lt(d->nxgrid, MAX_TICKS);
		d->xgrid_ms[d->nxgrid] = num(atts, "data-ms");
		d->xgrid_x[d->nxgrid++] = num(atts, "x1");
	} else if (!strcmp(name, SVG_NS "line") && cls && !strcmp(cls, "ygrid")) {
		const char *fraction = attr(atts, "data-fraction");

		cr_assert_not_null(fraction);
		if (!strcmp(fraction, "0"))
			d->y_zero = num(atts, "y1");
		if (!strcmp(fraction, "1"))
			d->y_one = num(atts, "y1");
	} else if (!strcmp(name, SVG_NS "text") && cls && !strcmp(cls, "title")) {
		d->text = d->title;
		d->text_size = sizeof(d->title);
	} else if (!strcmp(name, SVG_NS "text") && cls && !strcmp(cls, "legend")) {
		d->text = d->legend;
		d->text_size = sizeof(d->legend);
	}
}

static void on_end(void *data, const char *name)
{
	struct doc *d = data;

	if (d->text == d->legend)
		strncat(d->legend, "\n", sizeof(d->legend) - strlen(d->legend) - 1);
	d->text = NULL;
	(void)name;
}

/* Expat hands text over in pieces (an entity is one). */
static void on_text(void *data, const char *s, int len)
{
	struct doc *d = data;
	size_t have;

	if (!d->text)
		return;
	have = strlen(d->text);
	cr_assert_lt(have + (size_t)len, d->text_size);
	memcpy(d->text + have, s, (size_t)len);
	d->text[have + (size_t)len] = '\0';
}
#endif

/* Draw p and parse it into d: a well-formed document or the test fails. */
static void draw(const struct svg_plot *p, struct doc *d)
{
#ifdef HAVE_EXPAT
	XML_Parser x;
	char *buf;
	size_t len;

	cr_assert_eq(render(p, &buf, &len), 0);
	x = XML_ParserCreateNS("UTF-8", '|');
	cr_assert_not_null(x);
	memset(d, 0, sizeof(*d));
	d->y_zero = d->y_one = NAN;
	XML_SetUserData(x, d);
	XML_SetElementHandler(x, on_start, on_end);
	XML_SetCharacterDataHandler(x, on_text);
	cr_assert_eq(XML_Parse(x, buf, (int)len, 1), XML_STATUS_OK, "line %lu: %s",
		     (unsigned long)XML_GetCurrentLineNumber(x),
		     XML_ErrorString(XML_GetErrorCode(x)));
	XML_ParserFree(x);
	free(buf);
	cr_assert_str_eq(d->root, SVG_NS "svg");
#else
	(void)p, (void)d;
	cr_skip_test("built without expat (the arm64 sysroot has none): nothing to parse with");
#endif
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return (a > b) - (a < b);
}

struct pt {
	double ms, cx, cy;
};

/* By value, then by rank: equal values go up the CDF one above the other. */
static int cmp_pt(const void *x, const void *y)
{
	const struct pt *a = x, *b = y;

	if (a->ms != b->ms)
		return (a->ms > b->ms) - (a->ms < b->ms);
	return (a->cy < b->cy) - (a->cy > b->cy);
}

/* Series s's points: as many as samples, the same values as a multiset (printed to the
 * thousandth), cx by the axis scale and growing with ms, cy by the rank (i + 1) / n. */
static void check_series(const struct doc *d, int s, const double *ms, size_t n)
{
	double want[MAX_PTS], lo = d->xgrid_ms[0], hi = d->xgrid_ms[d->nxgrid - 1];
	double x0 = d->xgrid_x[0], x1 = d->xgrid_x[d->nxgrid - 1];
	struct pt got[MAX_PTS];
	size_t k = 0;

	memcpy(want, ms, n * sizeof(*ms));
	qsort(want, n, sizeof(*want), cmp_double);
	for (size_t i = 0; i < d->npt; i++)
		if (d->pt_series[i] == s) {
			cr_assert_lt(k, n, "more points than samples");
			got[k++] = (struct pt){ d->pt_ms[i], d->pt_cx[i], d->pt_cy[i] };
		}
	cr_assert_eq(k, n, "series %d: %zu points, %zu samples", s, k, n);
	qsort(got, n, sizeof(*got), cmp_pt);
	for (size_t i = 0; i < n; i++) {
		double rank = (double)(i + 1) / (double)n;

		cr_assert_float_eq(got[i].ms, want[i], 0.0005 + 1e-9, "sample %zu: %g, %g", i,
				   got[i].ms, want[i]);
		cr_assert_float_eq(got[i].cx, x0 + (want[i] - lo) / (hi - lo) * (x1 - x0), 0.002);
		cr_assert_float_eq(got[i].cy, d->y_zero + rank * (d->y_one - d->y_zero), 0.001);
		if (i)
			cr_assert_geq(got[i].cx, got[i - 1].cx, "cx grows with ms");
	}
	cr_assert_float_eq(got[n - 1].cy, d->y_one, 0.0005, "the largest sample is at fraction 1");
}

Test(bench_svg, every_point_is_a_sample_on_both_cdfs)
{
	double a[20], b[15];
	const struct svg_series series[] = { { "before", a, 20 }, { "after", b, 15 } };
	struct svg_plot p = { .title = "mayfly bench restore: 20 runs", .series = series,
			      .nseries = 2 };
	struct doc d;

	/* Any order: the writer sorts. */
	for (int i = 0; i < 20; i++)
		a[i] = 30 + 10 * uniform();
	for (int i = 0; i < 15; i++)
		b[i] = 25 + 12 * uniform();
	draw(&p, &d);
	cr_assert_eq(d.npt, 35);
	check_series(&d, 0, a, 20);
	check_series(&d, 1, b, 15);
	cr_assert_str_eq(d.title, "mayfly bench restore: 20 runs");
	cr_assert_not_null(strstr(d.legend, "before\n"));
	cr_assert_not_null(strstr(d.legend, "after\n"));
	cr_assert_eq(d.nphase, 0, "no phases, no bar");
}

/* The x ticks: 5 to 8, steps of 1, 2 or 5 x 10^k, covering every sample. */
static void check_ticks(const struct doc *d, double lo, double hi)
{
	double step = d->xgrid_ms[1] - d->xgrid_ms[0], m = step;

	cr_assert(d->nxgrid >= 5 && d->nxgrid <= 8, "%zu ticks for [%g, %g]", d->nxgrid, lo, hi);
	cr_assert_leq(d->xgrid_ms[0], lo);
	cr_assert_geq(d->xgrid_ms[d->nxgrid - 1], hi);
	cr_assert_geq(d->xgrid_ms[0], 0);
	for (size_t i = 1; i < d->nxgrid; i++)
		cr_assert_float_eq(d->xgrid_ms[i] - d->xgrid_ms[i - 1], step, step * 1e-6);
	/* The mantissa of step, which is printed to its last digit: within 1e-6. */
	while (m >= 9.5)
		m /= 10;
	while (m < 0.95)
		m *= 10;
	cr_assert(fabs(m - 1) < 1e-6 || fabs(m - 2) < 1e-6 || fabs(m - 5) < 1e-6,
		  "step %g for [%g, %g]", step, lo, hi);
}

Test(bench_svg, the_ms_axis_has_five_to_eight_nice_ticks)
{
	static const double ranges[][2] = {
		{ 100, 120 }, { 0.5, 1000 }, { 3.3, 3.3 }, { 0.0012, 0.0047 }, { 0, 0 },
		{ 12.3, 12.9 }, { 1, 2 }, { 799, 801 }, { 0, 7 }, { 41, 42 }, { 123456, 987654 },
	};

	for (size_t r = 0; r < sizeof(ranges) / sizeof(ranges[0]); r++) {
		const struct svg_series s = { "x", ranges[r], 2 };
		struct svg_plot p = { .series = &s, .nseries = 1 };
		struct doc d;

		draw(&p, &d);
		check_ticks(&d, ranges[r][0], ranges[r][1]);
		check_series(&d, 0, ranges[r], 2);
	}
}

/* The segments: the phases in order, side by side, as wide as their share, filling the bar. */
static void check_bar(const struct doc *d, const struct svg_phase *ph, size_t n)
{
	double total = 0, sum = 0;

	for (size_t i = 0; i < n; i++)
		total += ph[i].ms;
	cr_assert_eq(d->nphase, n);
	cr_assert_float_eq(d->phase_x[0], d->bar_x, 0.0005);
	for (size_t i = 0; i < n; i++) {
		cr_assert_float_eq(d->phase_ms[i], ph[i].ms, 0.0005 + 1e-9, "phase %zu", i);
		cr_assert_float_eq(d->phase_w[i], d->bar_w * ph[i].ms / total, 0.01, "phase %zu",
				   i);
		if (i)
			cr_assert_float_eq(d->phase_x[i], d->phase_x[i - 1] + d->phase_w[i - 1],
					   0.0005, "phase %zu starts where %zu ends", i, i - 1);
		sum += d->phase_w[i];
	}
	cr_assert_float_eq(sum, d->bar_w, 0.01);
}

Test(bench_svg, the_bar_is_the_phases_in_proportion)
{
	const double total[] = { 20, 21, 19.5 };
	const struct svg_series s = { "restore", total, 3 };
	const struct svg_phase ph[] = {
		{ "jail", 0.4 }, { "memory mapped", 3.125 }, { "vcpu", 0 }, { "first run", 11.2 },
		{ "agent ready", 5.275 },
	};
	struct svg_phase many[SVG_MAX_PHASES];
	char names[SVG_MAX_PHASES][16];
	struct svg_plot p = { .series = &s, .nseries = 1, .phases = ph, .nphases = 5 };
	struct doc d;

	draw(&p, &d);
	check_bar(&d, ph, 5);
	cr_assert_not_null(strstr(d.legend, "memory mapped 3.125 ms\n"));

	/* As many as allowed, in thirds: the rounding of 32 edges does not add up. */
	for (int i = 0; i < SVG_MAX_PHASES; i++) {
		snprintf(names[i], sizeof(names[i]), "phase %d", i);
		many[i] = (struct svg_phase){ names[i], (i % 7 + 1) / 3.0 };
	}
	p.phases = many;
	p.nphases = SVG_MAX_PHASES;
	draw(&p, &d);
	check_bar(&d, many, SVG_MAX_PHASES);
}

Test(bench_svg, markup_in_names_is_text)
{
	const char *title = "a <b> & \"c\" 'd' </svg> &amp; \xc3\xa9\xe2\x86\x92\xf0\x9f\x98\x80";
	const double ms[] = { 1, 2 };
	const struct svg_series s = { "<A&B>", ms, 2 };
	const struct svg_phase ph[] = { { "x\"<y>'", 1 } };
	struct svg_plot p = { .title = title, .series = &s, .nseries = 1, .phases = ph,
			      .nphases = 1 };
	struct doc d;

	draw(&p, &d);
	cr_assert_str_eq(d.title, title);
	cr_assert_not_null(strstr(d.legend, "<A&B>\n"));
	cr_assert_not_null(strstr(d.legend, "x\"<y>' 1.000 ms\n"));
}

static void refused(const struct svg_plot *p, const char *why)
{
	char *buf;
	size_t len;

	cr_assert_eq(render(p, &buf, &len), -EINVAL, "%s", why);
	cr_assert_eq(len, 0, "%s: nothing written", why);
	free(buf);
}

Test(bench_svg, refuses_what_it_cannot_draw)
{
	const double ms[] = { 1, 2 }, nan_ms[] = { 1, NAN }, neg[] = { -1, 2 };
	const double big[] = { 1, SVG_MAX_MS * 2 };
	struct svg_series s = { "a", ms, 2 }, many[SVG_MAX_SERIES + 1];
	struct svg_phase ph[SVG_MAX_PHASES + 1];
	struct svg_plot p = { .series = &s, .nseries = 1 };
	static const char *const bad_names[] = {
		"\xff", "a\xc0\xaf", "\xed\xa0\x80", "\xe2\x82", "\xf4\x90\x80\x80", "a\tb", "\x7f",
		"\xc2\x85", "\xef\xbf\xbe", "\xe0\x80\xaf",
	};

	p.nseries = 0;
	refused(&p, "no series");
	p.series = NULL;
	p.nseries = 1;
	refused(&p, "NULL series");
	p.series = &s;
	s.n = 0;
	refused(&p, "an empty series");
	s = (struct svg_series){ "a", nan_ms, 2 };
	refused(&p, "NaN");
	s.ms = neg;
	refused(&p, "negative");
	s.ms = big;
	refused(&p, "past SVG_MAX_MS");
	s.ms = ms;
	for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
		s.name = bad_names[i];
		refused(&p, "a bad series name");
		s.name = "a";
		p.title = bad_names[i];
		refused(&p, "a bad title");
		p.title = NULL;
	}
	s.name = NULL;
	refused(&p, "no name");
	s.name = "a";

	for (int i = 0; i <= SVG_MAX_SERIES; i++)
		many[i] = s;
	p.series = many;
	p.nseries = SVG_MAX_SERIES + 1;
	refused(&p, "too many series");
	p.series = &s;
	p.nseries = 1;

	for (int i = 0; i <= SVG_MAX_PHASES; i++)
		ph[i] = (struct svg_phase){ "p", 1 };
	p.phases = ph;
	p.nphases = SVG_MAX_PHASES + 1;
	refused(&p, "too many phases");
	p.nphases = 2;
	ph[1].ms = NAN;
	refused(&p, "a NaN phase");
	ph[1] = (struct svg_phase){ "\xc3", 1 };
	refused(&p, "a bad phase name");
}

Test(bench_svg, accepts_the_utf8_it_should)
{
	const double ms[] = { 0 };
	/* Two-, three- and four-byte forms at their edges. */
	const struct svg_series s = { "\xc2\xa0\xdf\xbf\xe0\xa0\x80\xef\xbf\xbd\xf0\x90\x80\x80"
				      "\xf4\x8f\xbf\xbd", ms, 1 };
	struct svg_plot p = { .series = &s, .nseries = 1 };
	struct doc d;

	draw(&p, &d);
	check_series(&d, 0, ms, 1);
}

Test(bench_svg, a_failing_stream_is_eio)
{
	const double ms[] = { 1, 2, 3 };
	const struct svg_series s = { "a", ms, 3 };
	struct svg_plot p = { .series = &s, .nseries = 1 };
	char small[64];
	FILE *f = fopen("/dev/full", "w");

	cr_assert_not_null(f);
	cr_assert_eq(svg_write(f, &p), -EIO);
	fclose(f);
	f = fmemopen(small, sizeof(small), "w");
	cr_assert_not_null(f);
	cr_assert_eq(svg_write(f, &p), -EIO);
	fclose(f);
}
