/* creds.h - the jailed process's own limits: rlimits, inherited fds, environment, capabilities, uid/gid, no_new_privs. */
#ifndef MAYFLY_JAIL_CREDS_H
#define MAYFLY_JAIL_CREDS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* The rlimits a jailed VMM runs under (docs/security.md, "The jail"). */
#define CREDS_NOFILE    4096          /* 256 vsock connections, disks, vCPUs, eventfds */
#define CREDS_NPROC     4096          /* per uid: sized for many VMs sharing --uid */
#define CREDS_FSIZE     (64ULL << 30) /* a file it writes (stdout redirected) */
#define CREDS_MEMLOCK   0             /* the VMM locks no memory */

/* Set RLIMIT_NOFILE, CORE (0), FSIZE, MEMLOCK and, with nproc, NPROC to
 * the values above; never raises a hard limit the process already has
 * lower. NPROC counts every process and thread of the real uid: only for
 * a uid the jail drops to, never a user's own, who may already run more.
 * SIGXFSZ is ignored so a write past FSIZE fails with EFBIG instead of
 * killing the VM. 0 or -errno with *what naming the limit that failed. */
int creds_set_rlimits(bool nproc, const char **what) __attribute__((warn_unused_result));

/* Close every descriptor above stderr that does not have FD_CLOEXEC:
 * mayfly opens all of its own with O_CLOEXEC, so these are the ones the
 * caller leaked into us. Returns how many were closed, or -errno. */
int creds_close_inherited_fds(void);

/* Drop to uid/gid for good: supplementary groups cleared (where allowed),
 * gid then uid set (real, effective and saved), every capability gone
 * from the bounding, ambient, inheritable, permitted and effective sets,
 * no_new_privs set, and the process made non-dumpable. Needs CAP_SETUID,
 * CAP_SETGID and CAP_SETPCAP (root, or the owner of a user namespace)
 * unless uid/gid are already ours. 0 or -errno with *what naming the step
 * that failed (the process is then unusable: the caller exits). */
int creds_drop(uid_t uid, gid_t gid, const char **what) __attribute__((warn_unused_result));

/* no_new_privs, non-dumpable and an empty ambient and inheritable set,
 * without changing ids: what an unprivileged process can always apply to
 * itself. 0 or -errno with *what. */
int creds_restrict_self(const char **what) __attribute__((warn_unused_result));

/* Keep only the capabilities keep[0..nkeep) (CAP_*), without changing
 * ids: every other one gone from the bounding, ambient, inheritable,
 * permitted and effective sets, and no_new_privs set (an exec regains
 * nothing). 0 or -errno with *what. */
int creds_keep_only(const int *keep, int nkeep, const char **what)
	__attribute__((warn_unused_result));

/* This process dies with signal `sig` when its parent does; false when the
 * parent (whose pid was `parent`; 0: not known, not checked) is already
 * gone. */
bool creds_die_with_parent(int sig, pid_t parent);

#endif
