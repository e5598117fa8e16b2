/* test_serve_supervise.c - mayfly serve's VM processes: spawned clean (fds, group, signals) and killed when the spawning thread ends; a stop reaps one that ends on SIGTERM as it ends, and kills one that ignores it after the grace. */
#include <criterion/criterion.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
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

/* The thread that runs the spawns (the service's main loop). */
struct loop {
	struct supervisor s;
	atomic_bool stop;
};

static void *pending_loop(void *arg)
{
	struct loop *l = arg;

	while (!atomic_load(&l->stop)) {
		struct pollfd p = { l->s.efd, POLLIN, 0 };

		if (poll(&p, 1, 20) > 0)
			supervise_pending(&l->s);
	}
	return NULL;
}

static void fd_target(pid_t pid, int fd, char *out, size_t len)
{
	char path[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, fd);
	n = readlink(path, out, len - 1);
	out[n > 0 ? n : 0] = '\0';
}

static unsigned long long status_field(pid_t pid, const char *name)
{
	char path[64], line[256];
	unsigned long long v = ~0ULL;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, name, strlen(name)))
			v = strtoull(line + strlen(name), NULL, 16);
	fclose(f);
	return v;
}

Test(serve_supervise, a_spawned_process_starts_clean_and_dies_with_the_spawning_thread)
{
	char log[] = "/tmp/serve-spawn-XXXXXX", got[PATH_MAX], comm[64], path[64];
	char *argv[] = { "/bin/sleep", "100", NULL };
	struct loop l = { .stop = false };
	sigset_t term;
	pthread_t t;
	pid_t pid;
	int status, fd, fds = 0, i;
	FILE *f;

	fd = mkstemp(log);
	cr_assert_geq(fd, 0);
	/* Ours: an fd without CLOEXEC, SIGPIPE ignored, SIGTERM blocked. */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &term, NULL);
	cr_assert_eq(supervise_init(&l.s), 0);
	cr_assert_eq(pthread_create(&t, NULL, pending_loop, &l), 0);
	pid = supervise_spawn(&l.s, argv, log);
	cr_assert_gt(pid, 0, "%s", strerror(-pid));
	for (i = 0; i < 500; i++) {   /* until it runs sleep */
		snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
		f = fopen(path, "r");
		comm[0] = '\0';
		if (f && fgets(comm, sizeof(comm), f) && !strcmp(comm, "sleep\n")) {
			fclose(f);
			break;
		}
		if (f)
			fclose(f);
		usleep(10000);
	}
	cr_assert_str_eq(comm, "sleep\n");
	fd_target(pid, 0, got, sizeof(got));
	cr_assert_str_eq(got, "/dev/null");
	fd_target(pid, 1, got, sizeof(got));
	cr_assert_str_eq(got, "/dev/null");
	fd_target(pid, 2, got, sizeof(got));
	cr_assert_str_eq(got, log);
	/* sleep itself opens files for a moment as it starts (its locale):
	 * an inherited fd is never closed, so wait for none to be left. */
	for (int tries = 0; tries < 500; tries++) {
		fds = 0;
		for (i = 3; i < 64; i++) {
			fd_target(pid, i, got, sizeof(got));
			fds += got[0] != '\0';
		}
		if (!fds)
			break;
		usleep(10000);
	}
	cr_assert_eq(fds, 0, "fds past stderr are open in the child");
	cr_assert_eq(getpgid(pid), pid, "not in a process group of its own");
	cr_assert_eq(status_field(pid, "SigBlk:"), 0, "signals blocked in the child");
	cr_assert_eq(status_field(pid, "SigIgn:"), 0, "signals ignored in the child");
	snprintf(path, sizeof(path), "/proc/%d/oom_score_adj", (int)pid);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	cr_assert_not_null(fgets(comm, sizeof(comm), f));
	fclose(f);
	cr_assert_str_eq(comm, SUPERVISE_VM_OOM_ADJ "\n", "the OOM killer would not take it first");
	/* The spawning thread ends: its child is killed (PDEATHSIG). */
	atomic_store(&l.stop, true);
	pthread_join(t, NULL);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "status %#x", status);
	supervise_destroy(&l.s);
	close(fd);
	unlink(log);
}
