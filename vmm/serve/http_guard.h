/* http_guard.h - serve's connections that have not sent a whole request head: each cut after so long, the oldest cut when too many wait, so that clients without a token cannot hold the API. */
#ifndef MAYFLY_SERVE_HTTP_GUARD_H
#define MAYFLY_SERVE_HTTP_GUARD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define HTTP_GUARD_MAX_WAITING 64      /* waiting connections before the oldest is cut */
#define HTTP_GUARD_TIMEOUT_MS  10000   /* to send a request head, or the next one */

struct http_guard_conn;

/* A connection is "waiting" from its accept, and again after each request
 * is answered (keep-alive), until the next request's head is in. A waiting
 * connection past timeout_ms is cut (shutdown: its thread sees the end and
 * closes it), and when a new one would make max_waiting + 1, the oldest
 * waiting one is cut: a new client always gets in, and holding the API
 * takes new connections faster than clients send a request head, not a
 * pile of idle ones. A request whose head is in (its token checked) lives
 * on its own terms: bodies, long calls and streamed exec output are not
 * timed here. */
struct http_guard {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct http_guard_conn *conns;
	unsigned waiting, max_waiting, timeout_ms;
	uint64_t evicted, cut;         /* statistics: cut for a newer one, or for time */
	bool stop, started;
	pthread_t thread;
};

/* Start the guard's thread. 0 or -errno. */
int http_guard_start(struct http_guard *g, unsigned max_waiting, unsigned timeout_ms)
	__attribute__((warn_unused_result));
/* Stop and join it; connections still known are forgotten (not cut). */
void http_guard_stop(struct http_guard *g);

/* A connection on fd began (waiting; the oldest waiting one is cut if
 * max_waiting wait already): its handle, NULL when out of memory (it is
 * then not guarded). */
struct http_guard_conn *http_guard_open(struct http_guard *g, int fd);
/* Its request head is in (false), or its request was answered and it
 * waits for the next one's (true). */
void http_guard_waiting(struct http_guard *g, struct http_guard_conn *c, bool waiting);
/* It ended (before its fd is closed); c is freed. */
void http_guard_close(struct http_guard *g, struct http_guard_conn *c);

#endif
