/* e2b_http.c - E2B's sandbox protocol on a listener of its own: the control plane the e2b SDKs call (create, list, get, kill, timeout, pause, connect), each answered from the service as serve's own API would, and envd's requests (named by the E2b-Sandbox-Id header) handed to e2b_envd.c. */
#include "serve/e2b_http.h"
#include "serve/calls.h"
#include "serve/e2b_envd.h"
#include "serve/e2b_msg.h"
#include "serve/e2b_proc.h"
#include "serve/e2b_watch.h"
#include "serve/e2b_port.h"
#include "serve/port_msg.h"
#include "serve/http_reply.h"
#include "serve/live.h"
#include "lib/atomic_file.h"
#include "lib/log.h"

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define E2B_MAX_JSON_BODY (64u << 10)   /* a control-plane request: a few members */
#define E2B_MAX_LIST      1000          /* a list's page at most */
#define E2B_BUSY_WAIT_MS 5000           /* a kill or pause waits this long for calls to end */
#define E2B_MAX_TARGET    8192          /* a published port's request target */

enum e2b_route {
	E2B_NONE, E2B_CREATE, E2B_LIST, E2B_GET, E2B_KILL, E2B_TIMEOUT, E2B_PAUSE, E2B_CONNECT,
	E2B_METRICS,
};

/* One request, from its first callback to its completion. */
struct e2b_request {
	enum e2b_route route;
	char id[API_ID_MAX + 1];
	const char *caller;            /* the API key's name */
	const char *key;               /* the API key: a sandbox's envd access token */
	struct http_body body;
	bool answered;                 /* a reply sent before the body's end */
	struct envd_call *envd;        /* an envd request: e2b_envd.c's */
	struct port_call *port;        /* a published port's: e2b_port.c's */
};

/* E2B's error body: the SDK reads its numeric "code" (404: not found, 409:
 * already paused) as much as the status. */
static enum MHD_Result send_error(struct MHD_Connection *conn, unsigned status, const char *msg)
{
	return http_send_json(conn, status, e2b_error_json((int)status, msg));
}

/* A path segment that is a sandbox id: what config_id_valid allows. */
static bool take_id(const char *s, size_t len, char *id)
{
	if (!len || len > API_ID_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '_'))
			return false;
	memcpy(id, s, len);
	id[len] = '\0';
	return true;
}

/* The control plane's routes: v2 as the SDK calls them, v1's equivalents
 * beside them. 0, 404 or 405. */
static int route(const char *method, const char *url, enum e2b_route *r, char *id)
{
	static const struct {
		const char *method, *suffix;   /* after /sandboxes/{id}; "" the id itself */
		enum e2b_route route;
	} on_id[] = {
		{ "GET", "", E2B_GET }, { "DELETE", "", E2B_KILL },
		{ "POST", "/timeout", E2B_TIMEOUT }, { "POST", "/pause", E2B_PAUSE },
		{ "POST", "/resume", E2B_CONNECT }, { "POST", "/connect", E2B_CONNECT },
		{ "GET", "/metrics", E2B_METRICS },
	};
	const char *rest, *slash;
	bool found = false;

	if (!strncmp(url, "/v2/", 4))
		url += 3;
	if (!strcmp(url, "/sandboxes")) {
		*r = !strcmp(method, "POST") ? E2B_CREATE : !strcmp(method, "GET") ? E2B_LIST : E2B_NONE;
		return *r == E2B_NONE ? 405 : 0;
	}
	if (strncmp(url, "/sandboxes/", 11))
		return 404;
	rest = url + 11;
	slash = strchr(rest, '/');
	if (!take_id(rest, slash ? (size_t)(slash - rest) : strlen(rest), id))
		return 404;
	rest = slash ? slash : "";
	for (size_t i = 0; i < sizeof(on_id) / sizeof(on_id[0]); i++) {
		if (strcmp(rest, on_id[i].suffix))
			continue;
		found = true;
		if (!strcmp(method, on_id[i].method)) {
			*r = on_id[i].route;
			return 0;
		}
	}
	return found ? 405 : 404;
}

static void iso_time(int64_t t, char *out, size_t len)
{
	struct tm tm;
	time_t tt = (time_t)t;

	gmtime_r(&tt, &tm);
	strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* "running" or "paused" as E2B knows them; NULL: a sandbox E2B would not
 * list (being deleted, ended, damaged, still starting). */
static const char *e2b_state(const char *state)
{
	if (!strcmp(state, "running") || !strcmp(state, "pausing") || !strcmp(state, "resuming"))
		return "running";
	return !strcmp(state, "paused") ? "paused" : NULL;
}

/* E2B's ListedSandbox (detail: SandboxDetail's members too) from serve's
 * own JSON of a sandbox (service_sandbox_json), or NULL. */
static json_t *listed(struct e2b_server *e, json_t *sb, const char *key, bool detail)
{
	const char *state = e2b_state(json_string_value(json_object_get(sb, "state")) ?: "");
	struct service_template *t = service_template_find(
		e->svc, json_string_value(json_object_get(sb, "template")) ?: "");
	/* The default template is E2B's "base"; another by its name. */
	const char *tmpl = !t ? "" : t == &e->svc->cfg.tmpl[0] ? "base" : t->name;
	int64_t created = json_integer_value(json_object_get(sb, "created"));
	int64_t ttl = json_integer_value(json_object_get(sb, "ttl"));
	json_t *meta = json_object_get(sb, "metadata"), *j;
	char started[32], end[32];

	if (!state)
		return NULL;
	iso_time(created, started, sizeof(started));
	/* No ttl: it lives until deleted; E2B has no such sandbox. */
	iso_time(created + (ttl ? ttl : API_MAX_TTL_S), end, sizeof(end));
	j = json_pack("{s:O, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:s, s:O}",
		      "sandboxID", json_object_get(sb, "id"), "templateID", tmpl, "alias", tmpl,
		      "clientID", "mayfly", "startedAt", started, "endAt", end, "state", state,
		      "cpuCount", (json_int_t)(t ? t->cpus : 0),
		      "memoryMB", (json_int_t)(t ? t->mem_mib : 0), "envdVersion", E2B_ENVD_VERSION,
		      "metadata", meta ? meta : json_object());
	if (j && detail) {
		char traffic[PORT_TOKEN_LEN + 1];

		port_traffic_token(e->traffic_key, json_string_value(json_object_get(sb, "id")) ?: "",
				   traffic);
		json_object_set_new(j, "envdAccessToken", json_string(key));
		json_object_set_new(j, "trafficAccessToken", json_string(traffic));
		json_object_set_new(j, "domain", json_string(e->domain));
	}
	return j;
}

/* Create's and connect's answer: the Sandbox the SDK builds its client of. */
static json_t *sandbox_json(struct e2b_server *e, const char *id, const char *tmpl, const char *key)
{
	char traffic[PORT_TOKEN_LEN + 1];

	/* Every sandbox's published ports want its token: E2B's
	 * allowPublicTraffic: false, always (docs/e2b.md). */
	port_traffic_token(e->traffic_key, id, traffic);
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "sandboxID", id, "templateID", tmpl,
			 "clientID", "mayfly", "envdVersion", E2B_ENVD_VERSION, "envdAccessToken",
			 key, "trafficAccessToken", traffic, "domain", e->domain);
}

/* E2B's NewSandbox as serve's own create: templateID ("base": the
 * default template), timeout (the ttl), envVars, metadata; the members
 * mayfly has no use for are ignored, as E2B ignores unknown ones. 0, or
 * -EINVAL with err. */
static int parse_create(const char *body, size_t len, struct api_create *c, char *tmpl,
			size_t tmplcap, char *err, size_t errlen)
{
	json_error_t je;
	json_t *in = json_loadb(body ? body : "{}", body ? len : 2, JSON_REJECT_DUPLICATES, &je);
	json_t *out = json_object(), *v;
	char *text = NULL;
	int rc = -EINVAL;

	if (!in || !json_is_object(in)) {
		snprintf(err, errlen, "the body must be a JSON object%s%s", in ? "" : ": ",
			 in ? "" : je.text);
		goto out;
	}
	v = json_object_get(in, "templateID");
	if (v && !json_is_string(v)) {
		snprintf(err, errlen, "\"templateID\" must be a string");
		goto out;
	}
	snprintf(tmpl, tmplcap, "%s", v ? json_string_value(v) : "base");
	if (strcmp(tmpl, "base"))
		json_object_set_new(out, "template", json_string(tmpl));
	v = json_object_get(in, "timeout");
	json_object_set_new(out, "ttl", v ? json_copy(v) : json_integer(E2B_DEFAULT_TIMEOUT_S));
	if ((v = json_object_get(in, "envVars")) && !json_is_null(v))
		json_object_set(out, "env", v);
	if ((v = json_object_get(in, "metadata")) && !json_is_null(v))
		json_object_set(out, "metadata", v);
	text = json_dumps(out, JSON_COMPACT);
	if (!text) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	/* Serve's own checks, its messages naming its members. */
	rc = api_parse_create(text, strlen(text), c, err, errlen);
out:
	free(text);
	json_decref(in);
	json_decref(out);
	return rc;
}

/* {"timeout": seconds} (connect's is optional: 0 then); a key twice is
 * refused, as create's are. 0 or -EINVAL. */
static int parse_timeout(const char *body, size_t len, bool required, unsigned *timeout_s,
			 char *err, size_t errlen)
{
	json_t *in = json_loadb(body ? body : "{}", body ? len : 2, JSON_REJECT_DUPLICATES, NULL), *v;
	int rc = 0;

	*timeout_s = 0;
	v = in ? json_object_get(in, "timeout") : NULL;
	if (!json_is_object(in) || (required && !v) ||
	    (v && (!json_is_integer(v) || json_integer_value(v) < 0 ||
		   json_integer_value(v) > API_MAX_TTL_S))) {
		snprintf(err, errlen, "the body must be {\"timeout\": seconds, 0-%u}", API_MAX_TTL_S);
		rc = -EINVAL;
	} else if (v) {
		*timeout_s = (unsigned)json_integer_value(v);
	}
	json_decref(in);
	return rc;
}

static int hex(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
	       c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Percent-decode s[0..len) into out (cap bytes, NUL-terminated). false
 * when malformed or too long. */
static bool unescape(const char *s, size_t len, char *out, size_t cap)
{
	size_t o = 0;

	for (size_t i = 0; i < len; i++) {
		int c = (unsigned char)s[i];

		if (c == '%') {
			if (i + 2 >= len || hex(s[i + 1]) < 0 || hex(s[i + 2]) < 0)
				return false;
			c = hex(s[i + 1]) * 16 + hex(s[i + 2]);
			i += 2;
		} else if (c == '+') {
			c = ' ';
		}
		if (!c || o + 1 >= cap)
			return false;
		out[o++] = (char)c;
	}
	out[o] = '\0';
	return true;
}

/* The list's "metadata" filter, as the SDK sends it: "k=v&k2=v2" (each
 * key and value percent-encoded once more inside), every pair required
 * in a sandbox's metadata. */
static bool metadata_matches(const char *filter, json_t *meta)
{
	char key[API_MAX_META_KEY * 3 + 1], val[API_MAX_META_VALUE * 3 + 1];
	char k[API_MAX_META_KEY + 1], v[API_MAX_META_VALUE + 1];

	while (filter && *filter) {
		const char *amp = strchrnul(filter, '&'), *eq = memchr(filter, '=', (size_t)(amp - filter));
		const char *have;

		if (!eq || !unescape(filter, (size_t)(eq - filter), key, sizeof(key)) ||
		    !unescape(eq + 1, (size_t)(amp - eq - 1), val, sizeof(val)) ||
		    !unescape(key, strlen(key), k, sizeof(k)) || !unescape(val, strlen(val), v, sizeof(v)))
			return false;
		have = json_string_value(json_object_get(meta, k));
		if (!have || strcmp(have, v))
			return false;
		filter = *amp ? amp + 1 : amp;
	}
	return true;
}

/* A "state" filter: "running,paused" (empty or NULL: both). */
static bool state_matches(const char *filter, const char *state)
{
	size_t n = strlen(state);

	if (!filter || !*filter)
		return true;
	for (const char *p = filter; *p; ) {
		const char *comma = strchrnul(p, ',');

		if ((size_t)(comma - p) == n && !strncmp(p, state, n))
			return true;
		p = *comma ? comma + 1 : comma;
	}
	return false;
}

static const char *arg(struct MHD_Connection *conn, const char *key)
{
	return MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, key);
}

/* GET /v2/sandboxes: the page after nextToken (a sandbox id), at most
 * limit, x-next-token naming the last one when more follow. */
static enum MHD_Result do_list(struct e2b_server *e, struct MHD_Connection *conn,
			       struct e2b_request *rq)
{
	const char *states = arg(conn, "state"), *meta = arg(conn, "metadata");
	const char *after = arg(conn, "nextToken"), *lim = arg(conn, "limit");
	unsigned long limit = lim ? strtoul(lim, NULL, 10) : E2B_MAX_LIST;
	json_t *all = service_list(e->svc), *out = json_array(), *sb;
	struct MHD_Response *resp;
	bool skipping = after && *after, more = false;
	size_t i;

	if (!all || !out) {
		json_decref(all);
		json_decref(out);
		return send_error(conn, 500, "out of memory");
	}
	limit = limit && limit < E2B_MAX_LIST ? limit : E2B_MAX_LIST;
	json_array_foreach(all, i, sb) {
		json_t *j;

		if (skipping) {
			skipping = strcmp(json_string_value(json_object_get(sb, "id")), after) != 0;
			continue;
		}
		j = listed(e, sb, rq->key, false);
		if (!j || !state_matches(states, json_string_value(json_object_get(j, "state"))) ||
		    !metadata_matches(meta, json_object_get(j, "metadata"))) {
			json_decref(j);
			continue;
		}
		if (json_array_size(out) == limit) {
			json_decref(j);
			more = true;
			break;
		}
		json_array_append_new(out, j);
	}
	json_decref(all);
	if (more) {
		json_t *last = json_array_get(out, json_array_size(out) - 1);
		char token[API_ID_MAX + 1];

		snprintf(token, sizeof(token), "%s",
			 json_string_value(json_object_get(last, "sandboxID")));
		resp = http_json_response(out);
		if (resp)
			MHD_add_response_header(resp, "x-next-token", token);
		return http_send(conn, 200, resp);
	}
	return http_send_json(conn, 200, out);
}

/* A query's Unix seconds (absent: *out untouched). -EINVAL when not a
 * non-negative decimal. */
static int unix_arg(struct MHD_Connection *conn, const char *key, int64_t *out)
{
	const char *s = arg(conn, key);
	long long v;
	char *end;

	if (!s)
		return 0;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (!*s || *end || errno || v < 0)
		return -EINVAL;
	*out = v;
	return 0;
}

/* GET .../metrics: the guest's figures now, as one sample (E2B keeps a
 * history sampled every few seconds; see docs/e2b.md). A paused sandbox
 * has none now, nor has a window (start, end) that does not hold now. */
static enum MHD_Result do_metrics(struct e2b_server *e, struct MHD_Connection *conn,
				  struct e2b_request *rq)
{
	json_t *now = service_get_json(e->svc, rq->id);
	const char *state = now ? e2b_state(json_string_value(json_object_get(now, "state"))) : NULL;
	bool found = state != NULL, paused = state && !strcmp(state, "paused");
	int64_t t = (int64_t)time(NULL), from = 0, to = INT64_MAX;
	struct call_result r = { 0 };
	struct proto_sysinfo si;
	struct sandbox *sb;
	char err[600], when[32];
	double pct;
	int st;

	json_decref(now);
	if (!found) {
		snprintf(err, sizeof(err), "sandbox %s not found", rq->id);
		return send_error(conn, 404, err);
	}
	if (unix_arg(conn, "start", &from) || unix_arg(conn, "end", &to))
		return send_error(conn, 400, "start and end are Unix seconds");
	if (paused || t < from || t > to)
		return http_send_json(conn, 200, json_array());
	st = service_get(e->svc, rq->id, &sb, err, sizeof(err));
	if (st)
		return send_error(conn, (unsigned)st, err);
	calls_metrics(e->svc, sb, rq->caller, &si, &pct, &r);
	service_put(e->svc, sb);
	if (r.status != 200)
		return send_error(conn, (unsigned)r.status, r.error);
	iso_time(t, when, sizeof(when));
	/* Bytes, as E2B's; the share of all CPUs to two places. */
	return http_send_json(conn, 200, json_pack("[{s:s, s:I, s:i, s:f, s:I, s:I, s:I, s:I, s:I}]",
		"timestamp", when, "timestampUnix", (json_int_t)t, "cpuCount", (int)si.cpus,
		"cpuUsedPct", (double)(int64_t)(pct * 100 + 0.5) / 100,
		"memUsed", (json_int_t)(si.mem_total - si.mem_available),
		"memTotal", (json_int_t)si.mem_total, "memCache", (json_int_t)si.mem_cached,
		"diskUsed", (json_int_t)(si.disk_total - si.disk_free),
		"diskTotal", (json_int_t)si.disk_total));
}

/* POST .../connect: a paused sandbox resumed (201), a running one as it
 * is (200); a timeout given is its new end. */
static enum MHD_Result do_connect(struct e2b_server *e, struct MHD_Connection *conn,
				  struct e2b_request *rq)
{
	json_t *now = service_get_json(e->svc, rq->id);
	const char *state = now ? e2b_state(json_string_value(json_object_get(now, "state"))) : NULL;
	struct sandbox *sb;
	unsigned timeout_s;
	char err[600], tmpl[API_TEMPLATE_MAX + 1];
	int st = 200;

	if (now)
		snprintf(tmpl, sizeof(tmpl), "%s", json_string_value(json_object_get(now, "template")));
	json_decref(now);
	if (!state) {
		snprintf(err, sizeof(err), "sandbox %s not found", rq->id);
		return send_error(conn, 404, err);
	}
	if (parse_timeout(rq->body.data, rq->body.len, false, &timeout_s, err, sizeof(err)))
		return send_error(conn, 400, err);
	if (!strcmp(state, "paused")) {
		/* A get resumes a paused sandbox, as any call does. */
		st = service_get(e->svc, rq->id, &sb, err, sizeof(err));
		if (st)
			return send_error(conn, (unsigned)st, err);
		service_put(e->svc, sb);
		st = 201;
	}
	if (timeout_s && service_set_timeout(e->svc, rq->id, timeout_s, err, sizeof(err)))
		log_warn("serve: e2b connect: %s", err);
	return http_send_json(conn, (unsigned)st, sandbox_json(e, rq->id, tmpl, rq->key));
}

typedef int (*sandbox_op)(struct e2b_server *e, const char *id, struct sandbox **sb, char *err,
			  size_t errlen);

static int begin_pause(struct e2b_server *e, const char *id, struct sandbox **sb, char *err,
		       size_t errlen)
{
	return service_begin_pause(e->svc, id, sb, err, errlen);
}

static int delete_sandbox(struct e2b_server *e, const char *id, struct sandbox **sb, char *err,
		  size_t errlen)
{
	(void)sb;
	return service_delete(e->svc, id, err, errlen);
}

/* op on sandbox id once no call holds it: at the first "busy" its
 * commands are told to end, then its calls get E2B_BUSY_WAIT_MS. Busy
 * still is 503, not E2B's 409 (which the SDK reads as "already paused"). */
static int when_idle(struct e2b_server *e, const char *id, sandbox_op op, struct sandbox **sb,
		     char *err, size_t errlen)
{
	int st = 0;

	for (int i = 0; i < E2B_BUSY_WAIT_MS / 100; i++) {
		st = op(e, id, sb, err, errlen);
		if (st != 409 || !strstr(err, "busy"))
			return st;
		if (!i)
			service_end_commands(e->svc, id);
		poll(NULL, 0, 100);
	}
	return 503;
}

static enum MHD_Result do_pause(struct e2b_server *e, struct MHD_Connection *conn,
				struct e2b_request *rq)
{
	json_t *now = service_get_json(e->svc, rq->id);
	const char *state = now ? json_string_value(json_object_get(now, "state")) : NULL;
	struct sandbox *sb = NULL;
	char err[600];
	int st;

	/* Already paused is E2B's 409 (the SDK's pause() then says false). */
	st = !state ? 404 : !strcmp(state, "paused") ? 409 : 0;
	json_decref(now);
	if (st)
		return send_error(conn, (unsigned)st, st == 404 ? "sandbox not found" :
				  "the sandbox is already paused");
	/* Its commands end first: a vsock stream does not outlive the VM's
	 * snapshot (E2B's processes would live on). */
	st = when_idle(e, rq->id, begin_pause, &sb, err, sizeof(err));
	if (!st)
		st = live_pause(e->svc, sb, rq->caller, err, sizeof(err));
	if (sb)
		service_put(e->svc, sb);
	return st ? send_error(conn, (unsigned)st, err) : http_send_empty(conn, 204);
}

static enum MHD_Result dispatch(struct e2b_server *e, struct MHD_Connection *conn,
				struct e2b_request *rq)
{
	char err[600], tmpl[API_TEMPLATE_MAX + 1];
	struct api_create create;
	struct sandbox *sb;
	unsigned timeout_s;
	json_t *j, *now;
	int st;

	switch (rq->route) {
	case E2B_CREATE:
		if (parse_create(rq->body.data, rq->body.len, &create, tmpl, sizeof(tmpl), err,
				 sizeof(err)))
			return send_error(conn, 400, err);
		st = service_create(e->svc, &create, &sb, err, sizeof(err));
		api_create_free(&create);
		if (st != 201)
			return send_error(conn, (unsigned)st, err);
		j = sandbox_json(e, sb->id, tmpl, rq->key);
		service_put(e->svc, sb);
		return http_send_json(conn, 201, j);
	case E2B_LIST:
		return do_list(e, conn, rq);
	case E2B_GET:
		now = service_get_json(e->svc, rq->id);
		j = now ? listed(e, now, rq->key, true) : NULL;
		json_decref(now);
		if (!j) {
			snprintf(err, sizeof(err), "sandbox %s not found", rq->id);
			return send_error(conn, 404, err);
		}
		return http_send_json(conn, 200, j);
	case E2B_KILL:
		/* Its commands end with it, as in E2B (serve's own delete is
		 * refused while they run). */
		st = when_idle(e, rq->id, delete_sandbox, NULL, err, sizeof(err));
		return st ? send_error(conn, (unsigned)st, err) : http_send_empty(conn, 204);
	case E2B_TIMEOUT:
		if (parse_timeout(rq->body.data, rq->body.len, true, &timeout_s, err, sizeof(err)))
			return send_error(conn, 400, err);
		st = service_set_timeout(e->svc, rq->id, timeout_s, err, sizeof(err));
		return st ? send_error(conn, (unsigned)st, err) : http_send_empty(conn, 204);
	case E2B_PAUSE:
		return do_pause(e, conn, rq);
	case E2B_CONNECT:
		return do_connect(e, conn, rq);
	case E2B_METRICS:
		return do_metrics(e, conn, rq);
	default:
		return send_error(conn, 500, "internal: unrouted");
	}
}

static const char *header(struct MHD_Connection *conn, const char *name)
{
	return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
}

/* The request target as the client sent it (MHD's url is unescaped and
 * has no query), which a published port passes on as it came. MHD
 * parses a request in its connection's thread (one per connection) and
 * calls on_uri, then on_request for it, with no other request between:
 * a thread's own copy needs no allocation that a request MHD refuses
 * half-way (headers too large) would leak. "" when longer. */
static _Thread_local char request_target[E2B_MAX_TARGET + 1];

/* Checks made before any body is read: the length's framing, the key or
 * token, the route. */
static enum MHD_Result first_call(struct e2b_server *e, struct MHD_Connection *conn,
				  const char *url, const char *method, void **con_cls)
{
	struct e2b_request *rq = calloc(1, sizeof(*rq));
	const char *sandbox = header(conn, "E2b-Sandbox-Id");
	char msg[200], host_id[PORT_ID_MAX + 1];
	unsigned port;
	int st;

	if (!rq)
		return MHD_NO;
	*con_cls = rq;
	rq->answered = true;           /* until every check below passed */
	http_guard_mark(&e->guard, conn, false);
	if (http_ambiguous_length(conn)) {
		struct MHD_Response *resp = http_json_response(json_pack(
			"{s:i, s:s}", "code", 400, "message", "two Content-Length headers, or one "
			"with Transfer-Encoding: the body's length is ambiguous"));

		if (resp)
			MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
		return http_send(conn, 400, resp);
	}
	/* A sandbox's own host name: a published port, or envd's (the SDK
	 * without E2B_SANDBOX_URL calls envd so). */
	if (port_parse_host(header(conn, MHD_HTTP_HEADER_HOST), e->domain, &port, host_id)) {
		if (port != E2B_ENVD_PORT) {
			if (!request_target[0])
				return send_error(conn, 414, "the request target is longer than "
						  "mayfly passes to a published port (8 KiB)");
			rq->answered = false;
			return port_begin(e, conn, method, request_target, port, host_id, &rq->port);
		}
		if (!sandbox)
			sandbox = host_id;
	}
	if (sandbox) {
		/* envd's requests: its access token is an API key (create gave it). */
		rq->key = header(conn, "X-Access-Token");
		rq->caller = e->tokens ? tokens_find(e->tokens, rq->key) : NULL;
		if (!rq->caller)
			return send_error(conn, 401, "missing or wrong X-Access-Token");
		if (!take_id(sandbox, strlen(sandbox), rq->id))
			return send_error(conn, 400, "a malformed E2b-Sandbox-Id");
		rq->answered = false;
		return envd_begin(e, conn, url, method, rq->id, rq->caller, &rq->envd);
	}
	/* The key before the route: without one, no route is told apart. */
	rq->key = header(conn, "X-API-KEY");
	rq->caller = e->tokens ? tokens_find(e->tokens, rq->key) : NULL;
	if (!rq->caller)
		return send_error(conn, 401, "missing or wrong API key (X-API-KEY)");
	st = route(method, url, &rq->route, rq->id);
	if (st) {
		snprintf(msg, sizeof(msg), st == 404 ? "no route %.100s" : "%s is not allowed on %.100s",
			 st == 404 ? url : method, url);
		return send_error(conn, (unsigned)st, msg);
	}
	rq->body.max = E2B_MAX_JSON_BODY;
	rq->answered = false;
	return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *data,
				  size_t *size, void **con_cls)
{
	struct e2b_server *e = cls;
	struct e2b_request *rq = *con_cls;

	(void)version;
	if (!rq)
		return first_call(e, conn, url, method, con_cls);
	if (rq->answered) {
		*size = 0;
		return MHD_YES;
	}
	if (rq->port)
		return port_body(e, conn, rq->port, data, size);
	if (rq->envd)
		return envd_body(e, conn, rq->envd, data, size);
	if (*size) {
		if (http_body_add(&rq->body, data, *size))
			return MHD_NO;
		*size = 0;
		return MHD_YES;
	}
	if (rq->body.too_large)
		return send_error(conn, 413, "the body is too large");
	return dispatch(e, conn, rq);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct e2b_server *e = cls;
	struct e2b_request *rq = *con_cls;

	(void)toe;
	http_guard_mark(&e->guard, conn, true);
	if (!rq)
		return;
	if (rq->envd)
		envd_end(e, rq->envd);
	port_end(rq->port);
	http_body_free(&rq->body);
	free(rq);
	*con_cls = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	http_guard_notify(&((struct e2b_server *)cls)->guard, conn, socket_context, toe);
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	size_t len = strlen(uri);

	(void)cls;
	(void)conn;
	if (len > E2B_MAX_TARGET)
		len = 0;
	memcpy(request_target, uri, len);
	request_target[len] = '\0';
	return NULL;
}

/* The key traffic tokens come from (port_traffic_token): made once, kept
 * in the state directory, so a token holds across restarts. */
static int traffic_key(struct e2b_server *e)
{
	char path[CONFIG_PATH_MAX + 32];
	int fd, rc = 0;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/e2b-traffic.key", e->svc->cfg.state);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0) {
		n = read(fd, e->traffic_key, sizeof(e->traffic_key));
		close(fd);
		if (n == (ssize_t)sizeof(e->traffic_key))
			return 0;
		log_say("serve: %s is not a %zu-byte key: remove it to make a new one", path,
			sizeof(e->traffic_key));
		return -EINVAL;
	}
	if (errno != ENOENT ||
	    getrandom(e->traffic_key, sizeof(e->traffic_key), 0) != (ssize_t)sizeof(e->traffic_key))
		rc = -errno;
	else
		rc = atomic_file_write(path, e->traffic_key, sizeof(e->traffic_key));
	if (rc)
		log_say("serve: cannot make %s: %s", path, strerror(-rc));
	return rc;
}

/* The commands kept without a client and the watchers: ended, freed. */
static void drop_streams(struct e2b_server *e)
{
	e2b_keeper_stop(e->keeper);
	e2b_watchers_free(e->watchers);
	e->keeper = NULL;
	e->watchers = NULL;
}

int e2b_start(struct e2b_server *e)
{
	if (traffic_key(e))
		return -EIO;
	e->keeper = e2b_keeper_start();
	e->watchers = e2b_watchers_new();
	if (!e->keeper || !e->watchers) {
		drop_streams(e);
		return -ENOMEM;
	}
	e->ws_stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (e->ws_stop_fd < 0) {
		int rc = -errno;

		drop_streams(e);
		return rc;
	}
	thread_crew_init(&e->ws);
	e->daemon = http_daemon_start(e->tls ? -1 : e->listen_fd, &e->guard, e->head_timeout_ms,
				      E2B_MAX_CONNECTIONS, MHD_ALLOW_UPGRADE, on_uri, on_request,
				      on_completed, on_connection, e);
	if (e->daemon && e->tls) {
		e->tls->handshake_ms = e->head_timeout_ms ? e->head_timeout_ms : HTTP_GUARD_TIMEOUT_MS;
		e->tls->max_conns = E2B_MAX_CONNECTIONS;
		if (tls_front_start(e->tls, e->listen_fd, e->daemon)) {
			MHD_stop_daemon(e->daemon);
			e->daemon = NULL;
			http_guard_stop(&e->guard);
		} else {
			e->listen_fd = -1;     /* the front's */
		}
	}
	if (!e->daemon) {
		close(e->ws_stop_fd);
		e->ws_stop_fd = -1;
		drop_streams(e);
		return -EIO;
	}
	return 0;
}

void e2b_quiesce(struct e2b_server *e)
{
	http_daemon_quiesce(e->daemon, &e->listen_fd);
}

void e2b_stop(struct e2b_server *e)
{
	uint64_t one = 1;
	bool started = e->daemon != NULL;

	/* TLS's relays and the WebSockets first: MHD's stop waits for their
	 * connections. */
	if (e->tls)
		tls_front_stop(e->tls);
	if (started) {
		(void)!write(e->ws_stop_fd, &one, sizeof(one));
		thread_crew_wait(&e->ws);
	}
	http_daemon_stop(&e->daemon, &e->guard, &e->listen_fd);
	/* After MHD: the streams it ended went to the keeper, which ends them. */
	drop_streams(e);
	if (started) {
		close(e->ws_stop_fd);
		thread_crew_destroy(&e->ws);
	}
}
