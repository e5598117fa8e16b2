/* metrics.h - mayfly serve's counters and latency histograms, rendered in the Prometheus text format. */
#ifndef MAYFLY_SERVE_METRICS_H
#define MAYFLY_SERVE_METRICS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define METRICS_BUCKETS 12     /* upper bounds in seconds, then +Inf */
#define METRICS_MAX_TEMPLATES 8

enum metrics_hist { M_CREATE, M_RESTORE, M_EXEC, M_NR_HIST };
enum metrics_failure {
	F_BAD_REQUEST, F_AUTH, F_NOT_FOUND, F_CONFLICT, F_REFUSED, F_RESTORE, F_AGENT, F_INTERNAL,
	F_NR,
};

/* How a running sandbox's VM process ended while the service watched. */
enum metrics_vm_exit { VMX_MEMORY, VMX_SIGNAL, VMX_EXIT, VMX_NR };

struct metrics_hist_data {
	uint64_t bucket[METRICS_BUCKETS + 1];   /* not cumulative; the last is +Inf */
	uint64_t count;
	double sum_s;
};

struct metrics {
	pthread_mutex_t lock;
	struct metrics_hist_data hist[M_NR_HIST];
	uint64_t failures[F_NR];
	uint64_t vm_exits[VMX_NR];
	uint64_t requests;
};

/* What the service is at the moment of a scrape. */
struct metrics_gauges {
	unsigned starting, running, stopping, exited, paused;   /* sandboxes by state */
	unsigned pool_ready, pool_target;                         /* every template's */
	unsigned ntmpl;            /* the warm pool per template, labelled by name */
	const char *tmpl_name[METRICS_MAX_TEMPLATES];
	unsigned tmpl_ready[METRICS_MAX_TEMPLATES];
};

void metrics_init(struct metrics *m);
void metrics_observe(struct metrics *m, enum metrics_hist h, uint64_t ns);
void metrics_fail(struct metrics *m, enum metrics_failure f);
void metrics_request(struct metrics *m);
void metrics_vm_exit(struct metrics *m, enum metrics_vm_exit why);

/* The whole exposition into a malloc'd string (*len without the NUL), or
 * NULL when out of memory. */
char *metrics_render(struct metrics *m, const struct metrics_gauges *g, size_t *len);

#endif
