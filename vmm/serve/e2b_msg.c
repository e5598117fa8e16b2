/* e2b_msg.c - E2B envd's process and filesystem messages (protobuf JSON) as pure functions: requests checked into typed values, events and entries rendered. */
#include "serve/e2b_msg.h"
#include "serve/connect.h"
#include "lib/base64.h"
#include "lib/errmsg.h"
#include "lib/json_shape.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* What jansson may build of one message: E2B_MAX_ARGS args and as many
 * envs (a key and a value each), with room for members we ignore. */
#define MAX_VALUES   (4 * E2B_MAX_ARGS + 256)
#define MAX_NESTING  16

/* The message as an object; len 0 is {} (an empty message). */
static json_t *message(const uint8_t *json, size_t len, char *err, size_t errlen)
{
	json_error_t je;
	json_t *root;

	if (!len) {
		root = json_object();
		if (!root)
			errmsg_invalid(err, errlen, "out of memory");
		return root;
	}
	if (!json_shape_within((const char *)json, len, MAX_VALUES, MAX_NESTING)) {
		errmsg_invalid(err, errlen, "message has more than %d values or %d levels",
			       MAX_VALUES, MAX_NESTING);
		return NULL;
	}
	/* jansson refuses text that is not UTF-8, and \u0000 in a string. */
	root = json_loadb((const char *)json, len, JSON_REJECT_DUPLICATES, &je);
	if (!root) {
		errmsg_invalid(err, errlen, "malformed JSON at byte %d: %s", je.position, je.text);
		return NULL;
	}
	if (!json_is_object(root)) {
		errmsg_invalid(err, errlen, "the message must be a JSON object");
		json_decref(root);
		return NULL;
	}
	return root;
}

/* A member; null is unset, as in protobuf's JSON. */
static json_t *get(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);

	return json_is_null(v) ? NULL : v;
}

/* An object member into *out (NULL: unset). */
static int object(json_t *obj, const char *key, json_t **out, char *err, size_t errlen)
{
	*out = get(obj, key);
	if (*out && !json_is_object(*out))
		return errmsg_invalid(err, errlen, "\"%s\" must be an object", key);
	return 0;
}

/* A string member of fewer than cap bytes into *out (NULL: unset). */
static int text(json_t *obj, const char *key, size_t cap, const char **out, char *err,
		size_t errlen)
{
	json_t *v = get(obj, key);

	*out = NULL;
	if (!v)
		return 0;
	if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
		return errmsg_invalid(err, errlen, "\"%s\" must be a string without NUL", key);
	if (json_string_length(v) >= cap)
		return errmsg_invalid(err, errlen, "\"%s\" is longer than %zu bytes", key, cap - 1);
	*out = json_string_value(v);
	return 0;
}

/* A string member that must be there and not be empty, copied to out. */
static int required(json_t *obj, const char *key, char *out, size_t cap, char *err, size_t errlen)
{
	const char *s;

	if (text(obj, key, cap, &s, err, errlen))
		return -EINVAL;
	if (!s || !*s)
		return errmsg_invalid(err, errlen, "\"%s\" is required", key);
	memcpy(out, s, strlen(s) + 1);
	return 0;
}

/* A uint32 member from 0 to max: a number, or a decimal string as
 * protobuf's JSON allows. A missing one is an error: the caller names
 * its default before asking. */
static int number(json_t *v, const char *key, uint32_t max, uint32_t *out, char *err,
		  size_t errlen)
{
	long long n = -1;

	if (json_is_integer(v))
		n = json_integer_value(v);
	else if (json_is_real(v) && json_real_value(v) >= 0 && json_real_value(v) <= max &&
		 json_real_value(v) == (double)(long long)json_real_value(v))
		n = (long long)json_real_value(v);
	else if (json_is_string(v) && json_string_length(v) >= 1 && json_string_length(v) <= 10 &&
		 strspn(json_string_value(v), "0123456789") == json_string_length(v))
		n = strtoll(json_string_value(v), NULL, 10);
	if (n < 0 || n > max)
		return errmsg_invalid(err, errlen, "\"%s\" must be a whole number from 0 to %u",
				      key, max);
	*out = (uint32_t)n;
	return 0;
}

/* Protobuf JSON's bytes: standard or URL-safe base64, padded or not, at
 * most max bytes decoded, into *out (malloc'd). The count, or -E2BIG, or
 * -EINVAL for what base64_decode refuses (non-canonical tails too). */
static long bytes(const char *s, size_t n, size_t max, uint8_t **out)
{
	size_t padded = (n + 3) / 4 * 4;
	char *b64;
	long got;

	*out = NULL;
	if (n > BASE64_LEN(max))
		return -E2BIG;
	if (n % 4 == 1)
		return -EINVAL;
	b64 = malloc(padded + 1);
	*out = malloc(padded / 4 * 3 + 1);
	if (!b64 || !*out) {
		free(b64);
		free(*out);
		*out = NULL;
		return -ENOMEM;
	}
	for (size_t i = 0; i < padded; i++)
		b64[i] = i >= n ? '=' : s[i] == '-' ? '+' : s[i] == '_' ? '/' : s[i];
	got = base64_decode(b64, padded, *out);
	free(b64);
	if (got < 0 || (size_t)got > max) {
		free(*out);
		*out = NULL;
		return got < 0 ? -EINVAL : -E2BIG;
	}
	return got;
}

/* ProcessSelector: "process" with pid or tag (a oneof: one of them). */
static int selector(json_t *root, uint32_t *pid, const char **tag, size_t tagcap, char *err,
		    size_t errlen)
{
	json_t *p, *v;

	*pid = 0;
	*tag = NULL;
	if (object(root, "process", &p, err, errlen))
		return -EINVAL;
	if (!p)
		return errmsg_invalid(err, errlen, "\"process\" is required");
	v = get(p, "pid");
	if (text(p, "tag", tagcap, tag, err, errlen))
		return -EINVAL;
	if (v && *tag)
		return errmsg_invalid(err, errlen, "\"process\" takes a pid or a tag, not both");
	if (v)
		return number(v, "pid", UINT32_MAX, pid, err, errlen);
	if (!*tag || !**tag)
		return errmsg_invalid(err, errlen, "\"process\" needs a pid or a tag");
	return 0;
}

/* A selector that must be a pid. */
static int by_pid(json_t *root, uint32_t *pid, char *err, size_t errlen)
{
	const char *tag;

	if (selector(root, pid, &tag, 256, err, errlen))
		return -EINVAL;
	if (tag)
		return errmsg_invalid(err, errlen, "\"process\" must be selected by pid here");
	return 0;
}

/* "pty": {"size": {"cols": C, "rows": R}}, each 1..E2B_MAX_PTY. */
static int pty_size(json_t *root, bool *given, unsigned *cols, unsigned *rows, char *err,
		    size_t errlen)
{
	json_t *pty, *size, *c, *r;
	uint32_t nc, nr;

	*given = false;
	if (object(root, "pty", &pty, err, errlen))
		return -EINVAL;
	if (!pty)
		return 0;
	if (object(pty, "size", &size, err, errlen))
		return -EINVAL;
	c = size ? get(size, "cols") : NULL;
	r = size ? get(size, "rows") : NULL;
	if (!c || !r || number(c, "cols", E2B_MAX_PTY, &nc, err, errlen) ||
	    number(r, "rows", E2B_MAX_PTY, &nr, err, errlen) || !nc || !nr)
		return errmsg_invalid(err, errlen, "\"pty.size\" needs cols and rows from 1 to %d",
				      E2B_MAX_PTY);
	*given = true;
	*cols = nc;
	*rows = nr;
	return 0;
}

/* process.cmd and process.args into s->argv (owner's strings). */
static int argv_of(json_t *proc, struct e2b_start *s, size_t *used, char *err, size_t errlen)
{
	json_t *args = get(proc, "args"), *cmd = get(proc, "cmd");
	size_t n = json_array_size(args), i;

	if (!json_is_string(cmd) || !json_string_length(cmd) ||
	    strlen(json_string_value(cmd)) != json_string_length(cmd))
		return errmsg_invalid(err, errlen, "\"process.cmd\" must be a string, not empty");
	if (args && !json_is_array(args))
		return errmsg_invalid(err, errlen, "\"process.args\" must be an array of strings");
	if (n >= E2B_MAX_ARGS)
		return errmsg_invalid(err, errlen, "\"process.args\" has more than %d members",
				      E2B_MAX_ARGS - 1);
	s->argv = calloc(n + 2, sizeof(*s->argv));
	if (!s->argv)
		return errmsg_invalid(err, errlen, "out of memory");
	for (i = 0; i <= n; i++) {
		json_t *a = i ? json_array_get(args, i - 1) : cmd;

		if (!json_is_string(a) || strlen(json_string_value(a)) != json_string_length(a))
			return errmsg_invalid(err, errlen, "\"process.args\"[%zu] must be a string "
					      "without NUL", i - 1);
		*used += json_string_length(a) + 1;
		/* Read-only, owner's: argv is handed on, never written. */
		s->argv[i] = (char *)json_string_value(a);
	}
	s->argc = (int)i;
	return 0;
}

/* process.envs, {"K": "V"}, into s->env's "K=V" strings. */
static int env_of(json_t *proc, struct e2b_start *s, size_t *used, char *err, size_t errlen)
{
	json_t *envs, *v;
	const char *key;

	if (object(proc, "envs", &envs, err, errlen))
		return -EINVAL;
	if (json_object_size(envs) > E2B_MAX_ARGS)
		return errmsg_invalid(err, errlen, "\"process.envs\" has more than %d members",
				      E2B_MAX_ARGS);
	s->env = calloc(json_object_size(envs) + 1, sizeof(*s->env));
	if (!s->env)
		return errmsg_invalid(err, errlen, "out of memory");
	json_object_foreach(envs, key, v) {
		if (!*key || strchr(key, '=') || !json_is_string(v) ||
		    strlen(json_string_value(v)) != json_string_length(v))
			return errmsg_invalid(err, errlen, "\"process.envs\": \"%.64s\" needs a "
					      "string value and a key without '=' (no NUL in either)",
					      key);
		*used += strlen(key) + json_string_length(v) + 2;
		if (*used > E2B_MAX_EXEC)
			break;
		if (asprintf(&s->env[s->nenv], "%s=%s", key, json_string_value(v)) < 0) {
			s->env[s->nenv] = NULL;
			return errmsg_invalid(err, errlen, "out of memory");
		}
		s->nenv++;
	}
	return 0;
}

int e2b_parse_start(const uint8_t *json, size_t len, struct e2b_start *s, char *err,
		    size_t errlen)
{
	json_t *proc, *in;
	const char *cwd, *tag;
	size_t used = 0;

	memset(s, 0, sizeof(*s));
	s->owner = message(json, len, err, errlen);
	if (!s->owner)
		return -EINVAL;
	if (object(s->owner, "process", &proc, err, errlen))
		goto out_free;
	if (!proc) {
		errmsg_invalid(err, errlen, "\"process\" is required");
		goto out_free;
	}
	if (argv_of(proc, s, &used, err, errlen) || env_of(proc, s, &used, err, errlen))
		goto out_free;
	if (used > E2B_MAX_EXEC) {
		errmsg_invalid(err, errlen, "\"process\": cmd, args and envs take more than %u "
			       "bytes", E2B_MAX_EXEC);
		goto out_free;
	}
	if (text(proc, "cwd", sizeof(s->cwd), &cwd, err, errlen) ||
	    text(s->owner, "tag", sizeof(s->tag), &tag, err, errlen) ||
	    pty_size(s->owner, &s->pty, &s->cols, &s->rows, err, errlen))
		goto out_free;
	s->has_cwd = cwd && *cwd;
	if (s->has_cwd)
		memcpy(s->cwd, cwd, strlen(cwd) + 1);
	s->has_tag = tag && *tag;
	if (s->has_tag)
		memcpy(s->tag, tag, strlen(tag) + 1);
	in = get(s->owner, "stdin");
	if (in && !json_is_boolean(in)) {
		errmsg_invalid(err, errlen, "\"stdin\" must be true or false");
		goto out_free;
	}
	s->stdin_open = !in || json_is_true(in);
	return 0;
out_free:
	e2b_start_free(s);
	return -EINVAL;
}

void e2b_start_free(struct e2b_start *s)
{
	for (int i = 0; i < s->nenv; i++)
		free(s->env[i]);
	free(s->env);
	free(s->argv);
	json_decref(s->owner);
	memset(s, 0, sizeof(*s));
}

int e2b_parse_selector(const uint8_t *json, size_t len, uint32_t *pid, char *tag, size_t tagcap,
		       char *err, size_t errlen)
{
	json_t *root = message(json, len, err, errlen);
	const char *t;
	int rc;

	if (!root)
		return -EINVAL;
	rc = selector(root, pid, &t, tagcap, err, errlen);
	if (!rc && tagcap)
		memcpy(tag, t ? t : "", t ? strlen(t) + 1 : 1);
	json_decref(root);
	return rc;
}

int e2b_parse_signal(const uint8_t *json, size_t len, uint32_t *pid, int *signo, char *err,
		     size_t errlen)
{
	json_t *root = message(json, len, err, errlen), *v;
	int rc;

	if (!root)
		return -EINVAL;
	rc = by_pid(root, pid, err, errlen);
	v = get(root, "signal");
	/* Enums come as names, or as their numbers. */
	if (!rc && json_is_string(v) && !strcmp(json_string_value(v), "SIGNAL_SIGKILL"))
		*signo = SIGKILL;
	else if (!rc && json_is_string(v) && !strcmp(json_string_value(v), "SIGNAL_SIGTERM"))
		*signo = SIGTERM;
	else if (!rc && json_is_integer(v) &&
		 (json_integer_value(v) == SIGKILL || json_integer_value(v) == SIGTERM))
		*signo = (int)json_integer_value(v);
	else if (!rc)
		rc = errmsg_invalid(err, errlen, "\"signal\" must be SIGNAL_SIGKILL or "
				    "SIGNAL_SIGTERM");
	json_decref(root);
	return rc;
}

int e2b_parse_input(const uint8_t *json, size_t len, uint32_t *pid, uint8_t **data,
		    size_t *datalen, bool *pty, char *err, size_t errlen)
{
	json_t *root = message(json, len, err, errlen), *in;
	const char *std, *raw;
	long got;
	int rc = -EINVAL;

	*data = NULL;
	if (!root)
		return -EINVAL;
	if (by_pid(root, pid, err, errlen) || object(root, "input", &in, err, errlen))
		goto out;
	if (!in) {
		errmsg_invalid(err, errlen, "\"input\" is required");
		goto out;
	}
	if (text(in, "stdin", SIZE_MAX, &std, err, errlen) ||
	    text(in, "pty", SIZE_MAX, &raw, err, errlen))
		goto out;
	if (!std == !raw) {
		errmsg_invalid(err, errlen, "\"input\" takes stdin or pty, one of them");
		goto out;
	}
	*pty = raw != NULL;
	if (*pty)
		std = raw;
	got = bytes(std, strlen(std), E2B_MAX_INPUT, data);
	if (got < 0) {
		errmsg_invalid(err, errlen, "\"input.%s\" %s", *pty ? "pty" : "stdin",
			       got == -E2BIG ? "is over 1 MiB" : got == -ENOMEM ? "out of memory" :
			       "is not base64");
		goto out;
	}
	*datalen = (size_t)got;
	rc = 0;
out:
	json_decref(root);
	return rc;
}

int e2b_parse_update(const uint8_t *json, size_t len, uint32_t *pid, unsigned *cols,
		     unsigned *rows, char *err, size_t errlen)
{
	json_t *root = message(json, len, err, errlen);
	bool given;
	int rc;

	if (!root)
		return -EINVAL;
	*cols = *rows = 0;
	rc = by_pid(root, pid, err, errlen);
	if (!rc)
		rc = pty_size(root, &given, cols, rows, err, errlen);
	json_decref(root);
	return rc;
}

/* The message, once its required string member key is copied to out;
 * NULL (err said why) otherwise. */
static json_t *with_text(const uint8_t *json, size_t len, const char *key, char *out, size_t cap,
			 char *err, size_t errlen)
{
	json_t *root = message(json, len, err, errlen);

	if (root && required(root, key, out, cap, err, errlen)) {
		json_decref(root);
		return NULL;
	}
	return root;
}

int e2b_parse_path(const uint8_t *json, size_t len, char *path, size_t cap, char *err,
		   size_t errlen)
{
	json_t *root = with_text(json, len, "path", path, cap, err, errlen);

	json_decref(root);
	return root ? 0 : -EINVAL;
}

int e2b_parse_list_dir(const uint8_t *json, size_t len, char *path, size_t cap,
		       unsigned *depth, char *err, size_t errlen)
{
	json_t *root = with_text(json, len, "path", path, cap, err, errlen), *d;
	uint32_t n = 1;
	int rc = 0;

	if (!root)
		return -EINVAL;
	d = get(root, "depth");
	if (d)
		rc = number(d, "depth", E2B_MAX_DEPTH, &n, err, errlen);
	*depth = n ? n : 1;   /* proto3 leaves a 0 out: the SDK's default */
	json_decref(root);
	return rc;
}

int e2b_parse_move(const uint8_t *json, size_t len, char *src, char *dst, size_t cap, char *err,
		   size_t errlen)
{
	json_t *root = with_text(json, len, "source", src, cap, err, errlen);
	int rc;

	if (!root)
		return -EINVAL;
	rc = required(root, "destination", dst, cap, err, errlen);
	json_decref(root);
	return rc;
}

int e2b_parse_watch_dir(const uint8_t *json, size_t len, char *path, size_t cap,
			bool *recursive, char *err, size_t errlen)
{
	json_t *root = with_text(json, len, "path", path, cap, err, errlen), *r;
	int rc = 0;

	if (!root)
		return -EINVAL;
	r = get(root, "recursive");
	if (r && !json_is_boolean(r))
		rc = errmsg_invalid(err, errlen, "\"recursive\" must be true or false");
	*recursive = json_is_true(r);
	if (!rc && json_is_true(get(root, "includeEntry")))
		rc = errmsg_invalid(err, errlen, "\"includeEntry\" is not supported: mayfly's "
				    "watch events carry no entry");
	json_decref(root);
	return rc;
}

int e2b_parse_watcher_id(const uint8_t *json, size_t len, char *id, size_t cap, char *err,
			 size_t errlen)
{
	json_t *root = with_text(json, len, "watcherId", id, cap, err, errlen);

	json_decref(root);
	return root ? 0 : -EINVAL;
}

/* {"event":{kind:body}} as compact text; body is dropped. */
static char *event(const char *kind, json_t *body)
{
	json_t *e;
	char *s;

	if (!body)
		return NULL;
	e = json_pack("{s:{s:o}}", "event", kind, body);
	if (!e)
		return NULL;
	s = json_dumps(e, JSON_COMPACT);
	json_decref(e);
	return s;
}

char *e2b_event_start(uint32_t pid)
{
	return event("start", json_pack("{s:I}", "pid", (json_int_t)pid));
}

char *e2b_event_data(const char *stream, const uint8_t *data, size_t len)
{
	json_t *body;
	char *b64;

	if (!stream || len > E2B_MAX_DATA ||
	    (strcmp(stream, "stdout") && strcmp(stream, "stderr") && strcmp(stream, "pty")))
		return NULL;
	b64 = malloc(BASE64_LEN(len) + 1);
	if (!b64)
		return NULL;
	base64_encode(data, len, b64);
	body = json_pack("{s:s}", stream, b64);
	free(b64);
	return event("data", body);
}

char *e2b_event_end(int exit_code, bool exited, const char *status, const char *error)
{
	json_t *end = json_object();

	if (!end)
		return NULL;
	if ((exit_code && json_object_set_new(end, "exitCode", json_integer(exit_code))) ||
	    (exited && json_object_set_new(end, "exited", json_true())) ||
	    (status && *status &&
	     json_object_set_new(end, "status", connect_json_text(status, E2B_MAX_TEXT))) ||
	    (error && json_object_set_new(end, "error", connect_json_text(error, E2B_MAX_TEXT)))) {
		json_decref(end);
		return NULL;
	}
	return event("end", end);
}

char *e2b_event_keepalive(void)
{
	return event("keepalive", json_object());
}

json_t *e2b_fs_event(unsigned kind, const char *name)
{
	static const char *const types[] = {
		[1] = "EVENT_TYPE_CREATE", [2] = "EVENT_TYPE_WRITE", [3] = "EVENT_TYPE_REMOVE",
		[4] = "EVENT_TYPE_RENAME", [5] = "EVENT_TYPE_CHMOD",
	};

	if (!kind || kind >= sizeof(types) / sizeof(types[0]) || !name)
		return NULL;
	return json_pack("{s:o, s:s}", "name", connect_json_text(name, E2B_MAX_NAME), "type",
			 types[kind]);
}

/* WatchDirResponse's oneof, at its top: {kind: body} as compact text. */
static char *watch_response(const char *kind, json_t *body)
{
	json_t *r = body ? json_pack("{s:o}", kind, body) : NULL;
	char *s = r ? json_dumps(r, JSON_COMPACT) : NULL;

	json_decref(r);
	return s;
}

char *e2b_watch_start(void)
{
	return watch_response("start", json_object());
}

char *e2b_watch_event(unsigned kind, const char *name)
{
	return watch_response("filesystem", e2b_fs_event(kind, name));
}

char *e2b_watch_keepalive(void)
{
	return watch_response("keepalive", json_object());
}

/* RFC 3339 in UTC, as protobuf's Timestamp: years 1 to 9999 only. 20
 * bytes and a NUL; the buffer is as wide as snprintf's worst case. */
#define TIME_BUF 80

static void rfc3339(int64_t s, char out[TIME_BUF])
{
	static const int64_t first = -62135596800, last = 253402300799;
	time_t t = (time_t)(s < first ? first : s > last ? last : s);
	struct tm tm;

	if (!gmtime_r(&t, &tm))
		memset(&tm, 0, sizeof(tm));
	snprintf(out, TIME_BUF, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

json_t *e2b_entry_json(const struct e2b_entry *e)
{
	static const char *const types[] = { "FILE_TYPE_UNSPECIFIED", "FILE_TYPE_FILE",
					     "FILE_TYPE_DIRECTORY", "FILE_TYPE_SYMLINK" };
	json_t *j = json_object();
	char size[24], when[TIME_BUF];

	if (!j)
		return NULL;
	/* int64 in JSON is a string; a size past it cannot be a file's. */
	snprintf(size, sizeof(size), "%llu",
		 (unsigned long long)(e->size > INT64_MAX ? INT64_MAX : e->size));
	rfc3339(e->mtime_s, when);
	if (json_object_set_new(j, "name", connect_json_text(e->name, sizeof(e->name) - 1)) ||
	    json_object_set_new(j, "type", json_string(types[e->type >= 1 && e->type <= 3 ?
							     e->type : 0])) ||
	    json_object_set_new(j, "path", connect_json_text(e->path, sizeof(e->path) - 1)) ||
	    json_object_set_new(j, "size", json_string(size)) ||
	    json_object_set_new(j, "mode", json_integer(e->mode)) ||
	    json_object_set_new(j, "permissions",
				connect_json_text(e->permissions, sizeof(e->permissions) - 1)) ||
	    json_object_set_new(j, "owner", connect_json_text(e->owner, sizeof(e->owner) - 1)) ||
	    json_object_set_new(j, "group", connect_json_text(e->group, sizeof(e->group) - 1)) ||
	    json_object_set_new(j, "modifiedTime", json_string(when)) ||
	    (e->has_target &&
	     json_object_set_new(j, "symlinkTarget",
				 connect_json_text(e->symlink_target,
						   sizeof(e->symlink_target) - 1)))) {
		json_decref(j);
		return NULL;
	}
	return j;
}

void e2b_permissions(uint32_t mode, char out[11])
{
	static const char rwx[] = "rwxrwxrwx";
	char type;

	switch (mode & S_IFMT) {
	case S_IFDIR: type = 'd'; break;
	case S_IFLNK: type = 'l'; break;
	case S_IFCHR: type = 'c'; break;
	case S_IFBLK: type = 'b'; break;
	case S_IFIFO: type = 'p'; break;
	case S_IFSOCK: type = 's'; break;
	default: type = '-'; break;
	}
	out[0] = type;
	for (int i = 0; i < 9; i++)
		out[1 + i] = mode & (0400u >> i) ? rwx[i] : '-';
	/* The set-id and sticky bits take the x places: lower case with x. */
	if (mode & S_ISUID)
		out[3] = mode & S_IXUSR ? 's' : 'S';
	if (mode & S_ISGID)
		out[6] = mode & S_IXGRP ? 's' : 'S';
	if (mode & S_ISVTX)
		out[9] = mode & S_IXOTH ? 't' : 'T';
	out[10] = '\0';
}

int e2b_guest_path(const char *given, char *out, size_t cap)
{
	int n;

	if (!given || !*given)
		return -EINVAL;
	n = given[0] == '/' ? snprintf(out, cap, "%s", given) :
			      snprintf(out, cap, E2B_HOME "/%s", given);
	return n > 0 && (size_t)n < cap ? 0 : -ENAMETOOLONG;
}

json_t *e2b_error_json(int status, const char *message)
{
	json_t *text = connect_json_text(message ? message : "", CONNECT_MAX_ERROR_TEXT);

	return text ? json_pack("{s:i, s:o}", "code", status, "message", text) : NULL;
}
