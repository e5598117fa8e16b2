/* test_serve_supervise.c - mayfly serve's stop of a VM process: one that ends on SIGTERM is reaped as it ends, one that ignores it is killed after the grace. */
#include <criterion/criterion.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "serve/supervise.h"

/* A child in a group of its own, SIGTERM ignored or not, returned once
 * its disposition is set; it waits to be stopped. */
static pid_t child(bool ignore_term)
{
	int ready[2];
	pid_t pid;
	char b;

	cr_assert_eq(pipe(ready), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		setpgid(0, 0);
		signal(SIGTERM, ignore_term ? SIG_IGN : SIG_DFL);
		if (write(ready[1], "r", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	setpgid(pid, pid);
	cr_assert_eq(read(ready[0], &b, 1), 1);
	close(ready[0]);
	close(ready[1]);
	return pid;
}

/* Stop such a child with grace_ms: it must end by want_sig and be reaped.
 * The ns the stop took. */
static uint64_t stop(bool ignore_term, unsigned grace_ms, int want_sig)
{
	pid_t pid = child(ignore_term);
	uint64_t t0 = clock_now_ns();
	int status;

	supervise_stop(pid, grace_ms, &status);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == want_sig, "status %#x", status);
	cr_assert_eq(kill(pid, 0), -1, "not reaped");
	return clock_now_ns() - t0;
}

Test(serve_supervise, a_process_that_ends_on_sigterm_is_reaped_without_waiting_out_the_grace)
{
	/* Generous: a missed wake-up would take the whole 20 s. */
	cr_assert_lt(stop(false, 20000, SIGTERM), 10000000000ULL, "waited out the grace");
}

Test(serve_supervise, a_process_that_ignores_sigterm_is_killed_after_the_grace)
{
	cr_assert_geq(stop(true, 300, SIGKILL), 300000000ULL, "killed before the grace ended");
}
