/* test_serve_e2b.c - mayfly serve's E2B front end (vmm/serve/e2b_*.c) on a real loopback port, its sandboxes run by fake_vmm (the real guest agent on the host, no KVM): E2B's shapes and codes as the SDK reads them, and what a hostile client sends: wrong keys, malformed envelopes, content types, bodies, filters. The SDK itself drives it in the e2e suite (tests/e2e/run-e2b-tests.sh). */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <openssl/ssl.h>

#include "serve/connect.h"
#include "envd_filesystem.pb-c.h"
#include "envd_process.pb-c.h"
#include "serve/e2b_http.h"
#include "serve/e2b_watch.h"
#include "serve/port_msg.h"
#include "serve/service.h"
#include "lib/fs_tree.h"
#include "serve_loop.h"

#define KEY   "e2b-key-0123456789abcdef"
#define HKEY  "X-API-KEY: " KEY "\r\n"
#define JSON  "Content-Type: application/json\r\n"

static char root[] = "/tmp/serve-e2b-XXXXXX";
static char state[64], home[64];
static struct service *svc;
static struct e2b_server e2b;
static struct tokens tokens;
static uint16_t port;
static struct serve_loop main_loop;
static const char *req_host = "x";   /* request's Host */

/* A listening socket on 127.0.0.1, its port the kernel's choice. */
static int listen_any(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(fd, 64), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	port = ntohs(a.sin_port);
	return fd;
}

static void setup(void)
{
	const char *fake = getenv("FAKE_VMM");
	char err[200];

	signal(SIGPIPE, SIG_IGN);
	cr_assert_not_null(fake, "FAKE_VMM is not set");
	cr_assert_not_null(mkdtemp(root));
	snprintf(state, sizeof(state), "%s/state", root);
	snprintf(home, sizeof(home), "%s/home", root);
	cr_assert_eq(mkdir(state, 0700), 0);
	cr_assert_eq(mkdir(home, 0700), 0);
	setenv("FAKE_VMM_HOME", home, 1);
	svc = calloc(1, sizeof(*svc));
	svc->cfg.ephemeral = true;
	svc->cfg.state = state;
	snprintf(svc->cfg.exe, sizeof(svc->cfg.exe), "%s", fake);
	snprintf(svc->cfg.tmpl[0].name, sizeof(svc->cfg.tmpl[0].name), "default");
	snprintf(svc->cfg.tmpl[0].id, sizeof(svc->cfg.tmpl[0].id), "fake");
	snprintf(svc->cfg.tmpl[0].dir, sizeof(svc->cfg.tmpl[0].dir), "%s", root);
	svc->cfg.tmpl[0].cpus = 1;
	svc->cfg.tmpl[0].mem_mib = 256;
	svc->cfg.ntmpl = 1;
	svc->cfg.max_sandboxes = 8;
	svc->cfg.call_timeout_s = 10;
	svc->cfg.max_output = 1 << 20;
	svc->cfg.max_file = 1 << 20;
	cr_assert_eq(service_start(svc), 0);
	serve_loop_start(&main_loop, svc);
	cr_assert_eq(tokens_parse(&tokens, "sdk " KEY "\n", strlen("sdk " KEY "\n"), err,
				  sizeof(err)), 0);
	e2b = (struct e2b_server){ .listen_fd = listen_any(), .svc = svc, .tokens = &tokens,
				   .max_file = 1 << 20, .head_timeout_ms = 2000 };
	snprintf(e2b.domain, sizeof(e2b.domain), "mayfly.test");
	cr_assert_eq(e2b_start(&e2b), 0);
}

static void teardown(void)
{
	e2b_stop(&e2b);
	service_stop(svc, 0);
	serve_loop_stop(&main_loop);
	service_destroy(svc);
	free(svc);
	fs_remove_tree(root);
}

TestSuite(serve_e2b, .init = setup, .fini = teardown, .timeout = 60);

struct reply {
	int status;
	char head[2048];
	char *body;                /* malloc'd, NUL-terminated */
	size_t len;
};

/* A chunked body (a stream's) as its bytes, in place. */
static void dechunk(struct reply *r)
{
	size_t in = 0, out = 0;

	for (;;) {
		char *end;
		unsigned long n = strtoul(r->body + in, &end, 16);

		cr_assert(end != r->body + in && !strncmp(end, "\r\n", 2), "a chunk's size");
		in = (size_t)(end - r->body) + 2;
		if (!n)
			break;
		cr_assert_leq(in + n + 2, r->len, "a cut chunk");
		memmove(r->body + out, r->body + in, n);
		out += n;
		in += n + 2;
	}
	r->len = out;
	r->body[out] = '\0';
}

/* One request on a new connection (Connection: close), the whole reply;
 * a body sent as it is (binary allowed). */
static void request(const char *method, const char *url, const char *headers, const void *body,
		    size_t body_len, struct reply *r)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct timeval tv = { .tv_sec = 10 };
	size_t got = 0, cap = 1 << 16, hl;
	char head[2048], *buf = malloc(cap), *sep;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ssize_t n;

	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	hl = (size_t)snprintf(head, sizeof(head), "%s %s HTTP/1.1\r\nHost: %s\r\n"
			      "Connection: close\r\n%sContent-Length: %zu\r\n\r\n", method, url,
			      req_host, headers ? headers : "", body_len);
	cr_assert_eq(write(fd, head, hl), (ssize_t)hl);
	if (body_len)
		(void)!write(fd, body, body_len);
	while ((n = read(fd, buf + got, cap - 1 - got)) > 0) {
		got += (size_t)n;
		if (got == cap - 1)
			buf = realloc(buf, cap *= 2);
	}
	close(fd);
	buf[got] = '\0';
	memset(r, 0, sizeof(*r));
	cr_assert_eq(sscanf(buf, "HTTP/1.1 %d", &r->status), 1, "reply: %s", buf);
	sep = strstr(buf, "\r\n\r\n");
	cr_assert_not_null(sep);
	snprintf(r->head, sizeof(r->head), "%.*s", (int)(sep - buf), buf);
	r->len = got - (size_t)(sep + 4 - buf);
	r->body = malloc(r->len + 1);
	memcpy(r->body, sep + 4, r->len);
	r->body[r->len] = '\0';
	free(buf);
	if (strcasestr(r->head, "Transfer-Encoding: chunked"))
		dechunk(r);
}

static json_t *json_of(const struct reply *r)
{
	json_t *j = json_loads(r->body, 0, NULL);

	cr_assert_not_null(j, "not JSON (%d): %s", r->status, r->body);
	return j;
}

/* A control-plane error as the SDK reads it: the status, and the same
 * number as "code" in the body. */
static void assert_e2b_error(struct reply *r, int status)
{
	json_t *j = json_of(r);

	cr_assert_eq(r->status, status, "status %d: %s", r->status, r->body);
	cr_assert_eq(json_integer_value(json_object_get(j, "code")), status, "%s", r->body);
	cr_assert(json_is_string(json_object_get(j, "message")), "%s", r->body);
	json_decref(j);
	free(r->body);
}

/* A unary Connect error: its status and code name. */
static void assert_connect_error(struct reply *r, int status, const char *code)
{
	json_t *j = json_of(r);

	cr_assert_eq(r->status, status, "status %d: %s", r->status, r->body);
	cr_assert(strstr(r->head, "Content-Type: application/json"), "%s", r->head);
	cr_assert_str_eq(json_string_value(json_object_get(j, "code")), code, "%s", r->body);
	json_decref(j);
	free(r->body);
}

static void create(const char *body, char *id)
{
	struct reply r;
	json_t *j;

	request("POST", "/v2/sandboxes", HKEY JSON, body, strlen(body), &r);
	cr_assert_eq(r.status, 201, "%d %s", r.status, r.body);
	j = json_of(&r);
	snprintf(id, API_ID_MAX + 1, "%s", json_string_value(json_object_get(j, "sandboxID")));
	cr_assert_str_eq(json_string_value(json_object_get(j, "envdVersion")), E2B_ENVD_VERSION);
	cr_assert_str_eq(json_string_value(json_object_get(j, "envdAccessToken")), KEY);
	cr_assert_str_eq(json_string_value(json_object_get(j, "domain")), "mayfly.test");
	json_decref(j);
	free(r.body);
}

/* An envd request's headers for sandbox id, with more after. */
static void envd_headers(char *out, size_t len, const char *id, const char *more)
{
	snprintf(out, len, "E2b-Sandbox-Id: %s\r\nE2b-Sandbox-Port: 49983\r\nX-Access-Token: " KEY
		 "\r\n%s", id, more);
}

Test(serve_e2b, the_key_is_checked_before_the_route_and_errors_carry_their_code)
{
	struct reply r;

	request("GET", "/v2/sandboxes", NULL, NULL, 0, &r);
	assert_e2b_error(&r, 401);
	request("GET", "/no/such/route", "X-API-KEY: wrong-key-0123456789abcdef\r\n", NULL, 0, &r);
	assert_e2b_error(&r, 401);
	request("GET", "/no/such/route", HKEY, NULL, 0, &r);
	assert_e2b_error(&r, 404);
	request("PUT", "/v2/sandboxes", HKEY, NULL, 0, &r);
	assert_e2b_error(&r, 405);
	request("GET", "/sandboxes/nope", HKEY, NULL, 0, &r);
	assert_e2b_error(&r, 404);
	request("GET", "/sandboxes/a%2Fb", HKEY, NULL, 0, &r);
	assert_e2b_error(&r, 404);
	/* envd's token, and a sandbox id that is not one. */
	request("GET", "/health", "E2b-Sandbox-Id: abc\r\nX-Access-Token: nope-0123456789abcdef\r\n",
		NULL, 0, &r);
	assert_e2b_error(&r, 401);
	request("GET", "/health", "E2b-Sandbox-Id: ../x\r\nX-Access-Token: " KEY "\r\n", NULL, 0, &r);
	assert_e2b_error(&r, 400);
}

Test(serve_e2b, create_refuses_bad_members_with_serves_own_checks)
{
	static const char *const bad[] = {
		"[1]", "{\"templateID\":7}", "{\"timeout\":-1}", "{\"timeout\":\"x\"}",
		"{\"envVars\":{\"A\":1}}", "{\"envVars\":{\"A=B\":\"x\"}}", "{\"metadata\":[1]}",
		"{\"templateID\":\"nope\"}", "{\"timeout\":99999999}", "not json",
	};
	struct reply r;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		request("POST", "/v2/sandboxes", HKEY JSON, bad[i], strlen(bad[i]), &r);
		cr_assert_eq(r.status, 400, "%s: %d %s", bad[i], r.status, r.body);
		assert_e2b_error(&r, 400);
	}
	request("GET", "/v2/sandboxes", HKEY, NULL, 0, &r);
	cr_assert_str_eq(r.body, "[]\n", "no sandbox was made: %s", r.body);
	free(r.body);
}

Test(serve_e2b, list_get_timeout_pause_and_kill_as_the_sdk_reads_them)
{
	char a[API_ID_MAX + 1], b[API_ID_MAX + 1], url[200], next[64] = "";
	struct reply r;
	json_t *j;
	char *h;

	create("{\"templateID\":\"base\",\"timeout\":120,\"metadata\":{\"a b\":\"c&d\"},"
	       "\"envVars\":{\"G\":\"hi\"}}", a);
	create("{\"metadata\":{\"k\":\"v\"}}", b);
	/* The SDK's metadata filter: each key and value percent-encoded, the
	 * pairs URL-encoded again, the whole once more by the query. */
	request("GET", "/v2/sandboxes?state=running,paused&metadata=a%252520b%3Dc%252526d", HKEY,
		NULL, 0, &r);
	j = json_of(&r);
	cr_assert_eq(json_array_size(j), 1, "%s", r.body);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(j, 0), "sandboxID")), a);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(j, 0), "templateID")),
			 "base");
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(
				 json_array_get(j, 0), "metadata"), "a b")), "c&d");
	json_decref(j);
	free(r.body);
	request("GET", "/v2/sandboxes?state=paused", HKEY, NULL, 0, &r);
	cr_assert_str_eq(r.body, "[]\n");
	free(r.body);
	/* Pages of one: x-next-token names the last; the next page has the other. */
	request("GET", "/v2/sandboxes?limit=1", HKEY, NULL, 0, &r);
	h = strcasestr(r.head, "x-next-token: ");
	cr_assert_not_null(h, "%s", r.head);
	sscanf(h + 14, "%63[0-9a-zA-Z_-]", next);
	free(r.body);
	snprintf(url, sizeof(url), "/v2/sandboxes?limit=1&nextToken=%s", next);
	request("GET", url, HKEY, NULL, 0, &r);
	j = json_of(&r);
	cr_assert_eq(json_array_size(j), 1);
	cr_assert_str_neq(json_string_value(json_object_get(json_array_get(j, 0), "sandboxID")), next);
	cr_assert_null(strcasestr(r.head, "x-next-token"), "the last page: %s", r.head);
	json_decref(j);
	free(r.body);

	snprintf(url, sizeof(url), "/sandboxes/%s/timeout", a);
	request("POST", url, HKEY JSON, "{\"timeout\":600}", 15, &r);
	cr_assert_eq(r.status, 204, "%d %s", r.status, r.body);
	free(r.body);
	request("POST", url, HKEY JSON, "{}", 2, &r);
	assert_e2b_error(&r, 400);
	request("POST", url, HKEY JSON, "{\"timeout\":600,\"timeout\":1}", 28, &r);
	assert_e2b_error(&r, 400);
	snprintf(url, sizeof(url), "/sandboxes/%s", a);
	request("GET", url, HKEY, NULL, 0, &r);
	j = json_of(&r);
	cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "running");
	cr_assert_str_eq(json_string_value(json_object_get(j, "envdAccessToken")), KEY);
	{
		/* endAt moved to about 600 s from now. */
		struct tm tm = { 0 };
		time_t end;

		cr_assert_not_null(strptime(json_string_value(json_object_get(j, "endAt")),
					    "%Y-%m-%dT%H:%M:%SZ", &tm));
		end = timegm(&tm);
		cr_assert(end >= time(NULL) + 590 && end <= time(NULL) + 610, "%s", r.body);
	}
	json_decref(j);
	free(r.body);

	request("DELETE", url, HKEY, NULL, 0, &r);
	cr_assert_eq(r.status, 204);
	free(r.body);
	request("DELETE", url, HKEY, NULL, 0, &r);
	assert_e2b_error(&r, 404);
	request("GET", url, HKEY, NULL, 0, &r);
	assert_e2b_error(&r, 404);
	snprintf(url, sizeof(url), "/sandboxes/%s/pause", a);
	request("POST", url, HKEY JSON, "{}", 2, &r);
	assert_e2b_error(&r, 404);
}

Test(serve_e2b, metrics_are_the_guests_own_figures_now)
{
	char id[API_ID_MAX + 1], url[200];
	time_t t0 = time(NULL);
	struct reply r;
	json_t *j, *m;

	create("{}", id);
	/* The fake VMM's agent runs on this host: its figures are this host's. */
	snprintf(url, sizeof(url), "/sandboxes/%s/metrics", id);
	for (int round = 0; round < 2; round++) {
		request("GET", url, HKEY, NULL, 0, &r);
		cr_assert_eq(r.status, 200, "%d %s", r.status, r.body);
		j = json_of(&r);
		cr_assert_eq(json_array_size(j), 1, "%s", r.body);
		m = json_array_get(j, 0);
		cr_assert_eq(json_integer_value(json_object_get(m, "cpuCount")),
			     sysconf(_SC_NPROCESSORS_ONLN), "%s", r.body);
		cr_assert(json_is_number(json_object_get(m, "cpuUsedPct")));
		cr_assert_geq(json_number_value(json_object_get(m, "cpuUsedPct")), 0);
		cr_assert_leq(json_number_value(json_object_get(m, "cpuUsedPct")), 100);
		cr_assert_gt(json_integer_value(json_object_get(m, "memTotal")), 16 << 20);
		cr_assert_gt(json_integer_value(json_object_get(m, "memUsed")), 0);
		cr_assert_leq(json_integer_value(json_object_get(m, "memUsed")),
			      json_integer_value(json_object_get(m, "memTotal")));
		cr_assert_leq(json_integer_value(json_object_get(m, "memCache")),
			      json_integer_value(json_object_get(m, "memTotal")));
		cr_assert_gt(json_integer_value(json_object_get(m, "diskTotal")), 0);
		cr_assert_leq(json_integer_value(json_object_get(m, "diskUsed")),
			      json_integer_value(json_object_get(m, "diskTotal")));
		cr_assert_geq(json_integer_value(json_object_get(m, "timestampUnix")), t0);
		cr_assert_eq(strlen(json_string_value(json_object_get(m, "timestamp")) ?: ""), 20,
			     "an RFC 3339 time in UTC: %s", r.body);
		json_decref(j);
		free(r.body);
	}
	/* A window that does not hold now has no sample; a malformed one is 400. */
	snprintf(url, sizeof(url), "/sandboxes/%s/metrics?start=0&end=1", id);
	request("GET", url, HKEY, NULL, 0, &r);
	cr_assert_eq(r.status, 200);
	cr_assert_str_eq(r.body, "[]\n");
	free(r.body);
	snprintf(url, sizeof(url), "/sandboxes/%s/metrics?start=yesterday", id);
	request("GET", url, HKEY, NULL, 0, &r);
	assert_e2b_error(&r, 400);
	request("GET", "/sandboxes/nosuchsandbox/metrics", HKEY, NULL, 0, &r);
	assert_e2b_error(&r, 404);
	snprintf(url, sizeof(url), "/sandboxes/%s/metrics", id);
	request("POST", url, HKEY, NULL, 0, &r);
	cr_assert_eq(r.status, 405);
	free(r.body);
}

Test(serve_e2b, envd_runs_a_command_as_a_connect_stream)
{
	static const char msg[] = "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\","
				  "\"echo $G; echo e >&2; exit 3\"]},\"stdin\":false}";
	char id[API_ID_MAX + 1], h[512];
	uint8_t body[CONNECT_ENVELOPE_LEN + sizeof(msg)];
	const uint8_t *p, *end;
	bool saw_end = false, saw_out = false;
	struct reply r;

	create("{\"envVars\":{\"G\":\"hello\"}}", id);
	envd_headers(h, sizeof(h), id, "Content-Type: application/connect+json\r\n"
		     "Connect-Protocol-Version: 1\r\n");
	connect_envelope(body, 0, sizeof(msg) - 1);
	memcpy(body + CONNECT_ENVELOPE_LEN, msg, sizeof(msg) - 1);
	request("POST", "/process.Process/Start", h, body, CONNECT_ENVELOPE_LEN + sizeof(msg) - 1, &r);
	cr_assert_eq(r.status, 200, "%d %s", r.status, r.body);
	cr_assert(strstr(r.head, "Content-Type: application/connect+json"), "%s", r.head);
	/* Envelopes: start first, the data, the end, then end-stream {}. */
	p = (const uint8_t *)r.body;
	end = p + r.len;
	for (int i = 0; p + CONNECT_ENVELOPE_LEN <= end; i++) {
		uint32_t len = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
		char text[4096];
		json_t *j;

		cr_assert_leq(p + CONNECT_ENVELOPE_LEN + len, end, "a cut envelope");
		snprintf(text, sizeof(text), "%.*s", (int)len, (const char *)p + CONNECT_ENVELOPE_LEN);
		j = json_loads(text, 0, NULL);
		cr_assert_not_null(j, "%s", text);
		if (i == 0)
			cr_assert_not_null(json_object_get(json_object_get(j, "event"), "start"), "%s", text);
		if (strstr(text, "\"stdout\":\"aGVsbG8K\""))   /* "hello\n" */
			saw_out = true;
		if (json_object_get(json_object_get(j, "event"), "end")) {
			cr_assert_eq(json_integer_value(json_object_get(json_object_get(
				     json_object_get(j, "event"), "end"), "exitCode")), 3, "%s", text);
			saw_end = true;
		}
		if (p[0] == CONNECT_FLAG_END_STREAM) {
			cr_assert_str_eq(text, "{}");
			cr_assert_eq(p + CONNECT_ENVELOPE_LEN + len, end, "nothing after the end");
		}
		json_decref(j);
		p += CONNECT_ENVELOPE_LEN + len;
	}
	cr_assert(saw_out && saw_end, "%.*s", (int)r.len, r.body);
	free(r.body);
}

/* The envelopes of a stream's body: each message in turn to fn, the last
 * (end-stream, JSON in both codecs) checked to be {}. */
static void each_envelope(const struct reply *r, void (*fn)(const uint8_t *, size_t, void *),
			  void *arg)
{
	const uint8_t *p = (const uint8_t *)r->body, *end = p + r->len;
	bool ended = false;

	while (p + CONNECT_ENVELOPE_LEN <= end) {
		uint32_t len = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];

		cr_assert_leq(p + CONNECT_ENVELOPE_LEN + len, end, "a cut envelope");
		cr_assert_not(ended, "an envelope after the end-stream one");
		if (p[0] == CONNECT_FLAG_END_STREAM) {
			cr_assert_eq(len, 2);
			cr_assert_eq(memcmp(p + CONNECT_ENVELOPE_LEN, "{}", 2), 0);
			ended = true;
		} else {
			fn(p + CONNECT_ENVELOPE_LEN, len, arg);
		}
		p += CONNECT_ENVELOPE_LEN + len;
	}
	cr_assert(ended && p == end, "no end-stream envelope, or bytes after it");
}

struct proto_run {
	int n, exit_code;
	bool saw_start, saw_end;
	char out[64];
};

static void on_proto_event(const uint8_t *msg, size_t len, void *arg)
{
	Process__StartResponse *m = process__start_response__unpack(NULL, len, msg);
	Process__ProcessEvent *ev = m ? m->event : NULL;
	struct proto_run *run = arg;

	cr_assert_not_null(ev, "not a StartResponse with an event (%zu bytes)", len);
	if (run->n++ == 0)
		cr_assert_eq(ev->event_case, PROCESS__PROCESS_EVENT__EVENT_START, "start first");
	if (ev->event_case == PROCESS__PROCESS_EVENT__EVENT_START)
		run->saw_start = ev->start->pid > 0;
	if (ev->event_case == PROCESS__PROCESS_EVENT__EVENT_DATA &&
	    ev->data->output_case == PROCESS__PROCESS_EVENT__DATA_EVENT__OUTPUT_STDOUT)
		snprintf(run->out + strlen(run->out), sizeof(run->out) - strlen(run->out), "%.*s",
			 (int)ev->data->stdout.len, (const char *)ev->data->stdout.data);
	if (ev->event_case == PROCESS__PROCESS_EVENT__EVENT_END) {
		run->saw_end = ev->end->exited;
		run->exit_code = ev->end->exit_code;
		cr_assert_str_eq(ev->end->status, "exit status 3");
	}
	process__start_response__free_unpacked(m, NULL);
}

Test(serve_e2b, envd_speaks_connects_binary_codec_as_well)
{
	static char *const args[] = { "-c", "echo $G; echo e >&2; exit 3" };
	Process__ProcessConfig cfg = PROCESS__PROCESS_CONFIG__INIT;
	Process__StartRequest start = PROCESS__START_REQUEST__INIT;
	Filesystem__ListDirRequest ls = FILESYSTEM__LIST_DIR_REQUEST__INIT;
	Filesystem__StatRequest stat = FILESYSTEM__STAT_REQUEST__INIT;
	Filesystem__ListDirResponse *entries;
	Filesystem__StatResponse *st;
	char id[API_ID_MAX + 1], h[512], hu[512];
	uint8_t body[512];
	struct proto_run run = { 0 };
	bool saw_tmp = false;
	char listed[] = "/tmp/mayfly-e2b-ls-XXXXXX";
	struct reply r;
	size_t n;

	create("{\"envVars\":{\"G\":\"hello\"}}", id);
	envd_headers(h, sizeof(h), id, "Content-Type: application/connect+proto\r\n"
		     "Connect-Protocol-Version: 1\r\n");
	envd_headers(hu, sizeof(hu), id, "Content-Type: application/proto\r\n");
	/* A stream: protobuf-c's own bytes in, its own unpacker on the way out. */
	cfg.cmd = "/bin/sh";
	cfg.args = (char **)args;
	cfg.n_args = 2;
	start.process = &cfg;
	n = process__start_request__pack(&start, body + CONNECT_ENVELOPE_LEN);
	connect_envelope(body, 0, (uint32_t)n);
	request("POST", "/process.Process/Start", h, body, CONNECT_ENVELOPE_LEN + n, &r);
	cr_assert_eq(r.status, 200, "%d %s", r.status, r.body);
	cr_assert(strstr(r.head, "Content-Type: application/connect+proto"), "%s", r.head);
	each_envelope(&r, on_proto_event, &run);
	cr_assert(run.saw_start && run.saw_end, "%d events", run.n);
	cr_assert_str_eq(run.out, "hello\n");
	cr_assert_eq(run.exit_code, 3);
	free(r.body);

	/* Unary: a listing and a stat, the replies protobuf; a time a Timestamp.
	 * The listing is of /tmp, not /: under qemu-user (the arm64 unit run)
	 * the agent's / is qemu's library prefix. */
	cr_assert_not_null(mkdtemp(listed));
	ls.path = "/tmp";
	n = filesystem__list_dir_request__pack(&ls, body);
	request("POST", "/filesystem.Filesystem/ListDir", hu, body, n, &r);
	cr_assert_eq(r.status, 200, "%d %s", r.status, r.body);
	cr_assert(strstr(r.head, "Content-Type: application/proto"), "%s", r.head);
	entries = filesystem__list_dir_response__unpack(NULL, r.len, (const uint8_t *)r.body);
	cr_assert_not_null(entries, "not a ListDirResponse");
	for (size_t i = 0; i < entries->n_entries; i++) {
		Filesystem__EntryInfo *e = entries->entries[i];

		if (strcmp(e->name, listed + strlen("/tmp/")))
			continue;
		saw_tmp = true;
		cr_assert_str_eq(e->path, listed);
		cr_assert_eq(e->type, FILESYSTEM__FILE_TYPE__FILE_TYPE_DIRECTORY);
		cr_assert_eq(e->permissions[0], 'd');
		cr_assert(e->modified_time && e->modified_time->seconds > 1500000000,
			  "a listed entry's modification time, in seconds since the epoch");
	}
	cr_assert(saw_tmp, "%s in a listing of /tmp (%zu entries)", listed, entries->n_entries);
	filesystem__list_dir_response__free_unpacked(entries, NULL);
	rmdir(listed);
	free(r.body);
	stat.path = "/tmp";
	n = filesystem__stat_request__pack(&stat, body);
	request("POST", "/filesystem.Filesystem/Stat", hu, body, n, &r);
	cr_assert_eq(r.status, 200, "%d %s", r.status, r.body);
	st = filesystem__stat_response__unpack(NULL, r.len, (const uint8_t *)r.body);
	cr_assert(st && st->entry && st->entry->modified_time, "a StatResponse with a time");
	cr_assert_gt(st->entry->modified_time->seconds, 1500000000, "seconds since the epoch");
	filesystem__stat_response__free_unpacked(st, NULL);
	free(r.body);

	/* A hostile body: errors stay JSON, the code says what. */
	request("POST", "/filesystem.Filesystem/Stat", hu, "\x0a\x09/tm", 5, &r);
	assert_connect_error(&r, 400, "invalid_argument");   /* a length past the end */
	request("POST", "/filesystem.Filesystem/Stat", hu, "\x0a\x03/\x00x", 5, &r);
	assert_connect_error(&r, 400, "invalid_argument");   /* a NUL in the path */
	request("POST", "/filesystem.Filesystem/Stat", hu, "\x0b\x0c", 2, &r);
	assert_connect_error(&r, 400, "invalid_argument");   /* a group */
	request("POST", "/filesystem.Filesystem/Stat", hu, "\x08\x01", 2, &r);
	assert_connect_error(&r, 400, "invalid_argument");   /* path as a varint */
	connect_envelope(body, 0, 2);
	memcpy(body + CONNECT_ENVELOPE_LEN, "\x0a\x7f", 2);
	request("POST", "/process.Process/Start", h, body, CONNECT_ENVELOPE_LEN + 2, &r);
	cr_assert_eq(r.status, 200);
	cr_assert(strstr(r.head, "Content-Type: application/connect+proto"), "%s", r.head);
	cr_assert(strstr(r.body + CONNECT_ENVELOPE_LEN, "invalid_argument"), "%s", r.body + 5);
	free(r.body);
}

Test(serve_e2b, envd_refuses_malformed_rpcs_with_connects_codes)
{
	char id[API_ID_MAX + 1], h[512], hu[512];
	uint8_t env[CONNECT_ENVELOPE_LEN + 2];
	struct reply r;

	create("{}", id);
	envd_headers(h, sizeof(h), id, "Content-Type: application/connect+json\r\n");
	envd_headers(hu, sizeof(hu), id, "Content-Type: application/json\r\n");
	/* A stream's errors: 200 and an end-stream envelope naming them. */
	request("POST", "/process.Process/Start", h, "{}", 2, &r);
	cr_assert_eq(r.status, 200);
	cr_assert_eq((uint8_t)r.body[0], CONNECT_FLAG_END_STREAM);
	cr_assert(strstr(r.body + CONNECT_ENVELOPE_LEN, "invalid_argument"), "%s", r.body + 5);
	free(r.body);
	connect_envelope(env, 0, 10);   /* says 10, has 2 */
	memcpy(env + CONNECT_ENVELOPE_LEN, "{}", 2);
	request("POST", "/process.Process/Start", h, env, sizeof(env), &r);
	cr_assert(strstr(r.body + CONNECT_ENVELOPE_LEN, "invalid_argument"), "%s", r.body + 5);
	free(r.body);
	connect_envelope(env, 0, 2);    /* no process.cmd */
	request("POST", "/process.Process/Start", h, env, sizeof(env), &r);
	cr_assert(strstr(r.body + CONNECT_ENVELOPE_LEN, "invalid_argument"), "%s", r.body + 5);
	free(r.body);
	/* Within the 1 MiB message but over the agent's 256 KiB request. */
	{
		size_t big = 300u << 10, n;
		char *msg = malloc(big + 64);
		uint8_t *body = malloc(big + 64 + CONNECT_ENVELOPE_LEN);

		cr_assert(msg && body);
		n = (size_t)sprintf(msg, "{\"process\":{\"cmd\":\"echo\",\"args\":[\"");
		memset(msg + n, 'a', big);
		n += big;
		n += (size_t)sprintf(msg + n, "\"]}}");
		connect_envelope(body, 0, (uint32_t)n);
		memcpy(body + CONNECT_ENVELOPE_LEN, msg, n);
		request("POST", "/process.Process/Start", h, body, n + CONNECT_ENVELOPE_LEN, &r);
		cr_assert_eq(r.status, 200);
		cr_assert(strstr(r.body + CONNECT_ENVELOPE_LEN, "invalid_argument"), "%s",
			  r.body + CONNECT_ENVELOPE_LEN);
		cr_assert(strstr(r.body + CONNECT_ENVELOPE_LEN, "guest agent"), "%s",
			  r.body + CONNECT_ENVELOPE_LEN);
		free(r.body);
		free(msg);
		free(body);
	}
	/* Unary: wrong type, a missing path, unknown pid, unknown method. */
	request("POST", "/filesystem.Filesystem/Stat", h, "{\"path\":\"/\"}", 12, &r);
	assert_connect_error(&r, 400, "invalid_argument");
	request("POST", "/filesystem.Filesystem/Stat", hu, "{\"path\":\"/no/such/x\"}", 21, &r);
	assert_connect_error(&r, 404, "not_found");
	request("POST", "/filesystem.Filesystem/Stat", hu, "{\"path\":7}", 10, &r);
	assert_connect_error(&r, 400, "invalid_argument");
	request("POST", "/process.Process/SendSignal", hu,
		"{\"process\":{\"pid\":4242},\"signal\":\"SIGNAL_SIGKILL\"}", 50, &r);
	assert_connect_error(&r, 404, "not_found");
	request("POST", "/filesystem.Filesystem/CreateWatcher", hu, "{}", 2, &r);
	assert_connect_error(&r, 400, "invalid_argument");
	request("POST", "/process.Process/StreamInput", hu, "{}", 2, &r);
	assert_connect_error(&r, 501, "unimplemented");
	request("GET", "/process.Process/List", hu, NULL, 0, &r);
	assert_e2b_error(&r, 405);
}

Test(serve_e2b, envd_files_up_and_down_multipart_and_raw)
{
	static const char multi[] =
		"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/tmp/e2b-a\"\r\n"
		"Content-Type: application/octet-stream\r\n\r\nfirst\r\n"
		"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/tmp/e2b-sub/e2b-b\"\r\n"
		"Content-Type: application/octet-stream\r\n\r\nsecond\r\n--XyZ--\r\n";
	char id[API_ID_MAX + 1], h[512];
	struct reply r;
	json_t *j;

	create("{}", id);
	envd_headers(h, sizeof(h), id, "Content-Type: multipart/form-data; boundary=XyZ\r\n");
	request("POST", "/files", h, multi, sizeof(multi) - 1, &r);
	cr_assert_eq(r.status, 200, "%d %s", r.status, r.body);
	j = json_of(&r);
	cr_assert_eq(json_array_size(j), 2, "%s", r.body);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(j, 1), "path")),
			 "/tmp/e2b-sub/e2b-b", "each part to its filename, its parent made");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(j, 1), "name")),
			 "e2b-b");
	json_decref(j);
	free(r.body);
	/* Two parts to one ?path=: refused. */
	request("POST", "/files?path=/tmp/e2b-c", h, multi, sizeof(multi) - 1, &r);
	assert_e2b_error(&r, 400);
	envd_headers(h, sizeof(h), id, "");
	request("GET", "/files?path=/tmp/e2b-a", h, NULL, 0, &r);
	cr_assert_eq(r.status, 200);
	cr_assert_str_eq(r.body, "first");
	free(r.body);
	request("GET", "/files?path=/tmp/e2b-missing", h, NULL, 0, &r);
	assert_e2b_error(&r, 404);
	/* Raw bytes to ?path=; a compressed body and another type refused. */
	envd_headers(h, sizeof(h), id, "Content-Type: application/octet-stream\r\n");
	request("POST", "/files?path=/tmp/e2b-a", h, "replaced", 8, &r);
	cr_assert_eq(r.status, 200, "%d %s", r.status, r.body);
	free(r.body);
	envd_headers(h, sizeof(h), id, "Content-Type: application/octet-stream\r\n"
		     "Content-Encoding: gzip\r\n");
	request("POST", "/files?path=/tmp/e2b-a", h, "zz", 2, &r);
	assert_e2b_error(&r, 415);
	envd_headers(h, sizeof(h), id, "Content-Type: text/plain\r\n");
	request("POST", "/files?path=/tmp/e2b-a", h, "zz", 2, &r);
	assert_e2b_error(&r, 415);
	envd_headers(h, sizeof(h), id, "");
	request("GET", "/files?path=/tmp/e2b-a", h, NULL, 0, &r);
	cr_assert_str_eq(r.body, "replaced", "the refused uploads left the file as it was");
	free(r.body);
	unlink("/tmp/e2b-a");
	unlink("/tmp/e2b-sub/e2b-b");
	rmdir("/tmp/e2b-sub");
}

/* An envd stream call (msg in one envelope) on a new connection, sent:
 * its socket. */
static int stream_call(const char *method, const char *id, const char *msg)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct timeval tv = { .tv_sec = 10 };
	uint8_t env[CONNECT_ENVELOPE_LEN];
	char head[1024];
	int fd = socket(AF_INET, SOCK_STREAM, 0), n;

	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	n = snprintf(head, sizeof(head), "POST %s HTTP/1.1\r\nHost: x\r\n"
		     "E2b-Sandbox-Id: %s\r\nX-Access-Token: " KEY "\r\n"
		     "Content-Type: application/connect+json\r\nContent-Length: %zu\r\n\r\n",
		     method, id, CONNECT_ENVELOPE_LEN + strlen(msg));
	connect_envelope(env, 0, (uint32_t)strlen(msg));
	cr_assert_eq(write(fd, head, (size_t)n), n);
	cr_assert_eq(write(fd, env, sizeof(env)), (ssize_t)sizeof(env));
	cr_assert_eq(write(fd, msg, strlen(msg)), (ssize_t)strlen(msg));
	return fd;
}

/* Read fd into buf (NUL-terminated) until needle comes (or, NULL, the
 * end): the bytes read. */
static size_t read_until(int fd, char *buf, size_t cap, const char *needle)
{
	size_t got = 0;
	ssize_t n;

	while (got < cap - 1 && (!needle || !memmem(buf, got, needle, strlen(needle)))) {
		n = read(fd, buf + got, cap - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	cr_assert(!needle || memmem(buf, got, needle, strlen(needle)), "no %s in: %s", needle, buf);
	return got;
}

#define HAS(buf, n, s) (memmem((buf), (n), (s), strlen(s)) != NULL)

/* A part's head, its one byte, the CRLF and the boundary each in a packet
 * of its own (as the SDK's fetch sends a Blob): libmicrohttpd then hands
 * the part's start over twice (no bytes, then the byte), which was read
 * as a second file (400 with ?path=). */
Test(serve_e2b, a_one_byte_file_whose_part_comes_in_pieces_is_one_file)
{
	static const char part1[] =
		"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/tmp/e2b-one\"\r\n"
		"Content-Type: application/octet-stream\r\n\r\n";
	static const char *const rest[] = { "x", "\r\n", "--XyZ--\r\n" };
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct timeval tv = { .tv_sec = 10 };
	char id[API_ID_MAX + 1], h[512], head[1024], got[2048];
	struct reply r;
	int fd, n;

	create("{}", id);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	n = snprintf(head, sizeof(head), "POST /files?path=/tmp/e2b-one HTTP/1.1\r\nHost: x\r\n"
		     "E2b-Sandbox-Id: %s\r\nX-Access-Token: " KEY "\r\nConnection: close\r\n"
		     "Content-Type: multipart/form-data; boundary=XyZ\r\nContent-Length: %zu\r\n\r\n%s",
		     id, sizeof(part1) - 1 + 1 + 2 + 9, part1);
	cr_assert_eq(write(fd, head, (size_t)n), n);
	for (int i = 0; i < 3; i++) {
		poll(NULL, 0, 100);
		cr_assert_eq(write(fd, rest[i], strlen(rest[i])), (ssize_t)strlen(rest[i]));
	}
	n = (int)read_until(fd, got, sizeof(got), NULL);
	close(fd);
	cr_assert(HAS(got, (size_t)n, "HTTP/1.1 200"), "%s", got);
	envd_headers(h, sizeof(h), id, "");
	request("GET", "/files?path=/tmp/e2b-one", h, NULL, 0, &r);
	cr_assert_eq(r.status, 200);
	cr_assert_str_eq(r.body, "x");
	free(r.body);
	unlink("/tmp/e2b-one");
}

/* Start's stream up to its start event, then the client goes: the pid. */
static unsigned start_and_leave(const char *id, const char *msg)
{
	char buf[4096], *p;
	unsigned pid = 0;
	int fd = stream_call("/process.Process/Start", id, msg);
	size_t n = read_until(fd, buf, sizeof(buf), "\"pid\":");

	p = memmem(buf, n, "\"pid\":", 6);
	cr_assert_eq(sscanf(p, "\"pid\":%u", &pid), 1, "%s", buf);
	close(fd);
	return pid;
}

Test(serve_e2b, a_command_outlives_its_stream_and_connect_reattaches_to_it)
{
	char id[API_ID_MAX + 1], go[100], msg[400], sel[64], h[512], url[100], buf[16384];
	struct timespec t0, t1;
	struct reply r;
	unsigned pid;
	size_t n;
	int fd;

	snprintf(go, sizeof(go), "%s/go", root);
	snprintf(msg, sizeof(msg), "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\",\"echo first; "
		 "while [ ! -e %s ]; do sleep 0.05; done; echo later; exit 4\"]}}", go);
	create("{}", id);
	pid = start_and_leave(id, msg);
	/* Its client went: still running, listed. */
	envd_headers(h, sizeof(h), id, JSON);
	request("POST", "/process.Process/List", h, "{}", 2, &r);
	snprintf(sel, sizeof(sel), "\"pid\":%u", pid);
	cr_assert(r.status == 200 && strstr(r.body, sel), "%d %s", r.status, r.body);
	free(r.body);
	/* No such process: not_found, at the stream's end. */
	fd = stream_call("/process.Process/Connect", id, "{\"process\":{\"pid\":999999}}");
	n = read_until(fd, buf, sizeof(buf), NULL);
	close(fd);
	cr_assert(HAS(buf, n, "HTTP/1.1 200") && HAS(buf, n, "\"not_found\""), "%s", buf);
	/* Reattached: the start event, then what comes from now on. */
	snprintf(sel, sizeof(sel), "{\"process\":{\"pid\":%u}}", pid);
	fd = stream_call("/process.Process/Connect", id, sel);
	read_until(fd, buf, sizeof(buf), "\"start\"");
	{
		/* One client at a time: a second Connect is refused. */
		int fd2 = stream_call("/process.Process/Connect", id, sel);
		char b2[4096];
		size_t n2 = read_until(fd2, b2, sizeof(b2), NULL);

		close(fd2);
		cr_assert(HAS(b2, n2, "\"failed_precondition\""), "%s", b2);
	}
	cr_assert_eq(close(open(go, O_CREAT | O_WRONLY, 0600)), 0);
	n = read_until(fd, buf, sizeof(buf), NULL);
	close(fd);
	cr_assert(HAS(buf, n, "\"stdout\":\"bGF0ZXIK\""), "no \"later\" reattached: %.*s", (int)n, buf);
	cr_assert(HAS(buf, n, "\"exitCode\":4"), "no exit code 4");
	cr_assert(!HAS(buf, n, "\"stdout\":\"Zmlyc3QK\""), "output from before the reattach");

	/* A kept command ends with its sandbox's kill, at the first DELETE. */
	start_and_leave(id, "{\"process\":{\"cmd\":\"sleep\",\"args\":[\"30\"]}}");
	snprintf(url, sizeof(url), "/sandboxes/%s", id);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	request("DELETE", url, HKEY, NULL, 0, &r);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	cr_assert_eq(r.status, 204, "%d %s", r.status, r.body);
	free(r.body);
	cr_assert_lt(t1.tv_sec - t0.tv_sec, 10);
}

Test(serve_e2b, a_sandbox_past_its_timeout_ends_its_commands_and_goes)
{
	char id[API_ID_MAX + 1], url[100], buf[8192];
	struct reply r;
	size_t n;
	int fd, st = 0;

	create("{\"timeout\":2}", id);
	/* A client that never lets go of its command's stream. */
	fd = stream_call("/process.Process/Start", id, "{\"process\":{\"cmd\":\"sleep\","
			 "\"args\":[\"60\"]}}");
	n = read_until(fd, buf, sizeof(buf), NULL);   /* to the stream's end (10 s at most) */
	close(fd);
	cr_assert(HAS(buf, n, "\"end\"") && HAS(buf, n, "signal: killed"),
		  "the command did not end at the timeout: %.*s", (int)n, buf);
	snprintf(url, sizeof(url), "/sandboxes/%s", id);
	for (int i = 0; i < 50 && st != 404; i++) {
		if (i)
			poll(NULL, 0, 100);
		request("GET", url, HKEY, NULL, 0, &r);
		st = r.status;
		free(r.body);
	}
	cr_assert_eq(st, 404, "the sandbox outlived its timeout");
}

Test(serve_e2b, watch_dir_streams_a_directorys_events_and_watchers_poll_them)
{
	char id[API_ID_MAX + 1], other[API_ID_MAX + 1], dir[128], msg[300], h[512], url[300], buf[8192], wid[64];
	struct reply r;
	json_t *j;
	size_t n;
	int fd;

	/* The fake guest is this host: its agent watches our files. */
	snprintf(dir, sizeof(dir), "%s/watched", root);
	cr_assert_eq(mkdir(dir, 0700), 0);
	create("{}", id);
	snprintf(msg, sizeof(msg), "{\"path\":\"%s\",\"recursive\":true}", dir);
	fd = stream_call("/filesystem.Filesystem/WatchDir", id, msg);
	n = read_until(fd, buf, sizeof(buf), "{\"start\":{}}");
	snprintf(url, sizeof(url), "%s/new.txt", dir);
	cr_assert_eq(close(open(url, O_CREAT | O_WRONLY, 0600)), 0);
	n = read_until(fd, buf, sizeof(buf), "\"type\":\"EVENT_TYPE_CREATE\"");
	cr_assert(HAS(buf, n, "{\"filesystem\":{\"name\":\"new.txt\",\"type\":\"EVENT_TYPE_CREATE\"}}"),
		  "%.*s", (int)n, buf);
	close(fd);
	/* A missing directory: not_found, at the stream's end. */
	snprintf(msg, sizeof(msg), "{\"path\":\"%s/none\"}", dir);
	fd = stream_call("/filesystem.Filesystem/WatchDir", id, msg);
	n = read_until(fd, buf, sizeof(buf), NULL);
	close(fd);
	cr_assert(HAS(buf, n, "\"not_found\""), "%.*s", (int)n, buf);

	/* A watcher: made, polled, removed. */
	envd_headers(h, sizeof(h), id, JSON);
	snprintf(msg, sizeof(msg), "{\"path\":\"%s\"}", dir);
	request("POST", "/filesystem.Filesystem/CreateWatcher", h, msg, strlen(msg), &r);
	cr_assert_eq(r.status, 200, "%d %s", r.status, r.body);
	j = json_of(&r);
	snprintf(wid, sizeof(wid), "%s", json_string_value(json_object_get(j, "watcherId")));
	json_decref(j);
	free(r.body);
	cr_assert_eq(strlen(wid), 32, "a watcher id: %s", wid);
	snprintf(url, sizeof(url), "%s/polled.txt", dir);
	cr_assert_eq(close(open(url, O_CREAT | O_WRONLY, 0600)), 0);
	snprintf(msg, sizeof(msg), "{\"watcherId\":\"%s\"}", wid);
	for (int i = 0; i < 50; i++) {
		request("POST", "/filesystem.Filesystem/GetWatcherEvents", h, msg, strlen(msg), &r);
		cr_assert_eq(r.status, 200, "%d %s", r.status, r.body);
		if (strstr(r.body, "polled.txt"))
			break;
		free(r.body);
		r.body = NULL;
		poll(NULL, 0, 100);
	}
	cr_assert_not_null(r.body, "GetWatcherEvents never gave the new file");
	cr_assert(strstr(r.body, "{\"events\":[{\"name\":\"polled.txt\",\"type\":\"EVENT_TYPE_CREATE\"}"),
		  "%s", r.body);
	free(r.body);
	request("POST", "/filesystem.Filesystem/RemoveWatcher", h, msg, strlen(msg), &r);
	cr_assert_eq(r.status, 200, "%d %s", r.status, r.body);
	free(r.body);
	request("POST", "/filesystem.Filesystem/GetWatcherEvents", h, msg, strlen(msg), &r);
	assert_connect_error(&r, 404, "not_found");
	request("POST", "/filesystem.Filesystem/RemoveWatcher", h, "{}", 2, &r);
	assert_connect_error(&r, 400, "invalid_argument");

	/* One sandbox holds E2B_SANDBOX_WATCHERS at most; another still gets one. */
	snprintf(msg, sizeof(msg), "{\"path\":\"%s\"}", dir);
	for (int i = 0; i < E2B_SANDBOX_WATCHERS; i++) {
		request("POST", "/filesystem.Filesystem/CreateWatcher", h, msg, strlen(msg), &r);
		cr_assert_eq(r.status, 200, "watcher %d: %d %s", i, r.status, r.body);
		free(r.body);
	}
	request("POST", "/filesystem.Filesystem/CreateWatcher", h, msg, strlen(msg), &r);
	cr_assert(strstr(r.body, "in this sandbox"), "%s", r.body);
	assert_connect_error(&r, 429, "resource_exhausted");
	create("{}", other);
	envd_headers(h, sizeof(h), other, JSON);
	request("POST", "/filesystem.Filesystem/CreateWatcher", h, msg, strlen(msg), &r);
	cr_assert_eq(r.status, 200, "another sandbox's watcher: %d %s", r.status, r.body);
	free(r.body);
}

/* --- published ports: PORT-ID.DOMAIN to a server "in the guest" (here the
 * fake guest's agent connects to the host's loopback) --------------------- */

/* A server that takes one connection at a time: reads a request head
 * (and a Content-Length body), keeps it, sends `answer` and closes. */
struct guest_server {
	int lfd;
	uint16_t port;
	const char *answer;
	size_t answer_len;
	unsigned conns;            /* to serve, then the thread ends */
	char got[8192];
	pthread_t thread;
};

static void *guest_server_main(void *arg)
{
	struct guest_server *g = arg;

	for (unsigned c = 0; c < g->conns; c++) {
		int fd = accept(g->lfd, NULL, NULL);
		size_t len = 0, want = SIZE_MAX;
		struct timeval tv = { .tv_sec = 5 };
		char *end;

		if (fd < 0)
			break;
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		memset(g->got, 0, sizeof(g->got));
		while (len < sizeof(g->got) - 1 && len < want) {
			ssize_t n = read(fd, g->got + len, sizeof(g->got) - 1 - len);

			if (n <= 0)
				break;
			len += (size_t)n;
			end = strstr(g->got, "\r\n\r\n");
			if (end && want == SIZE_MAX) {
				const char *cl = strcasestr(g->got, "\r\nContent-Length: ");

				want = (size_t)(end + 4 - g->got) + (cl ? strtoul(cl + 18, NULL, 10) : 0);
			}
		}
		(void)!write(fd, g->answer, g->answer_len);
		close(fd);
	}
	return NULL;
}

static void guest_server_start(struct guest_server *g, const char *answer, size_t len,
			       unsigned conns)
{
	uint16_t keep = port;

	g->lfd = listen_any();
	g->port = port;
	port = keep;
	g->answer = answer;
	g->answer_len = len;
	g->conns = conns;
	cr_assert_eq(pthread_create(&g->thread, NULL, guest_server_main, g), 0);
}

static void guest_server_stop(struct guest_server *g)
{
	shutdown(g->lfd, SHUT_RDWR);
	pthread_join(g->thread, NULL);
	close(g->lfd);
}

/* create's trafficAccessToken for a new sandbox. */
static void create_with_token(char *id, char *token)
{
	struct reply r;
	json_t *j;

	request("POST", "/v2/sandboxes", HKEY JSON, "{}", 2, &r);
	cr_assert_eq(r.status, 201, "%d %s", r.status, r.body);
	j = json_of(&r);
	snprintf(id, API_ID_MAX + 1, "%s", json_string_value(json_object_get(j, "sandboxID")));
	cr_assert_eq(strlen(json_string_value(json_object_get(j, "trafficAccessToken")) ?: ""),
		     PORT_TOKEN_LEN, "%s", r.body);
	strcpy(token, json_string_value(json_object_get(j, "trafficAccessToken")));
	json_decref(j);
	free(r.body);
}

Test(serve_e2b, a_published_port_passes_the_request_as_sent_and_streams_the_answer_back)
{
	static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
				     "X-Guest: yes\r\nConnection: close\r\n\r\nhello from the guest";
	char id[API_ID_MAX + 1], token[64], host[128], h[256];
	struct guest_server g;
	struct reply r;

	guest_server_start(&g, answer, sizeof(answer) - 1, 2);
	create_with_token(id, token);
	snprintf(host, sizeof(host), "%u-%s.mayfly.test", g.port, id);
	req_host = host;
	snprintf(h, sizeof(h), "e2b-traffic-access-token: %s\r\nX-Custom: 1\r\n", token);
	request("GET", "/a%2Fb?x=1&y=%20", h, NULL, 0, &r);
	cr_assert_eq(r.status, 200, "%d %s", r.status, r.body);
	cr_assert_str_eq(r.body, "hello from the guest");
	cr_assert(strcasestr(r.head, "X-Guest: yes"), "%s", r.head);
	/* The target unescaped as sent, HTTP/1.0 and close, the client's
	 * headers but never its token. */
	cr_assert(!strncmp(g.got, "GET /a%2Fb?x=1&y=%20 HTTP/1.0\r\n", 31), "%s", g.got);
	cr_assert(strstr(g.got, "\r\nHost: "), "%s", g.got);
	cr_assert(strstr(g.got, host), "%s", g.got);
	cr_assert(strcasestr(g.got, "X-Custom: 1"), "%s", g.got);
	cr_assert(!strcasestr(g.got, "traffic-access-token") && !strstr(g.got, token), "%s", g.got);
	free(r.body);

	/* An API key opens it too, and stays out of the guest's sight. */
	request("POST", "/form", HKEY, "a=1&b=2", 7, &r);
	cr_assert_eq(r.status, 200, "%d %s", r.status, r.body);
	cr_assert(strstr(g.got, "POST /form HTTP/1.0\r\n"), "%s", g.got);
	cr_assert(strstr(g.got, "\r\n\r\na=1&b=2"), "the body passed on: %s", g.got);
	cr_assert(!strstr(g.got, KEY), "%s", g.got);
	free(r.body);
	req_host = "x";
	guest_server_stop(&g);
}

Test(serve_e2b, a_published_port_wants_its_own_sandboxs_token)
{
	static const char answer[] = "HTTP/1.0 204 No Content\r\n\r\n";
	char a[API_ID_MAX + 1], b[API_ID_MAX + 1], ta[64], tb[64], host[128], h[256];
	struct guest_server g;
	struct reply r;

	guest_server_start(&g, answer, sizeof(answer) - 1, 1);
	create_with_token(a, ta);
	create_with_token(b, tb);
	cr_assert_str_neq(ta, tb);
	snprintf(host, sizeof(host), "%u-%s.MAYFLY.test:8080", g.port, a);
	req_host = host;
	request("GET", "/", NULL, NULL, 0, &r);
	assert_e2b_error(&r, 401);
	snprintf(h, sizeof(h), "e2b-traffic-access-token: %s\r\n", tb);
	request("GET", "/", h, NULL, 0, &r);
	assert_e2b_error(&r, 403);
	request("GET", "/", "X-API-KEY: not-a-key\r\n", NULL, 0, &r);
	assert_e2b_error(&r, 403);
	snprintf(h, sizeof(h), "e2b-traffic-access-token: %s\r\n", ta);
	request("GET", "/", h, NULL, 0, &r);
	cr_assert_eq(r.status, 204, "%d %s", r.status, r.body);
	free(r.body);
	/* No sandbox of that id: 404; an upgrade with a body: 400. */
	snprintf(host, sizeof(host), "%u-nosuch.mayfly.test", g.port);
	request("GET", "/", HKEY, NULL, 0, &r);
	assert_e2b_error(&r, 404);
	snprintf(host, sizeof(host), "%u-%s.mayfly.test", g.port, a);
	request("POST", "/", HKEY "Upgrade: websocket\r\n", "x", 1, &r);
	assert_e2b_error(&r, 400);
	/* Headers past libmicrohttpd's 32 KiB: refused before any of ours runs. */
	{
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
					  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		struct timeval tv = { .tv_sec = 10 };
		size_t big = 40000, n;
		char *req = malloc(big + 256), got[64] = "";
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		cr_assert_not_null(req);
		n = (size_t)sprintf(req, "GET / HTTP/1.1\r\nHost: %s\r\nX-Big: ", host);
		memset(req + n, 'a', big);
		n += big;
		n += (size_t)sprintf(req + n, "\r\n\r\n");
		cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		(void)!write(fd, req, n);
		cr_assert_gt(read(fd, got, sizeof(got) - 1), 0, "no answer to oversized headers");
		cr_assert(!strncmp(got, "HTTP/1.1 431", 12) || !strncmp(got, "HTTP/1.1 413", 12) ||
			  !strncmp(got, "HTTP/1.1 400", 12), "%s", got);
		close(fd);
		free(req);
	}
	req_host = "x";
	guest_server_stop(&g);
}

Test(serve_e2b, a_closed_port_or_a_broken_server_is_a_502_that_says_why)
{
	static const char *const answers[] = {
		"SSH-2.0-OpenSSH\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\n folded: x\r\n\r\n",
		"",
		/* Interim responses without end: nine, where eight are taken. */
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n"
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n"
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n"
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n"
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n",
		/* A 101 to a request that asked for no upgrade. */
		"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n",
	};
	char id[API_ID_MAX + 1], token[64], host[128];
	struct guest_server g;
	struct reply r;

	create_with_token(id, token);
	req_host = host;
	for (size_t i = 0; i < sizeof(answers) / sizeof(answers[0]); i++) {
		guest_server_start(&g, answers[i], strlen(answers[i]), 1);
		snprintf(host, sizeof(host), "%u-%s.mayfly.test", g.port, id);
		request("GET", "/", HKEY, NULL, 0, &r);
		cr_assert_eq(r.status, 502, "answer %zu: %d %s", i, r.status, r.body);
		cr_assert(strstr(r.body, "the guest's server"), "answer %zu: %s", i, r.body);
		free(r.body);
		guest_server_stop(&g);
	}
	/* One interim response, then the real one with a length: passed on. */
	{
		static const char ok[] = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"
					 "Content-Length: 2\r\n\r\nokTRAILING";

		guest_server_start(&g, ok, sizeof(ok) - 1, 1);
		snprintf(host, sizeof(host), "%u-%s.mayfly.test", g.port, id);
		request("GET", "/", HKEY, NULL, 0, &r);
		cr_assert_eq(r.status, 200, "%d %s", r.status, r.body);
		cr_assert_str_eq(r.body, "ok", "the body is its Content-Length, no more");
		free(r.body);
		guest_server_stop(&g);
	}
	/* A head over 32 KiB. */
	{
		size_t big = PORT_HEAD_MAX + 100;
		char *answer = malloc(big + 1);

		memcpy(answer, "HTTP/1.1 200 OK\r\nX-Big: ", 24);
		memset(answer + 24, 'a', big - 24);
		answer[big] = '\0';
		guest_server_start(&g, answer, big, 1);
		snprintf(host, sizeof(host), "%u-%s.mayfly.test", g.port, id);
		request("GET", "/", HKEY, NULL, 0, &r);
		cr_assert_eq(r.status, 502, "%d %s", r.status, r.body);
		cr_assert(strstr(r.body, "32 KiB"), "%s", r.body);
		free(r.body);
		guest_server_stop(&g);
		free(answer);
	}
	/* Nothing listens: a port just closed. */
	guest_server_start(&g, "", 0, 0);
	guest_server_stop(&g);
	snprintf(host, sizeof(host), "%u-%s.mayfly.test", g.port, id);
	request("GET", "/", HKEY, NULL, 0, &r);
	cr_assert_eq(r.status, 502, "%d %s", r.status, r.body);
	cr_assert(strstr(r.body, "nothing listens on port"), "%s", r.body);
	free(r.body);
	req_host = "x";
}

/* A WebSocket server "in the guest": its 101 and a first message, then an
 * echo of whatever comes until the end. */
static void *ws_server_main(void *arg)
{
	static const char yes[] = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
				  "Connection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
				  "\r\nearly";
	struct guest_server *g = arg;
	int fd = accept(g->lfd, NULL, NULL);
	size_t len = 0;
	char buf[4096];
	ssize_t n;

	if (fd < 0)
		return NULL;
	while (len < sizeof(g->got) - 1 && !strstr(g->got, "\r\n\r\n") &&
	       (n = read(fd, g->got + len, sizeof(g->got) - 1 - len)) > 0)
		len += (size_t)n;
	(void)!write(fd, yes, sizeof(yes) - 1);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		(void)!write(fd, buf, (size_t)n);
	close(fd);
	return NULL;
}

Test(serve_e2b, a_published_port_upgrades_to_a_websocket_and_relays_both_ways)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	char id[API_ID_MAX + 1], token[64], head[1024], got[4096];
	struct timeval tv = { .tv_sec = 10 };
	struct guest_server g = { 0 };
	uint16_t keep = port;
	size_t len = 0;
	ssize_t n;
	int fd;

	g.lfd = listen_any();
	g.port = port;
	port = keep;
	cr_assert_eq(pthread_create(&g.thread, NULL, ws_server_main, &g), 0);
	create_with_token(id, token);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	n = snprintf(head, sizeof(head), "GET /ws?room=1 HTTP/1.1\r\nHost: %u-%s.mayfly.test\r\n"
		     "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
		     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\ne2b-traffic-access-token: %s\r\n"
		     "\r\n", g.port, id, token);
	cr_assert_eq(write(fd, head, (size_t)n), n);
	while (len < sizeof(got) - 1 && !(strstr(got, "\r\n\r\n") && strstr(got, "early"))) {
		n = read(fd, got + len, sizeof(got) - 1 - len);
		cr_assert_gt(n, 0, "the upgrade's answer: %.*s; the guest saw: %s", (int)len, got, g.got);
		len += (size_t)n;
		got[len] = '\0';
	}
	cr_assert(!strncmp(got, "HTTP/1.1 101", 12), "%s", got);
	cr_assert(strcasestr(got, "\r\nUpgrade: websocket"), "%s", got);
	cr_assert(strstr(got, "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), "%s", got);
	/* The guest saw an HTTP/1.1 upgrade with the key, and no token. */
	cr_assert(!strncmp(g.got, "GET /ws?room=1 HTTP/1.1\r\n", 25), "%s", g.got);
	cr_assert(strcasestr(g.got, "Upgrade: websocket"), "%s", g.got);
	cr_assert(strstr(g.got, "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="), "%s", g.got);
	cr_assert(!strstr(g.got, token), "%s", g.got);
	/* Both ways, raw, as often as wanted. */
	for (int i = 0; i < 3; i++) {
		char msg[32];
		size_t want = (size_t)snprintf(msg, sizeof(msg), "frame %d", i);

		len = 0;
		cr_assert_eq(write(fd, msg, want), (ssize_t)want);
		while (len < want && (n = read(fd, got + len, want - len)) > 0)
			len += (size_t)n;
		cr_assert_eq(len, want);
		cr_assert(!memcmp(got, msg, want));
	}
	close(fd);
	pthread_join(g.thread, NULL);   /* the guest's end saw the close */
	close(g.lfd);
}

/* --- TLS (--e2b-cert/--e2b-key): tests/data's self-signed localhost pair --- */

#define CERT "../data/tls-cert.pem"
#define CERT_KEY "../data/tls-key.pem"

static SSL *tls_dial(SSL_CTX **ctx, uint16_t p, int *fd_out)
{
	static const unsigned char alpn[] = "\x02h2\x08http/1.1";
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(p),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	SSL *ssl;

	*ctx = SSL_CTX_new(TLS_client_method());
	cr_assert_eq(SSL_CTX_load_verify_locations(*ctx, CERT, NULL), 1);
	SSL_CTX_set_verify(*ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_alpn_protos(*ctx, alpn, sizeof(alpn) - 1);
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ssl = SSL_new(*ctx);
	SSL_set_fd(ssl, fd);
	SSL_set_tlsext_host_name(ssl, "localhost");
	SSL_set1_host(ssl, "localhost");
	*fd_out = fd;
	return ssl;
}

Test(serve_e2b, tls_serves_the_same_api_with_http11_alpn_and_refuses_plain_text_and_silence)
{
	static const char req[] = "GET /v2/sandboxes HTTP/1.1\r\nHost: localhost\r\n"
				  "X-API-KEY: " KEY "\r\nConnection: close\r\n\r\n";
	struct e2b_server e2 = { 0 };
	struct tls_front t;
	const unsigned char *proto;
	unsigned proto_len;
	char got[4096], err[300];
	uint16_t keep = port, tls_port;
	size_t len = 0;
	SSL_CTX *ctx;
	SSL *ssl;
	int fd, n;

	cr_assert_eq(tls_front_load(&t, CERT, "../data/tls-other-key.pem", err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "is not the key of"), "%s", err);
	cr_assert_eq(tls_front_load(&t, "../data/nosuch.pem", CERT_KEY, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "--e2b-cert"), "%s", err);
	cr_assert_eq(tls_front_load(&t, CERT, CERT_KEY, err, sizeof(err)), 0, "%s", err);
	e2 = (struct e2b_server){ .listen_fd = listen_any(), .svc = svc, .tokens = &tokens,
				  .max_file = 1 << 20, .head_timeout_ms = 1000, .tls = &t };
	tls_port = port;
	port = keep;
	snprintf(e2.domain, sizeof(e2.domain), "mayfly.test");
	cr_assert_eq(e2b_start(&e2), 0);

	/* A verified handshake, ALPN http/1.1 though h2 came first, the API. */
	ssl = tls_dial(&ctx, tls_port, &fd);
	cr_assert_eq(SSL_connect(ssl), 1, "the handshake");
	SSL_get0_alpn_selected(ssl, &proto, &proto_len);
	cr_assert_eq(proto_len, 8);
	cr_assert(!memcmp(proto, "http/1.1", 8));
	cr_assert_eq(SSL_write(ssl, req, sizeof(req) - 1), (int)sizeof(req) - 1);
	while (len < sizeof(got) - 1 && (n = SSL_read(ssl, got + len, (int)(sizeof(got) - 1 - len))) > 0)
		len += (size_t)n;
	got[len] = '\0';
	cr_assert(!strncmp(got, "HTTP/1.1 200", 12), "%s", got);
	cr_assert(strstr(got, "\r\n\r\n["), "a list: %s", got);
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	close(fd);

	/* Plain HTTP on the TLS port: no answer but the close. */
	{
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(tls_port),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		struct timeval tv = { .tv_sec = 5 };
		char buf[256];

		fd = socket(AF_INET, SOCK_STREAM, 0);
		cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		cr_assert_eq(write(fd, req, sizeof(req) - 1), (ssize_t)sizeof(req) - 1);
		n = (int)read(fd, buf, sizeof(buf));
		cr_assert(n <= 0 || strncmp(buf, "HTTP/", 5), "plain HTTP was answered");
		close(fd);
		/* A client that never says hello is cut after the handshake's time. */
		fd = socket(AF_INET, SOCK_STREAM, 0);
		cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		cr_assert_eq(read(fd, buf, sizeof(buf)), 0, "the silent client was not cut in 5 s");
		close(fd);
		/* A crowd of silent ones, on a front whose handshakes have a
		 * minute: the 65th has one of the others cut at once. */
		e2b_stop(&e2);
		e2.head_timeout_ms = 60000;
		e2.listen_fd = listen_any();
		a.sin_port = htons(port);
		port = keep;
		cr_assert_eq(e2b_start(&e2), 0);
		{
			int fds[TLS_MAX_HANDSHAKES + 1], cut = 0;

			for (int i = 0; i <= TLS_MAX_HANDSHAKES; i++) {
				fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
				connect(fds[i], (struct sockaddr *)&a, sizeof(a));
				if (i < TLS_MAX_HANDSHAKES)
					poll(NULL, 0, 2);   /* each in its handshake before the next */
			}
			for (int w = 0; w < 50 && !cut; w++) {
				poll(NULL, 0, 100);
				for (int i = 0; i < TLS_MAX_HANDSHAKES && !cut; i++)
					cut = read(fds[i], buf, sizeof(buf)) == 0 ||
					      (errno == ECONNRESET);
			}
			cr_assert(cut, "no silent client was cut for the newcomer in 5 s");
			for (int i = 0; i <= TLS_MAX_HANDSHAKES; i++)
				close(fds[i]);
		}
	}
	e2b_stop(&e2);
	tls_front_free(&t);
}
