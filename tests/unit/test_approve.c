/* test_approve.c - the approval hook: exit 0 allows, anything else refuses with a reason; a slow approver is killed at its timeout; nothing is left running. */
#include "policy/approve.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* No child of ours is left, reaped or not. */
static void no_children(void)
{
	cr_assert_eq(waitpid(-1, NULL, WNOHANG), -1, "a child was left behind");
	cr_assert_eq(errno, ECHILD);
}

static struct approve_result ask(const char *cmd, unsigned timeout_ms, const char *json)
{
	struct approver a = { .cmd = cmd, .timeout_ms = timeout_ms };
	struct approve_result r;

	approve_check(&a, json, &r);
	return r;
}

Test(approve, exit_0_allows_and_the_call_arrives_on_stdin)
{
	struct approve_result r = ask("grep -q '\"argv\":\\[\"rm\"' && test \"$(wc -l)\" = 0", 0,
				      "{\"tool\":\"exec\",\"argv\":[\"rm\",\"-rf\",\"/\"]}");

	/* grep -q reads up to the match; the count then sees nothing left. */
	cr_assert(r.allowed, "%s", r.reason);
	cr_assert_str_eq(r.reason, "");
	r = ask("read line; [ \"$line\" = '{\"a\":1}' ]", 0, "{\"a\":1}");
	cr_assert(r.allowed, "the call is one line with a newline: %s", r.reason);
	no_children();
}

Test(approve, another_status_refuses_with_its_first_line_as_the_reason)
{
	struct approve_result r = ask("echo 'no rm here'; echo second; exit 3", 0, "{}");

	cr_assert_not(r.allowed);
	cr_assert_str_eq(r.reason, "the approver exited 3: no rm here");
	no_children();
}

Test(approve, death_by_a_signal_refuses)
{
	struct approve_result r = ask("kill -9 $$", 0, "{}");

	cr_assert_not(r.allowed);
	cr_assert_not_null(strstr(r.reason, "killed by signal 9"), "%s", r.reason);
	no_children();
}

Test(approve, a_missing_command_refuses)
{
	struct approve_result r = ask("/nonexistent/approver", 0, "{}");

	cr_assert_not(r.allowed);
	cr_assert_not_null(strstr(r.reason, "exited 127"), "%s", r.reason);
}

Test(approve, a_slow_approver_is_killed_at_its_timeout_and_refuses)
{
	double t0 = now_s();
	struct approve_result r = ask("sleep 30", 300, "{}");
	double took = now_s() - t0;

	cr_assert_not(r.allowed);
	cr_assert_not_null(strstr(r.reason, "did not answer within 0.3 s"), "%s", r.reason);
	cr_assert_lt(took, 10.0, "took %.1f s", took);
	no_children();
}

Test(approve, what_it_leaves_behind_is_killed_with_it)
{
	char pidfile[] = "/tmp/mayfly-approve-test.XXXXXX", cmd[200];
	int fd = mkstemp(pidfile), pid = 0;
	FILE *f;
	struct approve_result r;

	cr_assert_geq(fd, 0);
	close(fd);
	/* Allowed at once, but a grandchild lingers in its process group. */
	snprintf(cmd, sizeof(cmd), "sleep 60 & echo $! > %s; exit 0", pidfile);
	r = ask(cmd, 0, "{}");
	cr_assert(r.allowed, "%s", r.reason);
	f = fopen(pidfile, "r");
	cr_assert_eq(fscanf(f, "%d", &pid), 1);
	fclose(f);
	unlink(pidfile);
	/* Killed (SIGKILL to the group); reparented to init, which reaps it. */
	for (int i = 0; i < 500 && kill(pid, 0) == 0; i++)
		usleep(10000);
	cr_assert_neq(kill(pid, 0), 0, "the approver's child %d still runs", pid);
}

Test(approve, a_flood_of_output_is_bounded_and_never_blocks_it)
{
	struct approve_result r = ask("head -c 10000000 /dev/zero | tr '\\0' x; exit 1", 0, "{}");

	cr_assert_not(r.allowed);
	cr_assert_lt(strlen(r.reason), sizeof(r.reason));
	cr_assert_not_null(strstr(r.reason, "the approver exited 1: xxxx"), "%.80s", r.reason);
	no_children();
}

Test(approve, a_large_call_reaches_an_approver_that_reads_it_all)
{
	size_t n = 1 << 20;
	char *json = malloc(n + 16);
	struct approve_result r;

	memset(json, 'a', n + 15);
	memcpy(json, "{\"x\":\"", 6);
	strcpy(json + n + 10, "\"}");
	r = ask("test \"$(wc -c)\" = 1048589", 0, json);
	cr_assert(r.allowed, "%s", r.reason);
	/* And one that never reads it does not hang us: it decides anyway. */
	r = ask("exit 0", 0, json);
	cr_assert(r.allowed, "%s", r.reason);
	free(json);
	no_children();
}

Test(approve, no_approver_allows_everything)
{
	struct approve_result r;

	approve_check(NULL, "{}", &r);
	cr_assert(r.allowed);
	r = ask(NULL, 0, "{}");
	cr_assert(r.allowed);
}
