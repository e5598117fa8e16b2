/* e2b_rpc.c - envd's Connect RPCs for a sandbox, each through the service's own calls: the process streams handed to e2b_proc.c, the processes' unary calls by pid, the filesystem's calls as serve's file calls with E2B's EntryInfo. */
#include "serve/e2b_rpc.h"
#include "serve/calls.h"
#include "serve/e2b_codec.h"
#include "serve/e2b_msg.h"
#include "serve/e2b_reply.h"
#include "serve/e2b_proc.h"
#include "serve/e2b_watch.h"
#include "serve/http_reply.h"
#include "lib/log.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LISTED     10000         /* ListDir's entries, all depths */

/* A failed service call (an HTTP status and message) as Connect's code. */
static enum MHD_Result call_error(struct MHD_Connection *conn, const struct call_result *r)
{
	return e2b_rpc_error(conn, e2b_code_of_status(r->status), r->error);
}

/* ---- process.Process's unary calls ---- */

static enum MHD_Result list(struct e2b_server *e, struct MHD_Connection *conn,
			    const struct e2b_codec *c, struct sandbox *sb)
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
	return e2b_codec_reply(conn, c, out ? json_pack("{s:o}", "processes", out) : NULL);
}

/* SendSignal, SendInput, CloseStdin and Update: each names a process by
 * its pid, which must be one of the sandbox's running commands. */
static enum MHD_Result on_process(struct e2b_server *e, struct MHD_Connection *conn,
				  const struct e2b_codec *c, const char *name, struct sandbox *sb,
				  const uint8_t *body, size_t len)
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
	return r.status == 200 ? e2b_codec_reply(conn, c, json_object()) : call_error(conn, &r);
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

	calls_file_list(e->svc, sb, caller, path, true, &files, r);
	if (r->status != 200)
		return r->status;
	json_array_foreach(files, i, f) {
		char child[API_MAX_PATH + 1];
		const char *name = json_string_value(json_object_get(f, "name")) ?: "";

		if (calls_child_path(child, sizeof(child), path, name) ||
		    json_array_size(out) >= MAX_LISTED)
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
				  const struct e2b_codec *c, const char *name, struct sandbox *sb,
				  const char *caller, const uint8_t *body, size_t len)
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
		return e2b_codec_reply(conn, c, json_pack("{s:o}", "entries", out));
	}
	if (!strcmp(name, "Remove")) {
		calls_remove(e->svc, sb, caller, path, true, &r);
		return r.status == 204 ? e2b_codec_reply(conn, c, json_object()) : call_error(conn, &r);
	}
	calls_file_stat(e->svc, sb, caller, path, &j, &r);
	if (!strcmp(name, "Stat") || !strcmp(name, "Move"))
		return r.status == 200 ? e2b_codec_reply(conn, c, json_pack("{s:o}", "entry", entry(path, j))) :
		       call_error(conn, &r);
	/* MakeDir: an existing path is already_exists (the SDK's false). */
	json_decref(j);
	if (r.status == 200)
		return e2b_rpc_error(conn, CONNECT_ALREADY_EXISTS, "the path exists");
	calls_mkdir(e->svc, sb, caller, path, true, &r);
	if (r.status != 201)
		return call_error(conn, &r);
	calls_file_stat(e->svc, sb, caller, path, &j, &r);
	return r.status == 200 ? e2b_codec_reply(conn, c, json_pack("{s:o}", "entry", entry(path, j))) :
	       call_error(conn, &r);
}

enum MHD_Result e2b_rpc(struct e2b_server *e, struct MHD_Connection *conn, const char *method,
			const char *id, const char *caller, const uint8_t *body, size_t len)
{
	static const char *const supported[] = {
		"process.Process/Start", "process.Process/Connect", "process.Process/List",
		"process.Process/SendSignal", "process.Process/SendInput",
		"process.Process/CloseStdin", "process.Process/Update", "filesystem.Filesystem/Stat",
		"filesystem.Filesystem/ListDir", "filesystem.Filesystem/MakeDir",
		"filesystem.Filesystem/Remove", "filesystem.Filesystem/Move",
		"filesystem.Filesystem/WatchDir", "filesystem.Filesystem/CreateWatcher",
		"filesystem.Filesystem/GetWatcherEvents", "filesystem.Filesystem/RemoveWatcher",
	};
	const char *ct = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
						     MHD_HTTP_HEADER_CONTENT_TYPE);
	const char *name = strchr(method, '/') + 1, *why = "";
	enum MHD_Result (*fail)(struct MHD_Connection *, enum connect_code, const char *);
	enum connect_codec any;
	const uint8_t *msg = body, *json;
	size_t msglen = len, jsonlen;
	struct e2b_codec c = { 0 };
	bool known = false;
	enum MHD_Result ret;
	struct sandbox *sb;
	char err[400], *owned;
	int st;

	for (size_t i = 0; i < sizeof(supported) / sizeof(supported[0]); i++)
		known |= !strcmp(method, supported[i]);
	st = e2b_codec_of(method, ct, &c);
	/* A stream's errors as a stream's, a unary call's as such; for a
	 * method envd does not have, as the client's Content-Type says. */
	fail = (st == -ENOENT ? !connect_stream_codec(ct, &any) : c.stream) ? e2b_stream_error :
	       e2b_rpc_error;
	if (!known) {
		snprintf(err, sizeof(err), "%s is not supported by mayfly's envd yet (docs/e2b.md)",
			 method);
		return fail(conn, CONNECT_UNIMPLEMENTED, err);
	}
	if (st)
		return fail(conn, CONNECT_INVALID_ARGUMENT, c.stream ?
			    "a stream's body is application/connect+json or application/connect+proto" :
			    "a unary call's body is application/json or application/proto");
	if (c.stream && connect_unwrap(body, len, &msg, &msglen, &why))
		return fail(conn, CONNECT_INVALID_ARGUMENT, why);
	st = e2b_codec_request(&c, msg, msglen, &json, &jsonlen, &owned, err, sizeof(err));
	if (st)
		return fail(conn, st == -EINVAL ? CONNECT_INVALID_ARGUMENT : CONNECT_INTERNAL, err);
	if (!strcmp(method, "process.Process/Start"))
		ret = e2b_proc_start(e, conn, &c, id, caller, json, jsonlen);
	else if (!strcmp(method, "process.Process/Connect"))
		ret = e2b_proc_connect(e, conn, &c, id, json, jsonlen);
	else if (!strcmp(name, "WatchDir"))
		ret = e2b_watch_dir(e, conn, &c, id, caller, json, jsonlen);
	else if (strstr(name, "Watcher"))
		ret = e2b_watcher_call(e, conn, &c, name, id, caller, json, jsonlen);
	else if ((st = service_get(e->svc, id, &sb, err, sizeof(err))))
		ret = e2b_rpc_error(conn, st == 404 ? CONNECT_NOT_FOUND : CONNECT_UNAVAILABLE, err);
	else {
		if (!strncmp(method, "filesystem.", 11))
			ret = filesystem(e, conn, &c, name, sb, caller, json, jsonlen);
		else if (!strcmp(name, "List"))
			ret = list(e, conn, &c, sb);
		else
			ret = on_process(e, conn, &c, name, sb, json, jsonlen);
		service_put(e->svc, sb);
	}
	free(owned);
	return ret;
}
