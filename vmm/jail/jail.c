/* jail.c - the VMM's jail: a supervisor process outside, the VM in namespaces, pivot_root, a cgroup and no privileges inside (docs/security.md). */
#include "jail/jail.h"
#include "jail/creds.h"
#include "jail/lease.h"
#include "jail/ns.h"
#include "lib/sparse.h"
#include "lib/exitcode.h"
#include "lib/thread.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "seccomp/seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <malloc.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/magic.h>

#define CGROUP_RMDIR_WAIT_MS 2000

/* A sanitizer build's leak checker needs /proc and to ptrace its own
 * threads (a dumpable process): it keeps both in the jail. */
#if defined(__SANITIZE_ADDRESS__)
#define JAIL_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define JAIL_SANITIZED 1
#endif
#endif
#ifndef JAIL_SANITIZED
#define JAIL_SANITIZED 0
#endif

/* A supervisor that could not leave the VM's (dead) PID namespace for its
 * children cannot fork LeakSanitizer's tracer at exit: it skips the check
 * (an unprivileged start, whose user namespace does not own the host's
 * PID namespace). */
static bool no_leak_check;

#if JAIL_SANITIZED
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
	return no_leak_check;
}
#endif

void jail_config_init(struct jail_config *jc)
{
	jc->disabled = false;
	jc->uid = JAIL_DEFAULT_UID;
	jc->gid = JAIL_DEFAULT_GID;
	jc->cpu_pct = JAIL_DEFAULT_CPU_PCT;
	jc->writable_dir = NULL;
	jc->control_socket = NULL;
}

/* The --vsock socket's directory, absolute: it is bind-mounted into the
 * jail so the device can still reach the host sockets PATH_P. */
static int vsock_dir(struct jail *j, const char *path)
{
	char buf[CONFIG_PATH_MAX * 2 + 2];

	if (path[0] == '/')
		snprintf(buf, sizeof(buf), "%s", path);
	else
		snprintf(buf, sizeof(buf), "%s/%s", j->cwd, path);
	if (strlen(buf) >= sizeof(j->vsock_dir))
		return -ENAMETOOLONG;
	snprintf(j->vsock_dir, sizeof(j->vsock_dir), "%s", dirname(buf));
	return 0;
}

/* An empty directory of our own, leased (jail/lease.h): root's under
 * JAIL_ROOT_BASE, anyone else's under $TMPDIR. What supervisors killed
 * before their cleanup left there goes first: root's cgroups too (only
 * root's base is closed to others, who could name a cgroup otherwise). */
static int make_jail_dir(struct jail *j, const struct vm_config *cfg)
{
	const char *tmp = getenv("TMPDIR"), *base = tmp && tmp[0] == '/' ? tmp : "/tmp";
	const char *prefix = "mayfly-jail-";
	int rc;

	if (j->root) {
		mkdir("/run", 0755);
		if (mkdir(JAIL_ROOT_BASE, 0755) < 0 && errno != EEXIST)
			return -errno;
		base = JAIL_ROOT_BASE;
		prefix = "jail-";
	}
	rc = lease_sweep(base, prefix, j->root ? CGROUP_ROOT "/" CGROUP_PARENT : NULL);
	if (rc > 0)
		log_info("jail: removed %d jail(s) left by killed supervisors", rc);
	rc = lease_take(&j->lease, base, prefix, cfg->id);
	if (rc)
		return rc;
	snprintf(j->dir, sizeof(j->dir), "%s", j->lease.dir);
	return 0;
}

/* A cgroup v2 per VM where /sys/fs/cgroup is one and writable; else one
 * line says the quotas are not applied. */
static void make_cgroup(struct jail *j, const struct jail_config *jc, const struct vm_config *cfg)
{
	struct cgroup_limits lim;
	struct statfs fs;
	const char *why = "";
	int rc;

	if (statfs(CGROUP_ROOT, &fs) < 0 || fs.f_type != CGROUP2_SUPER_MAGIC) {
		log_info("jail: no cgroup v2 at " CGROUP_ROOT ": no memory, pids or cpu quota");
		return;
	}
	if (access(CGROUP_ROOT, W_OK) < 0) {
		log_info("jail: " CGROUP_ROOT " is not writable: no memory, pids or cpu quota");
		return;
	}
	/* Room for every copy-on-write overlay: the root's and one per spare
	 * slot (a disk inserted there has the same quota). */
	cgroup_limits_for(cfg->mem_mib,
			  ((cfg->rootfs[0] ? 1 : 0) + (uint64_t)cfg->spare_disks) * cfg->disk_quota,
			  cfg->cpus, jc->cpu_pct, &lim);
	rc = cgroup_create(&j->cgroup, CGROUP_ROOT, j->lease.cgroup_name, &lim, &why);
	if (rc)
		log_warn("jail: %s (%s): no memory, pids or cpu quota", why, strerror(-rc));
	else if (j->cgroup.missing[0])
		log_warn("jail: cgroup without the %s controller(s): those quotas are not applied",
			j->cgroup.missing);
	else
		log_info("jail: cgroup %s: memory.max %llu MiB, pids.max %llu, cpu.max %llu/%u",
			 j->cgroup.path, (unsigned long long)lim.memory_max >> 20,
			 (unsigned long long)lim.pids_max, (unsigned long long)lim.cpu_quota_us,
			 CGROUP_PERIOD_US);
}

/* Everything jail_start made on the host, once the VM process is gone. */
static void cleanup(struct jail *j, const struct vm_config *cfg, bool socket_was_there)
{
	bool removed = true;
	struct stat st;
	int rc;

	if (j->dir[0] && rmdir(j->dir) < 0) {
		log_warn("cannot remove the jail directory '%s': %s", j->dir, strerror(errno));
		removed = false;
	}
	rc = cgroup_remove(&j->cgroup, CGROUP_RMDIR_WAIT_MS);
	if (rc) {
		log_warn("cannot remove the cgroup '%s': %s", j->cgroup.path, strerror(-rc));
		removed = false;
	}
	/* What could not go now is the next mayfly's to remove. */
	lease_release(&j->lease, removed);
	/* The jailed VM may not unlink its socket (its directory is not the
	 * VM uid's); one that was not there before it started is its own. */
	if (cfg->vsock_path[0] && !socket_was_there && lstat(cfg->vsock_path, &st) == 0 &&
	    S_ISSOCK(st.st_mode))
		unlink(cfg->vsock_path);
	/* Its control socket (mayfly pause, fork), last: a client waits for it
	 * to go. The VM bound a new one (a new inode) over any stale one. */
	if (j->control_socket && lstat(j->control_socket, &st) == 0 && S_ISSOCK(st.st_mode) &&
	    st.st_ino != j->ctl_before)
		unlink(j->control_socket);
}

/* The supervisor: signals sent to us go to the VM process (the terminal's
 * own, si_code SI_KERNEL, reached it already: it is in our process
 * group); our parent's death (PDEATHSIG) kills it, unless parent is 0
 * (detached). Its exit code. */
static int supervise(pid_t child, pid_t parent, const sigset_t *set, const struct cgroup *cg)
{
	int sfd = signalfd(-1, set, SFD_CLOEXEC), status;
	struct signalfd_siginfo si;
	bool parent_died = false;

	for (;;) {
		pid_t w = waitpid(child, &status, WNOHANG);

		if (w == child)
			break;
		if (w < 0 && errno != EINTR) {
			log_say("jail: lost the VM process: %s", strerror(errno));
			return EXIT_INTERNAL;
		}
		if (sfd < 0) {            /* no signalfd: just wait */
			if (waitpid(child, &status, 0) == child)
				break;
			continue;
		}
		if (read(sfd, &si, sizeof(si)) != sizeof(si))
			continue;
		if (si.ssi_signo == SIGCHLD)
			continue;
		if (parent && getppid() != parent) {
			parent_died = true;
			kill(child, SIGKILL);
		} else if (si.ssi_code != SI_KERNEL) {
			kill(child, (int)si.ssi_signo);
		}
	}
	if (sfd >= 0)
		close(sfd);
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (parent_died)
		log_say("jail: our parent died: the VM was killed");
	else if (WTERMSIG(status) == SIGKILL && cgroup_oom_kills(cg))
		log_say("jail: the VM process was killed by its memory limit (the cgroup's OOM "
			"killer, memory.max)");
	else
		log_say("jail: the VM process was killed by signal %d (%s)%s", WTERMSIG(status),
			strsignal(WTERMSIG(status)),
			WTERMSIG(status) == SIGKILL ? ": its cgroup's memory.max, or a kill" : "");
	return 128 + WTERMSIG(status);
}

/* What the supervisor keeps once the VM is forked: signals to a VM of
 * another uid (CAP_KILL); the jailed VMM's snapshot made the caller's
 * (CAP_CHOWN); a --get written, a socket or directory removed where the
 * caller's root may write but does not own (CAP_DAC_OVERRIDE, CAP_FOWNER:
 * the VM's socket in a sticky /tmp). No mount, namespace, uid change,
 * ptrace, raw I/O or module: a supervisor taken over gets none of them. */
static const int supervisor_caps[] = { CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_KILL };

/* The supervisor's own confinement, before it waits: those capabilities,
 * no_new_privs and its seccomp role. 0 or -errno after one line. */
static int confine_supervisor(void)
{
	const char *what = "";
	int rc = creds_keep_only(supervisor_caps, sizeof(supervisor_caps) / sizeof(supervisor_caps[0]),
				 &what);

	if (rc) {
		log_say("jail: cannot drop the supervisor's capabilities: %s: %s", what, strerror(-rc));
		return rc;
	}
	seccomp_enter(SECCOMP_ROLE_SUPERVISOR);
	return 0;
}

/* In the forked VM process, before anything else. alive: the read end
 * of a pipe only the supervisor writes to (its pid is not in our PID
 * namespace: getppid() says 0), hung up once it is gone. */
static int become_vm(struct jail *j, int alive, const sigset_t *set, bool in_cgroup)
{
	struct pollfd p = { .fd = alive, .events = POLLIN };
	sigset_t vm_set = *set;
	const char *what = "";
	int rc;

	creds_die_with_parent(SIGKILL, 0);
	if (poll(&p, 1, 0) != 0)
		return -ESRCH;   /* it died before the prctl: nobody would kill us */
	/* Kept: the uid drop clears PDEATHSIG, which jail_enter sets again. */
	j->alive_fd = alive;
	lease_drop(&j->lease);   /* the supervisor's to hold, not ours */
	/* As PID 1 of its namespace this process gets no signal it has no
	 * handler for, unless it is blocked: SIGINT, SIGTERM and SIGHUP stay
	 * blocked (queued) until vm_run reads them from its signalfd. */
	sigdelset(&vm_set, SIGCHLD);
	sigprocmask(SIG_SETMASK, &vm_set, NULL);
	rc = in_cgroup ? 0 : cgroup_join(&j->cgroup);
	if (rc) {
		log_say("jail: cannot join the VM's cgroup: %s", strerror(-rc));
		return rc;
	}
	rc = ns_unshare_rest(&what);
	if (rc) {
		log_say("jail: cannot create the VM's namespaces: %s: %s", what, strerror(-rc));
		return rc;
	}
	rc = creds_close_inherited_fds();
	if (rc > 0)
		log_info("jail: closed %d inherited file descriptor(s)", rc);
	j->inside = true;
	return 0;
}

enum jail_role jail_start(struct jail *j, const struct jail_config *jc, const struct vm_config *cfg,
			  int fail_code, int *code)
{
	pid_t parent = getppid(), child;
	const char *what = "";
	struct stat st;
	bool socket_was_there, in_cgroup;
	sigset_t set;
	int rc, pidns, alive[2];

	sparse_zero(j, sizeof(*j));   /* path buffers, mostly empty: sparse.h */
	j->lease.fd = -1;
	j->alive_fd = -1;
	*code = fail_code;
	if (jc->disabled) {
		log_warn("--no-jail: the VMM keeps every privilege of this process, with no "
			 "namespaces and no quotas (for debugging only)");
		return JAIL_VM;
	}
	j->root = geteuid() == 0;
	j->uid = j->root ? jc->uid : getuid();
	j->gid = j->root ? jc->gid : getgid();
	if (!getcwd(j->cwd, sizeof(j->cwd)))
		snprintf(j->cwd, sizeof(j->cwd), "/");
	if (cfg->vsock_path[0] && vsock_dir(j, cfg->vsock_path)) {
		log_say("jail: the --vsock path is too long");
		return JAIL_SUPERVISOR_DONE;
	}
	socket_was_there = cfg->vsock_path[0] && lstat(cfg->vsock_path, &st) == 0;
	j->control_socket = jc->control_socket;
	if (j->control_socket && lstat(j->control_socket, &st) == 0)
		j->ctl_before = st.st_ino;
	if (!j->root) {
		rc = ns_enter_user(j->uid, j->gid, &what);
		if (rc) {
			log_warn("jail: not applied: namespaces, pivot_root, cgroup (%s: %s); applied: "
				"no_new_privs, rlimits, closed fds, empty environment, not dumpable",
				what, strerror(-rc));
			j->restrict_only = true;
			return JAIL_VM;
		}
	}
	rc = make_jail_dir(j, cfg);
	if (rc) {
		log_say("jail: cannot create a jail directory: %s", strerror(-rc));
		return JAIL_SUPERVISOR_DONE;
	}
	if (jc->writable_dir) {
		snprintf(j->writable_dir, sizeof(j->writable_dir), "%s", jc->writable_dir);
		/* Its files are handed back to us once the VM is done. */
		if (j->root && chown(j->writable_dir, j->uid, j->gid) < 0) {
			log_say("jail: cannot give '%s' to the VM's uid: %s", j->writable_dir,
				strerror(errno));
			cleanup(j, cfg, socket_was_there);
			return JAIL_SUPERVISOR_DONE;
		}
	}
	make_cgroup(j, jc, cfg);
	j->cgroup_ns = clock_now_ns();
	/* The supervisor dies with our caller (unless detached: mayfly
	 * serve's sandboxes outlive the service); the VM with the supervisor. */
	if (jc->detached)
		parent = 0;
	else
		creds_die_with_parent(SIGTERM, parent);
	thread_stop_signals(&set);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	/* Only our next child enters the new PID namespace, as its PID 1;
	 * then ours goes back to our own for any later child. */
	pidns = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
	if (unshare(CLONE_NEWPID) < 0) {
		log_say("jail: cannot create a PID namespace: %s", strerror(errno));
		goto err_pidns;
	}
	if (pipe2(alive, O_CLOEXEC) < 0) {
		log_say("jail: cannot create a pipe: %s", strerror(errno));
		goto err_pidns;
	}
	fflush(NULL);   /* nothing buffered is written twice */
	child = cgroup_fork(&j->cgroup, &in_cgroup);
	if (child < 0) {
		log_say("jail: cannot fork the VM process: %s", strerror(errno));
		close(alive[0]);
		close(alive[1]);
		goto err_pidns;
	}
	close(alive[child == 0 ? 1 : 0]);
	if (child > 0) {
		no_leak_check = pidns < 0 || setns(pidns, CLONE_NEWPID) < 0;
		if (pidns >= 0)
			close(pidns);
	}
	if (child == 0) {
		j->forked_ns = clock_now_ns();
		if (pidns >= 0)
			close(pidns);
		if (become_vm(j, alive[0], &set, in_cgroup))
			_exit(fail_code);
		return JAIL_VM;
	}
	/* A page the VM process writes from here is copied if we still map
	 * it: our free heap pages, given back now, become its alone (each of
	 * a fork's many children would pay every copy). */
	malloc_trim(0);
	thread_drop_dead_stack();   /* and so do our dead frames */
	if (!confine_supervisor()) {
		*code = supervise(child, parent, &set, &j->cgroup);
	} else {
		kill(child, SIGKILL);
		while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
			;
		*code = EXIT_INTERNAL;
	}
	close(alive[1]);
	cleanup(j, cfg, socket_was_there);
	return JAIL_SUPERVISOR_DONE;

err_pidns:
	if (pidns >= 0)
		close(pidns);
	cleanup(j, cfg, socket_was_there);
	return JAIL_SUPERVISOR_DONE;
}

int jail_enter(struct jail *j, const struct vm_config *cfg)
{
	const char *keep[2], *what = "";
	int nkeep = 0, rc;

	if (!j->inside && !j->restrict_only)
		return 0;
	if (j->inside) {
		if (j->vsock_dir[0])
			keep[nkeep++] = j->vsock_dir;
		if (j->writable_dir[0])
			keep[nkeep++] = j->writable_dir;
		/* A relative --vsock path resolves against the same directory. */
		rc = ns_pivot_root(j->dir, keep, nkeep,
				   cfg->vsock_path[0] && cfg->vsock_path[0] != '/' ? j->cwd : NULL,
				   JAIL_SANITIZED, &what);
		if (rc)
			goto err;
	}
	/* Without a fork the leaked fds are still here (the child closed its
	 * own at its start, where /proc still showed them). */
	if (j->restrict_only)
		creds_close_inherited_fds();
	rc = creds_set_rlimits(j->root, &what);
	if (rc)
		goto err;
	clearenv();
	rc = j->inside ? creds_drop(j->uid, j->gid, &what) : creds_restrict_self(&what);
	if (!rc && JAIL_SANITIZED && prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
		rc = -errno, what = "PR_SET_DUMPABLE for the sanitizer";
	if (rc)
		goto err;
	if (j->inside) {
		/* Changing the uid cleared PDEATHSIG (commit_creds): set it again,
		 * then check the supervisor did not die in between. */
		struct pollfd p = { .fd = j->alive_fd, .events = POLLIN };

		if (!creds_die_with_parent(SIGKILL, 0) || poll(&p, 1, 0) != 0) {
			log_say("jail: the supervisor is gone");
			return EXIT_INTERNAL;
		}
		close(j->alive_fd);
		j->alive_fd = -1;
	}
	if (j->inside)
		log_info("jail: in '%s' as uid %u gid %u, no capabilities, no_new_privs", j->dir,
			 (unsigned)j->uid, (unsigned)j->gid);
	return 0;

err:
	log_say("jail: %s failed: %s", what, strerror(-rc));
	return EXIT_INTERNAL;
}
