/* serve_loop.h - mayfly serve's main loop on a thread of its own, for the unit tests that run a service: it spawns the VM processes (their PDEATHSIG follows that thread), reaps and expires. */
#ifndef MAYFLY_TESTS_SERVE_LOOP_H
#define MAYFLY_TESTS_SERVE_LOOP_H

#include <criterion/criterion.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>

#include "serve/service.h"

struct serve_loop {
	struct service *svc;
	pthread_t thread;
	atomic_bool stop;
};

static void *serve_loop_run(void *arg)
{
	struct serve_loop *l = arg;

	while (!atomic_load(&l->stop)) {
		struct pollfd p = { l->svc->sup.efd, POLLIN, 0 };

		if (poll(&p, 1, 50) > 0)
			supervise_pending(&l->svc->sup);
		service_tick(l->svc);
	}
	return NULL;
}

static inline void serve_loop_start(struct serve_loop *l, struct service *svc)
{
	l->svc = svc;
	atomic_store(&l->stop, false);
	cr_assert_eq(pthread_create(&l->thread, NULL, serve_loop_run, l), 0);
}

static inline void serve_loop_stop(struct serve_loop *l)
{
	atomic_store(&l->stop, true);
	pthread_join(l->thread, NULL);
}

#endif
