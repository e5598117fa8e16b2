/* gate.c - the approval hook before a tool call and its audit record after, the same JSON for both. */
#include "policy/gate.h"
#include "lib/clock.h"
#include "lib/image_id.h"
#include "lib/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gate_init(struct gate *g, const char *approve_cmd, unsigned approve_timeout_s,
	       const char *sandbox, const char *caller)
{
	memset(g, 0, sizeof(*g));
	g->sandbox = sandbox;
	g->caller = caller;
	g->approver.cmd = approve_cmd;
	g->approver.timeout_ms = approve_timeout_s * 1000;
}

int gate_open(struct gate *g, struct audit_log *log, const char *audit_path,
	      const char *approve_cmd, unsigned approve_timeout_s, const char *sandbox,
	      const char *caller)
{
	char err[300];

	gate_init(g, approve_cmd, approve_timeout_s, sandbox, caller);
	if (!audit_path)
		return 0;
	if (audit_open(log, audit_path, err, sizeof(err))) {
		log_say("%s", err);
		return -1;
	}
	g->audit = log;
	return 0;
}

void gate_close(struct gate *g)
{
	if (g->audit)
		audit_close(g->audit);
	g->audit = NULL;
}

static void hex(const uint8_t h[32], char out[65])
{
	image_hash_hex(h, out);
}

/* {"bytes": N, "sha256": hex}. */
static json_t *digest(const struct transfer_stats *st)
{
	char h[65];

	hex(st->sha256, h);
	return json_pack("{s:I, s:s}", "bytes", (json_int_t)st->bytes, "sha256", h);
}

static json_t *str(const char *s)
{
	return s ? audit_bytes(s, strlen(s)) : json_null();
}

json_t *gate_exec_call(const struct exec_spec *spec, const void *stdin_data, size_t stdin_len)
{
	json_t *call = json_object(), *argv = json_array(), *keys = json_array();

	if (!call || !argv || !keys)
		goto out_nomem;
	for (int i = 0; i < spec->argc; i++)
		if (json_array_append_new(argv, str(spec->argv[i])))
			goto out_nomem;
	for (int i = 0; i < spec->nenv; i++) {
		const char *eq = strchr(spec->env[i], '=');
		size_t n = eq ? (size_t)(eq - spec->env[i]) : strlen(spec->env[i]);

		/* The key only: values may be secrets (tokens, passwords). */
		if (json_array_append_new(keys, audit_bytes(spec->env[i], n)))
			goto out_nomem;
	}
	if (json_object_set_new(call, "argv", argv) ||
	    json_object_set_new(call, "cwd", str(spec->cwd)) ||
	    json_object_set_new(call, "env_keys", keys) ||
	    json_object_set_new(call, "timeout_ms", json_integer(spec->timeout_ms)) ||
	    json_object_set_new(call, "tty", json_boolean(spec->pty)))
		goto out_call;
	if (stdin_data) {
		char h[65];

		audit_sha256_hex(stdin_data, stdin_len, h);
		if (json_object_set_new(call, "stdin", json_pack("{s:I, s:s}", "bytes",
								 (json_int_t)stdin_len, "sha256", h)))
			goto out_call;
	} else if (json_object_set_new(call, "stdin", json_boolean(spec->stdin_fd >= 0))) {
		goto out_call;
	}
	return call;
out_nomem:
	json_decref(argv);
	json_decref(keys);
out_call:
	json_decref(call);
	return NULL;
}

json_t *gate_file_call(const char *tool, const char *guest, const char *local)
{
	json_t *call = json_object();

	if (!call || json_object_set_new(call, "tool", json_string(tool)) ||
	    json_object_set_new(call, "path", str(guest)) ||
	    (local && json_object_set_new(call, "local", str(local)))) {
		json_decref(call);
		return NULL;
	}
	return call;
}

/* The record's common members; takes result. */
static int record(struct gate *g, json_t *call, uint64_t start_ns, const char *outcome,
		  json_t *result, char *why, size_t whylen)
{
	char err[256];
	json_t *rec;
	int rc;

	if (!g->audit) {
		json_decref(result);
		return 0;
	}
	rec = json_pack("{s:s, s:s, s:O, s:s, s:o, s:f}", "sandbox", g->sandbox ? g->sandbox : "",
			"caller", g->caller ? g->caller : "", "call", call, "outcome", outcome,
			"result", result ? result : json_null(),
			"duration_ms", (double)(clock_now_ns() - start_ns) / 1e6);
	if (!rec) {
		snprintf(why, whylen, "cannot build the audit record: out of memory");
		return -EIO;
	}
	rc = audit_append(g->audit, rec, err, sizeof(err));
	json_decref(rec);
	if (rc) {
		snprintf(why, whylen, "%s", err);
		return -EIO;
	}
	return 0;
}

static const char *tool_of(json_t *call)
{
	const char *t = json_string_value(json_object_get(call, "tool"));

	return t ? t : "exec";
}

int gate_ask(struct gate *g, json_t *call, uint64_t *start_ns, char *why, size_t whylen)
{
	struct approve_result res;
	char *text;
	int rc;

	*start_ns = clock_now_ns();
	if (!json_object_get(call, "tool"))
		json_object_set_new(call, "tool", json_string("exec"));
	/* Reads are recorded, never asked about. */
	if (!g->approver.cmd || (strcmp(tool_of(call), "exec") && strcmp(tool_of(call), "write_file")))
		return 0;
	json_object_set_new(call, "sandbox", json_string(g->sandbox ? g->sandbox : ""));
	json_object_set_new(call, "caller", json_string(g->caller ? g->caller : ""));
	text = json_dumps(call, JSON_COMPACT);
	/* The approver reads the call; the record keeps it without the copies. */
	json_object_del(call, "sandbox");
	json_object_del(call, "caller");
	if (!text) {
		snprintf(res.reason, sizeof(res.reason), "the approver could not be asked: out of memory");
		res.allowed = false;
	} else {
		if (g->spawner)
			approve_spawner_ask(g->spawner, text, &res);
		else
			approve_check(&g->approver, text, &res);
		free(text);
	}
	if (res.allowed)
		return 0;
	snprintf(why, whylen, "refused by the approver (%s): %s", tool_of(call), res.reason);
	rc = record(g, call, *start_ns, "refused",
		    json_pack("{s:s, s:f}", "reason", res.reason, "approver_ms",
			      (double)res.duration_us / 1000), why, whylen);
	return rc ? rc : -EPERM;
}

int gate_record_exec(struct gate *g, json_t *call, uint64_t start_ns, const struct exec_result *res,
		     char *why, size_t whylen)
{
	bool exited = res->ended_ns && !res->signo;
	json_t *r = json_pack("{s:o, s:o, s:b, s:i, s:o, s:o, s:b}",
			      "exit_code", exited ? json_integer(res->exit_code) : json_null(),
			      "signal", res->signo ? json_integer(res->signo) : json_null(),
			      "timed_out", res->timed_out,
			      "mayfly_exit", res->exit_code,
			      "stdout", digest(&res->out), "stderr", digest(&res->err),
			      "truncated", res->truncated);

	if (r && res->ended_ns)
		json_object_set_new(r, "command_ms", json_real((double)res->duration_us / 1000));
	if (r && res->error[0])
		json_object_set_new(r, "error", str(res->error));
	return record(g, call, start_ns, res->ended_ns ? "done" : "failed", r, why, whylen);
}

int gate_record_file(struct gate *g, json_t *call, uint64_t start_ns, int rc, const char *err,
		     const struct transfer_stats *st, char *why, size_t whylen)
{
	json_t *r = st ? digest(st) : json_object();

	if (r && rc)
		json_object_set_new(r, "error", str(err && err[0] ? err : strerror(-rc)));
	return record(g, call, start_ns, rc ? "failed" : "done", r, why, whylen);
}
