/* mcp.c - the MCP server's JSON-RPC side: a reader thread takes lines apart, answers ping, server/discover and cancellation at once, and queues requests for the worker that serves them in order. */
#include "mcp/mcp.h"
#include "mcp/mcp_modern.h"
#include "mcp/mcp_tools.h"
#include "lib/json_shape.h"
#include "lib/log.h"
#include "seccomp/seccomp.h"
#include "lib/thread.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define READ_CHUNK   (64u << 10)

/* The 2025 revisions initialize answers in (the newest first); any other
 * request gets the newest, and the client decides. */
static const char *const versions[] = { MCP_PROTOCOL_VERSION, "2025-06-18", "2025-03-26",
					 "2024-11-05" };

int mcp_send(struct mcp_server *s, json_t *msg)
{
	char *text = json_dumps(msg, JSON_COMPACT);
	size_t len, off = 0;
	int rc = 0;

	if (!text)
		return -ENOMEM;
	len = strlen(text);
	text[len] = '\n';   /* json_dumps's NUL becomes the line's end */
	len++;
	pthread_mutex_lock(&s->out_lock);
	while (off < len) {
		ssize_t n = write(s->out_fd, text + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : -EIO;
			break;
		}
		off += (size_t)n;
	}
	pthread_mutex_unlock(&s->out_lock);
	free(text);
	return rc;
}

/* {"jsonrpc":"2.0","id":id,"error":{"code":code,"message":msg[,"data":data]}};
 * id NULL: null. Takes data (NULL: none). */
static void send_error_data(struct mcp_server *s, json_t *id, int code, const char *msg,
			    json_t *data)
{
	json_t *m = json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id",
			      id ? id : json_null(), "error", "code", code, "message", msg);

	if (m && data)
		json_object_set(json_object_get(m, "error"), "data", data);
	if (m)
		mcp_send(s, m);
	json_decref(m);
	json_decref(data);
}

static void send_error(struct mcp_server *s, json_t *id, int code, const char *msg)
{
	send_error_data(s, id, code, msg, NULL);
}

/* Takes result. */
static void send_result(struct mcp_server *s, json_t *id, json_t *result)
{
	json_t *m = json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id,
			      "result", result ? result : json_object());

	if (m)
		mcp_send(s, m);
	json_decref(m);
}

/* Request ids are strings or integers (MCP: never null). */
static bool id_valid(json_t *id)
{
	return json_is_string(id) || json_is_integer(id);
}

/* notifications/cancelled: the queued request is dropped; the running
 * one is killed (a command) and its answer withheld. */
static void cancel(struct mcp_server *s, json_t *params)
{
	json_t *id = json_object_get(params, "requestId");
	uint8_t kill_sig = SIGKILL;

	if (!id_valid(id))
		return;
	pthread_mutex_lock(&s->lock);
	if (s->current && json_equal(s->current, id)) {
		s->cancelled = true;
		if (write(s->sigs[1], &kill_sig, 1) != 1)
			log_debug("mcp: cannot pass the cancellation on: %s", strerror(errno));
	} else {
		for (size_t i = 0; i < s->qlen; i++) {
			json_t **q = &s->queue[(s->qhead + i) % MCP_QUEUE_MAX];

			if (*q && json_equal(json_object_get(*q, "id"), id)) {
				json_decref(*q);
				*q = NULL;   /* the worker skips the hole */
			}
		}
	}
	pthread_mutex_unlock(&s->lock);
}

static void enqueue(struct mcp_server *s, json_t *msg, json_t *id, size_t len)
{
	size_t slot;

	pthread_mutex_lock(&s->lock);
	if (s->qlen == MCP_QUEUE_MAX || s->queued_bytes + len > MCP_QUEUE_BYTES) {
		pthread_mutex_unlock(&s->lock);
		send_error(s, id, MCP_SERVER_BUSY, "too many requests waiting: send fewer at once");
		return;
	}
	slot = (s->qhead + s->qlen++) % MCP_QUEUE_MAX;
	s->queue[slot] = json_incref(msg);
	s->qbytes[slot] = len;
	s->queued_bytes += len;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

/* ping, on the reader: an empty result, which in the 2026-07-28 era (the
 * request's _meta says so) is a complete one like every other result. */
static void ping(struct mcp_server *s, json_t *id, json_t *params)
{
	json_t *result;

	if (!mcp_modern_claimed(params)) {
		send_result(s, id, NULL);
		return;
	}
	result = json_object();
	if (result && !mcp_modern_complete(result, false)) {
		send_result(s, id, result);   /* takes result */
		return;
	}
	json_decref(result);
	send_error(s, id, MCP_INTERNAL_ERROR, "internal error: out of memory");
}

/* server/discover, on the reader as ping is: a client's probe (with a
 * timeout: 10 s in the Python SDK) is answered before the guest agent
 * is up and while a command runs. Its answer depends on nothing else. */
static void discover(struct mcp_server *s, json_t *id, json_t *params)
{
	char caller[sizeof(s->caller)], why[300];   /* not the worker's modern_caller */
	json_t *data, *result;
	int code = mcp_modern_check(params, caller, sizeof(caller), &data, why, sizeof(why));

	if (code) {
		send_error_data(s, id, code, why, data);
		return;
	}
	result = mcp_modern_discover();
	if (result)
		send_result(s, id, result);
	else
		send_error(s, id, MCP_INTERNAL_ERROR, "internal error: out of memory");
}

_Static_assert(MCP_VALUES_MAX == 16384 && MCP_DEPTH_MAX == 64, "on_line's refusal names them");

/* One whole line from the client. */
static void on_line(struct mcp_server *s, const char *line, size_t len)
{
	json_error_t jerr;
	json_t *msg, *id, *method;
	const char *name;
	size_t i = 0;

	while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
		i++;
	if (i == len)
		return;   /* a blank line is nothing */
	if (!json_shape_within(line, len, MCP_VALUES_MAX, MCP_DEPTH_MAX)) {
		send_error(s, NULL, MCP_INVALID_REQUEST, "invalid request: more than 16384 JSON "
			   "values or nested deeper than 64: not parsed");
		return;
	}
	msg = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!msg) {
		send_error(s, NULL, MCP_PARSE_ERROR, "parse error: not valid JSON");
		return;
	}
	if (!json_is_object(msg)) {
		send_error(s, NULL, MCP_INVALID_REQUEST, json_is_array(msg) ?
			   "invalid request: batches are not supported (MCP 2025-06-18, 2026-07-28)" :
			   "invalid request: not a JSON object");
		goto out;
	}
	id = json_object_get(msg, "id");
	method = json_object_get(msg, "method");
	if (!method && (json_object_get(msg, "result") || json_object_get(msg, "error")))
		goto out;   /* an answer: we never send requests, so none is awaited */
	if (strcmp(json_string_value(json_object_get(msg, "jsonrpc")) ?: "", "2.0") ||
	    !json_is_string(method) || (id && !id_valid(id))) {
		send_error(s, id_valid(id) ? id : NULL, MCP_INVALID_REQUEST,
			   "invalid request: want jsonrpc \"2.0\", a method, and an id that is a "
			   "string or an integer");
		goto out;
	}
	name = json_string_value(method);
	if (!id) {
		/* Notifications get no answer, whatever they are. */
		if (!strcmp(name, "notifications/cancelled"))
			cancel(s, json_object_get(msg, "params"));
		goto out;
	}
	if (!strcmp(name, "ping"))
		ping(s, id, json_object_get(msg, "params"));
	else if (!strcmp(name, "server/discover") && mcp_modern_claimed(json_object_get(msg, "params")))
		discover(s, id, json_object_get(msg, "params"));
	else
		enqueue(s, msg, id, len);
out:
	json_decref(msg);
}

static void too_long(struct mcp_server *s)
{
	send_error(s, NULL, MCP_INVALID_REQUEST, "message longer than the server's limit: dropped");
}

/* The reader thread: lines of at most MCP_LINE_MAX from in_fd. */
static void *reader(void *arg)
{
	struct mcp_server *s = arg;
	size_t cap = READ_CHUNK, have = 0, scan = 0, max = s->line_max ? s->line_max : MCP_LINE_MAX;
	char *buf;
	bool skipping = false;   /* dropping the rest of an overlong line */

	thread_set_name("mcp-in");
	seccomp_enter(SECCOMP_ROLE_AGENT);
	buf = malloc(cap);

	while (buf) {
		struct pollfd p[2] = { { .fd = s->in_fd, .events = POLLIN },
				       { .fd = s->quit[0], .events = POLLIN } };
		char *nl;
		ssize_t n;

		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (!p[0].revents)
			continue;
		if (cap - have < READ_CHUNK && cap < max + READ_CHUNK) {
			char *bigger = realloc(buf, cap * 2);

			if (!bigger)
				break;
			buf = bigger;
			cap *= 2;
		}
		n = read(s->in_fd, buf + have, cap - have);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			break;
		have += (size_t)n;
		while ((nl = memchr(buf + scan, '\n', have - scan))) {
			size_t len = (size_t)(nl - buf);

			if (!skipping && len > max)
				too_long(s);
			else if (!skipping)
				on_line(s, buf, len);
			skipping = false;
			memmove(buf, nl + 1, have - len - 1);
			have -= len + 1;
			scan = 0;
		}
		scan = have;
		if (have > max) {
			if (!skipping)
				too_long(s);
			skipping = true;
			have = scan = 0;
		}
	}
	free(buf);
	pthread_mutex_lock(&s->lock);
	s->eof = true;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

static json_t *initialize(struct mcp_server *s, json_t *params)
{
	const char *want = json_string_value(json_object_get(params, "protocolVersion"));
	const char *client = json_string_value(json_object_get(json_object_get(params, "clientInfo"),
								"name"));
	const char *version = versions[0];
	char name[64];

	for (size_t i = 0; want && i < sizeof(versions) / sizeof(versions[0]); i++)
		if (!strcmp(want, versions[i]))
			version = versions[i];
	log_escape(name, sizeof(name), client ? client : "unknown");
	snprintf(s->caller, sizeof(s->caller), "mcp:%s", name);
	s->version = version;
	return json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s}, s:s}", "protocolVersion", version,
			 "capabilities", "tools", "listChanged", 0,
			 "serverInfo", "name", MCP_SERVER_NAME, "version", MCP_SERVER_VERSION,
			 "instructions", MCP_INSTRUCTIONS);
}

/* A 2026-07-28 request (its _meta claims a version): checked, then
 * served without regard to initialize. true: a tools/call, for serve's
 * path shared by both eras; false: answered here. */
static bool serve_modern(struct mcp_server *s, const char *method, json_t *id, json_t *params)
{
	json_t *data, *result;
	char why[300];
	bool bad = false;
	int code = mcp_modern_check(params, s->modern_caller, sizeof(s->modern_caller), &data,
				    why, sizeof(why));

	if (code) {
		send_error_data(s, id, code, why, data);
		return false;
	}
	if (!strcmp(method, "tools/call"))
		return true;
	if (!strcmp(method, "tools/list")) {
		result = mcp_tools_list();
		if (result && mcp_modern_complete(result, true)) {
			json_decref(result);
			result = NULL;
		}
	} else if (!strcmp(method, "subscriptions/listen")) {
		result = mcp_modern_listen(s, id, params, &bad);
	} else {
		/* initialize, logging/setLevel...: not in 2026-07-28 (ping and
		 * server/discover are the reader's). */
		send_error(s, id, MCP_METHOD_NOT_FOUND, "method not found");
		return false;
	}
	if (result)
		send_result(s, id, result);
	else if (bad)
		send_error(s, id, MCP_INVALID_PARAMS, "invalid params: notifications must be an object");
	else
		send_error(s, id, MCP_INTERNAL_ERROR, "internal error: out of memory");
	return false;
}

/* One request, on the worker. -EPIPE when the session must end. */
static int serve(struct mcp_server *s, json_t *msg)
{
	json_t *id = json_object_get(msg, "id"), *params = json_object_get(msg, "params");
	const char *method = json_string_value(json_object_get(msg, "method"));
	const char *caller = s->caller;
	bool modern = false;
	json_t *result = NULL;
	bool cancelled;
	char why[300];
	int rc = 0;

	if (params && !json_is_object(params)) {
		send_error(s, id, MCP_INVALID_PARAMS, "invalid params: params must be an object");
		return 0;
	}
	if (mcp_modern_claimed(params)) {
		if (!serve_modern(s, method, id, params))
			return 0;
		modern = true;
		caller = s->modern_caller;
	} else if (!strcmp(method, "initialize")) {
		result = initialize(s, params);
		s->initialized = true;
	} else if (strcmp(method, "tools/list") && strcmp(method, "tools/call")) {
		send_error(s, id, MCP_METHOD_NOT_FOUND, "method not found");
		return 0;
	} else if (!s->initialized) {
		send_error(s, id, MCP_INVALID_REQUEST, "not initialized: send initialize first (MCP "
			   "2025), or name the protocol version in params._meta (MCP 2026-07-28)");
		return 0;
	} else if (!strcmp(method, "tools/list")) {
		result = mcp_tools_list();
	}
	if (!strcmp(method, "tools/call")) {   /* in either era */
		json_t *name = json_object_get(params, "name"), *args = json_object_get(params, "arguments");

		s->gate->caller = caller;
		if (!json_is_string(name) || (args && !json_is_object(args))) {
			send_error(s, id, MCP_INVALID_PARAMS, "invalid params: want a tool name and "
				   "an arguments object");
			return 0;
		}
		rc = mcp_tools_call(s, json_string_value(name), args, &result, why, sizeof(why));
		if (rc == -EINVAL && (modern || strcmp(s->version, MCP_TOOL_ERRORS_SINCE) >= 0)) {
			/* 2025-11-25 on: bad arguments are the model's to fix, so a
			 * tool error it sees; an unknown tool stays a protocol one. */
			result = mcp_tools_error(why);
			rc = 0;
		} else if (rc == -EINVAL || rc == -ENOENT) {
			send_error(s, id, MCP_INVALID_PARAMS, why);
			return 0;
		}
		if (result && modern && mcp_modern_complete(result, false)) {
			json_decref(result);
			result = NULL;
		}
	}
	pthread_mutex_lock(&s->lock);
	cancelled = s->cancelled;
	pthread_mutex_unlock(&s->lock);
	if (cancelled) {
		/* The client gave up on it: the spec says not to answer. */
		json_decref(result);
	} else if (result) {
		send_result(s, id, result);
	} else if (!rc) {
		send_error(s, id, MCP_INTERNAL_ERROR, "internal error: out of memory");
	}
	return rc == -EPIPE ? rc : 0;
}

/* The next request, NULL at the end of input. */
static json_t *next(struct mcp_server *s)
{
	json_t *msg = NULL;

	pthread_mutex_lock(&s->lock);
	while (!msg) {
		while (!s->qlen && !s->eof)
			pthread_cond_wait(&s->cond, &s->lock);
		if (!s->qlen)
			break;
		msg = s->queue[s->qhead];
		s->queued_bytes -= s->qbytes[s->qhead];
		s->qhead = (s->qhead + 1) % MCP_QUEUE_MAX;
		s->qlen--;
	}
	if (msg) {
		s->current = json_object_get(msg, "id");
		s->cancelled = false;
	}
	pthread_mutex_unlock(&s->lock);
	return msg;
}

/* Wakes the worker when stop_fd fires (the VM ended). */
static void *watcher(void *arg)
{
	struct mcp_server *s = arg;
	struct pollfd p[2] = { { .fd = s->stop_fd, .events = POLLIN },
			       { .fd = s->quit[0], .events = POLLIN } };

	thread_set_name("mcp-stop");
	seccomp_enter(SECCOMP_ROLE_AGENT);
	while (poll(p, 2, -1) < 0 && errno == EINTR)
		;
	pthread_mutex_lock(&s->lock);
	s->eof = true;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

int mcp_start(struct mcp_server *s)
{
	int rc = 0;

	if (s->started)
		return 0;
	pthread_mutex_init(&s->out_lock, NULL);
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	s->qhead = s->qlen = 0;
	s->eof = s->initialized = s->cancelled = false;
	s->version = "";
	s->current = NULL;
	snprintf(s->caller, sizeof(s->caller), "mcp:unknown");
	snprintf(s->modern_caller, sizeof(s->modern_caller), "mcp:unknown");
	if (pipe2(s->sigs, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	if (pipe2(s->quit, O_CLOEXEC) < 0) {
		rc = -errno;
		goto out_sigs;
	}
	if (pthread_create(&s->rd, NULL, reader, s)) {
		rc = -EAGAIN;
		goto out_quit;
	}
	if (s->stop_fd >= 0)
		s->watching = !pthread_create(&s->wt, NULL, watcher, s);
	s->started = true;
	return 0;

out_quit:
	close(s->quit[0]);
	close(s->quit[1]);
out_sigs:
	close(s->sigs[0]);
	close(s->sigs[1]);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->out_lock);
	return rc;
}

void mcp_stop(struct mcp_server *s)
{
	if (!s->started)
		return;
	if (write(s->quit[1], "", 1) != 1)
		log_warn("mcp: cannot stop the reader: %s", strerror(errno));
	pthread_join(s->rd, NULL);
	if (s->watching)
		pthread_join(s->wt, NULL);
	while (s->qlen) {
		json_decref(s->queue[s->qhead]);
		s->qhead = (s->qhead + 1) % MCP_QUEUE_MAX;
		s->qlen--;
	}
	close(s->quit[0]);
	close(s->quit[1]);
	close(s->sigs[0]);
	close(s->sigs[1]);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->out_lock);
	s->started = s->watching = false;
}

int mcp_serve(struct mcp_server *s)
{
	json_t *msg;
	int rc = mcp_start(s);

	if (rc)
		return rc;
	while (!rc && (msg = next(s))) {
		rc = serve(s, msg);
		pthread_mutex_lock(&s->lock);
		s->current = NULL;   /* it points into msg */
		pthread_mutex_unlock(&s->lock);
		json_decref(msg);
		/* A kill for a command that had already ended must not hit the next. */
		while (read(s->sigs[0], &(uint8_t){ 0 }, 1) == 1)
			;
	}
	mcp_stop(s);
	return rc;
}
