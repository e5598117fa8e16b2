/* event.h - the I/O thread: an epoll loop that runs device work off the vCPU threads. */
#ifndef MAYFLY_LIB_EVENT_H
#define MAYFLY_LIB_EVENT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Kick eventfds of every device, plus vsock's listener, its timer and one
 * socket per connection (at most 256 of those): room for all at once. */
#define EVENT_MAX_SOURCES 512

/* Called on the I/O thread with the epoll events that fired. */
typedef void (*event_fn)(void *opaque, uint32_t events);

enum event_slot {
	EVENT_SLOT_FREE = 0,
	EVENT_SLOT_LIVE,
	EVENT_SLOT_DEAD,     /* deleted during the running batch: free at the next wait */
};

struct event_source {
	int fd;
	uint8_t state;       /* enum event_slot */
	event_fn fn;
	void *opaque;
};

struct event_loop {
	int epoll_fd;
	int stop_fd;                 /* eventfd: written by event_loop_stop */
	pthread_t thread;
	bool started;
	void (*enter)(void);          /* event_loop_start's, run first on the thread */
	_Atomic bool stopping;
	int nr_sources;              /* slots [0, nr_sources) have been handed out */
	/* event_loop_pause: the thread parks between batches. */
	pthread_mutex_t pause_lock;
	pthread_cond_t pause_cond;
	_Atomic bool pause_req;
	bool paused, exited;         /* pause_lock */
	struct event_source sources[EVENT_MAX_SOURCES];
};

/* Create the epoll instance. 0 or -errno. */
int event_loop_init(struct event_loop *loop) __attribute__((warn_unused_result));

/* Watch fd for `events` (EPOLLIN, ...; level-triggered) and call fn on the
 * I/O thread. The source table is not locked: call this before
 * event_loop_start, or on the I/O thread itself (from inside a callback)
 * while it runs. 0, -ENOSPC when full, or -errno from epoll_ctl. */
int event_loop_add(struct event_loop *loop, int fd, uint32_t events, event_fn fn, void *opaque)
	__attribute__((warn_unused_result));

/* Stop watching fd; call before closing it. Same threads as event_loop_add.
 * Safe from inside a callback of the running batch: an event of this batch
 * still queued for fd is dropped, and the slot is reused only after the
 * batch. 0, -ENOENT when fd is not watched, or -errno from epoll_ctl (the
 * source is gone either way). */
int event_loop_del(struct event_loop *loop, int fd);

/* Change the events watched on fd (0 leaves only EPOLLHUP and EPOLLERR,
 * which epoll always reports). Same threads as event_loop_add. 0, -ENOENT
 * when fd is not watched, or -errno from epoll_ctl. */
int event_loop_mod(struct event_loop *loop, int fd, uint32_t events);

/* Wait up to timeout_ms (-1: forever) for one batch of events and run their
 * callbacks on the calling thread, which is then the I/O thread: the loop's
 * own thread does this, and unit tests call it on a loop they never
 * started. Returns the number of events (0 on timeout or EINTR) or -errno. */
int event_loop_poll(struct event_loop *loop, int timeout_ms);

/* Start the I/O thread; enter (NULL: none) runs first on it: the caller's
 * set-up for it, such as its seccomp filter. 0 or -errno. */
int event_loop_start(struct event_loop *loop, void (*enter)(void))
	__attribute__((warn_unused_result));

/* Stop and join the thread (a callback in progress finishes first). */
void event_loop_stop(struct event_loop *loop);

/* Park the running I/O thread between two batches (no callback in
 * progress: device work drained) until event_loop_resume, or its stop.
 * Returns once it is parked (or has ended). Not from the I/O thread;
 * nothing when it was never started. */
void event_loop_pause(struct event_loop *loop);
void event_loop_resume(struct event_loop *loop);

/* Close the epoll and stop fds. Safe after a failed init, or on a loop
 * whose two fds were set to -1. */
void event_loop_destroy(struct event_loop *loop);

#endif
