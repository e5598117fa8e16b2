/* service.h - mayfly serve's sandboxes: each a supervised VM process restored from a template, kept in memory and on disk, with a warm pool per template. */
#ifndef MAYFLY_SERVE_SERVICE_H
#define MAYFLY_SERVE_SERVICE_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "policy/gate.h"
#include "vm/config.h"
#include "serve/api.h"
#include "serve/metrics.h"
#include "serve/registry.h"
#include "serve/supervise.h"

#define SERVICE_MAX_SANDBOXES 1024
#define SERVICE_MAX_EXTRA_ARGS 16
#define SERVICE_MAX_TEMPLATES METRICS_MAX_TEMPLATES
#define SERVICE_POOL_THREADS 8   /* the pools' refill threads at most */
#define SERVICE_LINGER_MAX 64    /* busy cgroups retried; past it, left to the jails' sweep */

enum sb_state { SB_STARTING, SB_POOL, SB_RUNNING, SB_STOPPING, SB_EXITED, SB_PAUSING, SB_PAUSED,
		 SB_RESUMING, SB_DAMAGED };

/* What a sandbox's directory holds besides its record: the environment
 * and network rules it was created with (a create request's members, mode
 * 0600: the values may be secrets, as its paused memory may hold them),
 * and its snapshot while paused. */
#define SERVICE_SPEC   "spec.json"
#define SERVICE_PAUSED "paused"


/* A template: a snapshot directory, addressed by name ("default", or a
 * --template NAME) or by its id (the snapshot cache's content hash, or the
 * directory's name), with a warm pool of its own. */
struct service_template {
	char name[API_TEMPLATE_MAX + 1];
	char id[API_TEMPLATE_MAX + 1];
	char dir[CONFIG_PATH_MAX];
	unsigned cpus;             /* as the snapshot saved them: a restore keeps them */
	uint64_t mem_mib;
	unsigned pool_ready, pool_starting;   /* its warm pool (the service's lock) */
	int hold_fd;               /* keeps the snapshot cache from removing dir; the service's life */
};

/* A running exec's handles (calls.c makes and unlinks them, under the
 * service's lock): the service signals them too, to end a sandbox's
 * commands at its ttl or for a kill. */
struct exec_slot {
	uint64_t id;
	uint32_t pid;              /* the guest's, once started; else 0 */
	int sig_w;                 /* a byte per signal for the command */
	int stdin_w;               /* api_exec.stdin_open: its stdin (non-blocking); else -1 */
	int winch_w;               /* api_exec.pty: 4 bytes (rows, cols) per resize; else -1 */
	struct exec_slot *next;
};

struct sandbox {
	char id[API_ID_MAX + 1];
	char dir[CONFIG_PATH_MAX];
	char vsock[CONFIG_VSOCK_PATH_MAX + 1];
	struct service_template *tmpl;   /* restored from (a fork's or resume's: its parent's) */
	enum sb_state state;
	pid_t pid;
	uint64_t pid_start;
	bool adopted;              /* pid is a previous service's VM process, not our child: */
	int pidfd;                 /* watched and stopped through this pidfd */
	int status;                /* wait status once SB_EXITED */
	char reason[256];          /* why SB_EXITED or SB_DAMAGED, for a person */
	int64_t created;           /* Unix seconds */
	uint64_t created_ns, last_used_ns;   /* CLOCK_MONOTONIC */
	uint64_t cpu_busy, cpu_total;   /* the guest's CPU ticks at its last metrics call */
	struct registry_record rec;
	char **env;                /* "K=V" for every exec */
	int nenv;
	struct api_net net;        /* given to each of its VM processes (resume, fork) */
	json_t *meta;              /* a create's "metadata" (owned), or NULL */
	int calls;                 /* in flight: a delete waits for none (else 409) */
	bool ending;               /* past its ttl: its commands were told to end */
	struct exec_slot *execs;   /* running execs, for their signals */
	struct sandbox *next;
	struct service *svc;       /* for an auto-pause's thread */
};

struct service_config {
	const char *state;         /* --state DIR */
	char exe[CONFIG_PATH_MAX]; /* this binary, for the VM processes */
	struct service_template tmpl[SERVICE_MAX_TEMPLATES];   /* [0] the default */
	unsigned ntmpl;
	unsigned pool;             /* --pool N ready VMs per template */
	char *extra[SERVICE_MAX_EXTRA_ARGS];   /* boot options passed on (--no-jail...) */
	const char *audit;         /* --audit, absolute; given to VMs with network rules */
	int nextra;
	unsigned call_timeout_s;
	uint64_t max_output;
	uint64_t max_file;         /* one file in or out */
	unsigned max_sandboxes;
	bool ephemeral;            /* --ephemeral: sandboxes end with the service */
	unsigned memory_reserve_mib;   /* --memory-reserve: what the host keeps */
	const char *meminfo;       /* /proc/meminfo (tests: another); NULL: no check */
	struct registry_paths paths;
};

struct service {
	struct service_config cfg;
	pthread_mutex_t lock;
	pthread_cond_t changed;    /* the pool or a sandbox's calls changed */
	struct sandbox *list;
	unsigned count;
	bool stopping;
	int stop_fd;               /* eventfd, readable once draining: agent waits give up */
	struct supervisor sup;
	struct metrics metrics;
	struct audit_log audit;
	struct gate gate;          /* audit log and approver; per call a copy names caller, sandbox */
	pthread_t pool_threads[SERVICE_POOL_THREADS];   /* pool.c's refill threads */
	pthread_mutex_t linger_lock;
	char linger[SERVICE_LINGER_MAX][REGISTRY_CGROUP_NAME_MAX];   /* VM cgroups still busy */
	unsigned nlinger;
	unsigned npool;
	uint64_t next_exec;
};

/* Set up (state directory made; a previous service's sandboxes adopted,
 * or with cfg.ephemeral its leftovers cleaned) and start the pool's
 * refill thread. The caller's thread must
 * then call supervise_pending whenever svc->sup.efd is readable and
 * service_tick every few hundred ms. 0 or -errno after one line. */
int service_start(struct service *svc);

/* Drain: refuse new sandboxes, give the calls in flight up to grace_ms,
 * then stop the pool's VMs; the sandboxes' VMs go on for the next service
 * to adopt (cfg.ephemeral: stopped, and their state removed). */
void service_stop(struct service *svc, unsigned grace_ms);
void service_destroy(struct service *svc);

/* Reap VM processes that ended, delete sandboxes past their TTL, remove
 * the cgroups that were still busy. */
void service_tick(struct service *svc);

/* What VM id left on the host once its process is gone (registry_clean_vm);
 * a cgroup still busy after a second is retried by service_tick and
 * waited for by the drain. */
void service_clean_vm(struct service *svc, const char *id);

/* Whether the host has more than the reserve available (MemAvailable): 0,
 * or 503 with err (a create, resume or fork must not push the host into
 * swap or its OOM killer). */
int service_memory_ok(struct service *svc, char *err, size_t errlen);

/* A new sandbox (from the pool when it fits, else restored now). On
 * success *out is held (service_put it) and 201; else an HTTP status
 * with err: 400 unknown template or a cpus/mem other than the
 * template's (checked before any VM starts), 503 too many or draining,
 * 500 the VM did not start. */
int service_create(struct service *svc, const struct api_create *req, struct sandbox **out,
		   char *err, size_t errlen);

/* The sandbox id, held for a call (its calls count up) until
 * service_put. 0; 404 none; 409 stopping or exited. */
int service_get(struct service *svc, const char *id, struct sandbox **out, char *err,
		size_t errlen);
void service_put(struct service *svc, struct sandbox *sb);
/* One more hold on sb, which the caller holds already (a stream that
 * outlives its call); service_put it. */
void service_hold(struct service *svc, struct sandbox *sb);

/* Hold a running sandbox for its pause: SB_PAUSING, its calls counted up
 * (service_put after live_pause). 0; 404; 409 not running or busy. */
int service_begin_pause(struct service *svc, const char *id, struct sandbox **out, char *err,
			size_t errlen);

/* The sandbox id ends (is deleted, running or paused) timeout_s from now:
 * its ttl set to that and recorded. 0; 404 none; 409 neither running
 * nor paused; 400 past API_MAX_TTL_S from its creation. */
int service_set_timeout(struct service *svc, const char *id, unsigned timeout_s, char *err,
			size_t errlen);

/* Delete: 0 (204); 404; 409 while calls are in flight. */
int service_delete(struct service *svc, const char *id, char *err, size_t errlen);

/* SIGKILL to every running command of sandbox id (their calls then end):
 * how many; -404 no such sandbox. */
int service_end_commands(struct service *svc, const char *id);

/* The template a create names: "" (the default), a name or an id (the
 * first template with it). NULL: none. */
struct service_template *service_template_find(struct service *svc, const char *name);

/* For live.c (pause, resume, fork): a new sandbox of template t (not
 * linked; NULL when out of memory); its VM started from the snapshot in
 * snap (NULL: its template's) and its agent waited for (0, or an HTTP
 * status with err). */
struct sandbox *service_new_sandbox(struct service *svc, struct service_template *t);
/* The same, for the sandbox id (a valid one) that a previous service made. */
struct sandbox *service_sandbox_named(struct service *svc, struct service_template *t,
				      const char *id);
int service_start_vm(struct service *svc, struct sandbox *sb, const struct api_create *req,
		     const char *snap, char *err, size_t errlen);
/* Link n new sandboxes at once, running: a call sees all of them or none
 * (a fork's children appear when the fork has succeeded). 0; -ESHUTDOWN
 * when draining (none linked: service_discard each). */
int service_link(struct service *svc, struct sandbox **sbs, unsigned n);
/* A sandbox never linked (or no longer): its VM stopped, what it left
 * cleaned, its directory removed, sb freed. */
void service_discard(struct service *svc, struct sandbox *sb);
/* Link sb into the list (pool.c: a ready pooled VM). The lock held. */
void service_link_locked(struct service *svc, struct sandbox *sb);
/* Rewrite sb's record with state. */
void service_record(struct sandbox *sb, const char *state);
/* sb's environment: a copy of the n "K=V" strings of env (sb has none
 * yet). 0, or -ENOMEM with those that could be copied. */
int service_copy_env(struct sandbox *sb, char *const *env, int n);
/* Write sb's SERVICE_SPEC (its environment and network rules). 0 or -errno. */
int service_save_spec(const struct sandbox *sb);
/* Whether sb's VM process has ended (reaped, sb->status set, when it is
 * our child); stop it (SIGTERM, grace_ms, then SIGKILL to its group). */
bool service_vm_ended(struct sandbox *sb);
void service_vm_stop(struct sandbox *sb, unsigned grace_ms);
/* Its VM process ended: no pid, no pidfd of an adopted one. */
void service_vm_forget(struct sandbox *sb);
/* Link an adopted sandbox (adopt.c), counted. */
void service_adopt_link(struct service *svc, struct sandbox *sb);
const char *service_state_name(enum sb_state st);

/* One sandbox's JSON (the lock held or the sandbox held). */
json_t *service_sandbox_json(const struct sandbox *sb);
/* The sandbox id's JSON as it is now (a paused one stays paused), or
 * NULL when there is none. */
json_t *service_get_json(struct service *svc, const char *id);
/* Every sandbox (pooled ones apart) as a JSON array. */
json_t *service_list(struct service *svc);
void service_gauges(struct service *svc, struct metrics_gauges *g);

#endif
