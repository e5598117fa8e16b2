/* oci.c - what a container asks for, from its OCI bundle's config.json and an exec's process spec (pure: JSON in, checked data out). */
#include "shim/oci.h"
#include "lib/errmsg.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OCI_STRING_MAX 65536   /* one argument, variable or path */
#define OCI_JSON_DEPTH 64

/* A copy of the JSON string at j: a string, not empty unless may_be_empty,
 * without a NUL inside, at most OCI_STRING_MAX bytes. NULL with err set. */
static char *take_string(json_t *j, const char *what, bool may_be_empty, char *err, size_t errlen)
{
	const char *s = json_string_value(j);
	size_t n = json_string_length(j);
	char *copy;

	if (!json_is_string(j)) {
		errmsg_invalid(err, errlen, "%s is not a string", what);
		return NULL;
	}
	if ((!n && !may_be_empty) || n > OCI_STRING_MAX || memchr(s, '\0', n)) {
		errmsg_invalid(err, errlen, "%s is empty, too long or holds a NUL", what);
		return NULL;
	}
	copy = strndup(s, n);
	if (!copy)
		errmsg_invalid(err, errlen, "out of memory");
	return copy;
}

/* A NULL-terminated copy of a JSON array of strings (max entries); each
 * checked by `check` when given. 0 or -EINVAL with err. */
static int take_strings(json_t *arr, const char *what, int max, char ***out, int *n,
			bool (*check)(const char *), char *err, size_t errlen)
{
	size_t count = json_array_size(arr), i;
	char **v;

	*out = NULL;
	*n = 0;
	if (!json_is_array(arr))
		return errmsg_invalid(err, errlen, "%s is not an array of strings", what);
	if (count > (size_t)max)
		return errmsg_invalid(err, errlen, "%s has %zu entries, at most %d", what, count, max);
	v = calloc(count + 1, sizeof(*v));
	if (!v)
		return errmsg_invalid(err, errlen, "out of memory");
	for (i = 0; i < count; i++) {
		v[i] = take_string(json_array_get(arr, i), what, false, err, errlen);
		if (!v[i] || (check && !check(v[i]))) {
			if (v[i])
				errmsg_invalid(err, errlen, "%s entry '%.60s' is malformed", what, v[i]);
			for (size_t k = 0; k <= i; k++)
				free(v[k]);
			free(v);
			return -EINVAL;
		}
	}
	*out = v;
	*n = (int)count;
	return 0;
}

static bool env_entry_ok(const char *s)
{
	const char *eq = strchr(s, '=');

	return eq && eq != s;
}

/* A JSON integer in [0, max]. */
static int take_uint(json_t *j, const char *what, uint64_t max, uint64_t *out, char *err,
		     size_t errlen)
{
	json_int_t v;

	if (!json_is_integer(j))
		return errmsg_invalid(err, errlen, "%s is not an integer", what);
	v = json_integer_value(j);
	if (v < 0 || (uint64_t)v > max)
		return errmsg_invalid(err, errlen, "%s %lld is out of range", what, (long long)v);
	*out = (uint64_t)v;
	return 0;
}

/* "user": {"uid", "gid", "additionalGids"}. */
static int take_user(json_t *user, struct oci_process *p, char *err, size_t errlen)
{
	json_t *groups = json_object_get(user, "additionalGids");
	uint64_t v = 0;

	if (!json_is_object(user))
		return errmsg_invalid(err, errlen, "process.user is not an object");
	if (json_object_get(user, "uid") &&
	    take_uint(json_object_get(user, "uid"), "process.user.uid", UINT32_MAX - 1, &v, err, errlen))
		return -EINVAL;
	p->uid = (uint32_t)v;
	v = 0;
	if (json_object_get(user, "gid") &&
	    take_uint(json_object_get(user, "gid"), "process.user.gid", UINT32_MAX - 1, &v, err, errlen))
		return -EINVAL;
	p->gid = (uint32_t)v;
	if (json_object_get(user, "username"))
		return errmsg_invalid(err, errlen, "process.user.username is not supported: give uid and gid");
	if (!groups || json_is_null(groups))
		return 0;
	if (!json_is_array(groups) || json_array_size(groups) > OCI_MAX_GROUPS)
		return errmsg_invalid(err, errlen, "process.user.additionalGids: an array of at most %d",
				      OCI_MAX_GROUPS);
	for (size_t i = 0; i < json_array_size(groups); i++) {
		if (take_uint(json_array_get(groups, i), "process.user.additionalGids",
			      UINT32_MAX - 1, &v, err, errlen))
			return -EINVAL;
		p->groups[p->ngroups++] = (uint32_t)v;
	}
	return 0;
}

/* An OCI "process" object. */
static int take_process(json_t *j, struct oci_process *p, char *err, size_t errlen)
{
	json_t *v;

	memset(p, 0, sizeof(*p));
	if (!json_is_object(j))
		return errmsg_invalid(err, errlen, "process is not an object");
	v = json_object_get(j, "args");
	if (!v)
		return errmsg_invalid(err, errlen, "process.args is missing");
	if (take_strings(v, "process.args", OCI_MAX_ARGS, &p->argv, &p->argc, NULL, err, errlen))
		goto err;
	if (p->argc < 1) {
		errmsg_invalid(err, errlen, "process.args is empty: no program to run");
		goto err;
	}
	v = json_object_get(j, "env");
	if (v && !json_is_null(v) &&
	    take_strings(v, "process.env", OCI_MAX_ENV, &p->env, &p->nenv, env_entry_ok, err, errlen))
		goto err;
	v = json_object_get(j, "cwd");
	p->cwd = v ? take_string(v, "process.cwd", false, err, errlen) : strdup("/");
	if (!p->cwd) {
		if (!v)
			errmsg_invalid(err, errlen, "out of memory");
		goto err;
	}
	if (p->cwd[0] != '/') {
		errmsg_invalid(err, errlen, "process.cwd '%.60s' is not absolute", p->cwd);
		goto err;
	}
	v = json_object_get(j, "user");
	if (v && take_user(v, p, err, errlen))
		goto err;
	v = json_object_get(j, "terminal");
	if (v && !json_is_boolean(v)) {
		errmsg_invalid(err, errlen, "process.terminal is not a boolean");
		goto err;
	}
	p->terminal = v && json_is_true(v);
	return 0;

err:
	oci_process_free(p);
	return -EINVAL;
}

void oci_process_free(struct oci_process *p)
{
	for (int i = 0; p->argv && i < p->argc; i++)
		free(p->argv[i]);
	for (int i = 0; p->env && i < p->nenv; i++)
		free(p->env[i]);
	free(p->argv);
	free(p->env);
	free(p->cwd);
	memset(p, 0, sizeof(*p));
}

bool oci_hostname_valid(const char *h)
{
	size_t n = strlen(h);

	if (n < 1 || n > 63 || h[0] == '-' || h[n - 1] == '-')
		return false;
	for (; *h; h++)
		if (!((*h >= 'a' && *h <= 'z') || (*h >= 'A' && *h <= 'Z') ||
		      (*h >= '0' && *h <= '9') || *h == '-'))
			return false;
	return true;
}

/* linux.resources: memory.limit, cpu.quota and cpu.period. */
static int take_resources(json_t *res, struct oci_config *c, char *err, size_t errlen)
{
	json_t *mem = json_object_get(res, "memory"), *cpu = json_object_get(res, "cpu"), *v;
	uint64_t u = 0;

	if (!json_is_object(res))
		return errmsg_invalid(err, errlen, "linux.resources is not an object");
	v = mem ? json_object_get(mem, "limit") : NULL;
	if (v && !json_is_null(v)) {
		if (!json_is_integer(v))
			return errmsg_invalid(err, errlen, "linux.resources.memory.limit is not an integer");
		/* -1: no limit (runc's convention). */
		c->memory_limit = json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
	}
	v = cpu ? json_object_get(cpu, "quota") : NULL;
	if (v && !json_is_null(v)) {
		if (!json_is_integer(v))
			return errmsg_invalid(err, errlen, "linux.resources.cpu.quota is not an integer");
		c->cpu_quota = json_integer_value(v);
	}
	v = cpu ? json_object_get(cpu, "period") : NULL;
	if (v && !json_is_null(v)) {
		if (take_uint(v, "linux.resources.cpu.period", 1000000, &u, err, errlen))
			return -EINVAL;
		c->cpu_period = u;
	}
	return 0;
}

/* io.mayfly.allow-net: "rule,rule,...": each entry its own string (the
 * shim checks each with net_rule_parse before the VM is made). */
static int take_allow_net(const char *list, struct oci_config *c, char *err, size_t errlen)
{
	const char *p = list;

	while (*p) {
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p);

		if (n) {
			if (c->nallow_net >= OCI_MAX_RULES)
				return errmsg_invalid(err, errlen, OCI_ANN_ALLOW_NET ": more than %d rules",
						      OCI_MAX_RULES);
			c->allow_net[c->nallow_net] = strndup(p, n);
			if (!c->allow_net[c->nallow_net])
				return errmsg_invalid(err, errlen, "out of memory");
			c->nallow_net++;
		}
		p += n + (comma != NULL);
	}
	return 0;
}

static int take_annotations(json_t *ann, struct oci_config *c, char *err, size_t errlen)
{
	json_t *v;

	if (!json_is_object(ann))
		return errmsg_invalid(err, errlen, "annotations is not an object");
	v = json_object_get(ann, OCI_ANN_ALLOW_NET);
	if (v) {
		char *list = take_string(v, "annotation " OCI_ANN_ALLOW_NET, true, err, errlen);
		int rc = list ? take_allow_net(list, c, err, errlen) : -EINVAL;

		free(list);
		if (rc)
			return rc;
	}
	v = json_object_get(ann, OCI_ANN_SANDBOX_ID);
	if (v && !(c->sandbox_id = take_string(v, "annotation " OCI_ANN_SANDBOX_ID, false, err,
					       errlen)))
		return -EINVAL;
	v = json_object_get(ann, OCI_ANN_CONTAINER_TYPE);
	if (v) {
		if (!json_is_string(v))
			return errmsg_invalid(err, errlen, "annotation " OCI_ANN_CONTAINER_TYPE
					      " is not a string");
		c->is_sandbox = !strcmp(json_string_value(v), "sandbox");
	}
	return 0;
}

int oci_config_parse(struct oci_config *c, const char *json, size_t len, char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *root, *v;
	int rc = -EINVAL;

	memset(c, 0, sizeof(*c));
	root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return errmsg_invalid(err, errlen, "config.json is not JSON: %.120s (line %d)",
				      jerr.text, jerr.line);
	if (!json_is_object(root)) {
		errmsg_invalid(err, errlen, "config.json is not a JSON object");
		goto out;
	}
	v = json_object_get(root, "process");
	if (!v) {
		errmsg_invalid(err, errlen, "config.json has no process");
		goto out;
	}
	if (take_process(v, &c->process, err, errlen))
		goto out;
	v = json_object_get(root, "hostname");
	if (v && json_string_length(v)) {
		c->hostname = take_string(v, "hostname", false, err, errlen);
		if (!c->hostname)
			goto out_free;
		if (!oci_hostname_valid(c->hostname)) {
			errmsg_invalid(err, errlen, "hostname '%.70s' is not an RFC 1123 label", c->hostname);
			goto out_free;
		}
	}
	v = json_object_get(root, "root");
	if (v && !json_is_object(v)) {
		errmsg_invalid(err, errlen, "root is not an object");
		goto out_free;
	}
	if (v && json_object_get(v, "path") &&
	    !(c->root_path = take_string(json_object_get(v, "path"), "root.path", false, err, errlen)))
		goto out_free;
	if (v && json_is_true(json_object_get(v, "readonly")))
		c->readonly_root = true;
	v = json_object_get(root, "linux");
	if (v && json_is_object(v) && json_object_get(v, "resources") &&
	    take_resources(json_object_get(v, "resources"), c, err, errlen))
		goto out_free;
	v = json_object_get(root, "annotations");
	if (v && !json_is_null(v) && take_annotations(v, c, err, errlen))
		goto out_free;
	rc = 0;
	goto out;

out_free:
	oci_config_free(c);
out:
	json_decref(root);
	return rc;
}

int oci_config_load(struct oci_config *c, const char *bundle_dir, char *err, size_t errlen)
{
	char path[4096];
	struct stat st;
	char *buf;
	ssize_t n;
	int fd, rc;

	memset(c, 0, sizeof(*c));
	if ((size_t)snprintf(path, sizeof(path), "%s/config.json", bundle_dir) >= sizeof(path))
		return errmsg_invalid(err, errlen, "the bundle's path is too long");
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return rc;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > OCI_CONFIG_MAX) {
		close(fd);
		return errmsg_invalid(err, errlen, "%s is not a regular file of at most %u bytes", path,
				      OCI_CONFIG_MAX);
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return errmsg_invalid(err, errlen, "out of memory");
	}
	n = read(fd, buf, (size_t)st.st_size);
	close(fd);
	if (n != st.st_size) {
		free(buf);
		return errmsg_invalid(err, errlen, "cannot read %s", path);
	}
	rc = oci_config_parse(c, buf, (size_t)n, err, errlen);
	free(buf);
	return rc;
}

void oci_config_free(struct oci_config *c)
{
	oci_process_free(&c->process);
	for (int i = 0; i < c->nallow_net; i++)
		free(c->allow_net[i]);
	free(c->hostname);
	free(c->sandbox_id);
	free(c->root_path);
	memset(c, 0, sizeof(*c));
}

int oci_process_parse(struct oci_process *p, const char *json, size_t len, char *err,
		      size_t errlen)
{
	json_error_t jerr;
	json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
	int rc;

	memset(p, 0, sizeof(*p));
	if (!root)
		return errmsg_invalid(err, errlen, "the process spec is not JSON: %.120s", jerr.text);
	rc = take_process(root, p, err, errlen);
	json_decref(root);
	return rc;
}

uint64_t oci_config_mem_mib(const struct oci_config *c, uint64_t min_mib, uint64_t default_mib)
{
	uint64_t mib;

	if (!c->memory_limit)
		return default_mib;
	mib = (c->memory_limit + (1ULL << 20) - 1) >> 20;
	return mib < min_mib ? min_mib : mib;
}

unsigned oci_config_cpus(const struct oci_config *c, unsigned max_cpus)
{
	uint64_t period = c->cpu_period ? c->cpu_period : 100000, n;

	if (c->cpu_quota <= 0)
		return 1;
	n = ((uint64_t)c->cpu_quota + period - 1) / period;
	return n < 1 ? 1 : n > max_cpus ? max_cpus : (unsigned)n;
}
