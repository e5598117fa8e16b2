/* registry.h - mayfly serve's state on disk: one directory per sandbox with a JSON record, and the clean-up of what a previous service left. */
#ifndef MAYFLY_SERVE_REGISTRY_H
#define MAYFLY_SERVE_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "serve/api.h"

#define REGISTRY_RECORD "record.json"

/* What is on disk about one sandbox: enough for another service process
 * to find its VM process and everything the VM left on the host. Never an
 * environment value (they may be secrets). */
struct registry_record {
	char id[API_ID_MAX + 1];
	char state[16];            /* "pool", "running", "exited" */
	char template[API_TEMPLATE_MAX + 1];
	pid_t pid;                 /* the mayfly boot process (a process group leader) */
	uint64_t pid_start;        /* its start time (/proc/PID/stat field 22): pid reuse */
	int64_t created;           /* Unix seconds */
	unsigned cpus;
	uint64_t mem_mib, disk_quota;
	unsigned ttl_s, idle_s;
};

/* Where a VM's leftovers are: CGROUP_ROOT and the jail directories' bases
 * outside tests. */
struct registry_paths {
	const char *cgroup_root;   /* <root>/mayfly/vm-ID-PID */
	const char *jail_bases[2]; /* <base>/jail-ID-* (root), <base>/mayfly-jail-ID-* */
};

/* Write r as <dir>/record.json, atomically. 0 or -errno. */
int registry_write(const char *dir, const struct registry_record *r);
/* Read <dir>/record.json into r, every member checked. 0, -errno, or
 * -EINVAL for a record out of shape. */
int registry_read(const char *dir, struct registry_record *r);

/* The start time of process pid (clock ticks since boot), 0 when none. */
uint64_t registry_pid_start(pid_t pid);

/* pid is a live process: not gone, not a zombie nobody reaped yet. */
bool registry_pid_alive(pid_t pid);


/* How long a VM's emptied cgroup may stay busy before a clean-up leaves
 * it for later (a VM's KVM VM torn down in an emulated host). */
#define REGISTRY_CGROUP_WAIT_MS 5000

/* A VM cgroup's name: vm-<id>-XXXXXX. */
#define REGISTRY_CGROUP_NAME_MAX 64

/* A VM's leftovers, once its process is gone: its cgroups (each waited
 * for up to wait_ms to empty), its jail directories, and their leases
 * unless a cgroup lingers (the next jail's sweep then removes it). How
 * many cgroups are still there; the first nbusy of their names go to
 * busy, for registry_retry_cgroup (never the id again: by then a new VM
 * of the same sandbox, a resume, may have a cgroup of its own). */
int registry_clean_vm(const struct registry_paths *p, const char *id, unsigned wait_ms,
		      char (*busy)[REGISTRY_CGROUP_NAME_MAX], int nbusy);

/* One more try at the busy cgroup name that registry_clean_vm gave: its
 * processes killed, it removed, then its jail's leases. Whether it is
 * gone. */
bool registry_retry_cgroup(const struct registry_paths *p, const char *name);

/* Remove the sandbox directory dir (named name): kill the process its
 * record names (only if its start time matches), clean its leftovers,
 * remove the directory. Whether a process was killed. */
bool registry_remove(const char *dir, const char *name, const struct registry_paths *p);

/* STATE/forks: what forks in flight when a service ended left. */
void registry_remove_forks(const char *state);

/* At start (an ephemeral service): for each <state>/sb/<ID>/, kill the process its record names
 * (only if its start time matches: never a reused pid), wait for it,
 * clean its leftovers and remove the directory. Returns how many
 * sandboxes were cleaned, *killed how many had a live process. */
int registry_cleanup(const char *state, const struct registry_paths *p, int *killed);

/* The last line of the VM process's log in a sandbox's dir (why it did
 * not start), control bytes as '?'; "" when there is none. */
void registry_log_tail(const char *dir, char *out, size_t len);
/* The last line of buf[0..n) (buf has room for a NUL at n; it is
 * changed), control bytes as '?', into out. */
void registry_last_line(char *buf, size_t n, char *out, size_t len);

#endif
