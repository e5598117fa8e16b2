/* runner.c - mayfly bench's runs: spawn `mayfly run --json` processes, read their timings events, reap them with their resource use. */
#include "bench/runner.h"
#include "lib/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* A run's stdout is JSON lines; the ones bench reads (timings, exit,
 * error) are short. A longer line is the command's output: skipped. */
#define LINE_MAX_BYTES (64 * 1024)

struct child {
	pid_t pid;
	int fd;                    /* its stdout; -1 once at EOF */
	uint64_t t0;               /* CLOCK_MONOTONIC just before its exec */
	struct bench_sample *s;
	bool timed;                /* its timings event came */
	bool skipping;             /* inside a line past LINE_MAX_BYTES */
	size_t len;
	char error[200];           /* its error event's message */
	char line[LINE_MAX_BYTES];
};

struct runner {
	const struct bench_plan *p;
	struct bench_sample *samples;
	struct child *kids;        /* BENCH_MAX_ACTIVE slots; pid 0: free */
	unsigned nactive, next, ndone, total;
	uint64_t first_ns;         /* the first measured run's start */
	char *err;
	size_t errlen;
	bool failed;
};

static void __attribute__((format(printf, 2, 3))) set_err(struct runner *r, const char *fmt, ...)
{
	va_list ap;

	if (r->failed)
		return;   /* the first failure is the one to say */
	r->failed = true;
	va_start(ap, fmt);
	vsnprintf(r->err, r->errlen, fmt, ap);
	va_end(ap);
}

static void take_timings(struct child *k, json_t *ev)
{
	json_t *phases = json_object_get(ev, "phases_ms"), *v;
	json_int_t start = json_integer_value(json_object_get(ev, "start_monotonic_ns"));
	const char *name;
	double main_ms;

	if (start <= 0 || (uint64_t)start < k->t0)
		return;   /* not ours to trust: the run is failed for no timings */
	main_ms = (double)((uint64_t)start - k->t0) / 1e6;
	k->s->at[BENCH_MAIN] = main_ms;
	k->s->restored = json_is_true(json_object_get(ev, "restored"));
	json_object_foreach(phases, name, v) {
		int point = bench_point_by_name(name);

		if (point > BENCH_MAIN && point < BENCH_EXIT && json_is_number(v) &&
		    json_number_value(v) >= 0)
			k->s->at[point] = main_ms + json_number_value(v);
	}
	json_object_foreach(json_object_get(ev, "vm_exits"), name, v)
		if (json_integer_value(v) > 0)
			bench_add_exits(k->s, name, (uint64_t)json_integer_value(v));
	k->timed = true;
}

static void take_line(struct child *k)
{
	json_t *ev = json_loadb(k->line, k->len, 0, NULL);
	const char *kind = json_string_value(json_object_get(ev, "event"));

	if (kind && !strcmp(kind, "timings"))
		take_timings(k, ev);
	else if (kind && !strcmp(kind, "error"))
		snprintf(k->error, sizeof(k->error), "%s",
			 json_string_value(json_object_get(ev, "message")) ?: "");
	json_decref(ev);
}

/* Split what came into lines. */
static void take_bytes(struct child *k, const char *buf, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (buf[i] == '\n') {
			if (!k->skipping)
				take_line(k);
			k->len = 0;
			k->skipping = false;
		} else if (!k->skipping && k->len < sizeof(k->line)) {
			k->line[k->len++] = buf[i];
		} else {
			k->skipping = true;
		}
	}
}

/* argv with stdin from /dev/null, stdout to out_fd (-1: /dev/null) and
 * stderr to err_path (NULL: ours). */
static int start(char *const argv[], int out_fd, const char *err_path, pid_t *pid)
{
	posix_spawn_file_actions_t fa;
	int rc = posix_spawn_file_actions_init(&fa);

	if (rc)
		return -rc;
	rc = posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	if (!rc)
		rc = out_fd >= 0 ?
		     posix_spawn_file_actions_adddup2(&fa, out_fd, STDOUT_FILENO) :
		     posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
	if (!rc && err_path)
		rc = posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, err_path,
						      O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (!rc)
		rc = posix_spawn(pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	return -rc;
}

int bench_spawn(char *const argv[], const char *err_path, pid_t *pid)
{
	return start(argv, -1, err_path, pid);
}

int bench_spawn_wait(char *const argv[])
{
	int status, rc;
	pid_t pid, got;

	rc = start(argv, -1, NULL, &pid);
	if (rc)
		return rc;
	do
		got = waitpid(pid, &status, 0);
	while (got < 0 && errno == EINTR);
	if (got < 0)
		return -errno;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Run s's command; its points count from origin (0: now). */
static int spawn(struct runner *r, struct child *k, struct bench_sample *s, uint64_t origin)
{
	int pipefd[2], rc;

	if (pipe2(pipefd, O_CLOEXEC))
		return -errno;
	memset(k, 0, offsetof(struct child, line));
	k->s = s;
	k->t0 = origin ? origin : clock_now_ns();
	rc = start(r->p->argv, pipefd[1], NULL, &k->pid);
	close(pipefd[1]);
	if (rc) {
		close(pipefd[0]);
		k->pid = 0;
		return rc;
	}
	k->fd = pipefd[0];
	r->nactive++;
	return 0;
}

/* Its stdout ended: reap it, with what its processes cost. */
static void reap(struct runner *r, struct child *k)
{
	struct bench_sample *s = k->s;
	struct rusage ru;
	int status = 0;
	pid_t got;

	do
		got = wait4(k->pid, &status, 0, &ru);
	while (got < 0 && errno == EINTR);
	s->at[BENCH_EXIT] = (double)(clock_now_ns() - k->t0) / 1e6;
	if (got < 0)
		memset(&ru, 0, sizeof(ru));
	s->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	s->user_ms = (double)ru.ru_utime.tv_sec * 1e3 + (double)ru.ru_utime.tv_usec / 1e3;
	s->sys_ms = (double)ru.ru_stime.tv_sec * 1e3 + (double)ru.ru_stime.tv_usec / 1e3;
	s->minflt = ru.ru_minflt;
	s->majflt = ru.ru_majflt;
	close(k->fd);
	k->fd = -1;
	k->pid = 0;
	r->nactive--;
	r->ndone++;
	if (s->exit_code && k->error[0])
		set_err(r, "run %u exited %d: %s", s->index + 1, s->exit_code, k->error);
	else if (s->exit_code)
		set_err(r, "run %u exited %d", s->index + 1, s->exit_code);
	else if (!k->timed)
		set_err(r, "run %u gave no timings event", s->index + 1);
	if (r->p->done)
		r->p->done(r->p->opaque, s, r->ndone, r->total);
}

static void pump(struct runner *r, struct child *k)
{
	char buf[16384];
	ssize_t n = read(k->fd, buf, sizeof(buf));

	if (n > 0)
		take_bytes(k, buf, (size_t)n);
	else if (n == 0 || (errno != EINTR && errno != EAGAIN))
		reap(r, k);
}

/* May the next run start now? Else how long until it may (ms), or -1:
 * when a run ends. */
static bool may_start(const struct runner *r, uint64_t now, int *wait_ms)
{
	const struct bench_plan *p = r->p;
	unsigned measured = r->next - p->warmup;

	*wait_ms = -1;
	if (r->failed || r->next >= r->total || r->nactive >= BENCH_MAX_ACTIVE)
		return false;
	if (r->next < p->warmup || p->mode == BENCH_SEQUENTIAL)
		return r->nactive == 0;
	if (p->mode == BENCH_BURST)
		return measured % p->burst ? true : r->nactive == 0;
	/* Staggered: on the schedule from the first measured start. */
	if (measured == 0)
		return r->nactive == 0;
	uint64_t due = r->first_ns + (uint64_t)measured * p->stagger_ms * 1000000ULL;
	if (now >= due)
		return true;
	*wait_ms = (int)((due - now + 999999) / 1000000);
	return false;
}

static struct child *free_slot(struct runner *r)
{
	for (unsigned i = 0; i < BENCH_MAX_ACTIVE; i++)
		if (!r->kids[i].pid)
			return &r->kids[i];
	return NULL;
}

/* After a failure: the runs still alive are ended, then reaped. */
static void end_all(struct runner *r)
{
	for (unsigned i = 0; i < BENCH_MAX_ACTIVE; i++)
		if (r->kids[i].pid)
			kill(r->kids[i].pid, SIGTERM);
}

int bench_run(const struct bench_plan *p, struct bench_sample *samples, char *err, size_t errlen)
{
	struct runner r = { .p = p, .samples = samples, .total = p->warmup + p->runs, .err = err,
			    .errlen = errlen };
	struct pollfd pfd[BENCH_MAX_ACTIVE];
	struct child *at[BENCH_MAX_ACTIVE];
	bool ended = false;

	/* Said once, plainly: where the spawn is emulated (qemu-user makes it a
	 * fork), a failed exec would only show as a child's exit 127. */
	if (access(p->argv[0], X_OK)) {
		snprintf(err, errlen, "cannot start %s: %s", p->argv[0], strerror(errno));
		return -1;
	}
	r.kids = calloc(BENCH_MAX_ACTIVE, sizeof(*r.kids));
	if (!r.kids) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	while (r.ndone < r.total && (r.nactive || !r.failed)) {
		uint64_t now = clock_now_ns();
		int wait_ms, n = 0, rc;

		if (r.failed && !ended) {
			end_all(&r);
			ended = true;
		}
		if (may_start(&r, now, &wait_ms)) {
			struct bench_sample *s = &samples[r.next];
			uint64_t origin = 0;
			char why[256];

			memset(s, 0, sizeof(*s));
			s->index = r.next;
			s->warmup = r.next < p->warmup;
			for (int i = 0; i < BENCH_POINTS; i++)
				s->at[i] = -1;
			if (r.next == p->warmup)
				r.first_ns = now;
			if (p->before && p->before(p->opaque, s, &origin, why, sizeof(why))) {
				set_err(&r, "run %u: %s", r.next + 1, why);
				continue;
			}
			rc = spawn(&r, free_slot(&r), s, origin);
			if (rc)
				set_err(&r, "cannot start %s: %s", p->argv[0], strerror(-rc));
			else
				r.next++;
			continue;
		}
		for (unsigned i = 0; i < BENCH_MAX_ACTIVE; i++)
			if (r.kids[i].pid) {
				pfd[n] = (struct pollfd){ .fd = r.kids[i].fd, .events = POLLIN };
				at[n++] = &r.kids[i];
			}
		if (!n && wait_ms < 0)
			break;   /* nothing alive, nothing due: only after a failure */
		rc = poll(pfd, (nfds_t)n, wait_ms);
		if (rc < 0 && errno != EINTR) {
			set_err(&r, "poll: %s", strerror(errno));
			continue;
		}
		for (int i = 0; i < n && rc > 0; i++)
			if (pfd[i].revents)
				pump(&r, at[i]);
	}
	free(r.kids);
	return r.failed ? -1 : 0;
}
