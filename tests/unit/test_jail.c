/* test_jail.c - the jail's pieces without a VM: cgroup paths and limits on a fake cgroup tree, rlimits, fds, no_new_privs and the uid/capability drop in forked children. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/magic.h>

#include "dir_files.h"
#include "jail/cgroup.h"
#include "jail/creds.h"

static char root[PATH_MAX / 2];

static void make_root(void)
{
	const char *t = getenv("TMPDIR");

	snprintf(root, sizeof(root), "%s/mayfly-test-cgroup-XXXXXX", t && *t ? t : "/tmp");
	cr_assert_not_null(mkdtemp(root), "mkdtemp: %s", strerror(errno));
}

static void rm_tree(void)
{
	char cmd[PATH_MAX + 16];

	if (!root[0])
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	cr_assert_eq(system(cmd), 0);
	root[0] = '\0';
}

TestSuite(jail, .init = make_root, .fini = rm_tree);

/* ---- cgroup limits and paths ---- */

Test(jail, limits_follow_the_vm_size)
{
	struct cgroup_limits l;

	cgroup_limits_for(256, 512ULL << 20, 2, 100, &l);
	cr_assert_eq(l.memory_max, (256ULL + CGROUP_VMM_OVERHEAD_MIB + 512) << 20);
	cr_assert_eq(l.pids_max, 2 + CGROUP_EXTRA_PIDS);
	cr_assert_eq(l.cpu_quota_us, 200000, "two vCPUs at 100%% of a CPU each");
	cgroup_limits_for(1, 0, 1, 1, &l);
	cr_assert_eq(l.cpu_quota_us, 1000, "the kernel's minimum quota is 1 ms");
	cgroup_limits_for(128, 0, 4, 250, &l);
	cr_assert_eq(l.cpu_quota_us, 1000000);
	cr_assert_eq(l.memory_max, (128ULL + CGROUP_VMM_OVERHEAD_MIB) << 20);
}

Test(jail, cgroup_created_under_mayfly_with_its_limits)
{
	struct cgroup_limits l = { .memory_max = 123 << 20, .pids_max = 17, .cpu_quota_us = 50000 };
	struct cgroup cg;
	char parent[PATH_MAX];
	const char *why = "";

	put(root, "cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma\n");
	cr_assert_eq(cgroup_create(&cg, root, "vm-x-1", &l, &why), 0, "%s", why);
	snprintf(parent, sizeof(parent), "%s/mayfly", root);
	cr_assert_str_eq(cg.path, strcat(strcpy((char[PATH_MAX]){ 0 }, parent), "/vm-x-1"));
	cr_assert_str_eq(cg.missing, "");
	/* One controller per write (the fake file keeps the last). */
	cr_assert_str_eq(get(root, "cgroup.subtree_control"), "+cpu");
	cr_assert_str_eq(get(parent, "cgroup.subtree_control"), "+cpu");
	cr_assert_str_eq(get(cg.path, "memory.max"), "128974848");
	cr_assert_str_eq(get(cg.path, "memory.swap.max"), "0");
	cr_assert_str_eq(get(cg.path, "pids.max"), "17");
	cr_assert_str_eq(get(cg.path, "cpu.max"), "50000 100000");
	cr_assert_eq(cgroup_join(&cg), 0);
	cr_assert_str_eq(get(cg.path, "cgroup.procs"), "0");
	/* A second VM beside it: the parent is reused. */
	struct cgroup cg2;

	cr_assert_eq(cgroup_create(&cg2, root, "vm-x-2", &l, &why), 0, "%s", why);
	cr_assert_str_neq(cg.path, cg2.path);
}

Test(jail, cgroup_without_a_controller_says_so_and_skips_its_file)
{
	struct cgroup_limits l = { .memory_max = 1 << 20, .pids_max = 3, .cpu_quota_us = 1000 };
	struct cgroup cg;
	const char *why = "";

	put(root, "cgroup.controllers", "memory\n");
	cr_assert_eq(cgroup_create(&cg, root, "vm-y-1", &l, &why), 0, "%s", why);
	cr_assert_str_eq(cg.missing, "pids, cpu");
	cr_assert_str_eq(get(cg.path, "memory.max"), "1048576");
	cr_assert_null(get(cg.path, "pids.max"));
	cr_assert_null(get(cg.path, "cpu.max"));
}

Test(jail, cgroup_that_exists_is_refused_and_nothing_is_left)
{
	struct cgroup_limits l = { .memory_max = 1 << 20, .pids_max = 3, .cpu_quota_us = 1000 };
	struct cgroup cg;
	const char *why = "";
	char path[PATH_MAX];

	put(root, "cgroup.controllers", "memory pids cpu\n");
	snprintf(path, sizeof(path), "%s/mayfly", root);
	cr_assert_eq(mkdir(path, 0755), 0);
	strcat(path, "/vm-z-1");
	cr_assert_eq(mkdir(path, 0755), 0);
	cr_assert_eq(cgroup_create(&cg, root, "vm-z-1", &l, &why), -EEXIST);
	cr_assert_str_eq(cg.path, "");
	cr_assert_null(get(path, "memory.max"), "limits written into someone else's cgroup");
	cr_assert_eq(cgroup_remove(&cg, 10), 0, "removing none is a no-op");
}

Test(jail, cgroup_remove_is_bounded_and_removes_an_empty_one)
{
	struct cgroup_limits l = { .memory_max = 1 << 20, .pids_max = 3, .cpu_quota_us = 1000 };
	struct cgroup cg;
	const char *why = "";
	char path[PATH_MAX + 32];
	static const char *const files[] = { "memory.max", "memory.swap.max", "pids.max", "cpu.max" };

	put(root, "cgroup.controllers", "memory pids cpu\n");
	cr_assert_eq(cgroup_create(&cg, root, "vm-r-1", &l, &why), 0, "%s", why);
	/* A plain directory with files is not empty: an error at once. */
	cr_assert_eq(cgroup_remove(&cg, 10000), -ENOTEMPTY);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", cg.path, files[i]);
		cr_assert_eq(unlink(path), 0, "%s", path);
	}
	snprintf(path, sizeof(path), "%s", cg.path);
	cr_assert_eq(cgroup_remove(&cg, 10), 0);
	cr_assert_str_eq(cg.path, "");
	cr_assert_neq(access(path, F_OK), 0, "the cgroup is still there");
}

/* memory.events' oom_kill, as the supervisor's last line names it. */
Test(jail, cgroup_oom_kills_reads_memory_events)
{
	struct cgroup_limits l = { .memory_max = 1 << 20 };
	struct cgroup cg, none = { .path = "" };
	const char *why = "";

	put(root, "cgroup.controllers", "memory\n");
	cr_assert_eq(cgroup_create(&cg, root, "vm-o-1", &l, &why), 0, "%s", why);
	cr_assert_eq(cgroup_oom_kills(&cg), 0, "no memory.events: none known");
	put(cg.path, "memory.events", "low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 0\n");
	cr_assert_eq(cgroup_oom_kills(&cg), 1);
	put(cg.path, "memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n");
	cr_assert_eq(cgroup_oom_kills(&cg), 0);
	cr_assert_eq(cgroup_oom_kills(&none), 0);
}

Test(jail, cgroup_path_too_long_is_refused)
{
	struct cgroup_limits l = { 0 };
	char name[CGROUP_PATH_MAX];
	struct cgroup cg;
	const char *why = "";

	memset(name, 'a', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	cr_assert_eq(cgroup_create(&cg, root, name, &l, &why), -ENAMETOOLONG);
	cr_assert_str_eq(cg.path, "");
}

/* ---- cgroup_fork: a child born in its cgroup, with libc's records right ---- */

static void *thread_noop(void *arg)
{
	return arg;
}

/* In the child: libc's record of the thread id is the child's own (what
 * glibc's fork guarantees), threads start and join, and the process is in
 * the cgroup `want` names (NULL: not checked). The number of the first
 * failed check, 0 if none. */
static int check_fork_child(const char *want)
{
	char line[CGROUP_PATH_MAX + 8] = "";
	static int token;
	pthread_t t;
	void *ret = NULL;
	int *tid = NULL;
	FILE *f;

	if (prctl(PR_GET_TID_ADDRESS, &tid) < 0 || !tid || *tid != (int)syscall(SYS_gettid))
		return 1;
	if (pthread_create(&t, NULL, thread_noop, &token) || pthread_join(t, &ret) || ret != &token)
		return 2;
	if (!want)
		return 0;
	f = fopen("/proc/self/cgroup", "r");
	if (!f || !fgets(line, sizeof(line), f))
		return 3;
	fclose(f);
	line[strcspn(line, "\n")] = '\0';
	return strncmp(line, "0::", 3) || strcmp(line + 3, want) ? 4 : 0;
}

static int fork_and_check(const struct cgroup *cg, const char *want, bool *joined)
{
	int status;
	pid_t pid = cgroup_fork(cg, joined);

	cr_assert_geq(pid, 0, "cgroup_fork: %s", strerror(errno));
	if (pid == 0)
		_exit(check_fork_child(want));
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status), "the child died of signal %d", WTERMSIG(status));
	return WEXITSTATUS(status);
}

Test(jail, cgroup_fork_without_a_cgroup_is_a_plain_fork)
{
	struct cgroup cg = { .path = "" };
	bool joined = true;

	cr_assert_eq(fork_and_check(&cg, NULL, &joined), 0);
	cr_assert_not(joined);
}

Test(jail, cgroup_fork_into_a_directory_not_a_cgroup_falls_back_to_fork)
{
	struct cgroup cg;
	bool joined = true;

	cr_assert_lt(strlen(root), sizeof(cg.path));
	memcpy(cg.path, root, strlen(root) + 1);
	cr_assert_eq(fork_and_check(&cg, NULL, &joined), 0);
	cr_assert_not(joined, "a plain directory cannot hold the child: cgroup_join's job");
}

/* Where /sys/fs/cgroup is a writable cgroup v2 (the harness, a real host). */
Test(jail, cgroup_fork_puts_the_child_in_the_cgroup_from_its_start)
{
	struct cgroup_limits l = { .memory_max = 512ULL << 20, .pids_max = 32,
				   .cpu_quota_us = 100000 };
	struct cgroup cg;
	struct statfs fs;
	const char *why = "";
	char name[64];
	bool joined = false;

	if (statfs(CGROUP_ROOT, &fs) < 0 || fs.f_type != CGROUP2_SUPER_MAGIC ||
	    access(CGROUP_ROOT, W_OK) < 0) {
		rm_tree();   /* a skipped test's .fini does not run */
		cr_skip_test("no writable cgroup v2 at " CGROUP_ROOT);
	}
	snprintf(name, sizeof(name), "test-fork-%d", (int)getpid());
	cr_assert_eq(cgroup_create(&cg, CGROUP_ROOT, name, &l, &why), 0, "%s", why);
	cr_expect_eq(fork_and_check(&cg, cg.path + strlen(CGROUP_ROOT), &joined), 0);
	cr_expect(joined, "CLONE_INTO_CGROUP (Linux 5.7) was not used");
	cr_assert_eq(cgroup_remove(&cg, 2000), 0);
}

/* ---- the process's own limits, each in a forked child ---- */

/* Run fn in a child; its exit status is the number of the first failed
 * check (0: all passed). */
static int in_child(int (*fn)(void))
{
	int status;
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(fn());
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status), "the child died of signal %d", WTERMSIG(status));
	return WEXITSTATUS(status);
}

static int limit_is(int resource, rlim_t want)
{
	struct rlimit rl;

	return getrlimit(resource, &rl) == 0 && rl.rlim_cur == want && rl.rlim_max == want;
}

static int rlimits_child(void)
{
	const char *what = "";
	char big[1024] = { 0 };
	int fd;

	struct rlimit before;

	if (getrlimit(RLIMIT_NPROC, &before) < 0 || creds_set_rlimits(false, &what))
		return 1;
	if (!limit_is(RLIMIT_NPROC, before.rlim_cur) && before.rlim_cur == before.rlim_max)
		return 8;   /* a user's own uid keeps its NPROC */
	if (creds_set_rlimits(true, &what))
		return 1;
	if (!limit_is(RLIMIT_CORE, 0) || !limit_is(RLIMIT_MEMLOCK, CREDS_MEMLOCK))
		return 2;
	if (!limit_is(RLIMIT_NOFILE, CREDS_NOFILE) || !limit_is(RLIMIT_FSIZE, CREDS_FSIZE))
		return 3;
	if (!limit_is(RLIMIT_NPROC, CREDS_NPROC))
		return 4;
	/* Past FSIZE a write fails with EFBIG: SIGXFSZ does not kill us. */
	{
		struct rlimit rl = { 512, 512 };
		char path[] = "/tmp/mayfly-test-fsize-XXXXXX";

		fd = mkstemp(path);
		if (fd < 0)
			return 5;
		unlink(path);
		if (setrlimit(RLIMIT_FSIZE, &rl) < 0)
			return 6;
		if (write(fd, big, sizeof(big)) != 512 || write(fd, big, 1) != -1 || errno != EFBIG)
			return 7;
	}
	return 0;
}

Test(jail, rlimits_are_set_and_fsize_fails_with_efbig)
{
	cr_assert_eq(in_child(rlimits_child), 0, "check %d failed", in_child(rlimits_child));
}

static int fds_child(void)
{
	int leaked = open("/dev/null", O_RDONLY);
	int ours = open("/dev/null", O_RDONLY | O_CLOEXEC);

	if (leaked < 0 || ours < 0)
		return 1;
	if (creds_close_inherited_fds() < 1)
		return 2;
	if (fcntl(leaked, F_GETFD) != -1 || errno != EBADF)
		return 3;
	if (fcntl(ours, F_GETFD) < 0)
		return 4;
	if (fcntl(STDERR_FILENO, F_GETFD) < 0 && errno == EBADF)
		return 5;
	return 0;
}

Test(jail, inherited_fds_are_closed_ours_kept)
{
	cr_assert_eq(in_child(fds_child), 0);
}

static int restrict_child(void)
{
	const char *what = "";

	if (creds_restrict_self(&what))
		return 1;
	if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
		return 2;
	if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0)
		return 3;
	return 0;
}

Test(jail, restrict_self_sets_no_new_privs_and_not_dumpable)
{
	cr_assert_eq(in_child(restrict_child), 0);
}

/* The value of a "Name:\t..." line of /proc/self/status. */
static int status_line(const char *name, char *out, size_t len)
{
	char line[256];
	FILE *f = fopen("/proc/self/status", "r");
	int found = 0;

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f))
		if (!strncmp(line, name, strlen(name)) && line[strlen(name)] == ':') {
			snprintf(out, len, "%s", line + strlen(name) + 2);
			out[strcspn(out, "\n")] = '\0';
			found = 1;
		}
	fclose(f);
	return found;
}

static int drop_child(void)
{
	static const char *const zero[] = { "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb" };
	const char *what = "";
	char v[128];

	if (creds_drop(65534, 65534, &what))
		return 1;
	if (getuid() != 65534 || geteuid() != 65534 || getgid() != 65534 || getegid() != 65534)
		return 2;
	for (size_t i = 0; i < sizeof(zero) / sizeof(zero[0]); i++)
		if (!status_line(zero[i], v, sizeof(v)) || strcmp(v, "0000000000000000"))
			return 10 + (int)i;
	if (!status_line("NoNewPrivs", v, sizeof(v)) || strcmp(v, "1"))
		return 3;
	if (getgroups(0, NULL) != 0)
		return 4;
	/* No way back. */
	if (setuid(0) == 0 || setresuid(0, 0, 0) == 0)
		return 5;
	return 0;
}

/* fn in a child as root (else the test is skipped, for why): every
 * check passed. */
static void as_root_in_child(int (*fn)(void), const char *why)
{
	int failed;

	if (geteuid() != 0) {
		rm_tree();   /* a skipped test's .fini does not run */
		cr_skip_test("needs root (%s)", why);
	}
	failed = in_child(fn);
	cr_assert_eq(failed, 0, "check %d failed", failed);
}

Test(jail, drop_leaves_no_uid_capability_or_way_back)
{
	as_root_in_child(drop_child, "the drop from uid 0 to 65534");
}

/* The supervisor's drop: the capabilities kept and no other, in every
 * set; no_new_privs; the uid stays (it still waits and cleans up). */
static int keep_child(void)
{
	static const int keep[] = { CAP_CHOWN, CAP_KILL };
	const char *what = "";
	char want[32], v[128];

	if (creds_keep_only(keep, 2, &what))
		return 1;
	snprintf(want, sizeof(want), "%016llx", (1ULL << CAP_CHOWN) | (1ULL << CAP_KILL));
	if (!status_line("CapEff", v, sizeof(v)) || strcmp(v, want))
		return 2;
	if (!status_line("CapPrm", v, sizeof(v)) || strcmp(v, want))
		return 3;
	if (!status_line("CapBnd", v, sizeof(v)) || strcmp(v, want))
		return 4;
	if (!status_line("CapInh", v, sizeof(v)) || strcmp(v, "0000000000000000"))
		return 5;
	if (!status_line("CapAmb", v, sizeof(v)) || strcmp(v, "0000000000000000"))
		return 6;
	if (!status_line("NoNewPrivs", v, sizeof(v)) || strcmp(v, "1"))
		return 7;
	if (geteuid() != 0)
		return 8;
	/* What it gave up is gone: no mount, no new uid. */
	if (unshare(CLONE_NEWNS) == 0 || setresuid(65534, 65534, 65534) == 0)
		return 9;
	return 0;
}

Test(jail, keep_only_leaves_the_named_capabilities_in_every_set)
{
	as_root_in_child(keep_child, "capabilities to keep");
}
