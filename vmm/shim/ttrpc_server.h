/* ttrpc_server.h - a ttrpc server on a listening Unix stream socket: many connections, many calls in flight on each, every call on a worker thread of a bounded pool. */
#ifndef MAYFLY_SHIM_TTRPC_SERVER_H
#define MAYFLY_SHIM_TTRPC_SERVER_H

#include "shim/ttrpc.h"

#include <stddef.h>
#include <stdint.h>

/* Defaults of struct ttrpc_server_config's zeros. */
#define TTRPC_SERVER_CONNS      64        /* connections at once; more wait in the backlog */
#define TTRPC_SERVER_WORKERS    32        /* calls running at once; more wait their turn */
#define TTRPC_SERVER_INFLIGHT   32        /* calls of one connection not yet answered */
#define TTRPC_SERVER_WRITE_MS   10000     /* a response not taken by then ends its connection */

/* Request bytes the calls of one connection, and of all, may hold before
 * the server stops reading (the peer's frames then wait in its socket). */
#define TTRPC_SERVER_CONN_BYTES (16u << 20)
#define TTRPC_SERVER_BYTES      (64u << 20)

#define TTRPC_REPLY_TEXT_MAX    1024

/* What a handler gets. Valid until it returns. */
struct ttrpc_call {
	const struct ttrpc_request *req;  /* service, method, payload, metadata (ttrpc_request_namespace) */
	uint32_t stream_id;
	uint64_t deadline_ns;   /* CLOCK_MONOTONIC, from the request's timeout; 0: none */
	/* Readable (poll POLLIN) once the caller has gone (its response will
	 * be dropped) or the server is stopping: a handler that parks (Wait
	 * until a process exits) polls it beside its own event and returns.
	 * Poll it, never read it: other calls of the connection share it. */
	int cancel_fd;
};

/* What a handler answers. Zeroed when it is called. */
struct ttrpc_reply {
	uint8_t *payload;       /* with OK: the response message (ttrpc_pack's), malloc'd; the server frees it. NULL: empty */
	size_t len;
	char message[TTRPC_REPLY_TEXT_MAX];   /* with another code: why (empty: the code's name) */
};

/* Returns an enum ttrpc_code: OK with reply->payload, another with
 * reply->message (a payload is then freed unsent). A number outside the
 * codes is answered INTERNAL. Runs on a worker thread, concurrently with
 * other calls, of this connection and others: the handler locks what it
 * shares. It may block (a Wait): other calls go on, up to the pool's size. */
typedef int32_t (*ttrpc_handler)(void *opaque, const struct ttrpc_call *call,
				 struct ttrpc_reply *reply);

struct ttrpc_method {
	const char *service;    /* "containerd.task.v2.Task" */
	const char *method;     /* "Create" */
	ttrpc_handler fn;
};

struct ttrpc_server_config {
	const struct ttrpc_method *methods;   /* the caller's, kept until the server is stopped */
	size_t n_methods;
	void *opaque;                          /* every handler's first argument */
	unsigned max_conns, max_workers, max_inflight, write_timeout_ms;   /* 0: the defaults above */
	/* containerd's shim accepts only peers of its own effective uid and
	 * gid (SO_PEERCRED; ttrpc's UnixSocketRequireSameUser): so do we,
	 * unless this is set. */
	bool any_user;
};

struct ttrpc_server;

/*
 * Serve listen_fd (a bound, listening AF_UNIX SOCK_STREAM socket, still
 * the caller's to close after the stop; it is made non-blocking) on a
 * thread of its own. Each request frame becomes a call, run on a worker
 * (the pool grows to max_workers, then calls wait in order) and answered
 * on its stream id, whole, under the connection's write lock; a stream id
 * used again is answered again. Without a handler for its service and
 * method a call is answered UNIMPLEMENTED ("service S" or "method M", as
 * ttrpc's Go server says); one whose deadline passed before it ran,
 * DEADLINE_EXCEEDED; an even stream id, INVALID_ARGUMENT (ttrpc's clients
 * number theirs odd). A frame of another type is skipped (ttrpc's own
 * server does the same, for later protocol versions).
 * What ends a connection: a length over TTRPC_MESSAGE_MAX (answered
 * RESOURCE_EXHAUSTED first, if its write lock is free), a body that is no
 * ttrpc Request (answered INVALID_ARGUMENT first, likewise), the peer's
 * close or an error, a response not taken within write_timeout_ms. The
 * calls it still had run on, are told through cancel_fd, and their
 * responses are dropped.
 * 0 with *out, or -EINVAL (a method without names or handler, no
 * methods), -ENOMEM, -errno from the thread or eventfd.
 */
int ttrpc_server_start(struct ttrpc_server **out, int listen_fd,
		       const struct ttrpc_server_config *cfg) __attribute__((warn_unused_result));

struct ttrpc_server_stats {
	unsigned conns;       /* open connections */
	unsigned calls;       /* calls taken and not yet answered (or dropped) */
	unsigned workers;     /* worker threads */
	uint64_t served;      /* calls answered or dropped since the start */
};

void ttrpc_server_stats(struct ttrpc_server *s, struct ttrpc_server_stats *st);

/*
 * Stop: accept and read no more, tell every call through its cancel_fd,
 * wait up to grace_ms for the calls in flight (their responses are still
 * written), then close every connection and free s. 0; or -ETIMEDOUT when
 * a handler had not returned by then: its thread then finishes alone (its
 * response dropped) and the last such thread frees what is left. Not from
 * a handler. NULL: nothing.
 */
int ttrpc_server_stop(struct ttrpc_server *s, unsigned grace_ms);

#endif
