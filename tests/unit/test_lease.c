/* test_lease.c - a jail's lease: held, nothing of it is swept; its owner killed, the next sweep removes its directory, cgroup and lock; only empty ones, only its own prefix. */
#include "jail/lease.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char base[64], cgroups[80];

static void setup(void)
{
	snprintf(base, sizeof(base), "/tmp/mayfly-lease-XXXXXX");
	cr_assert_not_null(mkdtemp(base));
	snprintf(cgroups, sizeof(cgroups), "%s/cgroups", base);
	cr_assert_eq(mkdir(cgroups, 0755), 0);
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	if (system(cmd) != 0)
		cr_log_warn("cannot remove %s", base);
}

static bool exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/* The fake cgroup a supervisor would make for lease l. */
static void make_cgroup(const struct lease *l, char *path, size_t len)
{
	snprintf(path, len, "%s/%s", cgroups, l->cgroup_name);
	cr_assert_eq(mkdir(path, 0755), 0);
}

TestSuite(lease, .init = setup, .fini = teardown);

Test(lease, a_held_lease_is_never_swept_and_its_owner_removes_it)
{
	struct lease l;
	char cg[CONFIG_PATH_MAX + 100];

	cr_assert_eq(lease_take(&l, base, "jail-", "vm1"), 0);
	cr_assert(exists(l.dir), "no jail directory");
	cr_assert(exists(l.lock), "no lock file");
	cr_assert_eq(strncmp(l.dir, base, strlen(base)), 0);
	cr_assert_str_eq(l.lock + strlen(l.dir), LEASE_SUFFIX);
	cr_assert_eq(strncmp(l.cgroup_name, "vm-vm1-", 7), 0, "%s", l.cgroup_name);
	cr_assert_eq(strlen(l.cgroup_name), strlen("vm-vm1-XXXXXX"));
	make_cgroup(&l, cg, sizeof(cg));
	cr_assert_eq(lease_sweep(base, "jail-", cgroups), 0);
	cr_assert(exists(l.dir) && exists(cg) && exists(l.lock), "a live owner's jail was swept");
	cr_assert_eq(rmdir(l.dir), 0);
	cr_assert_eq(rmdir(cg), 0);
	lease_release(&l, true);
	cr_assert_not(exists(l.lock), "the lock file is left");
	cr_assert_eq(l.fd, -1);
}

Test(lease, a_killed_owners_jail_cgroup_and_lock_go_at_the_next_sweep)
{
	struct lease l;
	char cg[CONFIG_PATH_MAX + 100];
	int p[2], status;
	pid_t owner;

	cr_assert_eq(pipe(p), 0);
	owner = fork();
	cr_assert_geq(owner, 0);
	if (owner == 0) {
		if (lease_take(&l, base, "jail-", "vm2") ||
		    write(p[1], &l, sizeof(l)) != (ssize_t)sizeof(l))
			_exit(1);
		pause();
		_exit(0);
	}
	cr_assert_eq(read(p[0], &l, sizeof(l)), (ssize_t)sizeof(l));
	make_cgroup(&l, cg, sizeof(cg));
	cr_assert_eq(lease_sweep(base, "jail-", cgroups), 0, "swept while its owner lives");
	kill(owner, SIGKILL);
	cr_assert_eq(waitpid(owner, &status, 0), owner);
	cr_assert(exists(l.dir) && exists(cg) && exists(l.lock));
	cr_assert_eq(lease_sweep(base, "jail-", cgroups), 1);
	cr_assert_not(exists(l.dir), "the jail directory is left");
	cr_assert_not(exists(cg), "the cgroup is left");
	cr_assert_not(exists(l.lock), "the lock file is left");
	cr_assert_eq(lease_sweep(base, "jail-", cgroups), 0);
}

Test(lease, a_busy_leftover_is_kept_for_the_next_sweep)
{
	struct lease l;
	char file[CONFIG_PATH_MAX + 16];

	cr_assert_eq(lease_take(&l, base, "jail-", "vm3"), 0);
	snprintf(file, sizeof(file), "%s/x", l.dir);
	cr_assert_eq(mkdir(file, 0755), 0);
	lease_release(&l, false);   /* closed, as by a killed owner */
	cr_assert_eq(lease_sweep(base, "jail-", cgroups), 0);
	cr_assert(exists(l.lock), "the lock went before what it guards");
	cr_assert_eq(rmdir(file), 0);
	cr_assert_eq(lease_sweep(base, "jail-", cgroups), 1);
	cr_assert_not(exists(l.dir));
	cr_assert_not(exists(l.lock));
}

Test(lease, other_names_are_left_alone)
{
	struct lease l;
	char other[CONFIG_PATH_MAX];

	cr_assert_eq(lease_take(&l, base, "mayfly-jail-", "vm4"), 0);
	lease_release(&l, false);
	snprintf(other, sizeof(other), "%s/jail-foreign", base);
	cr_assert_eq(mkdir(other, 0755), 0);
	cr_assert_eq(lease_sweep(base, "jail-", NULL), 0, "another prefix's lease was swept");
	cr_assert(exists(l.dir) && exists(l.lock) && exists(other));
	cr_assert_eq(lease_sweep(base, "mayfly-jail-", NULL), 1);
	cr_assert_not(exists(l.dir));
	cr_assert(exists(other), "a directory without a lock file was removed");
	cr_assert_eq(lease_sweep("/nonexistent/mayfly", "jail-", NULL), 0);
}
