/* http_reply.h - what serve's two HTTP front ends (its own API, http.c; E2B's, e2b_http.c) share on libmicrohttpd: replies, a bounded request body, the guard's bookkeeping. */
#ifndef MAYFLY_SERVE_HTTP_REPLY_H
#define MAYFLY_SERVE_HTTP_REPLY_H

#include <jansson.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "serve/http_guard.h"

/* Queue resp (taken; NULL: MHD_NO, the connection closed) with status. */
enum MHD_Result http_send(struct MHD_Connection *conn, unsigned status, struct MHD_Response *resp);
/* j (taken) as one line of compact JSON, application/json. NULL if it
 * cannot be made. */
struct MHD_Response *http_json_response(json_t *j);
enum MHD_Result http_send_json(struct MHD_Connection *conn, unsigned status, json_t *j);
/* An empty body. */
enum MHD_Result http_send_empty(struct MHD_Connection *conn, unsigned status);

/* A body read from reader(cls) (size: MHD_SIZE_UNKNOWN or the length;
 * free_cls(cls) when done, also when the reply cannot be made) with
 * content_type and status. */
enum MHD_Result http_send_stream(struct MHD_Connection *conn, unsigned status, uint64_t size,
				 size_t block, MHD_ContentReaderCallback reader, void *cls,
				 MHD_ContentReaderFreeCallback free_cls, const char *content_type);

/* libmicrohttpd serving listen_fd (-1: none, connections come by
 * MHD_add_connection), a thread per connection, at most
 * max_conns at once, no timeout of its own (the guard g, started here
 * with head_timeout_ms, times request heads; a call lasts as long as it
 * needs). on_uri (NULL: none) sees each request target as sent; what
 * it returns is the request's first context. The daemon, or NULL (the
 * guard stopped again). */
struct MHD_Daemon *http_daemon_start(int listen_fd, struct http_guard *g, unsigned head_timeout_ms,
				     unsigned max_conns, unsigned extra_flags,
				     void *(*on_uri)(void *cls, const char *uri,
						     struct MHD_Connection *conn),
				     MHD_AccessHandlerCallback on_request,
				     MHD_RequestCompletedCallback on_completed,
				     MHD_NotifyConnectionCallback on_connection, void *cls);
/* Stop accepting: the listening socket closed (*listen_fd -1). */
void http_daemon_quiesce(struct MHD_Daemon *d, int *listen_fd);
/* End every connection (each waits for its call), stop the guard, close
 * the listening socket. */
void http_daemon_stop(struct MHD_Daemon **d, struct http_guard *g, int *listen_fd);

/* A streamed body's read as libmicrohttpd counts it: 0 the end, < 0 an
 * error that cuts the response. */
ssize_t http_reader_result(ssize_t n);

/* Request smuggling's way in (RFC 9112, 6.3): two Content-Length
 * headers, or one beside Transfer-Encoding, or two of those. */
bool http_ambiguous_length(struct MHD_Connection *conn);

/* A request body kept whole, at most max bytes (past it: too_large, the
 * rest dropped). */
struct http_body {
	char *data;
	size_t len, cap, max;
	bool too_large;
};
/* Add a piece. 0, or -ENOMEM. */
int http_body_add(struct http_body *b, const char *data, size_t n);
void http_body_free(struct http_body *b);

/* libmicrohttpd's connection notices kept in the guard (its handle in
 * *socket_context); and a request's head in (waiting false) or answered. */
void http_guard_notify(struct http_guard *g, struct MHD_Connection *conn, void **socket_context,
		       enum MHD_ConnectionNotificationCode toe);
void http_guard_mark(struct http_guard *g, struct MHD_Connection *conn, bool waiting);

#endif
