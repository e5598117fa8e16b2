/* task.h - containerd's Task service, the logic: each container a microVM, its processes run by the guest agent, the events in containerd's order. Protocol-free: task_api.c speaks ttrpc for it. */
#ifndef MAYFLY_SHIM_TASK_H
#define MAYFLY_SHIM_TASK_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "shim/events.h"
#include "shim/oci.h"
#include "shim/proc.h"
#include "shim/rootfs.h"
#include "shim/sandbox.h"

#define TASK_MAX_EXECS 64
#define TASK_POD_SLOTS 7   /* a pod's containers besides its sandbox, over its life */
#define TASK_PATH_MAX  4096

/* containerd.v1.types.Status */
enum task_status {
	TASK_UNKNOWN = 0, TASK_CREATED = 1, TASK_RUNNING = 2, TASK_STOPPED = 3, TASK_PAUSED = 4,
};

struct shim_task {
	char id[PROC_ID_MAX + 1];
	char bundle[TASK_PATH_MAX];
	char rootfs[TASK_PATH_MAX + 8];   /* bundle/rootfs, or root.path without mounts */
	bool rootfs_mounted;              /* by us: unmounted at Delete */
	char image[TASK_PATH_MAX];        /* the root image the VM boots */
	char vm_dir[SANDBOX_SOCKET_MAX];  /* its sockets */
	struct oci_config cfg;
	struct sandbox vm;
	bool vm_started, vm_stopping, vm_stopped;   /* stop_vm's, under the lock */
	bool paused;
	struct shim_proc init;
	struct shim_proc *execs[TASK_MAX_EXECS];
	int nexecs;
	char root_in_guest[48];           /* where its processes are chrooted in the VM */
	/* A pod (the CRI annotations): its sandbox container's VM has spare
	 * disk slots; each other container of the pod is a member whose
	 * root goes into one (never given back: TASK_POD_SLOTS a pod). */
	struct shim_task *pod;            /* a member: the sandbox task whose VM it runs in */
	unsigned slot;                    /* a member: its disk slot in that VM */
	unsigned slots_used, members;     /* a sandbox: slots taken, members still there */
	bool orphaned;                    /* a sandbox deleted before its members: freed by the last */
	struct shim_task *next;
};

/* The service: its tasks under one lock. */
struct task_service {
	pthread_mutex_t lock;
	pthread_cond_t changed;           /* a process started or stopped */
	struct shim_task *tasks;
	const char *self;                 /* this binary, for the VMs */
	const char *kernel, *initrd;      /* the default guest's */
	const char *run_dir;              /* where VM directories go (short paths) */
	bool debug;
	struct events *events;
	const char *version;              /* Connect's answer */
	int exit_fd;                      /* eventfd: Shutdown asks the shim to end */
	bool shutting_down;
};

/* What Create is given. */
struct task_create {
	const char *id, *bundle;
	const struct rootfs_mount *mounts;
	int nmounts;
	bool terminal;
	const char *stdin_path, *stdout_path, *stderr_path;
};

/* Where a process stands (State, Wait, Delete): a copy. */
struct task_proc_state {
	enum task_status status;
	uint32_t pid;
	uint32_t exit_status;
	struct timespec exited_at;
	bool terminal;
	char stdin_path[TASK_PATH_MAX], stdout_path[TASK_PATH_MAX], stderr_path[TASK_PATH_MAX];
};

void task_service_init(struct task_service *s, const char *self, const char *kernel,
		       const char *initrd, const char *run_dir, bool debug, struct events *events,
		       const char *version, int exit_fd);

/* Every call returns 0 or -errno with one line in err; the errnos say
 * what containerd should make of it (task_api.c maps them): -ENOENT no
 * such task or process, -EEXIST already there, -EINVAL a bad request or
 * bundle, -EBUSY / -ESRCH not in the right state, -ENOTSUP not done. */
int task_create(struct task_service *s, const struct task_create *c, uint32_t *pid, char *err,
		size_t errlen);
int task_start(struct task_service *s, const char *id, const char *exec_id, uint32_t *pid,
	       char *err, size_t errlen);
int task_exec(struct task_service *s, const char *id, const char *exec_id, const char *spec_json,
	      size_t spec_len, bool terminal, const char *stdin_path, const char *stdout_path,
	      const char *stderr_path, char *err, size_t errlen);
int task_kill(struct task_service *s, const char *id, const char *exec_id, int signo, bool all,
	      char *err, size_t errlen);
/* Blocks until the process stopped, or cancel_fd (>= 0) is readable: the
 * caller left (-ECANCELED). */
int task_wait(struct task_service *s, const char *id, const char *exec_id, int cancel_fd,
	      struct task_proc_state *st, char *err, size_t errlen);
/* The state, and the task's bundle path into bundle. */
int task_state(struct task_service *s, const char *id, const char *exec_id,
	       struct task_proc_state *st, char *bundle, size_t bundle_len, char *err,
	       size_t errlen);
int task_delete(struct task_service *s, const char *id, const char *exec_id,
		struct task_proc_state *st, char *err, size_t errlen);
int task_pause(struct task_service *s, const char *id, bool pause, char *err, size_t errlen);
int task_resize(struct task_service *s, const char *id, const char *exec_id, uint32_t width,
		uint32_t height, char *err, size_t errlen);
int task_close_io(struct task_service *s, const char *id, const char *exec_id, char *err,
		  size_t errlen);
/* The processes: pids[] (the init's host pid first, then the execs' in
 * the guest), at most max. */
int task_pids(struct task_service *s, const char *id, uint32_t *pids, char (*exec_ids)[PROC_ID_MAX + 1],
	      int max, int *n, char *err, size_t errlen);
/* The VM's cgroup v2 directory (Stats). */
int task_cgroup(struct task_service *s, const char *id, char *path, size_t len, char *err,
		size_t errlen);
/* The init's host pid (Connect). */
int task_pid(struct task_service *s, const char *id, uint32_t *pid, char *err, size_t errlen);
/* Whether no task is left (Shutdown may end the shim). */
bool task_service_empty(struct task_service *s);
/* Stop every VM and unmount every root (the shim ends). */
void task_service_close(struct task_service *s);

#endif
