/* mcp_tools.c - the MCP tools: arguments checked, the call through the gate, the guest agent's answer as a CallToolResult. */
#include "mcp/mcp_tools.h"
#include "lib/errmsg.h"
#include "agent_client/events.h"
#include "agent_client/transfer.h"
#include "lib/base64.h"
#include "lib/clock.h"
#include "lib/image_id.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define NS                  1000000000ULL
#define DEFAULT_TIMEOUT_S   60
#define MAX_ENV             EXEC_MAX_ENV
#define MAX_ARGS            1024
#define LIST_MAX            10000     /* entries returned; the rest counted */
#define LIST_GRACE_S        5         /* past the call timeout for a directory's listing */
#define AGENT_GRACE_S       10        /* past a command's timeout, for its EXIT */
/* argv + env: well inside the agent's EXEC frame (PROTO_MAX_PAYLOAD), and
 * so inside an audit record. */
#define MAX_CALL_BYTES      (192u << 10)

static const char *const tools_json =
	"{\"tools\":["
	"{\"name\":\"run_command\",\"title\":\"Run a command\","
	"\"description\":\"Run a command in the sandbox (a Linux microVM kept for this session) "
	"and return its exit code, stdout and stderr. command is a shell string (run with "
	"/bin/sh -c) or an argv array.\","
	"\"inputSchema\":{\"type\":\"object\",\"properties\":{"
	"\"command\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":1}],"
	"\"description\":\"shell string, or argv\"},"
	"\"cwd\":{\"type\":\"string\",\"description\":\"working directory (default /root)\"},"
	"\"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}},"
	"\"timeout\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"seconds (default 60)\"},"
	"\"stdin\":{\"type\":\"string\",\"description\":\"the command's standard input\"}},"
	"\"required\":[\"command\"]}},"
	"{\"name\":\"read_file\",\"title\":\"Read a file\","
	"\"description\":\"Read a file of the sandbox: its text, or base64 for binary content.\","
	"\"inputSchema\":{\"type\":\"object\",\"properties\":{"
	"\"path\":{\"type\":\"string\",\"description\":\"absolute path\"}},\"required\":[\"path\"]}},"
	"{\"name\":\"write_file\",\"title\":\"Write a file\","
	"\"description\":\"Create or replace (or append to) a file in the sandbox.\","
	"\"inputSchema\":{\"type\":\"object\",\"properties\":{"
	"\"path\":{\"type\":\"string\",\"description\":\"absolute path\"},"
	"\"content\":{\"type\":\"string\"},"
	"\"encoding\":{\"type\":\"string\",\"enum\":[\"utf-8\",\"base64\"],\"description\":\"of content (default utf-8)\"},"
	"\"mode\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":4095,\"description\":\"permissions of a new file (default 420 = 0644)\"},"
	"\"append\":{\"type\":\"boolean\"}},\"required\":[\"path\",\"content\"]}},"
	"{\"name\":\"list_files\",\"title\":\"List a directory\","
	"\"description\":\"List a directory of the sandbox: name, type, mode and size of each entry.\","
	"\"inputSchema\":{\"type\":\"object\",\"properties\":{"
	"\"path\":{\"type\":\"string\",\"description\":\"absolute path\"}},\"required\":[\"path\"]}}"
	"]}";

json_t *mcp_tools_list(void)
{
	return json_loads(tools_json, 0, NULL);
}


/* A result: one text block (and structured content when not NULL, taken). */
static json_t *result(bool is_error, const char *text, json_t *structured)
{
	json_t *r = json_pack("{s:[{s:s, s:s%}], s:b}", "content", "type", "text", "text", text,
			      strlen(text), "isError", is_error);

	if (r && structured)
		json_object_set_new(r, "structuredContent", structured);
	else
		json_decref(structured);
	return r;
}

/* Structured content with its JSON as the text block too (the spec's
 * advice for clients that read only the text). Takes structured. */
static json_t *structured_result(bool is_error, json_t *structured)
{
	char *text = structured ? json_dumps(structured, JSON_COMPACT) : NULL;
	json_t *r = text ? result(is_error, text, structured) : NULL;

	if (!text)
		json_decref(structured);
	free(text);
	return r;
}

static json_t *digest(const struct transfer_stats *st)
{
	char h[65];

	image_hash_hex(st->sha256, h);
	return json_pack("{s:I, s:s}", "bytes", (json_int_t)st->bytes, "sha256", h);
}

/* A string member from bytes: text when valid UTF-8, else NAME_base64. */
static void set_bytes(json_t *obj, const char *name, const uint8_t *p, size_t len)
{
	bool cut;

	if (utf8_valid_prefix(p, len, &cut) == len) {
		json_object_set_new(obj, name, json_stringn((const char *)p, len));
	} else {
		char key[40], *b = malloc(BASE64_LEN(len) + 1);

		snprintf(key, sizeof(key), "%s_base64", name);
		if (b) {
			base64_encode(p, len, b);
			json_object_set_new(obj, key, json_string(b));
		}
		free(b);
	}
}

/* A growing buffer for a stream. */
struct buf {
	uint8_t *p;
	size_t len, cap;
};

static void buf_add(struct buf *b, const uint8_t *data, size_t n)
{
	if (b->cap - b->len < n) {
		size_t cap = b->cap ? b->cap : 4096;
		uint8_t *q;

		while (cap - b->len < n)
			cap *= 2;
		q = realloc(b->p, cap);
		if (!q)
			return;   /* dropped; max_output bounds the rest */
		b->p = q;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
}

struct outputs {
	struct buf out, err;
};

static void collect(void *opaque, bool is_err, const uint8_t *data, size_t len)
{
	struct outputs *o = opaque;

	buf_add(is_err ? &o->err : &o->out, data, len);
}

/* The refusal or failure of the gate, as a tool error; -EPIPE only when
 * the audit log failed (the session must not go on unrecorded). */
static int gate_failure(int rc, const char *why, json_t **res)
{
	*res = result(true, why, NULL);
	return rc == -EIO ? -EPIPE : 0;
}

/* command: a shell string, or argv. Fills argv (pointers into args). */
static int parse_command(json_t *cmd, const char **argv, int *argc, char *msg, size_t len)
{
	size_t i;
	json_t *v;

	if (json_is_string(cmd)) {
		argv[0] = "/bin/sh";
		argv[1] = "-c";
		argv[2] = json_string_value(cmd);
		*argc = 3;
		return 0;
	}
	if (!json_is_array(cmd) || !json_array_size(cmd) || json_array_size(cmd) > MAX_ARGS)
		return errmsg_invalid(msg, len, "invalid params: %s must be a string or an array of 1-1024 "
			   "strings", "command");
	json_array_foreach(cmd, i, v) {
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
			return errmsg_invalid(msg, len, "invalid params: %s must hold strings without NUL",
				   "command");
		argv[i] = json_string_value(v);
	}
	*argc = (int)json_array_size(cmd);
	return 0;
}

/* env {"K": "V"} into "K=V" strings (malloc'd, freed by the caller). */
static int parse_env(json_t *env, char **out, int *n, char *msg, size_t len)
{
	const char *k;
	json_t *v;

	*n = 0;
	if (!env)
		return 0;
	if (!json_is_object(env) || json_object_size(env) > MAX_ENV)
		return errmsg_invalid(msg, len, "invalid params: %s must be an object of at most 256 strings",
			   "env");
	json_object_foreach(env, k, v) {
		if (!json_is_string(v) || !*k || strchr(k, '=') ||
		    strlen(json_string_value(v)) != json_string_length(v))
			return errmsg_invalid(msg, len, "invalid params: %s: keys without '=', string values",
				   "env");
		if (asprintf(&out[*n], "%s=%s", k, json_string_value(v)) < 0)
			return errmsg_invalid(msg, len, "%s", "out of memory");
		(*n)++;
	}
	return 0;
}

/* What the agent's EXEC frame would carry of argv and env. */
static size_t call_size(const char **argv, int argc, char **env, int nenv)
{
	size_t n = 0;

	for (int i = 0; i < argc; i++)
		n += strlen(argv[i]) + 4;
	for (int i = 0; i < nenv; i++)
		n += strlen(env[i]) + 4;
	return n;
}

static json_t *exec_structured(const struct exec_result *r, const struct outputs *o)
{
	bool exited = r->ended_ns && !r->signo;
	json_t *s = json_pack("{s:o, s:o, s:b, s:b}",
			      "exit_code", exited ? json_integer(r->exit_code) : json_null(),
			      "signal", r->signo ? json_integer(r->signo) : json_null(),
			      "timed_out", r->timed_out, "truncated", r->truncated);

	if (s) {
		set_bytes(s, "stdout", o->out.p ? o->out.p : (const uint8_t *)"", o->out.len);
		set_bytes(s, "stderr", o->err.p ? o->err.p : (const uint8_t *)"", o->err.len);
	}
	return s;
}

static int run_command(struct mcp_server *s, json_t *args, json_t **res, char *msg, size_t len)
{
	const char *argv[MAX_ARGS + 1] = { 0 };
	char *env[MAX_ENV] = { 0 }, why[400];
	json_t *cwd = json_object_get(args, "cwd"), *tmo = json_object_get(args, "timeout"),
	       *in = json_object_get(args, "stdin"), *call = NULL;
	struct outputs out = { 0 };
	struct exec_result r;
	struct exec_spec spec;
	int argc = 0, nenv = 0, rc, memfd = -1;
	uint64_t t0;

	rc = parse_command(json_object_get(args, "command"), argv, &argc, msg, len);
	if (!rc)
		rc = parse_env(json_object_get(args, "env"), env, &nenv, msg, len);
	if (!rc && cwd && (!json_is_string(cwd) || json_string_value(cwd)[0] != '/'))
		rc = errmsg_invalid(msg, len, "invalid params: %s must be an absolute path", "cwd");
	if (!rc && tmo && (!json_is_integer(tmo) || json_integer_value(tmo) < 1 ||
			   json_integer_value(tmo) > s->limits.max_timeout_s))
		rc = errmsg_invalid(msg, len, "invalid params: timeout must be a whole number of seconds "
			 "from 1 to %u", s->limits.max_timeout_s);
	if (!rc && in && !json_is_string(in))
		rc = errmsg_invalid(msg, len, "invalid params: %s must be a string", "stdin");
	if (!rc && call_size(argv, argc, env, nenv) > MAX_CALL_BYTES)
		rc = errmsg_invalid(msg, len, "invalid params: command and env are over %u bytes together",
			 MAX_CALL_BYTES);
	if (rc)
		goto out;
	session_spec_init(&spec);
	spec.argv = (char **)argv;
	spec.argc = argc;
	spec.env = env;
	spec.nenv = nenv;
	spec.cwd = cwd ? json_string_value(cwd) : NULL;
	spec.timeout_ms = (uint32_t)(tmo ? json_integer_value(tmo) : DEFAULT_TIMEOUT_S) * 1000;
	spec.deadline_ns = clock_now_ns() + (spec.timeout_ms / 1000 + AGENT_GRACE_S) * NS;
	spec.max_output = s->limits.max_output;
	spec.signal_fd = s->sigs[0];
	spec.sink = collect;
	spec.sink_opaque = &out;
	if (in) {
		/* A memfd: read to its end at the agent's pace, whatever its size. */
		size_t n = json_string_length(in);

		memfd = memfd_create("mcp-stdin", MFD_CLOEXEC);
		if (memfd < 0 || write(memfd, json_string_value(in), n) != (ssize_t)n ||
		    lseek(memfd, 0, SEEK_SET) < 0) {
			*res = result(true, "cannot stage stdin on the host", NULL);
			goto out;
		}
		spec.stdin_fd = memfd;
	}
	call = gate_exec_call(&spec, in ? json_string_value(in) : NULL, in ? json_string_length(in) : 0);
	if (!call) {
		rc = errmsg_invalid(msg, len, "%s", "out of memory");
		goto out;
	}
	rc = gate_ask(s->gate, call, &t0, why, sizeof(why));
	if (rc) {
		rc = gate_failure(rc, why, res);
		goto out;
	}
	session_exec(s->client, &spec, &r);
	if (gate_record_exec(s->gate, call, t0, &r, why, sizeof(why))) {
		rc = gate_failure(-EIO, why, res);
		goto out;
	}
	if (r.ended_ns)
		*res = structured_result(false, exec_structured(&r, &out));
	else
		*res = result(true, r.error, NULL);
	/* A connection out of step serves no further call. */
	rc = s->client->broken ? -EPIPE : 0;
out:
	json_decref(call);
	for (int i = 0; i < nenv; i++)
		free(env[i]);
	if (memfd >= 0)
		close(memfd);
	free(out.out.p);
	free(out.err.p);
	return rc;
}

static int get_path(json_t *args, const char **path, char *msg, size_t len)
{
	json_t *p = json_object_get(args, "path");

	if (!json_is_string(p) || json_string_value(p)[0] != '/' ||
	    strlen(json_string_value(p)) != json_string_length(p) ||
	    json_string_length(p) >= PROTO_MAX_PATH)
		return errmsg_invalid(msg, len, "invalid params: %s must be an absolute path", "path");
	*path = json_string_value(p);
	return 0;
}

/* A file call's failure as a tool error; the session ends with the connection. */
static int file_failure(struct mcp_server *s, const char *what, const char *path, const char *err,
			json_t **res)
{
	char text[600];

	snprintf(text, sizeof(text), "%s %s: %s", what, path, err);
	*res = result(true, text, NULL);
	return s->client->broken ? -EPIPE : 0;
}

static int read_file(struct mcp_server *s, json_t *args, json_t **res, char *msg, size_t len)
{
	struct transfer_stats st = { 0 };
	const char *path;
	char why[400], err[300];
	uint8_t *data = NULL;
	size_t n = 0;
	json_t *call, *sc;
	uint64_t t0;
	int rc = get_path(args, &path, msg, len);

	if (rc)
		return rc;
	call = gate_file_call("read_file", path, NULL);
	if (!call)
		return errmsg_invalid(msg, len, "%s", "out of memory");
	gate_ask(s->gate, call, &t0, why, sizeof(why));   /* reads are never refused */
	rc = transfer_get_mem(s->client, path, s->limits.max_get_bytes, &data, &n,
			      clock_now_ns() + s->limits.call_timeout_s * NS, &st, err, sizeof(err));
	if (gate_record_file(s->gate, call, t0, rc, err, &st, why, sizeof(why))) {
		rc = gate_failure(-EIO, why, res);
	} else if (rc) {
		rc = file_failure(s, "cannot read", path, err, res);
	} else {
		sc = digest(&st);
		json_object_set_new(sc, "path", json_string(path));
		set_bytes(sc, "content", data, n);
		*res = structured_result(false, sc);
	}
	free(data);
	json_decref(call);
	return rc;
}

static int write_file(struct mcp_server *s, json_t *args, json_t **res, char *msg, size_t len)
{
	json_t *content = json_object_get(args, "content"), *enc = json_object_get(args, "encoding"),
	       *mode = json_object_get(args, "mode"), *append = json_object_get(args, "append"), *call;
	struct transfer_stats st = { 0 };
	const char *path, *data;
	char why[400], err[300];
	uint8_t *decoded = NULL;
	size_t n;
	uint64_t t0;
	int rc = get_path(args, &path, msg, len);

	if (rc)
		return rc;
	if (!json_is_string(content))
		return errmsg_invalid(msg, len, "invalid params: %s must be a string", "content");
	if (enc && (!json_is_string(enc) || (strcmp(json_string_value(enc), "utf-8") &&
					      strcmp(json_string_value(enc), "base64"))))
		return errmsg_invalid(msg, len, "invalid params: %s must be \"utf-8\" or \"base64\"", "encoding");
	if (mode && (!json_is_integer(mode) || json_integer_value(mode) < 0 ||
		     json_integer_value(mode) > 07777))
		return errmsg_invalid(msg, len, "invalid params: %s must be from 0 to 4095 (07777)", "mode");
	if (append && !json_is_boolean(append))
		return errmsg_invalid(msg, len, "invalid params: %s must be true or false", "append");
	data = json_string_value(content);
	n = json_string_length(content);
	if (enc && !strcmp(json_string_value(enc), "base64")) {
		long m;

		decoded = malloc(n / 4 * 3 + 1);
		if (!decoded)
			return errmsg_invalid(msg, len, "%s", "out of memory");
		m = base64_decode(data, n, decoded);
		if (m < 0) {
			free(decoded);
			return errmsg_invalid(msg, len, "invalid params: %s is not base64", "content");
		}
		data = (const char *)decoded;
		n = (size_t)m;
	}
	call = gate_file_call("write_file", path, NULL);
	if (!call) {
		free(decoded);
		return errmsg_invalid(msg, len, "%s", "out of memory");
	}
	/* What will be written, for the approver to check against. */
	audit_sha256_hex(data, n, why);
	json_object_set_new(call, "content", json_pack("{s:I, s:s}", "bytes", (json_int_t)n,
						       "sha256", why));
	json_object_set_new(call, "append", json_boolean(json_is_true(append)));
	rc = gate_ask(s->gate, call, &t0, why, sizeof(why));
	if (rc) {
		rc = gate_failure(rc, why, res);
		goto out;
	}
	rc = transfer_put_mem(s->client, data, n, path, mode ? (uint32_t)json_integer_value(mode) : 0644,
			      json_is_true(append), clock_now_ns() + s->limits.call_timeout_s * NS, &st,
			      err, sizeof(err));
	if (gate_record_file(s->gate, call, t0, rc, err, &st, why, sizeof(why))) {
		rc = gate_failure(-EIO, why, res);
	} else if (rc) {
		rc = file_failure(s, "cannot write", path, err, res);
	} else {
		json_t *sc = digest(&st);

		json_object_set_new(sc, "path", json_string(path));
		*res = structured_result(false, sc);
	}
out:
	free(decoded);
	json_decref(call);
	return rc;
}

static const char *type_name(uint32_t t)
{
	return t == PROTO_FT_FILE ? "file" : t == PROTO_FT_DIR ? "directory" :
	       t == PROTO_FT_SYMLINK ? "symlink" : "other";
}

struct listing {
	json_t *entries;
	uint64_t total;
};

/* One entry of the listing; past LIST_MAX only counted. */
static void add_entry(void *opaque, const char *name, uint32_t type, uint32_t mode, uint64_t size)
{
	struct listing *l = opaque;
	json_t *e;

	if (++l->total > LIST_MAX)
		return;
	e = json_pack("{s:s, s:i, s:I}", "type", type_name(type), "mode", (int)mode, "size",
		      (json_int_t)(size > (1ULL << 53) ? (1ULL << 53) : size));
	if (e) {
		set_bytes(e, "name", (const uint8_t *)name, strlen(name));
		json_array_append_new(l->entries, e);
	}
}

static int list_files(struct mcp_server *s, json_t *args, json_t **res, char *msg, size_t len)
{
	struct listing l = { .entries = json_array() };
	const char *path;
	char why[400], err[300];
	uint64_t t0;
	json_t *call;
	int rc = get_path(args, &path, msg, len);

	if (rc || !l.entries) {
		json_decref(l.entries);
		return rc ? rc : errmsg_invalid(msg, len, "%s", "out of memory");
	}
	call = gate_file_call("list_files", path, NULL);
	if (!call) {
		json_decref(l.entries);
		return errmsg_invalid(msg, len, "%s", "out of memory");
	}
	gate_ask(s->gate, call, &t0, why, sizeof(why));   /* a read: never refused */
	rc = transfer_list(s->client, path, add_entry, &l,
			   clock_now_ns() + (s->limits.call_timeout_s + LIST_GRACE_S) * NS, err, sizeof(err));
	if (gate_record_file(s->gate, call, t0, rc, err, NULL, why, sizeof(why))) {
		rc = gate_failure(-EIO, why, res);
	} else if (rc) {
		rc = file_failure(s, "cannot list", path, err, res);
	} else {
		*res = structured_result(false, json_pack("{s:s, s:O, s:I, s:b}", "path", path,
							  "entries", l.entries, "total",
							  (json_int_t)l.total, "truncated",
							  l.total > LIST_MAX));
	}
	json_decref(l.entries);
	json_decref(call);
	return rc;
}

int mcp_tools_call(struct mcp_server *s, const char *name, json_t *args, json_t **result_out,
		   char *msg, size_t msglen)
{
	json_t *empty = NULL;
	int rc;

	*result_out = NULL;
	if (!args)
		args = empty = json_object();
	if (!strcmp(name, "run_command"))
		rc = run_command(s, args, result_out, msg, msglen);
	else if (!strcmp(name, "read_file"))
		rc = read_file(s, args, result_out, msg, msglen);
	else if (!strcmp(name, "write_file"))
		rc = write_file(s, args, result_out, msg, msglen);
	else if (!strcmp(name, "list_files"))
		rc = list_files(s, args, result_out, msg, msglen);
	else {
		errmsg_invalid(msg, msglen, "unknown tool '%.100s'", name);
		rc = -ENOENT;
	}
	json_decref(empty);
	return rc;
}

json_t *mcp_tools_error(const char *text)
{
	return result(true, text, NULL);
}
