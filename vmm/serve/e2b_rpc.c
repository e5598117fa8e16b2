/* e2b_rpc.c - envd's Connect RPCs for a sandbox, each through the service's own calls: Start's command runs as an exec and its JSON events become envd's ProcessEvents, one envelope each; the filesystem's calls are serve's file calls with E2B's EntryInfo. */
#include "serve/e2b_rpc.h"
#include "serve/calls.h"
#include "serve/e2b_msg.h"
#include "serve/http_reply.h"
#include "lib/base64.h"
#include "lib/log.h"

#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STREAM_READ    65536
#define MAX_EVENT_LINE (8u << 20)    /* one of the exec's JSON lines (base64'd output) */
#define MAX_LISTED     10000         /* ListDir's entries, all depths */

enum MHD_Result e2b_rpc_error(struct MHD_Connection *conn, enum connect_code code, const char *msg)
{
	char *text = connect_error_json(code, msg);
	struct MHD_Response *resp;

	if (!text)
		return MHD_NO;
	resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	return http_send(conn, (unsigned)connect_code_status(code), resp);
}

/* A stream's error: Connect's streams answer 200 and end with it (the
 * SDK reads a stream's body only then). */
static enum MHD_Result stream_error(struct MHD_Connection *conn, enum connect_code code,
				    const char *msg)
{
	char *text = connect_end_stream_json(code, msg);
	struct MHD_Response *resp;
	uint8_t *body;
	size_t len;

	if (!text)
		return MHD_NO;
	len = strlen(text);
	body = malloc(CONNECT_ENVELOPE_LEN + len);
	if (!body) {
		free(text);
		return MHD_NO;
	}
	connect_envelope(body, CONNECT_FLAG_END_STREAM, (uint32_t)len);
	memcpy(body + CONNECT_ENVELOPE_LEN, text, len);
	free(text);
	resp = MHD_create_response_from_buffer(CONNECT_ENVELOPE_LEN + len, body,
					       MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/connect+json");
	return http_send(conn, 200, resp);
}

/* An HTTP status of a failed service call as Connect's code. */
static enum connect_code code_of_status(int status)
{
	switch (status) {
	case 400: return CONNECT_INVALID_ARGUMENT;
	case 403: return CONNECT_PERMISSION_DENIED;
	case 404: return CONNECT_NOT_FOUND;
	case 409: return CONNECT_FAILED_PRECONDITION;
	case 413: case 507: return CONNECT_RESOURCE_EXHAUSTED;
	case 503: return CONNECT_UNAVAILABLE;
	case 504: return CONNECT_DEADLINE_EXCEEDED;
	}
	return CONNECT_INTERNAL;
}

/* A failed service call (an HTTP status and message) as Connect's code. */
static enum MHD_Result call_error(struct MHD_Connection *conn, const struct call_result *r)
{
	return e2b_rpc_error(conn, code_of_status(r->status), r->error);
}

/* A unary reply: j (taken) as the response message. */
static enum MHD_Result reply(struct MHD_Connection *conn, json_t *j)
{
	if (!j)
		return e2b_rpc_error(conn, CONNECT_INTERNAL, "out of memory");
	return http_send_json(conn, 200, j);
}

/* ---- process.Process/Start: the exec's events as ProcessEvents ---- */

struct start_stream {
	struct exec_stream *s;
	char *line;                    /* the exec's JSON line in progress */
	size_t nline, capline;
	uint8_t *out;                  /* envelopes not yet read by the client */
	size_t nout, offout, capout;
	bool ended;                    /* the end-stream envelope is queued */
	bool pty;                      /* its output is a pty's: DataEvent's "pty" */
	bool saw_exit;
	char error[400];               /* the exec's "error" event */
};

static bool queue(struct start_stream *st, uint8_t flags, char *msg)
{
	size_t len = msg ? strlen(msg) : 0, need = st->nout + CONNECT_ENVELOPE_LEN + len;

	if (!msg)
		return false;
	if (need > st->capout) {
		uint8_t *n = realloc(st->out, need);

		if (!n) {
			free(msg);
			return false;
		}
		st->out = n;
		st->capout = need;
	}
	connect_envelope(st->out + st->nout, flags, (uint32_t)len);
	memcpy(st->out + st->nout + CONNECT_ENVELOPE_LEN, msg, len);
	st->nout = need;
	free(msg);
	return true;
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
		json_int_t pid = json_integer_value(json_object_get(ev, "pid"));

		queue(st, 0, e2b_event_start((uint32_t)pid));
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
	while (st->offout == st->nout) {
		ssize_t got;

		if (st->ended)
			return MHD_CONTENT_READER_END_OF_STREAM;
		st->nout = st->offout = 0;
		got = pump(st);
		if (got < 0)
			return MHD_CONTENT_READER_END_WITH_ERROR;   /* nobody to tell */
		/* The call's own error (a command that cannot start), or a
		 * sandbox gone mid-call (the SDK then asks /health). */
		if (!got && !st->ended)
			end_stream(st, st->error[0] ? CONNECT_INTERNAL : CONNECT_UNAVAILABLE,
				   st->error[0] ? st->error : "the command's stream ended without its exit");
	}
	n = st->nout - st->offout < max ? st->nout - st->offout : max;
	memcpy(buf, st->out + st->offout, n);
	st->offout += n;
	return (ssize_t)n;
}

static void start_free(void *cls)
{
	struct start_stream *st = cls;

	calls_exec_end(st->s);
	free(st->line);
	free(st->out);
	free(st);
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

static enum MHD_Result start(struct e2b_server *e, struct MHD_Connection *conn, const char *id,
			     const char *caller, const uint8_t *body, size_t len)
{
	const char *tmo = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Connect-Timeout-Ms");
	struct call_result r = { 0 };
	struct start_stream *st;
	struct e2b_start in;
	struct api_exec req;
	struct sandbox *sb;
	const uint8_t *msg;
	const char *why = "";
	uint64_t timeout_ms;
	char err[400];
	size_t msglen;
	int rc;

	if (connect_unwrap(body, len, &msg, &msglen, &why))
		return stream_error(conn, CONNECT_INVALID_ARGUMENT, why);
	if (connect_timeout_ms(tmo, &timeout_ms))
		return stream_error(conn, CONNECT_INVALID_ARGUMENT, "a malformed Connect-Timeout-Ms");
	if (e2b_parse_start(msg, msglen, &in, err, sizeof(err)))
		return stream_error(conn, CONNECT_INVALID_ARGUMENT, err);
	rc = exec_of_start(&in, timeout_ms, &req, err, sizeof(err));
	e2b_start_free(&in);
	if (rc)
		return stream_error(conn, rc == -EINVAL ? CONNECT_INVALID_ARGUMENT : CONNECT_INTERNAL,
				    err);
	rc = service_get(e->svc, id, &sb, err, sizeof(err));
	if (rc) {
		api_exec_free(&req);
		return stream_error(conn, rc == 404 ? CONNECT_NOT_FOUND : CONNECT_UNAVAILABLE, err);
	}
	st = calloc(1, sizeof(*st));
	if (st)
		st->pty = req.pty;
	if (!st || calls_exec_start(e->svc, sb, caller, &req, &st->s, &r)) {
		api_exec_free(&req);
		service_put(e->svc, sb);
		free(st);
		return stream_error(conn, st ? code_of_status(r.status) : CONNECT_INTERNAL,
				    st ? r.error : "out of memory");
	}
	calls_exec_watch(st->s, MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD)
					->connect_fd);
	return http_send_stream(conn, 200, MHD_SIZE_UNKNOWN, STREAM_READ, start_reader, st,
				start_free, "application/connect+json");
}

/* ---- process.Process's unary calls ---- */

static enum MHD_Result list(struct e2b_server *e, struct MHD_Connection *conn, struct sandbox *sb)
{
	json_t *running = calls_exec_list(e->svc, sb), *out = json_array(), *p;
	size_t i;

	json_array_foreach(running, i, p) {
		json_t *argv = json_object_get(p, "argv"), *args = json_array();

		for (size_t a = 1; args && a < json_array_size(argv); a++)
			json_array_append(args, json_array_get(argv, a));
		json_array_append_new(out, json_pack("{s:O, s:{s:O?, s:o}}", "pid",
						     json_object_get(p, "pid"), "config", "cmd",
						     json_array_get(argv, 0), "args", args));
	}
	json_decref(running);
	return reply(conn, out ? json_pack("{s:o}", "processes", out) : NULL);
}

/* SendSignal, SendInput, CloseStdin and Update: each names a process by
 * its pid, which must be one of the sandbox's running commands. */
static enum MHD_Result on_process(struct e2b_server *e, struct MHD_Connection *conn,
				  const char *name, struct sandbox *sb, const uint8_t *body,
				  size_t len)
{
	struct call_result r = { 0 };
	unsigned cols = 0, rows = 0;
	uint8_t *data = NULL;
	size_t datalen = 0;
	uint32_t pid = 0;
	uint64_t exec;
	char err[300], tag[2];
	int signo = 0, rc;
	bool pty;

	if (!strcmp(name, "SendSignal"))
		rc = e2b_parse_signal(body, len, &pid, &signo, err, sizeof(err));
	else if (!strcmp(name, "SendInput"))
		rc = e2b_parse_input(body, len, &pid, &data, &datalen, &pty, err, sizeof(err));
	else if (!strcmp(name, "Update"))
		rc = e2b_parse_update(body, len, &pid, &cols, &rows, err, sizeof(err));
	else
		rc = e2b_parse_selector(body, len, &pid, tag, sizeof(tag), err, sizeof(err));
	if (rc) {
		free(data);
		return e2b_rpc_error(conn, CONNECT_INVALID_ARGUMENT, err);
	}
	exec = calls_exec_of_pid(e->svc, sb, pid);
	if (!exec) {
		free(data);
		snprintf(err, sizeof(err), "no process %u started through this sandbox's API", pid);
		return e2b_rpc_error(conn, CONNECT_NOT_FOUND, err);
	}
	if (!strcmp(name, "SendSignal")) {
		calls_signal(e->svc, sb, exec, signo, &r);
		r.status = r.status == 202 ? 200 : r.status;
	} else if (!strcmp(name, "SendInput")) {
		calls_exec_input(e->svc, sb, exec, data, datalen, &r);
	} else if (!strcmp(name, "Update")) {
		if (cols && rows)
			calls_exec_resize(e->svc, sb, exec, (uint16_t)rows, (uint16_t)cols, &r);
		else
			r.status = 200;   /* nothing to change */
	} else {
		calls_exec_close_stdin(e->svc, sb, exec, &r);
	}
	free(data);
	return r.status == 200 ? reply(conn, json_object()) : call_error(conn, &r);
}

/* ---- filesystem.Filesystem ---- */

static int entry_type(const char *type)
{
	return !strcmp(type, "file") ? 1 : !strcmp(type, "dir") ? 2 : !strcmp(type, "symlink") ? 3 : 0;
}

/* EntryInfo of serve's own JSON of a file (a stat's or a listing's). */
static json_t *entry(const char *path, json_t *f)
{
	struct e2b_entry en = { 0 };
	const char *slash = strrchr(path, '/');

	snprintf(en.path, sizeof(en.path), "%s", path);
	snprintf(en.name, sizeof(en.name), "%s", slash && slash[1] ? slash + 1 : path);
	en.type = entry_type(json_string_value(json_object_get(f, "type")) ?: "");
	en.size = (uint64_t)json_integer_value(json_object_get(f, "size"));
	en.mode = (uint32_t)json_integer_value(json_object_get(f, "mode"));
	en.mtime_s = (int64_t)json_number_value(json_object_get(f, "mtime"));
	e2b_permissions(en.mode | (en.type == 2 ? 0040000 : en.type == 3 ? 0120000 : 0100000),
			en.permissions);
	return e2b_entry_json(&en);
}

/* path's entries, and below them to depth levels, into out. 0, or an HTTP
 * status in r. */
static int list_into(struct e2b_server *e, struct sandbox *sb, const char *caller,
		     const char *path, unsigned depth, json_t *out, struct call_result *r)
{
	json_t *files = NULL, *f;
	size_t i;

	calls_file_list(e->svc, sb, caller, path, &files, r);
	if (r->status != 200)
		return r->status;
	json_array_foreach(files, i, f) {
		char child[API_MAX_PATH + 1];
		const char *name = json_string_value(json_object_get(f, "name")) ?: "";
		int n = snprintf(child, sizeof(child), "%s%s%s", path,
				 path[strlen(path) - 1] == '/' ? "" : "/", name);

		if (n < 0 || (size_t)n >= sizeof(child) || json_array_size(out) >= MAX_LISTED)
			continue;
		json_array_append_new(out, entry(child, f));
		if (depth > 1 && entry_type(json_string_value(json_object_get(f, "type")) ?: "") == 2 &&
		    list_into(e, sb, caller, child, depth - 1, out, r)) {
			json_decref(files);
			return r->status;
		}
	}
	json_decref(files);
	r->status = 200;
	return 0;
}

static enum MHD_Result filesystem(struct e2b_server *e, struct MHD_Connection *conn,
				  const char *name, struct sandbox *sb, const char *caller,
				  const uint8_t *body, size_t len)
{
	char given[API_MAX_PATH + 1], path[API_MAX_PATH + 1], err[300];
	char dest[API_MAX_PATH + 1], to[API_MAX_PATH + 1];
	struct call_result r = { 0 };
	json_t *j = NULL;
	unsigned depth = 1;
	int rc;

	if (!strcmp(name, "ListDir"))
		rc = e2b_parse_list_dir(body, len, given, sizeof(given), &depth, err, sizeof(err));
	else if (!strcmp(name, "Move"))
		rc = e2b_parse_move(body, len, given, dest, sizeof(given), err, sizeof(err));
	else
		rc = e2b_parse_path(body, len, given, sizeof(given), err, sizeof(err));
	if (rc)
		return e2b_rpc_error(conn, CONNECT_INVALID_ARGUMENT, err);
	if (e2b_guest_path(given, path, sizeof(path)) ||
	    (!strcmp(name, "Move") && e2b_guest_path(dest, to, sizeof(to))))
		return e2b_rpc_error(conn, CONNECT_INVALID_ARGUMENT, "the path is too long");
	if (!strcmp(name, "Move")) {
		calls_rename(e->svc, sb, caller, path, to, &r);
		if (r.status != 200)
			return call_error(conn, &r);
		/* MoveResponse's entry: the file where it is now. */
		snprintf(path, sizeof(path), "%s", to);
	}
	if (!strcmp(name, "ListDir")) {
		json_t *out = json_array();

		if (!out)
			return e2b_rpc_error(conn, CONNECT_INTERNAL, "out of memory");
		if (list_into(e, sb, caller, path, depth, out, &r)) {
			json_decref(out);
			return call_error(conn, &r);
		}
		return reply(conn, json_pack("{s:o}", "entries", out));
	}
	if (!strcmp(name, "Remove")) {
		calls_remove(e->svc, sb, caller, path, true, &r);
		return r.status == 204 ? reply(conn, json_object()) : call_error(conn, &r);
	}
	calls_file_stat(e->svc, sb, caller, path, &j, &r);
	if (!strcmp(name, "Stat") || !strcmp(name, "Move"))
		return r.status == 200 ? reply(conn, json_pack("{s:o}", "entry", entry(path, j))) :
		       call_error(conn, &r);
	/* MakeDir: an existing path is already_exists (the SDK's false). */
	json_decref(j);
	if (r.status == 200)
		return e2b_rpc_error(conn, CONNECT_ALREADY_EXISTS, "the path exists");
	calls_mkdir(e->svc, sb, caller, path, true, &r);
	if (r.status != 201)
		return call_error(conn, &r);
	calls_file_stat(e->svc, sb, caller, path, &j, &r);
	return r.status == 200 ? reply(conn, json_pack("{s:o}", "entry", entry(path, j))) :
	       call_error(conn, &r);
}

enum MHD_Result e2b_rpc(struct e2b_server *e, struct MHD_Connection *conn, const char *method,
			const char *id, const char *caller, const uint8_t *body, size_t len)
{
	static const char *const fs[] = { "Stat", "ListDir", "MakeDir", "Remove", "Move" };
	static const char *const proc[] = { "List", "SendSignal", "SendInput", "CloseStdin",
					    "Update" };
	const char *ct = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
						     MHD_HTTP_HEADER_CONTENT_TYPE);
	const char *name = strchr(method, '/') + 1;
	bool is_fs = !strncmp(method, "filesystem.", 11), known = false;
	enum MHD_Result ret;
	struct sandbox *sb;
	char err[400];
	int st;

	if (!strcmp(method, "process.Process/Start")) {
		if (!connect_is_stream_type(ct))
			return stream_error(conn, CONNECT_INVALID_ARGUMENT,
					    "Start is a stream: application/connect+json");
		return start(e, conn, id, caller, body, len);
	}
	for (size_t i = 0; is_fs && i < sizeof(fs) / sizeof(fs[0]); i++)
		known |= !strcmp(name, fs[i]);
	for (size_t i = 0; !is_fs && i < sizeof(proc) / sizeof(proc[0]); i++)
		known |= !strcmp(name, proc[i]);
	if (!known) {
		snprintf(err, sizeof(err), "%s is not supported by mayfly's envd yet (docs/e2b.md)",
			 method);
		/* A stream's (Connect, WatchDir) as a stream's, a unary one's as such. */
		return connect_is_stream_type(ct) ? stream_error(conn, CONNECT_UNIMPLEMENTED, err) :
		       e2b_rpc_error(conn, CONNECT_UNIMPLEMENTED, err);
	}
	if (!connect_is_unary_type(ct))
		return e2b_rpc_error(conn, CONNECT_INVALID_ARGUMENT,
				     "a unary call's body is application/json");
	st = service_get(e->svc, id, &sb, err, sizeof(err));
	if (st)
		return e2b_rpc_error(conn, st == 404 ? CONNECT_NOT_FOUND : CONNECT_UNAVAILABLE, err);
	if (is_fs)
		ret = filesystem(e, conn, name, sb, caller, body, len);
	else if (!strcmp(name, "List"))
		ret = list(e, conn, sb);
	else
		ret = on_process(e, conn, name, sb, body, len);
	service_put(e->svc, sb);
	return ret;
}
