/* cgroup.h - one cgroup v2 per VM: memory.max, pids.max and cpu.max from the VM's size, created before it starts and removed after. */
#ifndef MAYFLY_JAIL_CGROUP_H
#define MAYFLY_JAIL_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CGROUP_ROOT             "/sys/fs/cgroup"
#define CGROUP_PARENT           "mayfly"   /* every VM's cgroup is under ROOT/mayfly */
#define CGROUP_VMM_OVERHEAD_MIB 256        /* the VMM beside guest RAM and the overlay */
#define CGROUP_EXTRA_PIDS       16         /* main, I/O, console, log, agent threads, margin */
#define CGROUP_PERIOD_US        100000
#define CGROUP_PATH_MAX         512

/* What a VM's cgroup allows. */
struct cgroup_limits {
	uint64_t memory_max;    /* bytes */
	uint64_t pids_max;
	uint64_t cpu_quota_us;  /* per CGROUP_PERIOD_US */
};

/* The limits of a VM with mem_mib of RAM, a copy-on-write overlay of at
 * most disk_quota bytes (host RAM too), `cpus` vCPUs each allowed
 * cpu_pct percent of one host CPU: memory.max = RAM + overlay +
 * CGROUP_VMM_OVERHEAD_MIB, pids.max = cpus + CGROUP_EXTRA_PIDS, cpu.max
 * = cpus * cpu_pct% of a period (at least 1 ms, the kernel's minimum). */
void cgroup_limits_for(uint64_t mem_mib, uint64_t disk_quota, unsigned cpus, unsigned cpu_pct,
		       struct cgroup_limits *out);

struct cgroup {
	char path[CGROUP_PATH_MAX];   /* "": none */
	char missing[64];             /* controllers not available, for the log line */
};

/* Create root/CGROUP_PARENT (once, enabling the memory, pids and cpu
 * controllers it can) and root/CGROUP_PARENT/name in it, and write the
 * limits of each controller it has (one that root does not offer is named
 * in cg->missing and skipped). root is CGROUP_ROOT outside tests. 0, or
 * -errno with *why (nothing left behind). */
int cgroup_create(struct cgroup *cg, const char *root, const char *name,
		  const struct cgroup_limits *lim, const char **why)
	__attribute__((warn_unused_result));

/* fork(), the child born in cg: clone3(CLONE_INTO_CGROUP), which skips
 * what moving a running process costs (cgroup_join waits for an RCU
 * grace period: ~12 ms in the nested harness). *joined says whether the
 * child is in cg already; false (a plain fork: no cg, or a kernel before
 * 5.7) leaves cgroup_join to the child. The caller must be
 * single-threaded, as for any fork of a process that goes on running C
 * code. fork's return value (-1 with errno on failure). */
/* Processes the cgroup's OOM killer ended (memory.events' oom_kill); 0
 * when none or unknown. */
uint64_t cgroup_oom_kills(const struct cgroup *cg);

pid_t cgroup_fork(const struct cgroup *cg, bool *joined) __attribute__((warn_unused_result));

/* Move the calling process into cg (before it unshares its cgroup
 * namespace). 0 or -errno. */
int cgroup_join(const struct cgroup *cg) __attribute__((warn_unused_result));

/* Remove cg once no process is left in it (waits up to timeout_ms for the
 * kernel to empty it). Safe on one never created. 0 or -errno. */
int cgroup_remove(struct cgroup *cg, int timeout_ms);

/* SIGKILL every process in the cgroup at path (cgroup.kill, Linux 5.14):
 * one nobody knows the pid of. Best effort. */
void cgroup_kill_all(const char *path);

#endif
