/* supervise.h - mayfly serve's VM processes: spawned from the service's main thread, in process groups of their own, stopped and reaped; a previous service's adopted through pidfds. */
#ifndef MAYFLY_SERVE_SUPERVISE_H
#define MAYFLY_SERVE_SUPERVISE_H

#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>

/* A VM process's oom_score_adj: the OOM killer's first choice, before the
 * service (whose own is 0, or lower when it may set that). */
#define SUPERVISE_VM_OOM_ADJ "500"

/* How long a VM process has to end after SIGTERM before its group is killed. */
#define SUPERVISE_TERM_GRACE_MS 3000

struct spawn_req;

/* PR_SET_PDEATHSIG fires when the *thread* that made a child ends, not
 * the process: a child made by an HTTP connection's thread would be
 * killed when that connection closes. So every VM process is started (a
 * vfork-like clone, then its exec) by the thread that runs
 * supervise_pending (the main thread, alive as long as the service), on
 * behalf of whichever thread asked. */
struct supervisor {
	pthread_mutex_t lock;
	pthread_cond_t done;
	int efd;                   /* eventfd: a request waits; the main loop polls it */
	struct spawn_req *queue;
	bool closed;               /* no more spawns (draining) */
	bool outlive;              /* VM processes outlive the service (no PDEATHSIG) */
};

int supervise_init(struct supervisor *s);
void supervise_destroy(struct supervisor *s);

/* Start argv[0] (absolute) with argv, stdin and stdout /dev/null, stderr
 * appended to log_path, every other fd closed, default signal
 * dispositions and mask, in a new process group, oom_score_adj
 * SUPERVISE_VM_OOM_ADJ, killed by SIGKILL when the service's main thread
 * ends unless s->outlive. Any thread but the one that runs
 * supervise_pending. pid, or -errno (-ESHUTDOWN once closed). */
pid_t supervise_spawn(struct supervisor *s, char *const argv[], const char *log_path);

/* Run the spawns asked for (the main thread, when s->efd is readable). */
void supervise_pending(struct supervisor *s);

/* Refuse further spawns; those waiting fail with -ESHUTDOWN. */
void supervise_close(struct supervisor *s);

/* Stop the process group pid leads: SIGTERM to pid, up to grace_ms for
 * it to end, then SIGKILL to the group; reaped. *status its wait status.
 * Any thread. */
void supervise_stop(pid_t pid, unsigned grace_ms, int *status);

/* 1 and *status when pid (our child) has ended and was reaped now, 0
 * while it runs, -errno. */
int supervise_poll(pid_t pid, int *status);

/* A process that is not our child (a previous service's VM, adopted): a
 * pidfd for it, or -errno. The caller checks afterwards that pid is
 * still the process it means (its start time): the pidfd then names it
 * for good, whatever process reuses the number later. */
int supervise_pidfd(pid_t pid);
/* 1 when the process behind pidfd has ended, else 0. */
int supervise_poll_fd(int pidfd);
/* supervise_stop for an adopted process: SIGTERM through its pidfd, up to
 * grace_ms, then SIGKILL to it and its group; waits (bounded) for its end.
 * The caller closes pidfd. */
void supervise_stop_fd(pid_t pid, int pidfd, unsigned grace_ms);

#endif
