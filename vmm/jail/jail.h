/* jail.h - the VMM's jail: a supervisor process outside, the VM in namespaces, pivot_root, a cgroup and no privileges inside (docs/security.md). */
#ifndef MAYFLY_JAIL_JAIL_H
#define MAYFLY_JAIL_JAIL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "vm/config.h"
#include "jail/cgroup.h"
#include "jail/lease.h"

#define JAIL_DEFAULT_UID     65534   /* "nobody" */
#define JAIL_DEFAULT_GID     65534   /* "nogroup" */
#define JAIL_DEFAULT_CPU_PCT 100     /* each vCPU at most one host CPU */
#define JAIL_MAX_CPU_PCT     1000
#define JAIL_ROOT_BASE       "/run/mayfly"   /* where root's jail directories go */

/* What the user asked for (boot, run: --no-jail, --uid, --gid, --cpu-quota). */
struct jail_config {
	bool disabled;             /* --no-jail */
	uid_t uid;                 /* started as root: the ids the VMM drops to */
	gid_t gid;
	unsigned cpu_pct;          /* cpu.max: percent of a host CPU per vCPU */
	bool detached;             /* --detached: not ended by its caller's death */
	/* Not an option: an absolute directory the jailed VM writes into
	 * (snapshot create's new snapshot), given to the VM's uid and
	 * bind-mounted into the jail at the same path. NULL: none. */
	const char *writable_dir;
	/* Not an option: the VM's control socket in the --vsock socket's
	 * directory (boot --vsock), or NULL. Removed after the VM when the VM
	 * bound it (a new inode), as the --vsock socket is. */
	const char *control_socket;
};

/* Defaults: enabled, 65534:65534, 100%. */
void jail_config_init(struct jail_config *jc);

/* One VM's jail, from jail_start to the process's end. */
struct jail {
	bool inside;               /* we are the jailed VM process (namespaces on) */
	bool restrict_only;        /* no namespaces: only what a process may do to itself */
	bool root;                 /* started as root: drop to jc->uid/gid */
	uid_t uid;
	gid_t gid;
	char dir[CONFIG_PATH_MAX]; /* the jail directory on the host */
	char vsock_dir[CONFIG_PATH_MAX];   /* boot --vsock: the socket's directory, kept */
	char writable_dir[CONFIG_PATH_MAX];   /* jail_config's, kept */
	const char *control_socket;   /* jail_config's */
	ino_t ctl_before;          /* its inode before the VM (0: none) */
	char cwd[CONFIG_PATH_MAX];
	struct cgroup cgroup;
	struct lease lease;        /* owns dir and cgroup while the supervisor lives */
	int alive_fd;              /* the VM: hung up once the supervisor is gone; -1 */
	/* CLOCK_MONOTONIC when jail_start's steps were done (0: not
	 * reached): the directory and cgroup made; the VM process forked. */
	uint64_t cgroup_ns, forked_ns;
};

enum jail_role {
	JAIL_VM,                   /* go on: build and run the VM (jailed or not) */
	JAIL_SUPERVISOR_DONE,      /* the jailed VM process ended: exit with *code */
};

/* Before the VM is built, single-threaded (no VM thread yet; the log
 * writer is not running): with the jail on, create the per-VM jail
 * directory and cgroup (quotas from cfg), then fork. The parent becomes
 * the supervisor: it passes SIGINT, SIGTERM and SIGHUP sent to it on to
 * the VM process, kills it when its own parent dies, waits for it,
 * removes the jail directory, the cgroup and a --vsock socket left
 * behind, and returns JAIL_SUPERVISOR_DONE with the VM process's exit
 * code (128+N when it was killed by signal N). The child, PID 1 of a new
 * PID namespace, in new mount, IPC, UTS, network and cgroup namespaces
 * and in the cgroup, dying with the supervisor (PDEATHSIG), its inherited
 * fds closed, returns JAIL_VM. Unprivileged, the namespaces come from a
 * user namespace; where none is allowed (or with --no-jail) there is no
 * fork: JAIL_VM in this process, after one line saying what is not
 * applied. On an error before the fork: JAIL_SUPERVISOR_DONE with *code
 * fail_code after one line (the VM process exits with it when its own
 * set-up fails). */
enum jail_role jail_start(struct jail *j, const struct jail_config *jc, const struct vm_config *cfg,
			  int fail_code, int *code) __attribute__((warn_unused_result));

/* After vm_build, before any VM thread starts: pivot_root into the jail
 * directory (empty but for the --vsock socket's directory: every image,
 * /dev/kvm and snapshot file is open already), rlimits, environment
 * cleared, every id and capability dropped, no_new_privs, not dumpable.
 * A no-op for a VM not jailed. 0, or an exit code after one line. */
int jail_enter(struct jail *j, const struct vm_config *cfg) __attribute__((warn_unused_result));

#endif
