/* test_approve_spawner.c - the approver's spawner: answers as approve_check does, keeps the environment it started with, serves a seccomp-filtered caller, and leaves nothing behind when mayfly ends, however it ends. */
#include "policy/approve_spawner.h"
#include "seccomp/seccomp.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* No child of ours is left, reaped or not. */
static void no_children(void)
{
	cr_assert_eq(waitpid(-1, NULL, WNOHANG), -1, "a child was left behind");
	cr_assert_eq(errno, ECHILD);
}

static void start(struct approve_spawner *s, const char *cmd, unsigned timeout_ms)
{
	struct approver a = { .cmd = cmd, .timeout_ms = timeout_ms };

	cr_assert_eq(approve_spawner_start(s, &a), 0);
}

/* The pid an approver wrote to path (it runs `echo $$ > path` first). */
static pid_t pid_in(const char *path)
{
	FILE *f;
	long pid = 0;

	for (int i = 0; i < 500 && pid <= 0; i++) {
		f = fopen(path, "r");
		if (f) {
			if (fscanf(f, "%ld", &pid) != 1)
				pid = 0;
			fclose(f);
		}
		if (pid <= 0)
			usleep(10000);
	}
	cr_assert_gt(pid, 0, "the approver never wrote its pid");
	return (pid_t)pid;
}

/* A process that is gone (or a zombie nobody will reap: ours are reaped). */
static bool gone(pid_t pid)
{
	for (int i = 0; i < 500; i++) {
		if (kill(pid, 0) < 0 && errno == ESRCH)
			return true;
		waitpid(-1, NULL, WNOHANG);   /* as a subreaper, orphans are ours */
		usleep(10000);
	}
	return false;
}

Test(approve_spawner, answers_as_the_approver_says_with_the_environment_it_started_with)
{
	struct approve_spawner s;
	struct approve_result r;

	setenv("MAYFLY_TEST_APPROVE", "yes", 1);
	start(&s, "[ \"$MAYFLY_TEST_APPROVE\" = yes ] && grep -q '\"argv\":\\[\"ls\"' || "
		  "{ echo \"not $MAYFLY_TEST_APPROVE\"; exit 4; }", 0);
	/* The jailed VM clears its environment: the spawner keeps its own. */
	unsetenv("MAYFLY_TEST_APPROVE");
	approve_spawner_ask(&s, "{\"tool\":\"exec\",\"argv\":[\"ls\"]}", &r);
	cr_assert(r.allowed, "%s", r.reason);
	approve_spawner_ask(&s, "{\"tool\":\"exec\",\"argv\":[\"rm\"]}", &r);
	cr_assert_not(r.allowed);
	cr_assert_str_eq(r.reason, "the approver exited 4: not yes");
	approve_spawner_ask(&s, "{\"tool\":\"exec\",\"argv\":[\"ls\",\"-l\"]}", &r);
	cr_assert(r.allowed, "a third call on the same spawner: %s", r.reason);
	approve_spawner_stop(&s);
	no_children();
}

Test(approve_spawner, a_timeout_is_the_approvers_own)
{
	struct approve_spawner s;
	struct approve_result r;

	start(&s, "sleep 30", 200);
	approve_spawner_ask(&s, "{}", &r);
	cr_assert_not(r.allowed);
	cr_assert(strstr(r.reason, "did not answer within 0.2 s"), "%s", r.reason);
	approve_spawner_stop(&s);
	no_children();
}

/* The agent thread asks under its seccomp filter: no fork, no exec there. */
Test(approve_spawner, a_caller_under_the_agent_filter_is_answered)
{
	struct approve_spawner s;
	int status;
	pid_t child;

	start(&s, "exit 0", 0);
	child = fork();
	cr_assert_geq(child, 0);
	if (child == 0) {
		struct approve_result r;

		if (seccomp_install(SECCOMP_ROLE_AGENT))
			_exit(2);
		approve_spawner_ask(&s, "{\"tool\":\"exec\"}", &r);
		_exit(r.allowed ? 0 : 1);
	}
	cr_assert_eq(waitpid(child, &status, 0), child);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %#x", status);
	approve_spawner_stop(&s);
	no_children();
}

Test(approve_spawner, stopping_mid_call_kills_the_approver)
{
	char pidfile[] = "/tmp/mayfly-spawner-XXXXXX";
	char cmd[128];
	struct approve_spawner s;
	pid_t approver, asker;
	int fd = mkstemp(pidfile);

	cr_assert_geq(fd, 0);
	close(fd);
	unlink(pidfile);
	snprintf(cmd, sizeof(cmd), "echo $$ > %s; exec sleep 60", pidfile);
	start(&s, cmd, 60000);
	/* Another process asks (it holds the socket too, as the jailed VM
	 * does) and is killed mid-call; then we, the owner, stop. */
	asker = fork();
	cr_assert_geq(asker, 0);
	if (asker == 0) {
		struct approve_result r;

		approve_spawner_ask(&s, "{}", &r);
		_exit(0);
	}
	approver = pid_in(pidfile);
	kill(asker, SIGKILL);
	waitpid(asker, NULL, 0);
	approve_spawner_stop(&s);
	cr_assert(gone(approver), "the approver %d outlived mayfly", (int)approver);
	unlink(pidfile);
	no_children();
}

/* A SIGKILL of mayfly (the spawner's parent) mid-call: the spawner and
 * its approver end too. We are the subreaper of what is orphaned. */
Test(approve_spawner, a_killed_mayfly_leaves_no_spawner_or_approver)
{
	char pidfile[] = "/tmp/mayfly-spawner-XXXXXX";
	char cmd[128];
	int fd = mkstemp(pidfile), p[2];
	pid_t mayfly, spawner, approver;

	cr_assert_geq(fd, 0);
	close(fd);
	unlink(pidfile);
	cr_assert_eq(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
	cr_assert_eq(pipe(p), 0);
	snprintf(cmd, sizeof(cmd), "echo $$ > %s; exec sleep 60", pidfile);
	mayfly = fork();
	cr_assert_geq(mayfly, 0);
	if (mayfly == 0) {
		struct approve_spawner s;
		struct approver a = { .cmd = cmd, .timeout_ms = 60000 };
		struct approve_result r;

		close(p[0]);
		if (approve_spawner_start(&s, &a))
			_exit(1);
		if (write(p[1], &s.pid, sizeof(s.pid)) != sizeof(s.pid))
			_exit(1);
		approve_spawner_ask(&s, "{}", &r);
		_exit(0);
	}
	close(p[1]);
	cr_assert_eq(read(p[0], &spawner, sizeof(spawner)), (ssize_t)sizeof(spawner));
	close(p[0]);
	approver = pid_in(pidfile);
	kill(mayfly, SIGKILL);
	waitpid(mayfly, NULL, 0);
	cr_assert(gone(spawner), "the spawner %d outlived mayfly", (int)spawner);
	cr_assert(gone(approver), "the approver %d outlived mayfly", (int)approver);
	unlink(pidfile);
	prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
	no_children();
}

Test(approve_spawner, a_spawner_that_is_gone_refuses_every_call)
{
	struct approve_spawner s;
	struct approve_result r;

	start(&s, "exit 0", 0);
	kill(s.pid, SIGKILL);
	approve_spawner_ask(&s, "{}", &r);
	cr_assert_not(r.allowed);
	cr_assert_str_eq(r.reason, "the approver's spawner is gone");
	approve_spawner_ask(&s, "{}", &r);
	cr_assert_not(r.allowed, "a later call is refused too");
	approve_spawner_stop(&s);
	no_children();
}
