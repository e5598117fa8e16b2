/* ns.h - the jail's namespaces and its root: unshare, a user namespace for an unprivileged start, pivot_root into an empty per-VM directory. */
#ifndef MAYFLY_JAIL_NS_H
#define MAYFLY_JAIL_NS_H

#include <stdbool.h>
#include <sys/types.h>

/* Become the owner of a new user namespace in which our own uid and gid
 * map to themselves (nothing else is mapped; setgroups is denied), so an
 * unprivileged process can create the other namespaces. Single-threaded
 * callers only. 0 or -errno with *what. */
int ns_enter_user(uid_t uid, gid_t gid, const char **what) __attribute__((warn_unused_result));

/* New mount, IPC, UTS, network and cgroup namespaces for the calling
 * process (the PID namespace is the supervisor's unshare before its
 * fork); every mount made private, so nothing done here reaches the
 * host; the host name "mayfly". 0 or -errno with *what. */
int ns_unshare_rest(const char **what) __attribute__((warn_unused_result));

/* Make dir (an empty directory) the root: a small tmpfs mounted on it in
 * our mount namespace, each of keep[0..nkeep) (absolute directories)
 * bind-mounted read-write at its own path in it (nosuid, nodev, noexec),
 * with_proc: our PID namespace's /proc at /proc (sanitizer builds: the
 * leak checker reads it), pivot_root into it, the old root detached, the
 * new root read-only and the working directory `cwd` (made in it when
 * not NULL), else "/". 0 or -errno with *what. */
int ns_pivot_root(const char *dir, const char *const *keep, int nkeep, const char *cwd,
		  bool with_proc, const char **what) __attribute__((warn_unused_result));

#endif
