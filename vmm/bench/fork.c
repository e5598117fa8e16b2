/* fork.c - mayfly bench fork's parent VM and its forks, each a directory of ours removed after its run. */
#include "bench/fork.h"
#include "bench/runner.h"
#include "lib/clock.h"
#include "lib/log.h"

#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path) && errno != ENOENT ? -1 : 0;
}

static void remove_tree(const char *path)
{
	nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Fork n's directory, DIR/fN, into buf after prefix ("--out=", ...). */
static void fork_path(const struct bench_fork *f, const char *prefix, unsigned n, char *buf,
		      size_t len)
{
	/* The directory fitted the socket's longer name: this fits too. */
	if ((size_t)snprintf(buf, len, "%s%s/f%u", prefix, f->dir, n) >= len)
		buf[0] = '\0';
}

int bench_fork_start(struct bench_fork *f, const char *self, char *const vm_opts[])
{
	const char *tmp = getenv("TMPDIR");
	char *boot[8 + 64], *exec[] = { (char *)self, "exec", f->sock_arg, "--", "true", NULL };
	size_t n = 0;
	int rc;

	memset(f, 0, sizeof(*f));
	snprintf(f->dir, sizeof(f->dir), "%s/mayfly-bench-fork.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(f->dir)) {
		log_say("cannot make a directory for the forks in %s: %s", tmp && *tmp ? tmp : "/tmp",
			strerror(errno));
		return -1;
	}
	if ((size_t)snprintf(f->sock_arg, sizeof(f->sock_arg), "--vsock=%s/parent.sock", f->dir) >=
	    sizeof(f->sock_arg)) {
		log_say("TMPDIR %s is too long a path for the parent's socket", f->dir);
		bench_fork_stop(f);
		return -1;
	}
	boot[n++] = (char *)self;
	boot[n++] = "boot";
	boot[n++] = f->sock_arg;
	for (size_t i = 0; vm_opts[i] && n < sizeof(boot) / sizeof(boot[0]) - 1; i++)
		boot[n++] = vm_opts[i];
	boot[n] = NULL;
	rc = bench_spawn(boot, NULL, &f->parent);
	if (rc) {
		log_say("cannot start the parent VM: %s", strerror(-rc));
		f->parent = 0;
		bench_fork_stop(f);
		return -1;
	}
	/* exec waits for the guest's agent itself (60 s at most). */
	rc = bench_spawn_wait(exec);
	if (rc) {
		log_say("the parent VM's agent never answered (mayfly exec exited %d)", rc);
		bench_fork_stop(f);
		return -1;
	}
	return 0;
}

int bench_fork_before(struct bench_fork *f, const char *self, struct bench_sample *s,
		      uint64_t *origin, char *err, size_t errlen)
{
	char *fork[] = { (char *)self, "fork", f->sock_arg, f->out_arg, NULL };
	char last[PATH_MAX + 16];
	int rc;

	if (f->forks) {   /* the last run's, done with */
		fork_path(f, "", f->forks - 1, last, sizeof(last));
		remove_tree(last);
	}
	fork_path(f, "--out=", f->forks, f->out_arg, sizeof(f->out_arg));
	fork_path(f, "--snapshot=", f->forks, f->snap_arg, sizeof(f->snap_arg));
	f->forks++;
	*origin = clock_now_ns();
	rc = bench_spawn_wait(fork);
	if (rc < 0)
		snprintf(err, errlen, "cannot start mayfly fork: %s", strerror(-rc));
	else if (rc)
		snprintf(err, errlen, "mayfly fork exited %d", rc);
	if (rc)
		return -1;
	s->at[BENCH_FORKED] = (double)(clock_now_ns() - *origin) / 1e6;
	return 0;
}

void bench_fork_stop(struct bench_fork *f)
{
	if (f->parent > 0) {
		int status;

		kill(f->parent, SIGTERM);
		while (waitpid(f->parent, &status, 0) < 0 && errno == EINTR)
			;
		f->parent = 0;
	}
	if (f->dir[0])
		remove_tree(f->dir);
	f->dir[0] = '\0';
}
