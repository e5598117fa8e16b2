/* fork.c - mayfly bench fork's parent VM and its forks, each a directory of ours removed after its run. */
#include "bench/fork.h"
#include "bench/runner.h"
#include "lib/clock.h"
#include "lib/fs_tree.h"
#include "lib/log.h"

#include <stdio.h>
#include <string.h>

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
	char err[300];

	memset(f, 0, sizeof(*f));
	if (bench_workdir(f->dir, sizeof(f->dir), "fork", err, sizeof(err))) {
		log_say("bench fork: %s", err);
		return -1;
	}
	if (bench_vm_start(&f->parent, self, f->dir, "parent", vm_opts, NULL, err, sizeof(err))) {
		log_say("bench fork: the parent VM: %s", err);
		bench_fork_stop(f);
		return -1;
	}
	return 0;
}

int bench_fork_before(struct bench_fork *f, const char *self, struct bench_sample *s,
		      uint64_t *origin, char *err, size_t errlen)
{
	char *fork[] = { (char *)self, "fork", f->parent.sock_arg, f->out_arg, NULL };
	char last[PATH_MAX + 16];
	int rc;

	if (f->forks) {   /* the last run's, done with */
		fork_path(f, "", f->forks - 1, last, sizeof(last));
		fs_remove_tree(last);
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
	bench_vm_stop(&f->parent);
	bench_vm_reap(&f->parent);
	if (f->dir[0])
		fs_remove_tree(f->dir);
	f->dir[0] = '\0';
}
