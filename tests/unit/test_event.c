/* test_event.c - the I/O thread's loop (vmm/lib/event.c): sources added, changed and deleted while it runs. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include "lib/event.h"

struct ev_probe {
	struct event_loop *loop;
	int fd;
	int calls;
	struct ev_probe *victim;   /* deleted (and its fd closed) when this one runs */
};

static void ev_probe_fn(void *opaque, uint32_t events)
{
	struct ev_probe *e = opaque;

	(void)events;
	e->calls++;
	if (e->victim && e->victim->fd >= 0) {
		cr_assert_eq(event_loop_del(e->loop, e->victim->fd), 0);
		close(e->victim->fd);
		e->victim->fd = -1;
	}
}

static int ready_eventfd(void)
{
	uint64_t one = 1;
	int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, &one, sizeof(one)), (ssize_t)sizeof(one));
	return fd;
}

Test(event_loop, delete_during_batch_is_safe)
{
	struct event_loop l;
	struct ev_probe a = { .loop = &l }, b = { .loop = &l }, c = { .loop = &l };

	cr_assert_eq(event_loop_init(&l), 0);
	a.fd = ready_eventfd();
	b.fd = ready_eventfd();
	a.victim = &b;   /* whichever runs first deletes the other */
	b.victim = &a;
	cr_assert_eq(event_loop_add(&l, a.fd, EPOLLIN, ev_probe_fn, &a), 0);
	cr_assert_eq(event_loop_add(&l, b.fd, EPOLLIN, ev_probe_fn, &b), 0);
	cr_assert_eq(event_loop_poll(&l, 0), 2, "both were ready in one batch");
	cr_assert_eq(a.calls + b.calls, 1, "a source deleted in the batch still ran");
	/* A source added after the batch never gets the dead slot's events. */
	c.fd = ready_eventfd();
	cr_assert_eq(event_loop_add(&l, c.fd, EPOLLIN, ev_probe_fn, &c), 0);
	cr_assert_eq(event_loop_poll(&l, 0), 2, "the survivor (still readable) and c");
	cr_assert_eq(c.calls, 1);
	cr_assert_eq(a.calls + b.calls, 2);
	close(a.fd >= 0 ? a.fd : b.fd);
	close(c.fd);
	event_loop_destroy(&l);
}

Test(event_loop, dead_slot_reused_only_after_the_batch)
{
	static struct event_loop l;
	static int fds[EVENT_MAX_SOURCES];
	struct rlimit rl;
	struct ev_probe e = { .loop = &l };
	int extra;

	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur < EVENT_MAX_SOURCES + 64) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		if (rl.rlim_cur < EVENT_MAX_SOURCES + 64)
			cr_skip_test("fd limit below %d", EVENT_MAX_SOURCES + 64);
	}
	cr_assert_eq(event_loop_init(&l), 0);
	for (int i = 0; i < EVENT_MAX_SOURCES; i++) {
		fds[i] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		cr_assert_eq(event_loop_add(&l, fds[i], EPOLLIN, ev_probe_fn, &e), 0, "source %d", i);
	}
	extra = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	cr_assert_eq(event_loop_add(&l, extra, EPOLLIN, ev_probe_fn, &e), -ENOSPC);
	/* Deleted, but its slot waits for the next wait: still full. */
	cr_assert_eq(event_loop_del(&l, fds[7]), 0);
	cr_assert_eq(event_loop_del(&l, fds[7]), -ENOENT);
	cr_assert_eq(event_loop_add(&l, extra, EPOLLIN, ev_probe_fn, &e), -ENOSPC);
	cr_assert_eq(event_loop_poll(&l, 0), 0);
	cr_assert_eq(event_loop_add(&l, extra, EPOLLIN, ev_probe_fn, &e), 0);
	for (int i = 0; i < EVENT_MAX_SOURCES; i++)
		close(fds[i]);
	close(extra);
	event_loop_destroy(&l);
}

Test(event_loop, modify_events)
{
	struct event_loop l;
	struct ev_probe e = { .loop = &l };

	cr_assert_eq(event_loop_init(&l), 0);
	e.fd = ready_eventfd();
	cr_assert_eq(event_loop_add(&l, e.fd, EPOLLIN, ev_probe_fn, &e), 0);
	cr_assert_eq(event_loop_mod(&l, e.fd, 0), 0);
	cr_assert_eq(event_loop_poll(&l, 0), 0, "a source watched for nothing fired");
	cr_assert_eq(event_loop_mod(&l, e.fd, EPOLLIN), 0);
	cr_assert_eq(event_loop_poll(&l, 0), 1);
	cr_assert_eq(e.calls, 1);
	cr_assert_eq(event_loop_mod(&l, 12345, EPOLLIN), -ENOENT);
	cr_assert_eq(event_loop_del(&l, 12345), -ENOENT);
	cr_assert_eq(event_loop_del(&l, e.fd), 0);
	cr_assert_eq(event_loop_poll(&l, 0), 0, "a deleted source fired");
	close(e.fd);
	event_loop_destroy(&l);
}

/* A source that drains its eventfd and counts, from the loop's own thread. */
static void drain_fn(void *opaque, uint32_t events)
{
	struct ev_probe *e = opaque;
	uint64_t v;

	(void)events;
	if (read(e->fd, &v, sizeof(v)) == (ssize_t)sizeof(v))
		__atomic_add_fetch(&e->calls, 1, __ATOMIC_SEQ_CST);
}

static int calls_of(struct ev_probe *e)
{
	return __atomic_load_n(&e->calls, __ATOMIC_SEQ_CST);
}

/* mayfly fork: the I/O thread parks between batches, runs nothing while
 * parked, goes on after the resume, and a stop ends a parked thread. */
Test(event_loop, pause_parks_the_thread_resume_and_stop)
{
	struct event_loop l;
	struct ev_probe e = { .loop = &l };
	uint64_t one = 1;

	cr_assert_eq(event_loop_init(&l), 0);
	e.fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	cr_assert_eq(event_loop_add(&l, e.fd, EPOLLIN, drain_fn, &e), 0);
	cr_assert_eq(event_loop_start(&l, NULL), 0);
	event_loop_pause(&l);
	cr_assert_eq(write(e.fd, &one, sizeof(one)), (ssize_t)sizeof(one));
	usleep(100 * 1000);
	cr_assert_eq(calls_of(&e), 0, "a parked loop ran a callback");
	event_loop_resume(&l);
	for (int i = 0; i < 2000 && calls_of(&e) == 0; i++)
		usleep(1000);
	cr_assert_eq(calls_of(&e), 1, "the resumed loop did not serve the source");
	/* No spin on the wake-up the pause wrote: one more event, one more call. */
	usleep(50 * 1000);
	cr_assert_eq(calls_of(&e), 1);
	event_loop_pause(&l);
	event_loop_stop(&l);   /* joins a parked thread */
	event_loop_pause(&l);  /* a stopped loop: returns at once */
	close(e.fd);
	event_loop_destroy(&l);
}
