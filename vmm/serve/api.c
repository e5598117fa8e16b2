/* api.c - mayfly serve's HTTP API as pure functions: which route a request is, and its JSON body checked into a typed request. */
#include "serve/api.h"
#include "lib/errmsg.h"
#include "lib/base64.h"
#include "vm/config.h"
#include "net/rules.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const names[API_NR_ROUTES] = {
	[API_HEALTH] = "health", [API_METRICS] = "metrics", [API_CREATE] = "create",
	[API_LIST] = "list", [API_GET] = "get", [API_DELETE] = "delete", [API_EXEC] = "exec",
	[API_SIGNAL] = "signal", [API_FILE_PUT] = "file_put", [API_FILE_GET] = "file_get",
	[API_FILE_REMOVE] = "file_remove", [API_FILE_LIST] = "file_list",
	[API_FILE_STAT] = "file_stat", [API_MKDIR] = "mkdir", [API_PAUSE] = "pause",
	[API_RESUME] = "resume", [API_FORK] = "fork",
};

const char *api_route_name(enum api_route r)
{
	return r < API_NR_ROUTES ? names[r] : "unknown";
}

bool api_wants_json(enum api_route r)
{
	return r == API_CREATE || r == API_EXEC || r == API_SIGNAL || r == API_MKDIR ||
	       r == API_FORK;
}

/* A path's shape: its segments after /sandboxes/{id}, each with its
 * methods. "" is the sandbox itself. */
struct shape {
	const char *tail;
	const char *method[3];
	enum api_route route[3];
	const char *allow;
};

static const struct shape sandbox_shapes[] = {
	{ "", { "GET", "DELETE" }, { API_GET, API_DELETE }, "GET, DELETE" },
	{ "/exec", { "POST" }, { API_EXEC }, "POST" },
	{ "/files", { "GET", "PUT", "DELETE" }, { API_FILE_GET, API_FILE_PUT, API_FILE_REMOVE },
	  "GET, PUT, DELETE" },
	{ "/files/list", { "GET" }, { API_FILE_LIST }, "GET" },
	{ "/files/stat", { "GET" }, { API_FILE_STAT }, "GET" },
	{ "/files/mkdir", { "POST" }, { API_MKDIR }, "POST" },
	{ "/pause", { "POST" }, { API_PAUSE }, "POST" },
	{ "/resume", { "POST" }, { API_RESUME }, "POST" },
	{ "/fork", { "POST" }, { API_FORK }, "POST" },
};

static int pick(const struct shape *s, const char *method, struct api_match *m, const char **allow)
{
	for (int i = 0; i < 3 && s->method[i]; i++)
		if (!strcmp(method, s->method[i])) {
			m->route = s->route[i];
			return 0;
		}
	*allow = s->allow;
	return 405;
}

/* /sandboxes/{id}/exec/{n}/signal */
static int signal_route(const char *rest, const char *method, struct api_match *m,
			const char **allow)
{
	char *end;
	unsigned long long n;

	if (rest[0] < '1' || rest[0] > '9')
		return 404;
	errno = 0;
	n = strtoull(rest, &end, 10);
	if (errno || strcmp(end, "/signal"))
		return 404;
	m->exec_id = n;
	if (strcmp(method, "POST")) {
		*allow = "POST";
		return 405;
	}
	m->route = API_SIGNAL;
	return 0;
}

int api_route(const char *method, const char *url, struct api_match *m, const char **allow)
{
	static const char prefix[] = "/sandboxes";
	const char *id, *slash;
	size_t idlen;

	memset(m, 0, sizeof(*m));
	*allow = NULL;
	if (!strcmp(url, "/health") || !strcmp(url, "/metrics")) {
		m->route = url[1] == 'h' ? API_HEALTH : API_METRICS;
		*allow = "GET";
		return strcmp(method, "GET") ? 405 : 0;
	}
	if (strncmp(url, prefix, sizeof(prefix) - 1))
		return 404;
	url += sizeof(prefix) - 1;
	if (!*url || !strcmp(url, "/")) {
		*allow = "GET, POST";
		if (!strcmp(method, "GET"))
			m->route = API_LIST;
		else if (!strcmp(method, "POST"))
			m->route = API_CREATE;
		else
			return 405;
		return 0;
	}
	if (*url != '/')
		return 404;
	id = url + 1;
	slash = strchr(id, '/');
	idlen = slash ? (size_t)(slash - id) : strlen(id);
	if (!idlen || idlen > API_ID_MAX)
		return 404;
	memcpy(m->id, id, idlen);
	m->id[idlen] = '\0';
	if (!config_id_valid(m->id))
		return 404;
	url = id + idlen;
	if (!strncmp(url, "/exec/", 6))
		return signal_route(url + 6, method, m, allow);
	for (size_t i = 0; i < sizeof(sandbox_shapes) / sizeof(sandbox_shapes[0]); i++)
		if (!strcmp(url, sandbox_shapes[i].tail))
			return pick(&sandbox_shapes[i], method, m, allow);
	return 404;
}


/* The body as an object whose keys are all in `known` (NULL-terminated). */
static json_t *object(const char *body, size_t len, const char *const *known, char *err,
		      size_t errlen)
{
	json_error_t je;
	json_t *root;
	const char *key;
	json_t *v;

	if (!len) {
		root = json_object();
		if (!root)
			errmsg_invalid(err, errlen, "out of memory");
		return root;
	}
	root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
	if (!root) {
		errmsg_invalid(err, errlen, "malformed JSON at byte %d: %s", je.position, je.text);
		return NULL;
	}
	if (!json_is_object(root)) {
		errmsg_invalid(err, errlen, "the body must be a JSON object");
		goto out_free;
	}
	json_object_foreach(root, key, v) {
		size_t i;

		for (i = 0; known[i] && strcmp(key, known[i]); i++)
			;
		if (!known[i]) {
			errmsg_invalid(err, errlen, "unknown member \"%.64s\"", key);
			goto out_free;
		}
	}
	return root;
out_free:
	json_decref(root);
	return NULL;
}

static int whole(json_t *root, const char *key, uint64_t min, uint64_t max, uint64_t *out,
		 char *err, size_t errlen)
{
	json_t *v = json_object_get(root, key);

	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    (uint64_t)json_integer_value(v) < min || (uint64_t)json_integer_value(v) > max)
		return errmsg_invalid(err, errlen, "\"%s\" must be a whole number from %llu to %llu", key,
			   (unsigned long long)min, (unsigned long long)max);
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

/* {"K": "V", ...} into "K=V" strings (malloc'd array of malloc'd strings). */
/* "metadata": a client's labels, shown back and kept across restarts. */
static int metadata_object(json_t *root, json_t **out, char *err, size_t errlen)
{
	json_t *obj = json_object_get(root, "metadata"), *v;
	const char *key;

	*out = NULL;
	if (!obj)
		return 0;
	if (!json_is_object(obj) || json_object_size(obj) > API_MAX_METADATA)
		return errmsg_invalid(err, errlen, "\"metadata\" must be an object of at most %d "
		    "strings", API_MAX_METADATA);
	json_object_foreach(obj, key, v) {
		if (!*key || strlen(key) > API_MAX_META_KEY || !json_is_string(v) ||
		    json_string_length(v) > API_MAX_META_VALUE ||
		    strlen(json_string_value(v)) != json_string_length(v))
			return errmsg_invalid(err, errlen, "\"metadata\": \"%.64s\" needs a key of 1-%d "
			    "bytes and a string value of at most %d (no NUL)", key, API_MAX_META_KEY,
			    API_MAX_META_VALUE);
	}
	*out = obj;
	return 0;
}

static int env_object(json_t *root, char ***env, int *nenv, char *err, size_t errlen)
{
	json_t *obj = json_object_get(root, "env"), *v;
	const char *key;
	char **out;
	int n = 0;

	*env = NULL;
	*nenv = 0;
	if (!obj)
		return 0;
	if (!json_is_object(obj))
		return errmsg_invalid(err, errlen, "\"env\" must be an object of strings");
	if (json_object_size(obj) > API_MAX_ARGS)
		return errmsg_invalid(err, errlen, "\"env\" has more than %d members", API_MAX_ARGS);
	out = calloc(json_object_size(obj) + 1, sizeof(*out));
	if (!out)
		return errmsg_invalid(err, errlen, "out of memory");
	json_object_foreach(obj, key, v) {
		const char *val = json_string_value(v);

		if (!*key || strchr(key, '=') || !json_is_string(v) ||
		    strlen(val) != json_string_length(v)) {
			errmsg_invalid(err, errlen, "\"env\": \"%.64s\" needs a string value and a key without "
			    "'=' (no NUL in either)", key);
			goto out_free;
		}
		if (asprintf(&out[n], "%s=%s", key, val) < 0) {
			out[n] = NULL;
			errmsg_invalid(err, errlen, "out of memory");
			goto out_free;
		}
		n++;
	}
	*env = out;
	*nenv = n;
	return 0;
out_free:
	for (int i = 0; i < n; i++)
		free(out[i]);
	free(out);
	return -EINVAL;
}

/* An array of n malloc'd strings, and the strings. */
static void strings_free(char **v, int n)
{
	for (int i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

void api_net_free(struct api_net *n)
{
	strings_free(n->allow, n->nallow);
	strings_free(n->resolve, n->nresolve);
	memset(n, 0, sizeof(*n));
}

static int strings_copy(char ***dst, int *ndst, char *const *src, int n)
{
	*dst = NULL;
	*ndst = 0;
	if (!n)
		return 0;
	*dst = calloc((size_t)n, sizeof(**dst));
	if (!*dst)
		return -ENOMEM;
	for (; *ndst < n; (*ndst)++)
		if (!((*dst)[*ndst] = strdup(src[*ndst])))
			return -ENOMEM;
	return 0;
}

int api_net_copy(struct api_net *dst, const struct api_net *src)
{
	memset(dst, 0, sizeof(*dst));
	if (strings_copy(&dst->allow, &dst->nallow, src->allow, src->nallow) ||
	    strings_copy(&dst->resolve, &dst->nresolve, src->resolve, src->nresolve)) {
		api_net_free(dst);
		return -ENOMEM;
	}
	return 0;
}

/* "key": an array of at most max strings, each added to p by add (the
 * command line's parser): a bad one is the parser's line. */
static int rule_array(json_t *root, const char *key, unsigned max, struct net_policy *p,
		      int (*add)(struct net_policy *, const char *, char *, size_t),
		      char ***out, int *nout, char *err, size_t errlen)
{
	json_t *arr = json_object_get(root, key), *v;
	size_t i;

	if (!arr)
		return 0;
	if (!json_is_array(arr))
		return errmsg_invalid(err, errlen, "\"%s\" must be an array of strings", key);
	if (json_array_size(arr) > max)
		return errmsg_invalid(err, errlen, "\"%s\" has more than %u members", key, max);
	*out = calloc(json_array_size(arr) + 1, sizeof(**out));
	if (!*out)
		return errmsg_invalid(err, errlen, "out of memory");
	json_array_foreach(arr, i, v) {
		char line[300];

		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
			return errmsg_invalid(err, errlen, "\"%s\"[%zu] must be a string (no NUL)", key,
					      i);
		if (add(p, json_string_value(v), line, sizeof(line)))
			return errmsg_invalid(err, errlen, "\"%s\"[%zu]: %s", key, i, line);
		if (!((*out)[*nout] = strdup(json_string_value(v))))
			return errmsg_invalid(err, errlen, "out of memory");
		(*nout)++;
	}
	return 0;
}

/* allow_net and resolve, checked as run's --allow-net and --resolve are. */
static int net_members(json_t *root, struct api_net *n, char *err, size_t errlen)
{
	struct net_policy *p = calloc(1, sizeof(*p));   /* large: every rule's text */
	int rc;

	if (!p)
		return errmsg_invalid(err, errlen, "out of memory");
	rc = rule_array(root, "allow_net", NET_MAX_RULES, p, net_policy_add_rule, &n->allow,
			&n->nallow, err, errlen);
	if (!rc)
		rc = rule_array(root, "resolve", NET_MAX_RESOLVE, p, net_policy_add_resolve,
				&n->resolve, &n->nresolve, err, errlen);
	if (!rc && p->nr_resolves && !p->nr_rules)
		rc = errmsg_invalid(err, errlen, "\"resolve\" goes with \"allow_net\"");
	free(p);
	if (rc)
		api_net_free(n);
	return rc;
}

int api_parse_create(const char *body, size_t len, struct api_create *c, char *err, size_t errlen)
{
	static const char *const known[] = { "template", "cpus", "mem", "disk_quota", "env", "ttl",
					     "idle_timeout", "allow_net", "resolve", "metadata", NULL };
	json_t *root = object(body, len, known, err, errlen), *t;
	uint64_t n;

	memset(c, 0, sizeof(*c));
	if (!root)
		return -EINVAL;
	t = json_object_get(root, "template");
	if (t && (!json_is_string(t) || json_string_length(t) > API_TEMPLATE_MAX ||
		  !json_string_length(t))) {
		errmsg_invalid(err, errlen, "\"template\" must be a template's name or id (1-%d bytes)",
		    API_TEMPLATE_MAX);
		goto out_free;
	}
	if (t)
		snprintf(c->template, sizeof(c->template), "%s", json_string_value(t));
	n = 0;
	if (whole(root, "cpus", 1, CONFIG_MAX_CPUS, &n, err, errlen))
		goto out_free;
	c->cpus = (unsigned)n;
	if (whole(root, "mem", 1, CONFIG_MAX_MEM_MIB, &c->mem_mib, err, errlen) ||
	    whole(root, "disk_quota", 4096, 1ULL << 50, &c->disk_quota, err, errlen))
		goto out_free;
	n = 0;
	if (whole(root, "ttl", 1, API_MAX_TTL_S, &n, err, errlen))
		goto out_free;
	c->ttl_s = (unsigned)n;
	n = 0;
	if (whole(root, "idle_timeout", 1, API_MAX_TTL_S, &n, err, errlen))
		goto out_free;
	c->idle_s = (unsigned)n;
	if (env_object(root, &c->env, &c->nenv, err, errlen))
		goto out_free;
	if (metadata_object(root, &c->metadata, err, errlen) ||
	    net_members(root, &c->net, err, errlen))
		goto out_env;
	c->owner = root;
	return 0;
out_env:
	strings_free(c->env, c->nenv);
	c->env = NULL;
	c->nenv = 0;
out_free:
	json_decref(root);
	return -EINVAL;
}

void api_create_free(struct api_create *c)
{
	strings_free(c->env, c->nenv);
	api_net_free(&c->net);
	json_decref(c->owner);
	memset(c, 0, sizeof(*c));
}

static int stdin_member(json_t *root, struct api_exec *e, char *err, size_t errlen)
{
	json_t *s = json_object_get(root, "stdin"), *b = json_object_get(root, "stdin_b64");

	if (s && b)
		return errmsg_invalid(err, errlen, "\"stdin\" and \"stdin_b64\" exclude each other");
	if (s) {
		if (!json_is_string(s))
			return errmsg_invalid(err, errlen, "\"stdin\" must be a string");
		e->stdin_len = json_string_length(s);
		e->stdin_data = malloc(e->stdin_len + 1);
		if (!e->stdin_data)
			return errmsg_invalid(err, errlen, "out of memory");
		memcpy(e->stdin_data, json_string_value(s), e->stdin_len);
	}
	if (b) {
		long got;

		if (!json_is_string(b))
			return errmsg_invalid(err, errlen, "\"stdin_b64\" must be a base64 string");
		e->stdin_data = malloc(json_string_length(b) / 4 * 3 + 1);
		if (!e->stdin_data)
			return errmsg_invalid(err, errlen, "out of memory");
		got = base64_decode(json_string_value(b), json_string_length(b), e->stdin_data);
		if (got < 0)
			return errmsg_invalid(err, errlen, "\"stdin_b64\" is not valid base64");
		e->stdin_len = (size_t)got;
	}
	return 0;
}

int api_parse_exec(const char *body, size_t len, struct api_exec *e, char *err, size_t errlen)
{
	static const char *const known[] = { "argv", "env", "cwd", "stdin", "stdin_b64", "timeout",
					     NULL };
	json_t *root = object(body, len, known, err, errlen), *argv, *cwd;
	uint64_t n = 0;
	size_t i;

	memset(e, 0, sizeof(*e));
	if (!root)
		return -EINVAL;
	e->owner = root;
	argv = json_object_get(root, "argv");
	if (!json_is_array(argv) || !json_array_size(argv) || json_array_size(argv) > API_MAX_ARGS) {
		errmsg_invalid(err, errlen, "\"argv\" must be an array of 1-%d strings", API_MAX_ARGS);
		goto out_free;
	}
	e->argv = calloc(json_array_size(argv) + 1, sizeof(*e->argv));
	if (!e->argv) {
		errmsg_invalid(err, errlen, "out of memory");
		goto out_free;
	}
	for (i = 0; i < json_array_size(argv); i++) {
		json_t *a = json_array_get(argv, i);

		if (!json_is_string(a) || strlen(json_string_value(a)) != json_string_length(a)) {
			errmsg_invalid(err, errlen, "\"argv\"[%zu] must be a string without NUL", i);
			goto out_free;
		}
		e->argv[i] = json_string_value(a);
	}
	e->argc = (int)i;
	if (!json_string_length(json_array_get(argv, 0))) {
		errmsg_invalid(err, errlen, "\"argv\"[0] must not be empty");
		goto out_free;
	}
	cwd = json_object_get(root, "cwd");
	if (cwd && (!json_is_string(cwd) || api_check_path(json_string_value(cwd), err, errlen) ||
		    strlen(json_string_value(cwd)) != json_string_length(cwd))) {
		errmsg_invalid(err, errlen, "\"cwd\" must be an absolute guest path");
		goto out_free;
	}
	e->cwd = cwd ? json_string_value(cwd) : NULL;
	if (whole(root, "timeout", 1, API_MAX_TTL_S, &n, err, errlen))
		goto out_free;
	e->timeout_s = (unsigned)n;
	if (stdin_member(root, e, err, errlen) || env_object(root, &e->env, &e->nenv, err, errlen))
		goto out_free;
	return 0;
out_free:
	api_exec_free(e);
	return -EINVAL;
}

void api_exec_free(struct api_exec *e)
{
	strings_free(e->env, e->nenv);
	free(e->argv);
	free(e->stdin_data);
	json_decref(e->owner);
	memset(e, 0, sizeof(*e));
}

int api_parse_signal(const char *body, size_t len, int *signo, char *err, size_t errlen)
{
	static const char *const known[] = { "signal", NULL };
	static const struct { const char *name; int no; } sigs[] = {
		{ "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT }, { "KILL", SIGKILL },
		{ "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "TERM", SIGTERM }, { "CONT", SIGCONT },
		{ "STOP", SIGSTOP },
	};
	json_t *root = object(body, len, known, err, errlen), *s;
	int rc = -EINVAL;

	if (!root)
		return -EINVAL;
	s = json_object_get(root, "signal");
	if (json_is_integer(s) && json_integer_value(s) >= 1 && json_integer_value(s) <= 64) {
		*signo = (int)json_integer_value(s);
		rc = 0;
	} else if (json_is_string(s)) {
		const char *name = json_string_value(s);

		if (!strncasecmp(name, "SIG", 3))
			name += 3;
		for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
			if (!strcasecmp(name, sigs[i].name)) {
				*signo = sigs[i].no;
				rc = 0;
			}
	}
	if (rc)
		errmsg_invalid(err, errlen, "\"signal\" must be 1-64 or one of HUP, INT, QUIT, KILL, USR1, "
		    "USR2, TERM, CONT, STOP");
	json_decref(root);
	return rc;
}

int api_parse_mkdir(const char *body, size_t len, char *path, size_t pathcap, bool *parents,
		    char *err, size_t errlen)
{
	static const char *const known[] = { "path", "parents", NULL };
	json_t *root = object(body, len, known, err, errlen), *p, *par;
	int rc = -EINVAL;

	if (!root)
		return -EINVAL;
	p = json_object_get(root, "path");
	par = json_object_get(root, "parents");
	if (!json_is_string(p) || strlen(json_string_value(p)) != json_string_length(p) ||
	    json_string_length(p) >= pathcap)
		errmsg_invalid(err, errlen, "\"path\" must be an absolute guest path");
	else if (par && !json_is_boolean(par))
		errmsg_invalid(err, errlen, "\"parents\" must be true or false");
	else if (!api_check_path(json_string_value(p), err, errlen)) {
		snprintf(path, pathcap, "%s", json_string_value(p));
		*parents = par && json_is_true(par);
		rc = 0;
	}
	json_decref(root);
	return rc;
}

int api_parse_fork(const char *body, size_t len, unsigned max, unsigned *count, char *err,
		   size_t errlen)
{
	static const char *const known[] = { "count", NULL };
	json_t *root = object(body, len, known, err, errlen);
	uint64_t n = 1;
	int rc;

	if (!root)
		return -EINVAL;
	rc = whole(root, "count", 1, max, &n, err, errlen);
	json_decref(root);
	*count = (unsigned)n;
	return rc;
}

int api_check_path(const char *path, char *err, size_t errlen)
{
	if (!path || !*path)
		return errmsg_invalid(err, errlen, "the query parameter path=/absolute/guest/path is required");
	if (path[0] != '/' || strlen(path) > API_MAX_PATH)
		return errmsg_invalid(err, errlen, "path must be absolute and at most %d bytes", API_MAX_PATH);
	return 0;
}
