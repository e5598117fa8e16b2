/* http_reply.c - what serve's two HTTP front ends share on libmicrohttpd: replies, a bounded request body, the guard's bookkeeping. */
#include "serve/http_reply.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

enum MHD_Result http_send(struct MHD_Connection *conn, unsigned status, struct MHD_Response *resp)
{
	enum MHD_Result r;

	if (!resp)
		return MHD_NO;
	r = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return r;
}

struct MHD_Response *http_json_response(json_t *j)
{
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	struct MHD_Response *resp;
	size_t len;

	json_decref(j);
	if (!text)
		return NULL;
	len = strlen(text);
	text = realloc(text, len + 2) ?: text;   /* failed: the NUL's byte takes the newline */
	text[len] = '\n';
	resp = MHD_create_response_from_buffer(len + 1, text, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(text);
		return NULL;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	return resp;
}

enum MHD_Result http_send_json(struct MHD_Connection *conn, unsigned status, json_t *j)
{
	return http_send(conn, status, http_json_response(j));
}

enum MHD_Result http_send_empty(struct MHD_Connection *conn, unsigned status)
{
	return http_send(conn, status,
			 MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT));
}

ssize_t http_reader_result(ssize_t n)
{
	if (n == 0)
		return MHD_CONTENT_READER_END_OF_STREAM;
	return n < 0 ? MHD_CONTENT_READER_END_WITH_ERROR : n;
}

static enum MHD_Result count_length(void *cls, enum MHD_ValueKind kind, const char *key,
				    const char *value)
{
	unsigned *n = cls;

	(void)kind;
	(void)value;
	if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH))
		n[0]++;
	else if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING))
		n[1]++;
	return MHD_YES;
}

bool http_ambiguous_length(struct MHD_Connection *conn)
{
	unsigned n[2] = { 0, 0 };

	MHD_get_connection_values(conn, MHD_HEADER_KIND, count_length, n);
	return n[0] > 1 || (n[0] && n[1]) || n[1] > 1;
}

int http_body_add(struct http_body *b, const char *data, size_t n)
{
	if (b->too_large || !n)
		return 0;
	if (b->len + n > b->max) {
		b->too_large = true;
		http_body_free(b);
		return 0;
	}
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *nb;

		while (cap < b->len + n)
			cap *= 2;
		cap = cap > b->max ? b->max : cap;
		nb = realloc(b->data, cap);
		if (!nb)
			return -ENOMEM;
		b->data = nb;
		b->cap = cap;
	}
	memcpy(b->data + b->len, data, n);
	b->len += n;
	return 0;
}

void http_body_free(struct http_body *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

void http_guard_notify(struct http_guard *g, struct MHD_Connection *conn, void **socket_context,
		       enum MHD_ConnectionNotificationCode toe)
{
	if (toe == MHD_CONNECTION_NOTIFY_STARTED)
		*socket_context = http_guard_open(g, MHD_get_connection_info(
						  conn, MHD_CONNECTION_INFO_CONNECTION_FD)->connect_fd);
	else
		http_guard_close(g, *socket_context);
}

void http_guard_mark(struct http_guard *g, struct MHD_Connection *conn, bool waiting)
{
	http_guard_waiting(g, MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT)
				      ->socket_context, waiting);
}

enum MHD_Result http_send_stream(struct MHD_Connection *conn, unsigned status, uint64_t size,
				 size_t block, MHD_ContentReaderCallback reader, void *cls,
				 MHD_ContentReaderFreeCallback free_cls, const char *content_type)
{
	struct MHD_Response *resp = MHD_create_response_from_callback(size, block, reader, cls,
								      free_cls);

	if (!resp) {
		free_cls(cls);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
	return http_send(conn, status, resp);
}

struct MHD_Daemon *http_daemon_start(int listen_fd, struct http_guard *g, unsigned head_timeout_ms,
				     unsigned max_conns, unsigned extra_flags,
				     void *(*on_uri)(void *cls, const char *uri,
						     struct MHD_Connection *conn),
				     MHD_AccessHandlerCallback on_request,
				     MHD_RequestCompletedCallback on_completed,
				     MHD_NotifyConnectionCallback on_connection, void *cls)
{
	/* No listening socket: connections come by MHD_add_connection (TLS),
	 * and MHD takes no MHD_OPTION_LISTEN_SOCKET then (MHD_OPTION_ARRAY
	 * leaves it out: an empty array ends at once). */
	struct MHD_OptionItem listen_opt[] = {
		{ listen_fd < 0 ? MHD_OPTION_END : MHD_OPTION_LISTEN_SOCKET, listen_fd, NULL },
		{ MHD_OPTION_END, 0, NULL },
	};
	struct MHD_Daemon *d;

	if (http_guard_start(g, HTTP_GUARD_MAX_WAITING,
			     head_timeout_ms ? head_timeout_ms : HTTP_GUARD_TIMEOUT_MS))
		return NULL;
	if (listen_fd < 0)
		extra_flags |= MHD_USE_NO_LISTEN_SOCKET;
	d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
			     MHD_USE_ITC | extra_flags, 0, NULL, NULL, on_request, cls,
			     MHD_OPTION_ARRAY, listen_opt,
			     MHD_OPTION_NOTIFY_COMPLETED, on_completed, cls,
			     MHD_OPTION_URI_LOG_CALLBACK, on_uri, cls,
			     MHD_OPTION_NOTIFY_CONNECTION, on_connection, cls,
			     MHD_OPTION_CONNECTION_LIMIT, max_conns,
			     MHD_OPTION_CONNECTION_TIMEOUT, 0u,
			     MHD_OPTION_END);
	if (!d)
		http_guard_stop(g);
	return d;
}

void http_daemon_quiesce(struct MHD_Daemon *d, int *listen_fd)
{
	MHD_socket fd;

	if (!d)
		return;
	fd = MHD_quiesce_daemon(d);
	if (fd != MHD_INVALID_SOCKET)
		close(fd);
	*listen_fd = -1;
}

void http_daemon_stop(struct MHD_Daemon **d, struct http_guard *g, int *listen_fd)
{
	/* The daemon first: its connections' ends unregister them from the guard. */
	if (*d)
		MHD_stop_daemon(*d);
	*d = NULL;
	http_guard_stop(g);
	if (*listen_fd >= 0)
		close(*listen_fd);
	*listen_fd = -1;
}
