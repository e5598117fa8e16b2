/* test_serve_registry.c - mayfly serve's records on disk, and the clean-up at start: a live VM process of a previous service killed (never a reused pid), its cgroup, jail directory and files removed; a cgroup or lease left without its jail directory found by name. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "serve/registry.h"
#include "lib/fs_tree.h"

static char root[] = "/tmp/serve-registry-XXXXXX";

static void setup(void)
{
	cr_assert_not_null(mkdtemp(root));
}

static void teardown(void)
{
	fs_remove_tree(root);
}

TestSuite(serve_registry, .init = setup, .fini = teardown);

#define PATH(out, fmt, ...) snprintf(out, sizeof(out), "%s/" fmt, root, ##__VA_ARGS__)

static bool exists(const char *p)
{
	struct stat st;

	return lstat(p, &st) == 0;
}

Test(serve_registry, a_record_reads_back_as_written)
{
	struct registry_record w = { .id = "0123abcd", .state = "running", .template = "t1",
				     .pid = 1234, .pid_start = 99, .created = 1700000000, .cpus = 2,
				     .mem_mib = 256, .disk_quota = 4096, .ttl_s = 60, .idle_s = 5 };
	struct registry_record r;

	cr_assert_eq(registry_write(root, &w), 0);
	cr_assert_eq(registry_read(root, &r), 0);
	cr_assert_str_eq(r.id, w.id);
	cr_assert_str_eq(r.state, w.state);
	cr_assert_str_eq(r.template, w.template);
	cr_assert_eq(r.pid, w.pid);
	cr_assert_eq(r.pid_start, w.pid_start);
	cr_assert_eq(r.created, w.created);
	cr_assert_eq(r.cpus, w.cpus);
	cr_assert_eq(r.mem_mib, w.mem_mib);
	cr_assert_eq(r.disk_quota, w.disk_quota);
	cr_assert_eq(r.ttl_s, w.ttl_s);
	cr_assert_eq(r.idle_s, w.idle_s);
}

Test(serve_registry, a_record_out_of_shape_is_refused)
{
	char p[512];
	FILE *f;

	PATH(p, REGISTRY_RECORD);
	cr_assert_eq(registry_read(root, &(struct registry_record){ 0 }), -ENOENT);
	f = fopen(p, "w");
	fputs("{\"id\":\"../x\",\"state\":\"running\",\"template\":\"t\",\"pid\":1,\"pid_start\":1,"
	      "\"created\":1,\"cpus\":1,\"mem\":1,\"disk_quota\":0,\"ttl\":0,\"idle_timeout\":0}", f);
	fclose(f);
	cr_assert_eq(registry_read(root, &(struct registry_record){ 0 }), -EINVAL, "a bad id");
	f = fopen(p, "w");
	fputs("{\"id\":\"ab\"", f);
	fclose(f);
	cr_assert_eq(registry_read(root, &(struct registry_record){ 0 }), -EINVAL);
}

/* A stand-in for a VM process a killed service left: a child of ours in a
 * group of its own. */
static pid_t stale_process(void)
{
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		setpgid(0, 0);
		pause();
		_exit(0);
	}
	setpgid(pid, pid);
	return pid;
}

static void leave_sandbox(const char *id, pid_t pid, uint64_t start)
{
	struct registry_record r = { .pid = pid, .pid_start = start, .cpus = 1, .mem_mib = 1 };
	char p[512];

	snprintf(r.id, sizeof(r.id), "%s", id);
	snprintf(r.state, sizeof(r.state), "running");
	PATH(p, "sb/%s", id);
	cr_assert_eq(mkdir(p, 0700), 0);
	cr_assert_eq(registry_write(p, &r), 0);
	strcat(p, "/vsock");
	cr_assert_eq(mknod(p, S_IFREG | 0600, 0), 0);
}

Test(serve_registry, cleanup_kills_a_stale_vm_and_removes_what_it_left)
{
	struct registry_paths paths;
	char sb[512], cg[512], jail[512], cgbase[512], jailbase[512], tmpbase[512], p[512];
	pid_t pid = stale_process();
	int killed, status;

	PATH(sb, "sb");
	cr_assert_eq(mkdir(sb, 0700), 0);
	PATH(cgbase, "cg");
	PATH(p, "cg/mayfly");
	cr_assert_eq(mkdir(cgbase, 0700), 0);
	cr_assert_eq(mkdir(p, 0700), 0);
	PATH(cg, "cg/mayfly/vm-%s-Ab3dE9", "aaaa");   /* named after its jail directory */
	cr_assert_eq(mkdir(cg, 0700), 0);
	PATH(jailbase, "run");
	cr_assert_eq(mkdir(jailbase, 0700), 0);
	PATH(jail, "run/jail-%s-Ab3dE9", "aaaa");
	cr_assert_eq(mkdir(jail, 0700), 0);
	PATH(p, "run/jail-%s-Ab3dE9/vsock", "aaaa");
	cr_assert_eq(mkdir(p, 0700), 0);
	PATH(p, "run/jail-%s-Ab3dE9.lock", "aaaa");   /* its lease */
	cr_assert_eq(mknod(p, S_IFREG | 0600, 0), 0);
	PATH(tmpbase, "tmp");
	cr_assert_eq(mkdir(tmpbase, 0700), 0);
	leave_sandbox("aaaa", pid, registry_pid_start(pid));
	/* Another sandbox's jail directory is not this one's. */
	PATH(p, "run/jail-%s-Zz9zZ9", "aaaab");
	cr_assert_eq(mkdir(p, 0700), 0);

	paths = (struct registry_paths){ cgbase, { jailbase, tmpbase } };
	cr_assert_eq(registry_cleanup(root, &paths, &killed), 1);
	cr_assert_eq(killed, 1);
	cr_assert_eq(waitpid(pid, &status, WNOHANG), -1, "already reaped by the clean-up");
	PATH(p, "sb/%s", "aaaa");
	cr_assert_not(exists(p));
	cr_assert_not(exists(cg));
	cr_assert_not(exists(jail));
	PATH(p, "run/jail-%s-Ab3dE9.lock", "aaaa");
	cr_assert_not(exists(p), "the jail's lease file is left");
	PATH(p, "run/jail-%s-Zz9zZ9", "aaaab");
	cr_assert(exists(p));
}

/* A fake cgroup tree (<root>/cg/mayfly) and jail base (<root>/run), each
 * buffer of 512 bytes. */
static void make_bases(char *cgbase, char *jailbase)
{
	char p[512];

	snprintf(cgbase, 512, "%s/cg", root);
	snprintf(jailbase, 512, "%s/run", root);
	PATH(p, "cg/mayfly");
	cr_assert_eq(mkdir(cgbase, 0700), 0);
	cr_assert_eq(mkdir(p, 0700), 0);
	cr_assert_eq(mkdir(jailbase, 0700), 0);
}

/* A supervisor killed (or out of time) after its jail directory went
 * but before its cgroup did: the cgroup and the lease file are still
 * found, by their names; another VM's are left. */
Test(serve_registry, a_vms_cgroup_and_lease_without_its_jail_directory_are_removed)
{
	struct registry_paths paths;
	char cg[512], other[512], lease[512], cgbase[512], jailbase[512];

	make_bases(cgbase, jailbase);
	PATH(cg, "cg/mayfly/vm-%s-Qq1qQ1", "bbbb");
	cr_assert_eq(mkdir(cg, 0700), 0);
	PATH(other, "cg/mayfly/vm-%s-Qq1qQ1", "bbbbc");
	cr_assert_eq(mkdir(other, 0700), 0);
	PATH(lease, "run/jail-%s-Qq1qQ1.lock", "bbbb");
	cr_assert_eq(mknod(lease, S_IFREG | 0600, 0), 0);
	paths = (struct registry_paths){ cgbase, { jailbase, NULL } };
	cr_assert_eq(registry_clean_vm(&paths, "bbbb", 0, NULL, 0), 0);
	cr_assert_not(exists(cg), "the cgroup without a jail directory is left");
	cr_assert_not(exists(lease), "the lease without a jail directory is left");
	cr_assert(exists(other), "another VM's cgroup was removed");
}

/* A cgroup that does not go (here: not empty; on a host, busy while the
 * kernel tears its last VM down) is named for the caller to retry, and
 * its lease stays so the next jail's sweep finds it meanwhile. The retry
 * takes that cgroup alone: the same sandbox's next VM (a resume) has
 * its own, with its jail directory and lease, all left alone. */
Test(serve_registry, a_busy_cgroup_is_retried_by_its_name_and_a_newer_vm_of_the_id_is_untouched)
{
	struct registry_paths paths;
	char cg[512], inside[512], lease[512], jail[512], cgbase[512], jailbase[512];
	char newer[512], newer_busy[512], newer_jail[512], newer_lease[512];
	char busy[2][REGISTRY_CGROUP_NAME_MAX];

	make_bases(cgbase, jailbase);
	PATH(cg, "cg/mayfly/vm-%s-Rr2rR2", "cccc");
	cr_assert_eq(mkdir(cg, 0700), 0);
	PATH(inside, "cg/mayfly/vm-%s-Rr2rR2/busy", "cccc");
	cr_assert_eq(mkdir(inside, 0700), 0);
	PATH(jail, "run/jail-%s-Rr2rR2", "cccc");
	cr_assert_eq(mkdir(jail, 0700), 0);
	PATH(lease, "run/jail-%s-Rr2rR2.lock", "cccc");
	cr_assert_eq(mknod(lease, S_IFREG | 0600, 0), 0);
	paths = (struct registry_paths){ cgbase, { jailbase, NULL } };
	cr_assert_eq(registry_clean_vm(&paths, "cccc", 0, busy, 2), 1, "the busy cgroup is not counted");
	cr_assert_str_eq(busy[0], "vm-cccc-Rr2rR2");
	cr_assert(exists(cg));
	cr_assert(exists(lease), "the lease went while its cgroup is still there");
	cr_assert_not(exists(jail));
	cr_assert_not(registry_retry_cgroup(&paths, busy[0]), "a busy cgroup reads as gone");

	/* The sandbox resumed meanwhile: a VM of the same id, running. */
	PATH(newer, "cg/mayfly/vm-%s-Ss3sS3", "cccc");
	cr_assert_eq(mkdir(newer, 0700), 0);
	PATH(newer_busy, "cg/mayfly/vm-%s-Ss3sS3/running", "cccc");
	cr_assert_eq(mkdir(newer_busy, 0700), 0);
	PATH(newer_jail, "run/jail-%s-Ss3sS3", "cccc");
	cr_assert_eq(mkdir(newer_jail, 0700), 0);
	PATH(newer_lease, "run/jail-%s-Ss3sS3.lock", "cccc");
	cr_assert_eq(mknod(newer_lease, S_IFREG | 0600, 0), 0);

	cr_assert_eq(rmdir(inside), 0);
	cr_assert(registry_retry_cgroup(&paths, busy[0]));
	cr_assert_not(exists(cg));
	cr_assert_not(exists(lease), "the lease is left once its cgroup went");
	cr_assert(exists(newer_busy), "the running VM's cgroup was touched");
	cr_assert(exists(newer_jail), "the running VM's jail directory was removed");
	cr_assert(exists(newer_lease), "the running VM's lease was removed");
}

Test(serve_registry, a_reused_pid_is_never_killed)
{
	struct registry_paths paths = { NULL, { NULL, NULL } };
	char sb[512];
	pid_t pid = stale_process();
	int killed, status;

	PATH(sb, "sb");
	cr_assert_eq(mkdir(sb, 0700), 0);
	/* The record's start time is not this process's: the pid was reused. */
	leave_sandbox("bbbb", pid, registry_pid_start(pid) + 1);
	cr_assert_eq(registry_cleanup(root, &paths, &killed), 1);
	cr_assert_eq(killed, 0);
	cr_assert_eq(waitpid(pid, &status, WNOHANG), 0, "still running");
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
}

Test(serve_registry, a_directory_without_a_record_is_removed_too)
{
	struct registry_paths paths = { NULL, { NULL, NULL } };
	char p[512];
	int killed;

	PATH(p, "sb");
	cr_assert_eq(mkdir(p, 0700), 0);
	PATH(p, "sb/%s", "cccc");
	cr_assert_eq(mkdir(p, 0700), 0);
	cr_assert_eq(registry_cleanup(root, &paths, &killed), 1);
	cr_assert_not(exists(p));
	cr_assert_eq(registry_cleanup(root, &paths, &killed), 0, "nothing left the second time");
}

Test(serve_registry, remove_tree_never_follows_a_symlink)
{
	char dir[512], outside[512], link[512], victim[512];
	int fd;

	PATH(dir, "d");
	PATH(outside, "outside");
	cr_assert_eq(mkdir(dir, 0700), 0);
	cr_assert_eq(mkdir(outside, 0700), 0);
	PATH(victim, "outside/keep");
	fd = open(victim, O_WRONLY | O_CREAT, 0600);
	cr_assert_geq(fd, 0);
	close(fd);
	PATH(link, "d/l");
	cr_assert_eq(symlink(outside, link), 0);
	cr_assert_eq(fs_remove_tree(dir), 0);
	cr_assert_not(exists(dir));
	cr_assert(exists(victim));
}

/* serve waits for a new VM's socket only while its process lives: a zombie
 * nobody reaped yet, or a pid gone, is not alive. */
Test(serve_registry, a_zombie_or_a_gone_pid_is_not_alive)
{
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(0);
	cr_assert(registry_pid_alive(getpid()));
	for (int i = 0; i < 500 && registry_pid_alive(pid); i++)
		usleep(10000);
	cr_assert_not(registry_pid_alive(pid), "an exited, unreaped child counts as alive");
	cr_assert_neq(registry_pid_start(pid), 0u, "the zombie is still there");
	cr_assert_eq(waitpid(pid, NULL, 0), pid);
	cr_assert_not(registry_pid_alive(pid));
	cr_assert_not(registry_pid_alive(0));
}
