/* proc.h - one process of a container (its init or an exec): run in the VM through the guest agent, its stdio carried to and from containerd's fifos, its exit recorded. */
#ifndef MAYFLY_SHIM_PROC_H
#define MAYFLY_SHIM_PROC_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "agent_client/client.h"
#include "shim/oci.h"
#include "shim/sandbox.h"

#define PROC_ID_MAX 76   /* containerd's ids: at most 76 bytes */

enum proc_state { PROC_CREATED, PROC_RUNNING, PROC_STOPPED };

struct shim_proc;

/* Called on the process's thread once it ended (state STOPPED). */
typedef void (*proc_exit_fn)(struct shim_proc *p, void *opaque);

struct shim_proc {
	char exec_id[PROC_ID_MAX + 1];    /* "" for the container's init process */
	struct oci_process spec;          /* owned */
	char *stdin_path, *stdout_path, *stderr_path;   /* containerd's fifos; NULL: none */
	bool terminal;
	const char *root;                 /* the container's root in the guest */

	/* Guarded by *lock (the task's), signalled on *changed. */
	pthread_mutex_t *lock;
	pthread_cond_t *changed;
	enum proc_state state;
	uint32_t pid;                     /* in the guest, once running */
	uint32_t exit_status;             /* once stopped: the code, or 128 + the signal */
	struct timespec exited_at;        /* CLOCK_REALTIME */
	char error[256];                  /* why it stopped without running, or "" */
	bool starting;                    /* task_start's: a second Start is refused */
	bool start_published;             /* its start's event is queued: its exit's may follow */
	bool exit_pending;                /* it ended before that: the exit's waits */

	/* The running process's own. */
	struct agent_client *client;
	int in_fd, out_fd, err_fd;
	int sig[2], winch[2];             /* pipes to its session: signals, sizes */
	pthread_t thread;
	bool thread_started;
	proc_exit_fn on_exit;
	void *on_exit_opaque;
};

/* p set up from spec (taken over: the caller's is zeroed) and the paths
 * (copied), state CREATED; lock and changed are the owner's. 0 or -ENOMEM. */
int proc_init(struct shim_proc *p, const char *exec_id, struct oci_process *spec,
	      const char *stdin_path, const char *stdout_path, const char *stderr_path,
	      bool terminal, const char *root, pthread_mutex_t *lock, pthread_cond_t *changed);

/* Start p in vm: containerd's fifos opened (stdout and stderr for
 * writing, stdin for reading), a connection to the agent, EXEC with the
 * process's argv, env, cwd, user and terminal, chrooted into p->root.
 * Returns once it runs (state RUNNING, pid set) or failed (state STOPPED,
 * error set, on_exit not called): 0, or -errno with one line in err.
 * Called with *p->lock not held. */
int proc_start(struct shim_proc *p, struct sandbox *vm, proc_exit_fn on_exit, void *opaque,
	       char *err, size_t errlen);

/* Pass signo to the running process. 0, or -ESRCH when it is not running. */
int proc_signal(struct shim_proc *p, int signo);

/* Its terminal's new size. 0, -ESRCH, or -EINVAL without a terminal. */
int proc_resize(struct shim_proc *p, uint16_t rows, uint16_t cols);

/* End of its stdin. 0 or -ESRCH. */
int proc_close_stdin(struct shim_proc *p);

/* Join its thread and give back what it holds (the spec, the paths, the
 * descriptors). The process must have stopped or never started. */
void proc_destroy(struct shim_proc *p);

#endif
