/* e2b_proc.c - envd's process streams: Start runs a command as serve's exec and turns its JSON events into ProcessEvents, one envelope each; as in E2B a command outlives its stream, so one whose client went is kept (drained, its output dropped) until it ends, Connect gives it a client again, or its sandbox's kill, pause or ttl ends it. */
#include "serve/e2b_proc.h"
#include "serve/calls.h"
#include "serve/e2b_msg.h"
#include "serve/e2b_reply.h"
#include "serve/http_reply.h"
#include "lib/base64.h"
#include "lib/log.h"

#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define STREAM_READ    65536
#define MAX_EVENT_LINE (8u << 20)    /* one of the exec's JSON lines (base64'd output) */
#define KEEP_MAX       256           /* commands kept without a client, all sandboxes */
#define CONNECT_WAIT_MS 2000         /* a Connect waits this long for a stream's client to go */

/* ---- process.Process/Start: the exec's events as ProcessEvents ---- */

struct start_stream {
	struct exec_stream *s;
	struct e2b_keeper *keeper;     /* where it goes when its client does */
	struct sandbox *sb;            /* the command's (held by its exec) */
	uint32_t pid;                  /* the guest's, once started */
	char *line;                    /* the exec's JSON line in progress */
	size_t nline, capline;
	struct connect_queue q;        /* envelopes not yet read by the client */
	struct e2b_codec codec;        /* its client's call's (Start's, then a Connect's) */
	bool ended;                    /* the end-stream envelope is queued */
	bool pty;                      /* its output is a pty's: DataEvent's "pty" */
	bool saw_exit;
	char error[400];               /* the exec's "error" event */
};

static bool queue(struct start_stream *st, uint8_t flags, char *msg)
{
	return e2b_codec_push(&st->codec, &st->q, flags, msg);
}

static void end_stream(struct start_stream *st, enum connect_code code, const char *msg)
{
	queue(st, CONNECT_FLAG_END_STREAM, connect_end_stream_json(code, msg));
	st->ended = true;
}

/* Output, however long, in pieces the renderer takes. */
static void queue_data(struct start_stream *st, const char *name, const uint8_t *data, size_t len)
{
	for (size_t off = 0; off < len; off += E2B_MAX_DATA) {
		size_t n = len - off < E2B_MAX_DATA ? len - off : E2B_MAX_DATA;

		queue(st, 0, e2b_event_data(name, data + off, n));
	}
}

static void on_exit_event(struct start_stream *st, json_t *ev)
{
	int code = (int)json_integer_value(json_object_get(ev, "code"));
	int sig = (int)json_integer_value(json_object_get(ev, "signal"));
	char status[64];

	st->saw_exit = true;
	if (json_is_true(json_object_get(ev, "timed_out"))) {
		end_stream(st, CONNECT_DEADLINE_EXCEEDED, "the command ran past its timeout");
		return;
	}
	/* As envd (Go's ProcessState) tells them. */
	if (sig > 0) {
		/* "signal: killed", Go's lower-case description. */
		snprintf(status, sizeof(status), "signal: %s", strsignal(sig));
		status[8] = (char)tolower((unsigned char)status[8]);
	} else
		snprintf(status, sizeof(status), "exit status %d", code);
	queue(st, 0, e2b_event_end(sig > 0 ? -1 : code, sig <= 0, status,
				   sig > 0 || code ? status : NULL));
	end_stream(st, CONNECT_OK, NULL);
}

/* One of the exec's JSON lines (serve's own events: trusted in shape,
 * checked anyway). */
static void on_line(struct start_stream *st, const char *line, size_t len)
{
	json_t *ev = json_loadb(line, len, 0, NULL);
	const char *kind = json_string_value(json_object_get(ev, "event"));
	const char *text;

	if (!kind) {
		json_decref(ev);
		return;
	}
	if (!strcmp(kind, "started")) {
		st->pid = (uint32_t)json_integer_value(json_object_get(ev, "pid"));
		queue(st, 0, e2b_event_start(st->pid));
	} else if (!strcmp(kind, "stdout") || !strcmp(kind, "stderr")) {
		const char *name = st->pty ? "pty" : kind;

		if ((text = json_string_value(json_object_get(ev, "data")))) {
			queue_data(st, name, (const uint8_t *)text,
				   json_string_length(json_object_get(ev, "data")));
		} else if ((text = json_string_value(json_object_get(ev, "data_b64")))) {
			size_t n = strlen(text);
			uint8_t *bytes = malloc(n / 4 * 3 + 3);
			long got = bytes ? base64_decode(text, n, bytes) : -1;

			if (got >= 0)
				queue_data(st, name, bytes, (size_t)got);
			free(bytes);
		}
	} else if (!strcmp(kind, "exit")) {
		on_exit_event(st, ev);
	} else if (!strcmp(kind, "error")) {
		snprintf(st->error, sizeof(st->error), "%s",
			 json_string_value(json_object_get(ev, "message")) ?: "the call failed");
	}
	json_decref(ev);
}

/* More of the exec's lines, turned into envelopes: > 0, 0 at its end,
 * -ECONNRESET when the client went. */
static ssize_t pump(struct start_stream *st)
{
	char buf[STREAM_READ];
	ssize_t n = calls_exec_read(st->s, buf, sizeof(buf));

	if (n <= 0)
		return n == -ECONNRESET ? n : 0;
	for (ssize_t i = 0; i < n && !st->ended; ) {
		char *nl = memchr(buf + i, '\n', (size_t)(n - i));
		size_t take = nl ? (size_t)(nl - (buf + i)) : (size_t)(n - i);

		if (st->nline + take > MAX_EVENT_LINE) {
			end_stream(st, CONNECT_INTERNAL, "an event larger than 8 MiB");
			break;
		}
		if (st->nline + take > st->capline) {
			size_t cap = st->nline + take + 4096;
			char *nb = realloc(st->line, cap);

			if (!nb) {
				end_stream(st, CONNECT_INTERNAL, "out of memory");
				break;
			}
			st->line = nb;
			st->capline = cap;
		}
		memcpy(st->line + st->nline, buf + i, take);
		st->nline += take;
		i += (ssize_t)take;
		if (nl) {
			on_line(st, st->line, st->nline);
			st->nline = 0;
			i++;
		}
	}
	return n;
}

static ssize_t start_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct start_stream *st = cls;
	size_t n;

	(void)pos;
	while (!(n = connect_queue_take(&st->q, buf, max))) {
		ssize_t got;

		if (st->ended)
			return MHD_CONTENT_READER_END_OF_STREAM;
		got = pump(st);
		if (got < 0)
			return MHD_CONTENT_READER_END_WITH_ERROR;   /* nobody to tell */
		/* The call's own error (a command that cannot start), or a
		 * sandbox gone mid-call (the SDK then asks /health). */
		if (!got && !st->ended)
			end_stream(st, st->error[0] ? CONNECT_INTERNAL : CONNECT_UNAVAILABLE,
				   st->error[0] ? st->error : "the command's stream ended without its exit");
	}
	return (ssize_t)n;
}

static void stream_free(struct start_stream *st)
{
	calls_exec_end(st->s);
	free(st->line);
	connect_queue_free(&st->q);
	free(st);
}

/* ---- the keeper: commands whose client went, drained until they end ---- */

struct e2b_keeper {
	pthread_mutex_t lock;
	pthread_t thread;
	int wake_fd;                   /* eventfd: the list changed, or stop */
	bool stopping;
	struct start_stream *kept[KEEP_MAX];
	int n;
	struct log_limit full_log;     /* "too many kept" */
};

static void wake(struct e2b_keeper *k)
{
	uint64_t one = 1;

	if (write(k->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_warn("e2b: cannot wake the process keeper: %s", strerror(errno));
}

/* Take st (its client gone, its command running): true, or false when
 * full or stopping (the caller ends the command). */
static bool keep(struct e2b_keeper *k, struct start_stream *st)
{
	bool kept = false, full = false;

	pthread_mutex_lock(&k->lock);
	if (!k->stopping && k->n < KEEP_MAX) {
		calls_exec_watch(st->s, -1);
		connect_queue_drop(&st->q);
		k->kept[k->n++] = st;
		kept = true;
	} else {
		full = !k->stopping;
	}
	pthread_mutex_unlock(&k->lock);
	if (kept)
		wake(k);
	if (full)   /* a client can repeat this at will: limited */
		log_limited(&k->full_log, LOG_WARN, "e2b: %d commands run without a client "
			    "already: process %u of sandbox %s ends with its stream", KEEP_MAX,
			    st->pid, st->sb->id);
	return kept;
}

/* The kept command of sb with pid, taken out (the lock held); NULL: none. */
static struct start_stream *take_locked(struct e2b_keeper *k, const struct sandbox *sb,
					uint32_t pid)
{
	for (int i = 0; i < k->n; i++) {
		struct start_stream *st = k->kept[i];

		if (st->sb == sb && st->pid == pid) {
			k->kept[i] = k->kept[--k->n];
			return st;
		}
	}
	return NULL;
}

/* Drain what is ready of the kept commands polled (p[1..n]); those that
 * ended are moved to done. The lock held: a Connect takes a command only
 * between pumps. */
static int drain_locked(struct e2b_keeper *k, struct start_stream **polled,
			const struct pollfd *p, int n, struct start_stream **done)
{
	int ndone = 0;

	for (int i = 0; i < n; i++) {
		struct start_stream *st = polled[i];
		int at = -1;

		if (!p[i + 1].revents)
			continue;
		for (int j = 0; j < k->n && at < 0; j++)
			at = k->kept[j] == st ? j : -1;
		if (at < 0)
			continue;   /* taken by a Connect meanwhile */
		if (pump(st) <= 0 || st->ended) {
			k->kept[at] = k->kept[--k->n];
			done[ndone++] = st;
		}
		connect_queue_drop(&st->q);   /* nobody reads it: dropped, as envd does */
	}
	return ndone;
}

static void *keeper_main(void *arg)
{
	struct e2b_keeper *k = arg;
	struct start_stream *polled[KEEP_MAX], *done[KEEP_MAX];
	struct pollfd p[KEEP_MAX + 1];

	for (;;) {
		int n, ndone;
		uint64_t v;

		pthread_mutex_lock(&k->lock);
		if (k->stopping) {
			pthread_mutex_unlock(&k->lock);
			return NULL;
		}
		n = k->n;
		p[0] = (struct pollfd){ .fd = k->wake_fd, .events = POLLIN };
		for (int i = 0; i < n; i++) {
			polled[i] = k->kept[i];
			p[i + 1] = (struct pollfd){ .fd = calls_exec_fd(polled[i]->s),
						    .events = POLLIN };
		}
		pthread_mutex_unlock(&k->lock);
		if (poll(p, (nfds_t)n + 1, -1) < 0) {
			if (errno != EINTR) {
				log_warn("e2b: the process keeper's poll: %s", strerror(errno));
				poll(NULL, 0, 100);
			}
			continue;
		}
		if (p[0].revents && read(k->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			log_warn("e2b: the process keeper's wake: %s", strerror(errno));
		pthread_mutex_lock(&k->lock);
		ndone = drain_locked(k, polled, p, n, done);
		pthread_mutex_unlock(&k->lock);
		for (int i = 0; i < ndone; i++)
			stream_free(done[i]);
	}
}

struct e2b_keeper *e2b_keeper_start(void)
{
	struct e2b_keeper *k = calloc(1, sizeof(*k));

	if (!k)
		return NULL;
	pthread_mutex_init(&k->lock, NULL);
	k->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (k->wake_fd < 0 || pthread_create(&k->thread, NULL, keeper_main, k)) {
		if (k->wake_fd >= 0)
			close(k->wake_fd);
		pthread_mutex_destroy(&k->lock);
		free(k);
		return NULL;
	}
	return k;
}

void e2b_keeper_stop(struct e2b_keeper *k)
{
	if (!k)
		return;
	pthread_mutex_lock(&k->lock);
	k->stopping = true;
	pthread_mutex_unlock(&k->lock);
	wake(k);
	pthread_join(k->thread, NULL);
	/* The thread is gone: the kept commands end with the API. */
	for (int i = 0; i < k->n; i++)
		stream_free(k->kept[i]);
	close(k->wake_fd);
	pthread_mutex_destroy(&k->lock);
	free(k);
}

/* MHD is done with the stream: at its command's end, or its client's. */
static void start_free(void *cls)
{
	struct start_stream *st = cls;

	if (!st->ended && st->pid && keep(st->keeper, st))
		return;
	stream_free(st);
}

/* A response streaming st's events to conn's client. */
static enum MHD_Result stream_to(struct MHD_Connection *conn, struct start_stream *st)
{
	const char *type = connect_content_type(st->codec.codec, true);

	calls_exec_watch(st->s, MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD)
					->connect_fd);
	return http_send_stream(conn, 200, MHD_SIZE_UNKNOWN, STREAM_READ, start_reader, st,
				start_free, type);
}

/* StartRequest as serve's exec: argv, the sandbox's and its own envs, cwd
 * (a relative one in E2B's home); a timeout just past the client's own. */
static int exec_of_start(struct e2b_start *in, uint64_t timeout_ms, struct api_exec *out,
			 char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	out->argv = calloc((size_t)in->argc + 1, sizeof(*out->argv));
	out->owner = json_pack("[O, s]", in->owner, in->has_cwd ? in->cwd : "");
	if (!out->argv || !out->owner) {
		api_exec_free(out);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (int i = 0; i < in->argc; i++)
		out->argv[i] = in->argv[i];
	out->argc = in->argc;
	out->env = in->env;
	out->nenv = in->nenv;
	in->env = NULL;
	in->nenv = 0;
	if (in->has_cwd) {
		char cwd[API_MAX_PATH + 1];

		if (e2b_guest_path(in->cwd, cwd, sizeof(cwd))) {
			api_exec_free(out);
			snprintf(err, errlen, "the cwd is longer than %d bytes", API_MAX_PATH);
			return -EINVAL;
		}
		json_array_set_new(out->owner, 1, json_string(cwd));
		out->cwd = json_string_value(json_array_get(out->owner, 1));
	}
	out->timeout_s = timeout_ms ? (unsigned)((timeout_ms + 999) / 1000) + 1 : 0;
	out->stdin_open = in->stdin_open;
	out->pty = in->pty;
	out->rows = (uint16_t)in->rows;
	out->cols = (uint16_t)in->cols;
	return 0;
}

enum MHD_Result e2b_proc_start(struct e2b_server *e, struct MHD_Connection *conn,
			       const struct e2b_codec *c, const char *id, const char *caller,
			       const uint8_t *json, size_t len)
{
	const char *tmo = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Connect-Timeout-Ms");
	struct call_result r = { 0 };
	struct start_stream *st;
	struct e2b_start in;
	struct api_exec req;
	struct sandbox *sb;
	uint64_t timeout_ms;
	char err[400];
	int rc;

	if (connect_timeout_ms(tmo, &timeout_ms))
		return e2b_stream_error(conn, CONNECT_INVALID_ARGUMENT, "a malformed Connect-Timeout-Ms");
	if (e2b_parse_start(json, len, &in, err, sizeof(err)))
		return e2b_stream_error(conn, CONNECT_INVALID_ARGUMENT, err);
	rc = exec_of_start(&in, timeout_ms, &req, err, sizeof(err));
	e2b_start_free(&in);
	if (rc)
		return e2b_stream_error(conn, rc == -EINVAL ? CONNECT_INVALID_ARGUMENT : CONNECT_INTERNAL,
				    err);
	rc = service_get(e->svc, id, &sb, err, sizeof(err));
	if (rc) {
		api_exec_free(&req);
		return e2b_stream_error(conn, rc == 404 ? CONNECT_NOT_FOUND : CONNECT_UNAVAILABLE, err);
	}
	st = calloc(1, sizeof(*st));
	if (st) {
		st->pty = req.pty;
		st->codec = *c;
		st->keeper = e->keeper;
		st->sb = sb;
	}
	if (!st || calls_exec_start(e->svc, sb, caller, &req, &st->s, &r)) {
		api_exec_free(&req);
		service_put(e->svc, sb);
		free(st);
		return e2b_stream_error(conn, st ? e2b_code_of_status(r.status) : CONNECT_INTERNAL,
				    st ? r.error : "out of memory");
	}
	return stream_to(conn, st);
}

enum MHD_Result e2b_proc_connect(struct e2b_server *e, struct MHD_Connection *conn,
				 const struct e2b_codec *c, const char *id, const uint8_t *json,
				 size_t len)
{
	struct start_stream *st = NULL;
	struct sandbox *sb;
	uint32_t pid = 0;
	char err[400], tag[2];
	int rc;

	if (e2b_parse_selector(json, len, &pid, tag, sizeof(tag), err, sizeof(err)))
		return e2b_stream_error(conn, CONNECT_INVALID_ARGUMENT, err);
	if (!pid)
		return e2b_stream_error(conn, CONNECT_INVALID_ARGUMENT,
					"processes are selected by pid here, not by tag");
	rc = service_get(e->svc, id, &sb, err, sizeof(err));
	if (rc)
		return e2b_stream_error(conn, rc == 404 ? CONNECT_NOT_FOUND : CONNECT_UNAVAILABLE, err);
	/* A client that has just let go (the SDK's disconnect() and then
	 * connect()) is seen going within a moment: wait that long for it. */
	for (int i = 0; i < CONNECT_WAIT_MS / 50; i++) {
		pthread_mutex_lock(&e->keeper->lock);
		st = take_locked(e->keeper, sb, pid);
		pthread_mutex_unlock(&e->keeper->lock);
		if (st || !calls_exec_of_pid(e->svc, sb, pid))
			break;
		poll(NULL, 0, 50);
	}
	if (!st) {
		bool running = calls_exec_of_pid(e->svc, sb, pid) != 0;

		service_put(e->svc, sb);
		snprintf(err, sizeof(err), running ? "process %u streams to another client: mayfly "
			 "streams a process to one client at a time" : "no process %u started "
			 "through this sandbox's API is running", pid);
		return e2b_stream_error(conn, running ? CONNECT_FAILED_PRECONDITION :
					CONNECT_NOT_FOUND, err);
	}
	service_put(e->svc, sb);   /* the command holds its sandbox */
	/* As envd's Connect: the start event, then what comes from now on. */
	connect_queue_drop(&st->q);
	st->codec = *c;
	queue(st, 0, e2b_event_start(st->pid));
	return stream_to(conn, st);
}

