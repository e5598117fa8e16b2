/* metrics.c - mayfly serve's counters and latency histograms, rendered in the Prometheus text format. */
#include "serve/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double bounds[METRICS_BUCKETS] = {
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10,
};
static const char *const hist_names[M_NR_HIST] = {
	[M_CREATE] = "mayfly_serve_create_seconds",
	[M_RESTORE] = "mayfly_serve_restore_seconds",
	[M_EXEC] = "mayfly_serve_exec_seconds",
};
static const char *const hist_help[M_NR_HIST] = {
	[M_CREATE] = "POST /sandboxes until the sandbox is ready (from the pool or restored)",
	[M_RESTORE] = "a VM process started until its guest agent answers",
	[M_EXEC] = "an exec call from its request to the command's exit",
};
static const char *const vm_exit_names[VMX_NR] = {
	[VMX_MEMORY] = "memory", [VMX_SIGNAL] = "signal", [VMX_EXIT] = "exit",
};
static const char *const failure_names[F_NR] = {
	[F_BAD_REQUEST] = "bad_request", [F_AUTH] = "auth", [F_NOT_FOUND] = "not_found",
	[F_CONFLICT] = "conflict", [F_REFUSED] = "refused", [F_RESTORE] = "restore",
	[F_AGENT] = "agent", [F_INTERNAL] = "internal",
};

void metrics_init(struct metrics *m)
{
	memset(m, 0, sizeof(*m));
	pthread_mutex_init(&m->lock, NULL);
}

void metrics_observe(struct metrics *m, enum metrics_hist h, uint64_t ns)
{
	double s = (double)ns / 1e9;
	int b = 0;

	while (b < METRICS_BUCKETS && s > bounds[b])
		b++;
	pthread_mutex_lock(&m->lock);
	m->hist[h].bucket[b]++;
	m->hist[h].count++;
	m->hist[h].sum_s += s;
	pthread_mutex_unlock(&m->lock);
}

void metrics_fail(struct metrics *m, enum metrics_failure f)
{
	pthread_mutex_lock(&m->lock);
	m->failures[f]++;
	pthread_mutex_unlock(&m->lock);
}

void metrics_vm_exit(struct metrics *m, enum metrics_vm_exit why)
{
	pthread_mutex_lock(&m->lock);
	m->vm_exits[why]++;
	pthread_mutex_unlock(&m->lock);
}

void metrics_request(struct metrics *m)
{
	pthread_mutex_lock(&m->lock);
	m->requests++;
	pthread_mutex_unlock(&m->lock);
}

char *metrics_render(struct metrics *m, const struct metrics_gauges *g, size_t *len)
{
	static const char *const states[] = { "starting", "running", "stopping", "exited", "paused" };
	const unsigned counts[] = { g->starting, g->running, g->stopping, g->exited, g->paused };
	char *buf = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&buf, &size);

	if (!f)
		return NULL;
	fputs("# HELP mayfly_serve_sandboxes Sandboxes by state (pooled ones apart).\n"
	      "# TYPE mayfly_serve_sandboxes gauge\n", f);
	for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++)
		fprintf(f, "mayfly_serve_sandboxes{state=\"%s\"} %u\n", states[i], counts[i]);
	fputs("# HELP mayfly_serve_pool_ready Restored VMs waiting in a template's warm pool.\n"
	      "# TYPE mayfly_serve_pool_ready gauge\n", f);
	for (unsigned i = 0; i < g->ntmpl; i++)
		fprintf(f, "mayfly_serve_pool_ready{template=\"%s\"} %u\n", g->tmpl_name[i],
			g->tmpl_ready[i]);
	fputs("# HELP mayfly_serve_pool_target A template's warm pool size (--pool).\n"
	      "# TYPE mayfly_serve_pool_target gauge\n", f);
	for (unsigned i = 0; i < g->ntmpl; i++)
		fprintf(f, "mayfly_serve_pool_target{template=\"%s\"} %u\n", g->tmpl_name[i],
			g->pool_target);
	pthread_mutex_lock(&m->lock);
	fprintf(f, "# HELP mayfly_serve_requests_total HTTP requests received.\n"
		"# TYPE mayfly_serve_requests_total counter\nmayfly_serve_requests_total %llu\n",
		(unsigned long long)m->requests);
	fputs("# HELP mayfly_serve_failures_total Failed requests by cause.\n"
	      "# TYPE mayfly_serve_failures_total counter\n", f);
	for (int i = 0; i < F_NR; i++)
		fprintf(f, "mayfly_serve_failures_total{cause=\"%s\"} %llu\n", failure_names[i],
			(unsigned long long)m->failures[i]);
	fputs("# HELP mayfly_serve_vm_exits_total Sandboxes whose VM process ended while running, "
	      "by cause (memory: its cgroup's OOM killer).\n"
	      "# TYPE mayfly_serve_vm_exits_total counter\n", f);
	for (int i = 0; i < VMX_NR; i++)
		fprintf(f, "mayfly_serve_vm_exits_total{cause=\"%s\"} %llu\n", vm_exit_names[i],
			(unsigned long long)m->vm_exits[i]);
	for (int h = 0; h < M_NR_HIST; h++) {
		const struct metrics_hist_data *d = &m->hist[h];
		uint64_t cum = 0;

		fprintf(f, "# HELP %s %s.\n# TYPE %s histogram\n", hist_names[h], hist_help[h],
			hist_names[h]);
		for (int b = 0; b < METRICS_BUCKETS; b++) {
			cum += d->bucket[b];
			fprintf(f, "%s_bucket{le=\"%g\"} %llu\n", hist_names[h], bounds[b],
				(unsigned long long)cum);
		}
		cum += d->bucket[METRICS_BUCKETS];
		fprintf(f, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n",
			hist_names[h], (unsigned long long)cum, hist_names[h], d->sum_s,
			hist_names[h], (unsigned long long)d->count);
	}
	pthread_mutex_unlock(&m->lock);
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	*len = size;
	return buf;
}
