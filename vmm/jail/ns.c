/* ns.c - the jail's namespaces and its root: unshare, a user namespace for an unprivileged start, pivot_root into an empty per-VM directory. */
#include "jail/ns.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define JAIL_MOUNT_FLAGS (MS_NOSUID | MS_NODEV | MS_NOEXEC)

static int fail(const char **what, const char *step)
{
	int rc = -errno;

	*what = step;
	return rc ? rc : -EPERM;
}

static int write_text(const char *path, const char *text)
{
	size_t len = strlen(text);
	int fd = open(path, O_WRONLY | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, text, len) != (ssize_t)len)
		rc = -errno ? -errno : -EIO;
	close(fd);
	return rc;
}

int ns_enter_user(uid_t uid, gid_t gid, const char **what)
{
	char map[64];
	int rc;

	if (unshare(CLONE_NEWUSER) < 0)
		return fail(what, "a user namespace");
	/* Before gid_map: an unprivileged writer must deny setgroups. */
	rc = write_text("/proc/self/setgroups", "deny");
	if (!rc) {
		snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
		rc = write_text("/proc/self/uid_map", map);
	}
	if (!rc) {
		snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)gid, (unsigned)gid);
		rc = write_text("/proc/self/gid_map", map);
	}
	if (rc)
		*what = "the user namespace's id maps";
	return rc;
}

int ns_unshare_rest(const char **what)
{
	if (unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET | CLONE_NEWCGROUP) < 0)
		return fail(what, "mount, IPC, UTS, network and cgroup namespaces");
	/* Shared mounts would carry our jail's mounts back to the host. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return fail(what, "making the mounts private");
	if (sethostname("mayfly", 6) < 0)
		return fail(what, "sethostname");
	/* The host's /proc shows host pids: our own namespace's, until the
	 * pivot (LeakSanitizer, for one, matches getpid() against it). */
	if (mount("proc", "/proc", "proc", JAIL_MOUNT_FLAGS, NULL) < 0)
		return fail(what, "mounting /proc for the PID namespace");
	return 0;
}

/* mkdir -p of an absolute path under root. */
static int make_path(const char *root, const char *path)
{
	char buf[PATH_MAX];
	size_t rl = strlen(root);

	if (snprintf(buf, sizeof(buf), "%s%s", root, path) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	for (char *p = buf + rl + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return mkdir(buf, 0755) < 0 && errno != EEXIST ? -errno : 0;
}

static int bind_into(const char *dir, const char *src)
{
	char dst[PATH_MAX];
	int rc;

	if (src[0] != '/')
		return -EINVAL;
	rc = make_path(dir, src);
	if (rc)
		return rc;
	snprintf(dst, sizeof(dst), "%s%s", dir, src);
	if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
		return -errno;
	/* A bind mount takes new flags only through a remount. In a user
	 * namespace one the host locked (read-only, say) refuses it; it then
	 * keeps the host's own flags, which are no weaker. */
	mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | JAIL_MOUNT_FLAGS, NULL);
	return 0;
}

int ns_pivot_root(const char *dir, const char *const *keep, int nkeep, const char *cwd,
		  bool with_proc, const char **what)
{
	int rc;

	if (mount("mayfly-jail", dir, "tmpfs", JAIL_MOUNT_FLAGS, "size=64k,nr_inodes=256,mode=0755") < 0)
		return fail(what, "mounting the jail's tmpfs");
	for (int i = 0; i < nkeep; i++) {
		rc = bind_into(dir, keep[i]);
		if (rc) {
			*what = "bind-mounting a directory the VM needs into the jail";
			return rc;
		}
	}
	if (with_proc) {
		char proc[PATH_MAX];

		snprintf(proc, sizeof(proc), "%s/proc", dir);
		if (make_path(dir, "/proc") || mount("proc", proc, "proc", JAIL_MOUNT_FLAGS, NULL) < 0)
			return fail(what, "mounting /proc in the jail");
	}
	if (cwd && make_path(dir, cwd)) {
		*what = "making the working directory in the jail";
		return -ENAMETOOLONG;
	}
	if (chdir(dir) < 0)
		return fail(what, "chdir into the jail");
	/* pivot_root(".", "."): the old root ends up stacked on the new one,
	 * and detaching "." then removes it; no directory for it is needed.
	 * An initramfs root (rootfs, as in the nested harness's L1) has no
	 * parent mount and pivot_root refuses it (EINVAL): there the jail is
	 * moved over / and entered with chroot, as switch_root does; the old
	 * root stays underneath, out of reach of a process that can no
	 * longer mount or chroot (no capabilities, in our mount namespace). */
	if (syscall(SYS_pivot_root, ".", ".") == 0) {
		if (umount2(".", MNT_DETACH) < 0)
			return fail(what, "detaching the old root");
	} else if (errno != EINVAL) {
		return fail(what, "pivot_root");
	} else if (mount(".", "/", NULL, MS_MOVE, NULL) < 0 || chroot(".") < 0) {
		return fail(what, "moving the jail over an initramfs root");
	}
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | JAIL_MOUNT_FLAGS, NULL) < 0)
		return fail(what, "making the jail's root read-only");
	if (chdir(cwd && cwd[0] == '/' ? cwd : "/") < 0 && chdir("/") < 0)
		return fail(what, "chdir to /");
	return 0;
}
