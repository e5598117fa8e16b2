/* cgroup.c - one cgroup v2 per VM: memory.max, pids.max and cpu.max from the VM's size, created before it starts and removed after. */
#include "jail/cgroup.h"
#include "lib/log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/sched.h>

static const char *const controllers[] = { "memory", "pids", "cpu" };
#define NR_CONTROLLERS (sizeof(controllers) / sizeof(controllers[0]))

void cgroup_limits_for(uint64_t mem_mib, uint64_t disk_quota, unsigned cpus, unsigned cpu_pct,
		       struct cgroup_limits *out)
{
	uint64_t quota = (uint64_t)cpus * cpu_pct * (CGROUP_PERIOD_US / 100);

	out->memory_max = ((mem_mib + CGROUP_VMM_OVERHEAD_MIB) << 20) + disk_quota;
	out->pids_max = (uint64_t)cpus + CGROUP_EXTRA_PIDS;
	out->cpu_quota_us = quota < 1000 ? 1000 : quota;
}

static int write_file(const char *dir, const char *name, const char *text)
{
	char path[CGROUP_PATH_MAX + 64];
	size_t len = strlen(text);
	ssize_t n;
	int fd, rc = 0;

	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	/* O_CREAT: a cgroup file exists already; a test's fake tree gets one. */
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	n = write(fd, text, len);
	if (n != (ssize_t)len)
		rc = n < 0 ? -errno : -EIO;
	if (close(fd) < 0 && !rc)
		rc = -errno;
	return rc;
}

/* dir/file's first len - 1 bytes into buf, NUL-terminated ("" when it
 * cannot be read). */
static void read_small(const char *dir, const char *file, char *buf, size_t len)
{
	char path[CGROUP_PATH_MAX + 64];
	ssize_t n = -1;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, len - 1);
		close(fd);
	}
	buf[n > 0 ? n : 0] = '\0';
}

/* Which of ours the cgroup at dir offers ("cgroup.controllers"), as bits. */
static unsigned available(const char *dir)
{
	char buf[512];
	unsigned bits = 0;

	read_small(dir, "cgroup.controllers", buf, sizeof(buf));
	for (char *tok = strtok(buf, " \n"); tok; tok = strtok(NULL, " \n"))
		for (size_t i = 0; i < NR_CONTROLLERS; i++)
			if (!strcmp(tok, controllers[i]))
				bits |= 1u << i;
	return bits;
}

uint64_t cgroup_oom_kills(const struct cgroup *cg)
{
	char buf[512], *p;
	unsigned long long n = 0;

	if (!cg->path[0])
		return 0;
	read_small(cg->path, "memory.events", buf, sizeof(buf));
	p = strstr(buf, "oom_kill ");
	if (p && (p == buf || p[-1] == '\n'))
		sscanf(p + 9, "%llu", &n);
	return n;
}

/* Let dir's children use the controllers in bits, one at a time (one the
 * kernel refuses does not cost the others); the bits that took. */
static unsigned delegate(const char *dir, unsigned bits)
{
	char text[32];

	for (size_t i = 0; i < NR_CONTROLLERS; i++) {
		if (!(bits & (1u << i)))
			continue;
		snprintf(text, sizeof(text), "+%s", controllers[i]);
		if (write_file(dir, "cgroup.subtree_control", text))
			bits &= ~(1u << i);
	}
	return bits;
}

int cgroup_create(struct cgroup *cg, const char *root, const char *name,
		  const struct cgroup_limits *lim, const char **why)
{
	char parent[CGROUP_PATH_MAX], num[64];
	unsigned bits;
	int rc;

	cg->path[0] = cg->missing[0] = '\0';
	if (snprintf(parent, sizeof(parent), "%s/%s", root, CGROUP_PARENT) >= (int)sizeof(parent) ||
	    snprintf(cg->path, sizeof(cg->path), "%s/%s", parent, name) >= (int)sizeof(cg->path)) {
		cg->path[0] = '\0';
		*why = "the cgroup path is too long";
		return -ENAMETOOLONG;
	}
	bits = available(root);
	if (mkdir(parent, 0755) < 0 && errno != EEXIST) {
		rc = -errno;
		*why = "cannot create the cgroup " CGROUP_PARENT;
		goto err_path;
	}
	/* Both levels delegate; a controller that is on already stays on. */
	bits = delegate(parent, delegate(root, bits));
	if (mkdir(cg->path, 0755) < 0) {
		rc = -errno;
		*why = "cannot create the VM's cgroup";
		goto err_path;
	}
	for (size_t i = 0; i < NR_CONTROLLERS; i++)
		if (!(bits & (1u << i)))
			snprintf(cg->missing + strlen(cg->missing),
				 sizeof(cg->missing) - strlen(cg->missing), "%s%s",
				 cg->missing[0] ? ", " : "", controllers[i]);
	rc = 0;
	if (bits & 1u) {
		snprintf(num, sizeof(num), "%llu", (unsigned long long)lim->memory_max);
		rc = write_file(cg->path, "memory.max", num);
		/* Swap would let the VM past memory.max; absent without swap. */
		if (!rc)
			write_file(cg->path, "memory.swap.max", "0");
	}
	if (!rc && (bits & 2u)) {
		snprintf(num, sizeof(num), "%llu", (unsigned long long)lim->pids_max);
		rc = write_file(cg->path, "pids.max", num);
	}
	if (!rc && (bits & 4u)) {
		snprintf(num, sizeof(num), "%llu %u", (unsigned long long)lim->cpu_quota_us,
			 CGROUP_PERIOD_US);
		rc = write_file(cg->path, "cpu.max", num);
	}
	if (rc) {
		*why = "cannot write the VM's cgroup limits";
		rmdir(cg->path);
		goto err_path;
	}
	return 0;

err_path:
	cg->path[0] = '\0';
	return rc;
}

pid_t cgroup_fork(const struct cgroup *cg, bool *joined)
{
	struct clone_args args = { .exit_signal = SIGCHLD };
	void *robust_head = NULL;
	size_t robust_len = 0;
	int *tid = NULL, fd;
	long pid;

	*joined = false;
	if (!cg->path[0])
		return fork();
	fd = open(cg->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	/* What glibc's own fork() does for the child, done by hand: the
	 * kernel writes the child's tid where libc keeps it (and clears it
	 * at exit), and the child registers the same robust-futex list. */
	if (fd < 0 || prctl(PR_GET_TID_ADDRESS, &tid) < 0 || !tid ||
	    syscall(SYS_get_robust_list, 0, &robust_head, &robust_len) < 0) {
		if (fd >= 0)
			close(fd);
		return fork();
	}
	args.flags = CLONE_INTO_CGROUP | CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID;
	args.child_tid = (uintptr_t)tid;
	args.cgroup = (uint64_t)fd;
	pid = syscall(SYS_clone3, &args, sizeof(args));
	if (pid == 0) {
		syscall(SYS_set_robust_list, robust_head, robust_len);
		close(fd);
		*joined = true;
		return 0;
	}
	close(fd);
	if (pid > 0) {
		*joined = true;
		return (pid_t)pid;
	}
	/* No clone3, no CLONE_INTO_CGROUP, or cg not a cgroup v2 directory:
	 * the child joins by itself (and says so if that fails). */
	return fork();
}

int cgroup_join(const struct cgroup *cg)
{
	return cg->path[0] ? write_file(cg->path, "cgroup.procs", "0") : 0;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void cgroup_kill_all(const char *path)
{
	char file[CGROUP_PATH_MAX + 64];
	int fd;

	/* Never created (no O_CREAT): an older kernel, or a directory that is
	 * no cgroup, has none. */
	if (snprintf(file, sizeof(file), "%s/cgroup.kill", path) >= (int)sizeof(file))
		return;
	fd = open(file, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (write(fd, "1", 1) != 1)
		log_warn("cannot kill the processes of cgroup '%s': %s", path, strerror(errno));
	close(fd);
}

int cgroup_remove(struct cgroup *cg, int timeout_ms)
{
	long long until = now_ms() + timeout_ms;
	int rc = 0;

	if (!cg->path[0])
		return 0;
	/* The last task may still be leaving the cgroup after its parent
	 * reaped it (EBUSY): wait for that, bounded, never for anything else. */
	while (rmdir(cg->path) < 0) {
		rc = -errno;
		if (errno != EBUSY || now_ms() >= until)
			break;
		poll(NULL, 0, 5);
		rc = 0;
	}
	if (!rc)
		cg->path[0] = '\0';
	return rc;
}
