/* test_serve_api.c - mayfly serve's routes and request bodies: every documented shape accepted, everything else refused with a message naming what is wrong. */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "serve/api.h"
#include "net/rules.h"

static int route(const char *method, const char *url, struct api_match *m)
{
	const char *allow;

	return api_route(method, url, m, &allow);
}

Test(serve_api, each_route_is_found_with_its_id)
{
	static const struct { const char *method, *url; enum api_route r; } cases[] = {
		{ "GET", "/health", API_HEALTH }, { "GET", "/metrics", API_METRICS },
		{ "POST", "/sandboxes", API_CREATE }, { "GET", "/sandboxes", API_LIST },
		{ "GET", "/sandboxes/ab12", API_GET }, { "DELETE", "/sandboxes/ab12", API_DELETE },
		{ "POST", "/sandboxes/ab12/exec", API_EXEC },
		{ "PUT", "/sandboxes/ab12/files", API_FILE_PUT },
		{ "GET", "/sandboxes/ab12/files", API_FILE_GET },
		{ "DELETE", "/sandboxes/ab12/files", API_FILE_REMOVE },
		{ "GET", "/sandboxes/ab12/files/list", API_FILE_LIST },
		{ "GET", "/sandboxes/ab12/files/stat", API_FILE_STAT },
		{ "POST", "/sandboxes/ab12/files/mkdir", API_MKDIR },
		{ "POST", "/sandboxes/ab12/pause", API_PAUSE },
		{ "POST", "/sandboxes/ab12/resume", API_RESUME },
		{ "POST", "/sandboxes/ab12/fork", API_FORK },
	};
	struct api_match m;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cr_assert_eq(route(cases[i].method, cases[i].url, &m), 0, "%s %s", cases[i].method,
			     cases[i].url);
		cr_assert_eq(m.route, cases[i].r, "%s %s", cases[i].method, cases[i].url);
		if (cases[i].r >= API_GET)
			cr_assert_str_eq(m.id, "ab12");
	}
	cr_assert_eq(route("POST", "/sandboxes/ab12/exec/42/signal", &m), 0);
	cr_assert_eq(m.route, API_SIGNAL);
	cr_assert_eq(m.exec_id, 42);
}

Test(serve_api, unknown_paths_are_404_and_wrong_methods_405_with_allow)
{
	const char *allow;
	struct api_match m;

	cr_assert_eq(route("GET", "/", &m), 404);
	cr_assert_eq(route("GET", "/sandboxesx", &m), 404);
	cr_assert_eq(route("GET", "/sandboxes/ab12/nope", &m), 404);
	cr_assert_eq(route("GET", "/sandboxes//exec", &m), 404);
	cr_assert_eq(route("GET", "/sandboxes/a%2Fb", &m), 404, "an id out of [A-Za-z0-9._-]");
	cr_assert_eq(route("GET", "/sandboxes/0123456789012345678901234567890123", &m), 404);
	cr_assert_eq(route("POST", "/sandboxes/ab12/exec/0/signal", &m), 404);
	cr_assert_eq(route("POST", "/sandboxes/ab12/exec/1x/signal", &m), 404);
	cr_assert_eq(api_route("PUT", "/sandboxes", &m, &allow), 405);
	cr_assert_str_eq(allow, "GET, POST");
	cr_assert_eq(api_route("POST", "/sandboxes/ab12", &m, &allow), 405);
	cr_assert_str_eq(allow, "GET, DELETE");
	cr_assert_eq(api_route("POST", "/health", &m, &allow), 405);
}

Test(serve_api, create_takes_every_member_and_an_empty_body)
{
	const char *body = "{\"template\":\"default\",\"cpus\":2,\"mem\":512,\"disk_quota\":1048576,"
			   "\"env\":{\"A\":\"1\",\"B\":\"x=y\"},\"ttl\":60,\"idle_timeout\":30}";
	struct api_create c;
	char err[200];

	cr_assert_eq(api_parse_create(body, strlen(body), &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.template, "default");
	cr_assert_eq(c.cpus, 2);
	cr_assert_eq(c.mem_mib, 512);
	cr_assert_eq(c.disk_quota, 1048576);
	cr_assert_eq(c.ttl_s, 60);
	cr_assert_eq(c.idle_s, 30);
	cr_assert_eq(c.nenv, 2);
	cr_assert_str_eq(c.env[0], "A=1");
	cr_assert_str_eq(c.env[1], "B=x=y");
	api_create_free(&c);
	cr_assert_eq(api_parse_create(NULL, 0, &c, err, sizeof(err)), 0);
	cr_assert_eq(c.cpus, 0);
	api_create_free(&c);
}

static void refused_create(const char *body, const char *want)
{
	struct api_create c;
	char err[200] = "";

	cr_assert_eq(api_parse_create(body, strlen(body), &c, err, sizeof(err)), -EINVAL, "%s", body);
	cr_assert(strstr(err, want), "%s: got '%s', want '%s'", body, err, want);
}

Test(serve_api, bad_create_bodies_are_refused_naming_the_member)
{
	refused_create("{\"cpus\":1,", "malformed JSON");
	refused_create("[1]", "must be a JSON object");
	refused_create("{\"cpu\":1}", "unknown member \"cpu\"");
	refused_create("{\"cpus\":0}", "\"cpus\"");
	refused_create("{\"cpus\":\"2\"}", "\"cpus\"");
	refused_create("{\"cpus\":255}", "\"cpus\"");
	refused_create("{\"mem\":-1}", "\"mem\"");
	refused_create("{\"ttl\":1.5}", "\"ttl\"");
	refused_create("{\"disk_quota\":10}", "\"disk_quota\"");
	refused_create("{\"template\":\"\"}", "\"template\"");
	refused_create("{\"env\":[\"A=1\"]}", "\"env\"");
	refused_create("{\"env\":{\"A=B\":\"1\"}}", "\"env\"");
	refused_create("{\"env\":{\"A\":1}}", "\"env\"");
	refused_create("{\"ttl\":1,\"ttl\":2}", "malformed JSON");
	refused_create("{\"metadata\":[\"a\"]}", "\"metadata\"");
	refused_create("{\"metadata\":{\"a\":1}}", "\"metadata\"");
	refused_create("{\"metadata\":{\"\":\"x\"}}", "\"metadata\"");
}

/* metadata: a client's labels (E2B's), strings only, bounded. */
Test(serve_api, create_takes_metadata_within_bounds)
{
	char body[8192], err[200];
	struct api_create c;
	int n;

	snprintf(body, sizeof(body), "{\"metadata\":{\"team\":\"x\",\"run\":\"7\"}}");
	cr_assert_eq(api_parse_create(body, strlen(body), &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(json_string_value(json_object_get(c.metadata, "team")), "x");
	api_create_free(&c);
	n = snprintf(body, sizeof(body), "{\"metadata\":{");
	for (int i = 0; i <= API_MAX_METADATA; i++)
		n += snprintf(body + n, sizeof(body) - (size_t)n, "%s\"k%d\":\"v\"", i ? "," : "", i);
	snprintf(body + n, sizeof(body) - (size_t)n, "}}");
	refused_create(body, "at most 64");
	snprintf(body, sizeof(body), "{\"metadata\":{\"%0*d\":\"v\"}}", API_MAX_META_KEY + 1, 0);
	refused_create(body, "\"metadata\"");
	snprintf(body, sizeof(body), "{\"metadata\":{\"k\":\"%0*d\"}}", API_MAX_META_VALUE + 1, 0);
	refused_create(body, "\"metadata\"");
}

/* allow_net and resolve: run's --allow-net and --resolve strings, kept as
 * given for each VM process, checked by the same parser and limits. */
Test(serve_api, create_takes_network_rules_checked_as_the_command_line)
{
	const char *body = "{\"allow_net\":[\"pypi.org:443\",\"*.test\",\"[fd00::/8]:80\"],"
			   "\"resolve\":[\"a.test:127.0.0.1\"]}";
	struct api_create c, none;
	struct api_net copy;
	char err[200];

	cr_assert_eq(api_parse_create(body, strlen(body), &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(c.net.nallow, 3);
	cr_assert_str_eq(c.net.allow[0], "pypi.org:443");
	cr_assert_str_eq(c.net.allow[2], "[fd00::/8]:80");
	cr_assert_eq(c.net.nresolve, 1);
	cr_assert_str_eq(c.net.resolve[0], "a.test:127.0.0.1");
	cr_assert_eq(api_net_copy(&copy, &c.net), 0);
	api_create_free(&c);
	cr_assert_str_eq(copy.allow[1], "*.test", "the copy outlives the request");
	cr_assert_str_eq(copy.resolve[0], "a.test:127.0.0.1");
	api_net_free(&copy);
	cr_assert_eq(api_parse_create("{}", 2, &none, err, sizeof(err)), 0);
	cr_assert_eq(none.net.nallow, 0, "no rule: no network");
	api_create_free(&none);
}

Test(serve_api, bad_network_rules_are_refused_naming_the_member)
{
	char many[64 * 12 + 32];
	size_t n;

	refused_create("{\"allow_net\":\"a.test\"}", "\"allow_net\" must be an array");
	refused_create("{\"allow_net\":[1]}", "\"allow_net\"[0] must be a string");
	refused_create("{\"allow_net\":[\"a.test\",\"a.test:0\"]}", "\"allow_net\"[1]: bad --allow-net");
	refused_create("{\"allow_net\":[\"*\"]}", "\"allow_net\"[0]");
	refused_create("{\"allow_net\":[\"a\\u0000b\"]}", "\\u0000 is not allowed");
	refused_create("{\"allow_net\":[\"a.test\"],\"resolve\":[\"a.test\"]}",
		       "\"resolve\"[0]: bad --resolve");
	refused_create("{\"resolve\":[\"a.test:10.0.0.1\"]}", "\"resolve\" goes with \"allow_net\"");
	n = (size_t)snprintf(many, sizeof(many), "{\"allow_net\":[");
	for (int i = 0; i <= NET_MAX_RULES; i++)
		n += (size_t)snprintf(many + n, sizeof(many) - n, "%s\"h%d.test\"", i ? "," : "", i);
	snprintf(many + n, sizeof(many) - n, "]}");
	refused_create(many, "more than 64 members");
}

Test(serve_api, exec_takes_argv_env_cwd_stdin_and_timeout)
{
	const char *body = "{\"argv\":[\"sh\",\"-c\",\"cat\"],\"env\":{\"K\":\"V\"},\"cwd\":\"/tmp\","
			   "\"stdin\":\"hi\\n\",\"timeout\":5}";
	const char *b64 = "{\"argv\":[\"cat\"],\"stdin_b64\":\"AAEC\"}";
	struct api_exec e;
	char err[200];

	cr_assert_eq(api_parse_exec(body, strlen(body), &e, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(e.argc, 3);
	cr_assert_str_eq(e.argv[2], "cat");
	cr_assert_null(e.argv[3]);
	cr_assert_str_eq(e.env[0], "K=V");
	cr_assert_str_eq(e.cwd, "/tmp");
	cr_assert_eq(e.stdin_len, 3);
	cr_assert_eq(memcmp(e.stdin_data, "hi\n", 3), 0);
	cr_assert_eq(e.timeout_s, 5);
	api_exec_free(&e);
	cr_assert_eq(api_parse_exec(b64, strlen(b64), &e, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(e.stdin_len, 3);
	cr_assert_eq(e.stdin_data[2], 2);
	api_exec_free(&e);
}

static void refused_exec(const char *body, const char *want)
{
	struct api_exec e;
	char err[200] = "";

	cr_assert_eq(api_parse_exec(body, strlen(body), &e, err, sizeof(err)), -EINVAL, "%s", body);
	cr_assert(strstr(err, want), "%s: got '%s', want '%s'", body, err, want);
}

Test(serve_api, bad_exec_bodies_are_refused)
{
	refused_exec("", "\"argv\"");
	refused_exec("{\"argv\":[]}", "\"argv\"");
	refused_exec("{\"argv\":\"ls\"}", "\"argv\"");
	refused_exec("{\"argv\":[\"ls\",1]}", "\"argv\"[1]");
	refused_exec("{\"argv\":[\"\"]}", "\"argv\"[0]");
	refused_exec("{\"argv\":[\"a\\u0000b\"]}", "not allowed");
	refused_exec("{\"argv\":[\"ls\"],\"cwd\":\"tmp\"}", "\"cwd\"");
	refused_exec("{\"argv\":[\"ls\"],\"stdin\":\"a\",\"stdin_b64\":\"AA==\"}", "exclude");
	refused_exec("{\"argv\":[\"ls\"],\"stdin_b64\":\"!!\"}", "base64");
	refused_exec("{\"argv\":[\"ls\"],\"timeout\":0}", "\"timeout\"");
	refused_exec("{\"argv\":[\"ls\"],\"tty\":true}", "unknown member \"tty\"");
}

Test(serve_api, signals_by_number_or_name)
{
	char err[200];
	int signo;

	cr_assert_eq(api_parse_signal("{\"signal\":9}", 12, &signo, err, sizeof(err)), 0);
	cr_assert_eq(signo, 9);
	cr_assert_eq(api_parse_signal("{\"signal\":\"SIGTERM\"}", 20, &signo, err, sizeof(err)), 0);
	cr_assert_eq(signo, SIGTERM);
	cr_assert_eq(api_parse_signal("{\"signal\":\"int\"}", 16, &signo, err, sizeof(err)), 0);
	cr_assert_eq(signo, SIGINT);
	cr_assert_eq(api_parse_signal("{\"signal\":0}", 12, &signo, err, sizeof(err)), -EINVAL);
	cr_assert_eq(api_parse_signal("{\"signal\":\"NOPE\"}", 17, &signo, err, sizeof(err)), -EINVAL);
	cr_assert_eq(api_parse_signal("{}", 2, &signo, err, sizeof(err)), -EINVAL);
}

static int mkdir_body(const char *body, char *path, size_t cap, bool *parents, char *err,
		      size_t errlen)
{
	return api_parse_mkdir(body, strlen(body), path, cap, parents, err, errlen);
}

Test(serve_api, guest_paths_must_be_absolute)
{
	char err[200], path[64];
	bool parents;

	cr_assert_eq(api_check_path("/root/a", err, sizeof(err)), 0);
	cr_assert_eq(api_check_path("root/a", err, sizeof(err)), -EINVAL);
	cr_assert_eq(api_check_path("", err, sizeof(err)), -EINVAL);
	cr_assert_eq(api_check_path(NULL, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "path="));
	cr_assert_eq(mkdir_body("{\"path\":\"/a/b\",\"parents\":true}", path, sizeof(path),
				&parents, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(path, "/a/b");
	cr_assert(parents);
	cr_assert_eq(mkdir_body("{\"path\":\"a\"}", path, sizeof(path), &parents, err,
				sizeof(err)), -EINVAL);
	cr_assert_eq(mkdir_body("{\"path\":\"/a\",\"parents\":1}", path, sizeof(path), &parents,
				err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "\"parents\""), "%s", err);
}

Test(serve_api, fork_takes_a_bounded_count)
{
	char err[200];
	unsigned n;

	cr_assert_eq(api_parse_fork(NULL, 0, 16, &n, err, sizeof(err)), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(api_parse_fork("{\"count\":16}", 12, 16, &n, err, sizeof(err)), 0);
	cr_assert_eq(n, 16);
	cr_assert_eq(api_parse_fork("{\"count\":17}", 12, 16, &n, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "\"count\""), "%s", err);
	cr_assert_eq(api_parse_fork("{\"count\":0}", 11, 16, &n, err, sizeof(err)), -EINVAL);
	cr_assert_eq(api_parse_fork("{\"n\":2}", 7, 16, &n, err, sizeof(err)), -EINVAL);
	cr_assert_eq(api_route("GET", "/sandboxes/ab12/pause", &(struct api_match){ 0 },
			       &(const char *){ NULL }), 405);
}
