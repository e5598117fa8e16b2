/* test_serve_metrics.c - mayfly serve's /metrics text: Prometheus exposition format, cumulative buckets, one line per state and cause. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "serve/metrics.h"

static bool has_line(const char *text, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = text; (p = strstr(p, line)); p++)
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return true;
	return false;
}

Test(serve_metrics, gauges_counters_and_cumulative_histograms)
{
	struct metrics m;
	struct metrics_gauges g = { .starting = 1, .running = 3, .pool_ready = 3, .pool_target = 4,
				    .ntmpl = 2, .tmpl_name = { "default", "py" }, .tmpl_ready = { 2, 1 } };
	size_t len;
	char *text;

	metrics_init(&m);
	metrics_observe(&m, M_CREATE, 2000000);      /* 2 ms */
	metrics_observe(&m, M_CREATE, 30000000);     /* 30 ms */
	metrics_observe(&m, M_CREATE, 60000000000);  /* 60 s: +Inf only */
	metrics_fail(&m, F_REFUSED);
	metrics_fail(&m, F_REFUSED);
	metrics_request(&m);
	text = metrics_render(&m, &g, &len);
	cr_assert_not_null(text);
	cr_assert_eq(strlen(text), len);
	cr_assert(has_line(text, "mayfly_serve_sandboxes{state=\"running\"} 3"));
	cr_assert(has_line(text, "mayfly_serve_sandboxes{state=\"starting\"} 1"));
	cr_assert(has_line(text, "mayfly_serve_pool_ready{template=\"default\"} 2"));
	cr_assert(has_line(text, "mayfly_serve_pool_ready{template=\"py\"} 1"));
	cr_assert(has_line(text, "mayfly_serve_pool_target{template=\"py\"} 4"));
	cr_assert(has_line(text, "mayfly_serve_failures_total{cause=\"refused\"} 2"));
	cr_assert(has_line(text, "mayfly_serve_failures_total{cause=\"auth\"} 0"));
	cr_assert(has_line(text, "mayfly_serve_requests_total 1"));
	cr_assert(has_line(text, "# TYPE mayfly_serve_create_seconds histogram"));
	cr_assert(has_line(text, "mayfly_serve_create_seconds_bucket{le=\"0.001\"} 0"));
	cr_assert(has_line(text, "mayfly_serve_create_seconds_bucket{le=\"0.0025\"} 1"));
	cr_assert(has_line(text, "mayfly_serve_create_seconds_bucket{le=\"0.05\"} 2"));
	cr_assert(has_line(text, "mayfly_serve_create_seconds_bucket{le=\"10\"} 2"));
	cr_assert(has_line(text, "mayfly_serve_create_seconds_bucket{le=\"+Inf\"} 3"));
	cr_assert(has_line(text, "mayfly_serve_create_seconds_count 3"));
	cr_assert(has_line(text, "mayfly_serve_create_seconds_sum 60.032000"));
	cr_assert(has_line(text, "mayfly_serve_exec_seconds_count 0"));
	cr_assert_eq(text[len - 1], '\n');
	free(text);
}
