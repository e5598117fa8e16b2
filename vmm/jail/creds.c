/* creds.c - the jailed process's own limits: rlimits, inherited fds, environment, capabilities, uid/gid, no_new_privs. */
#include "jail/creds.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static int fail(const char **what, const char *step)
{
	int rc = -errno;

	*what = step;
	return rc ? rc : -EPERM;
}

/* Lower a limit to `want`; a hard limit already below it stays. */
static int lower(int resource, rlim_t want)
{
	struct rlimit rl;

	if (getrlimit(resource, &rl) < 0)
		return -errno;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want)
		want = rl.rlim_max;
	rl.rlim_cur = rl.rlim_max = want;
	return setrlimit(resource, &rl) < 0 ? -errno : 0;
}

int creds_set_rlimits(bool nproc, const char **what)
{
	static const struct { int resource; rlim_t value; const char *name; } limits[] = {
		{ RLIMIT_NOFILE, CREDS_NOFILE, "RLIMIT_NOFILE" },
		{ RLIMIT_NPROC, CREDS_NPROC, "RLIMIT_NPROC" },
		{ RLIMIT_CORE, 0, "RLIMIT_CORE" },
		{ RLIMIT_FSIZE, CREDS_FSIZE, "RLIMIT_FSIZE" },
		{ RLIMIT_MEMLOCK, CREDS_MEMLOCK, "RLIMIT_MEMLOCK" },
	};

	/* Past FSIZE a write fails with EFBIG; the default SIGXFSZ would
	 * kill the VM for a full log file. */
	signal(SIGXFSZ, SIG_IGN);
	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
		int rc;

		if (limits[i].resource == RLIMIT_NPROC && !nproc)
			continue;
		rc = lower(limits[i].resource, limits[i].value);

		if (rc) {
			*what = limits[i].name;
			return rc;
		}
	}
	return 0;
}

int creds_close_inherited_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int closed = 0, fd;
	struct dirent *e;

	if (!d)
		return -errno;
	while ((e = readdir(d)) != NULL) {
		char *end;
		long n = strtol(e->d_name, &end, 10);
		int flags;

		if (*end || end == e->d_name || n <= STDERR_FILENO || n == dirfd(d))
			continue;
		fd = (int)n;
		flags = fcntl(fd, F_GETFD);
		if (flags >= 0 && !(flags & FD_CLOEXEC)) {
			close(fd);
			closed++;
		}
	}
	closedir(d);
	return closed;
}

static int caps_clear(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

	memset(data, 0, sizeof(data));
	return (int)syscall(SYS_capset, &hdr, data);
}

int creds_restrict_self(const char **what)
{
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return fail(what, "clearing the ambient capabilities");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return fail(what, "no_new_privs");
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return fail(what, "PR_SET_DUMPABLE");
	return 0;
}

/* Every capability the kernel knows leaves the bounding set, but
 * keep[0..nkeep). 0, or -1 with errno. */
static int bounding_keep_only(const int *keep, int nkeep)
{
	for (int cap = 0; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; cap++) {
		bool kept = false;

		for (int i = 0; i < nkeep; i++)
			kept |= keep[i] == cap;
		if (!kept && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
			return -1;
	}
	return 0;
}

int creds_drop(uid_t uid, gid_t gid, const char **what)
{
	/* A user namespace's setgroups is "deny": its groups cannot be
	 * dropped, and only map to the overflow gid inside anyway. */
	if (setgroups(0, NULL) < 0 && errno != EPERM)
		return fail(what, "setgroups");
	/* The bounding set first: dropping it needs CAP_SETPCAP, gone below. */
	if (bounding_keep_only(NULL, 0) < 0)
		return fail(what, "dropping the bounding capabilities");
	if (setresgid(gid, gid, gid) < 0)
		return fail(what, "setresgid");
	if (setresuid(uid, uid, uid) < 0)
		return fail(what, "setresuid");
	/* From root to another uid the kernel clears them itself; in a user
	 * namespace the uid does not change and they stay: clear all. */
	if (caps_clear() < 0)
		return fail(what, "capset");
	if (getuid() != uid || geteuid() != uid || getgid() != gid || getegid() != gid) {
		errno = EPERM;
		return fail(what, "checking the new ids");
	}
	return creds_restrict_self(what);
}

int creds_keep_only(const int *keep, int nkeep, const char **what)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

	memset(data, 0, sizeof(data));
	for (int i = 0; i < nkeep; i++) {
		data[keep[i] / 32].permitted |= 1u << (keep[i] % 32);
		data[keep[i] / 32].effective |= 1u << (keep[i] % 32);
	}
	/* The bounding set first: dropping it needs CAP_SETPCAP, gone below. */
	if (bounding_keep_only(keep, nkeep) < 0)
		return fail(what, "dropping the bounding capabilities");
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return fail(what, "clearing the ambient capabilities");
	if (syscall(SYS_capset, &hdr, data) < 0)
		return fail(what, "capset");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return fail(what, "no_new_privs");
	return 0;
}

bool creds_die_with_parent(int sig, pid_t parent)
{
	if (prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) < 0)
		return false;
	/* The parent may have died before the prctl: it would never fire. */
	return !parent || getppid() == parent;
}
