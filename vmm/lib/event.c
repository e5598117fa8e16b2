/* event.c - the I/O thread: one epoll loop per VM that calls device handlers when their fds fire. */
#include "lib/event.h"
#include "lib/log.h"
#include "lib/thread.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

int event_loop_init(struct event_loop *loop)
{
	memset(loop, 0, sizeof(*loop));
	pthread_mutex_init(&loop->pause_lock, NULL);
	pthread_cond_init(&loop->pause_cond, NULL);
	loop->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	loop->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (loop->epoll_fd < 0 || loop->stop_fd < 0) {
		int rc = -errno;

		event_loop_destroy(loop);
		return rc;
	}
	/* The stop fd has no source entry: data.ptr NULL means "stop". */
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };

	if (epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, loop->stop_fd, &ev) < 0) {
		int rc = -errno;

		event_loop_destroy(loop);
		return rc;
	}
	return 0;
}

int event_loop_add(struct event_loop *loop, int fd, uint32_t events, event_fn fn, void *opaque)
{
	struct event_source *src = NULL;
	struct epoll_event ev = { .events = events };

	/* Only FREE slots: a DEAD one may still be named by an event of the
	 * batch being dispatched, which must not reach the new source. */
	for (int i = 0; i < loop->nr_sources && !src; i++)
		if (loop->sources[i].state == EVENT_SLOT_FREE)
			src = &loop->sources[i];
	if (!src) {
		if (loop->nr_sources >= EVENT_MAX_SOURCES)
			return -ENOSPC;
		src = &loop->sources[loop->nr_sources];
	}
	ev.data.ptr = src;
	if (epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	*src = (struct event_source){ .fd = fd, .state = EVENT_SLOT_LIVE, .fn = fn, .opaque = opaque };
	if (src == &loop->sources[loop->nr_sources])
		loop->nr_sources++;
	return 0;
}

static struct event_source *find_live(struct event_loop *loop, int fd)
{
	for (int i = 0; i < loop->nr_sources; i++)
		if (loop->sources[i].state == EVENT_SLOT_LIVE && loop->sources[i].fd == fd)
			return &loop->sources[i];
	return NULL;
}

int event_loop_del(struct event_loop *loop, int fd)
{
	struct event_source *src = find_live(loop, fd);
	int rc = 0;

	if (!src)
		return -ENOENT;
	if (epoll_ctl(loop->epoll_fd, EPOLL_CTL_DEL, fd, NULL) < 0)
		rc = -errno;
	src->state = EVENT_SLOT_DEAD;
	return rc;
}

int event_loop_mod(struct event_loop *loop, int fd, uint32_t events)
{
	struct event_source *src = find_live(loop, fd);
	struct epoll_event ev = { .events = events };

	if (!src)
		return -ENOENT;
	ev.data.ptr = src;
	if (epoll_ctl(loop->epoll_fd, EPOLL_CTL_MOD, fd, &ev) < 0)
		return -errno;
	return 0;
}

/* Between batches no event names a DEAD slot any more: free them, and give
 * back the unused top of the table. */
static void reap_dead(struct event_loop *loop)
{
	for (int i = 0; i < loop->nr_sources; i++)
		if (loop->sources[i].state == EVENT_SLOT_DEAD)
			loop->sources[i].state = EVENT_SLOT_FREE;
	while (loop->nr_sources > 0 && loop->sources[loop->nr_sources - 1].state == EVENT_SLOT_FREE)
		loop->nr_sources--;
}

int event_loop_poll(struct event_loop *loop, int timeout_ms)
{
	struct epoll_event evs[16];
	int n;

	reap_dead(loop);
	n = epoll_wait(loop->epoll_fd, evs, 16, timeout_ms);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	for (int i = 0; i < n && !atomic_load(&loop->stopping); i++) {
		struct event_source *src = evs[i].data.ptr;

		/* A callback earlier in this batch may have deleted this
		 * source: its slot is DEAD and its opaque may be freed. */
		if (src && src->state == EVENT_SLOT_LIVE)
			src->fn(src->opaque, evs[i].events);
	}
	return n;
}

/* Between two batches (no callback running): park while a pause is
 * asked for. The wake-up event_loop_pause wrote is read, or epoll would
 * keep reporting it after the resume. */
static void park_if_asked(struct event_loop *loop)
{
	uint64_t count;

	if (!atomic_load(&loop->pause_req))
		return;
	pthread_mutex_lock(&loop->pause_lock);
	if (read(loop->stop_fd, &count, sizeof(count)) < 0)
		count = 0;   /* nothing pending: a stop may have drained it */
	loop->paused = true;
	pthread_cond_broadcast(&loop->pause_cond);
	while (atomic_load(&loop->pause_req) && !atomic_load(&loop->stopping))
		pthread_cond_wait(&loop->pause_cond, &loop->pause_lock);
	loop->paused = false;
	pthread_mutex_unlock(&loop->pause_lock);
}

static void *event_loop_thread(void *arg)
{
	struct event_loop *loop = arg;

	thread_set_name("io");
	if (loop->enter)
		loop->enter();   /* the caller's filter, before any callback */
	while (!atomic_load(&loop->stopping)) {
		int n = event_loop_poll(loop, -1);

		if (n < 0) {
			log_error("io thread: epoll_wait failed: %s", strerror(-n));
			break;
		}
		park_if_asked(loop);
	}
	/* A pause waiting for this thread must not wait for ever. */
	pthread_mutex_lock(&loop->pause_lock);
	loop->exited = true;
	pthread_cond_broadcast(&loop->pause_cond);
	pthread_mutex_unlock(&loop->pause_lock);
	return NULL;
}

void event_loop_pause(struct event_loop *loop)
{
	uint64_t one = 1;

	if (!loop->started)
		return;
	pthread_mutex_lock(&loop->pause_lock);
	atomic_store(&loop->pause_req, true);
	if (write(loop->stop_fd, &one, sizeof(one)) < 0)
		log_debug("io thread: wake-up eventfd already signalled");
	while (!loop->paused && !loop->exited)
		pthread_cond_wait(&loop->pause_cond, &loop->pause_lock);
	pthread_mutex_unlock(&loop->pause_lock);
}

void event_loop_resume(struct event_loop *loop)
{
	pthread_mutex_lock(&loop->pause_lock);
	atomic_store(&loop->pause_req, false);
	pthread_cond_broadcast(&loop->pause_cond);
	pthread_mutex_unlock(&loop->pause_lock);
}

int event_loop_start(struct event_loop *loop, void (*enter)(void))
{
	/* Signals belong to the main thread's signalfd, never to device code;
	 * but a fault's (SIGBUS from a snapshot's memory file cut short, a
	 * sanitizer's SIGSEGV) must stay deliverable, or the kernel kills
	 * the process without its handler's line. */
	int rc;

	loop->enter = enter;
	rc = thread_start(&loop->thread, event_loop_thread, loop);

	if (rc)
		return rc;
	loop->started = true;
	return 0;
}

void event_loop_stop(struct event_loop *loop)
{
	uint64_t one = 1;

	if (!loop->started)
		return;
	atomic_store(&loop->stopping, true);
	if (write(loop->stop_fd, &one, sizeof(one)) < 0)
		log_debug("io thread: stop eventfd already signalled");
	/* A thread parked by event_loop_pause wakes to leave. */
	pthread_mutex_lock(&loop->pause_lock);
	pthread_cond_broadcast(&loop->pause_cond);
	pthread_mutex_unlock(&loop->pause_lock);
	pthread_join(loop->thread, NULL);
	loop->started = false;
}

void event_loop_destroy(struct event_loop *loop)
{
	if (loop->epoll_fd >= 0)
		close(loop->epoll_fd);
	if (loop->stop_fd >= 0)
		close(loop->stop_fd);
	loop->epoll_fd = loop->stop_fd = -1;
}
