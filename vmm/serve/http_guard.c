/* http_guard.c - a deadline and a cap for connections still sending a request head, enforced by one thread that shuts down the late ones. */
#include "serve/http_guard.h"
#include "lib/clock.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

struct http_guard_conn {
	struct http_guard_conn *next, **pprev;
	int fd;
	bool waiting, cut;
	uint64_t since_ns;   /* when it began waiting */
};

#define GUARD_TICK_MS 200

static void set_waiting(struct http_guard *g, struct http_guard_conn *c, bool waiting)
{
	if (c->waiting != waiting)
		g->waiting += waiting ? 1 : (unsigned)-1;
	c->waiting = waiting;
	c->since_ns = clock_now_ns();
}

/* Shut c's socket down, once: its thread sees the end and closes it. The
 * fd is still open: http_guard_close, under the lock held here, comes
 * before the connection's thread closes it. */
static void cut(struct http_guard_conn *c)
{
	shutdown(c->fd, SHUT_RDWR);
	c->cut = true;
}

/* Cut each connection waiting past the deadline, once. Lock held. */
static void cut_late(struct http_guard *g)
{
	uint64_t now = clock_now_ns(), limit = (uint64_t)g->timeout_ms * 1000000ULL;

	for (struct http_guard_conn *c = g->conns; c; c = c->next)
		if (c->waiting && !c->cut && now - c->since_ns > limit) {
			cut(c);
			g->cut++;
		}
}

static void *guard_thread(void *arg)
{
	struct http_guard *g = arg;

	pthread_mutex_lock(&g->lock);
	while (!g->stop) {
		struct timespec t = clock_realtime_after_ms(GUARD_TICK_MS);

		cut_late(g);
		pthread_cond_timedwait(&g->wake, &g->lock, &t);
	}
	pthread_mutex_unlock(&g->lock);
	return NULL;
}

int http_guard_start(struct http_guard *g, unsigned max_waiting, unsigned timeout_ms)
{
	int rc;

	memset(g, 0, sizeof(*g));
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->wake, NULL);
	g->max_waiting = max_waiting;
	g->timeout_ms = timeout_ms;
	rc = pthread_create(&g->thread, NULL, guard_thread, g);
	if (rc)
		return -rc;
	g->started = true;
	return 0;
}

void http_guard_stop(struct http_guard *g)
{
	struct http_guard_conn *c;

	if (!g->started)
		return;
	pthread_mutex_lock(&g->lock);
	g->stop = true;
	pthread_cond_signal(&g->wake);
	pthread_mutex_unlock(&g->lock);
	pthread_join(g->thread, NULL);
	g->started = false;
	while ((c = g->conns)) {
		g->conns = c->next;
		free(c);
	}
}

/* The oldest waiting connection not cut yet, cut. Lock held. */
static void evict_oldest(struct http_guard *g)
{
	struct http_guard_conn *old = NULL;

	for (struct http_guard_conn *c = g->conns; c; c = c->next)
		if (c->waiting && !c->cut && (!old || c->since_ns < old->since_ns))
			old = c;
	if (old) {
		cut(old);
		g->evicted++;
	}
}

struct http_guard_conn *http_guard_open(struct http_guard *g, int fd)
{
	struct http_guard_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->fd = fd;
	pthread_mutex_lock(&g->lock);
	/* Cut ones still count until their threads close them. */
	if (g->waiting >= g->max_waiting)
		evict_oldest(g);
	c->next = g->conns;
	if (g->conns)
		g->conns->pprev = &c->next;
	c->pprev = &g->conns;
	g->conns = c;
	set_waiting(g, c, true);
	pthread_mutex_unlock(&g->lock);
	return c;
}

void http_guard_waiting(struct http_guard *g, struct http_guard_conn *c, bool waiting)
{
	if (!c)
		return;
	pthread_mutex_lock(&g->lock);
	set_waiting(g, c, waiting);
	pthread_mutex_unlock(&g->lock);
}

void http_guard_close(struct http_guard *g, struct http_guard_conn *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&g->lock);
	set_waiting(g, c, false);
	*c->pprev = c->next;
	if (c->next)
		c->next->pprev = c->pprev;
	pthread_mutex_unlock(&g->lock);
	free(c);
}
