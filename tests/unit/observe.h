/* observe.h - what a test sees of the code under test: its stderr, caught and read back, and its threads. */
#ifndef MAYFLY_TEST_OBSERVE_H
#define MAYFLY_TEST_OBSERVE_H

#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"

/* A file, not a pipe: code that writes without bound must not hang the
 * test on a full pipe, so that the assertion about the count can fail. */
struct capture {
	FILE *file;
	int saved_fd;
};

static inline void capture_start(struct capture *c)
{
	fflush(stderr);
	c->file = tmpfile();
	cr_assert_not_null(c->file, "tmpfile");
	c->saved_fd = dup(STDERR_FILENO);
	cr_assert_geq(c->saved_fd, 0);
	cr_assert_geq(dup2(fileno(c->file), STDERR_FILENO), 0);
}

/* Restore stderr; the captured text, NUL-terminated (free it). */
static inline char *capture_stop(struct capture *c)
{
	long size;
	char *text;

	cr_assert_geq(dup2(c->saved_fd, STDERR_FILENO), 0);
	close(c->saved_fd);
	cr_assert_eq(fseek(c->file, 0, SEEK_END), 0);
	size = ftell(c->file);
	cr_assert_geq(size, 0);
	text = calloc(1, (size_t)size + 1);
	cr_assert_not_null(text);
	rewind(c->file);
	cr_assert_eq(fread(text, 1, (size_t)size, c->file), (size_t)size);
	fclose(c->file);
	return text;
}

/* An fd (stdout, stderr) made the write end of a pipe for a while. */
struct redirect {
	int fd, saved;
	int rd;                       /* the read end: the test's to read, or not */
};

static inline void redirect_to_pipe(struct redirect *r, int fd)
{
	int p[2];

	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	r->fd = fd;
	r->rd = p[0];
	r->saved = dup(fd);
	cr_assert_geq(r->saved, 0);
	cr_assert_geq(dup2(p[1], fd), 0);
	close(p[1]);
}

/* Put the fd back; the pipe's reader then sees EOF. Idempotent. */
static inline void redirect_restore(struct redirect *r)
{
	if (r->saved < 0)
		return;
	cr_assert_geq(dup2(r->saved, r->fd), 0);
	close(r->saved);
	r->saved = -1;
}

/* A thread reading a pipe to its end, into a NUL-terminated buffer. */
struct drain {
	pthread_t thread;
	int fd;
	char *buf;
	size_t len, cap;
};

static inline void *drain_run(void *arg)
{
	struct drain *d = arg;
	ssize_t n;

	while ((n = read(d->fd, d->buf + d->len, d->cap - d->len - 1)) > 0)
		d->len += (size_t)n;
	d->buf[d->len] = '\0';
	return NULL;
}

static inline void drain_start(struct drain *d, int fd, size_t cap)
{
	d->fd = fd;
	d->cap = cap;
	d->len = 0;
	d->buf = malloc(cap);
	cr_assert_not_null(d->buf);
	cr_assert_eq(pthread_create(&d->thread, NULL, drain_run, d), 0);
}

/* Wait for EOF (restore the redirect first); what was read (free it). */
static inline char *drain_finish(struct drain *d)
{
	pthread_join(d->thread, NULL);
	return d->buf;
}

/* log_report_suppressed, then capture_stop: the text expect_limited wants. */
static inline char *capture_stop_summed(struct capture *c)
{
	log_report_suppressed();
	return capture_stop(c);
}

/* Lines of text that contain needle. */
static inline unsigned count_lines(const char *text, const char *needle)
{
	unsigned n = 0;

	for (const char *line = text; *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);

		if (memmem(line, len, needle, strlen(needle)))
			n++;
		line += len + (end ? 1 : 0);
	}
	return n;
}

/* Threads of this process that have not exited. */
static inline unsigned nr_threads(void)
{
	DIR *dir = opendir("/proc/self/task");
	struct dirent *e;
	unsigned n = 0;

	cr_assert_not_null(dir);
	while ((e = readdir(dir)))
		if (e->d_name[0] != '.')
			n++;
	closedir(dir);
	return n;
}

/* nr_threads once it is `want`, or after 5 s whatever it is. A joined
 * thread leaves /proc/self/task a moment after pthread_join returns: the
 * kernel wakes the joiner when it clears the thread's id, before the thread
 * has finished exiting (a longer moment under qemu-user). */
static inline unsigned nr_threads_settled(unsigned want)
{
	unsigned n = nr_threads();

	for (int i = 0; i < 500 && n != want; i++) {
		usleep(10 * 1000);
		n = nr_threads();
	}
	return n;
}

/* All `total` lines a guest triggered, those of text containing `needle`,
 * are accounted for: a few passed, and the rest were counted as suppressed,
 * in a later line's "(N similar lines suppressed)" or in the summary of
 * log_report_suppressed (capture_stop_summed). */
static inline void expect_limited(const char *text, const char *needle, unsigned total)
{
	static const char suffix[] = " similar lines suppressed)";
	static const char summary[] = " more lines suppressed by the per-cause log limits";
	unsigned passed = 0;
	unsigned long long suppressed = 0;

	for (const char *line = text; *line;) {
		const char *end = strchr(line, '\n'), *p;
		size_t len = end ? (size_t)(end - line) : strlen(line);

		if (memmem(line, len, needle, strlen(needle))) {
			passed++;
			p = memmem(line, len, suffix, strlen(suffix));
			if (p) {
				while (p > line && p[-1] >= '0' && p[-1] <= '9')
					p--;
				suppressed += strtoull(p, NULL, 10);
			}
		} else if ((p = memmem(line, len, summary, strlen(summary)))) {
			/* "mayfly[id] <level>: N more lines suppressed ..." */
			while (p > line && p[-1] >= '0' && p[-1] <= '9')
				p--;
			suppressed += strtoull(p, NULL, 10);
		}
		line += len + (end ? 1 : 0);
	}
	/* One more than the burst: the interval may pass on a slow machine. */
	cr_assert_leq(passed, LOG_LIMIT_BURST + 1, "%u lines \"%s\" passed the limit", passed,
		      needle);
	cr_assert_eq(passed + suppressed, total,
		     "%u lines passed + %llu counted as suppressed, want %u in all", passed,
		     suppressed, total);
}

#endif
