/* test_serve_http.c - mayfly serve's HTTP front end on a real Unix socket with a service holding no VM: TLS refused cleanly, tokens, routes, bodies bounded, errors as JSON. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "serve/http.h"
#include "serve/service.h"

#define TOKEN "0123456789abcdef0123"

static char root[] = "/tmp/serve-http-XXXXXX";
static char sock[100];
static struct service *svc;
static struct http_server http;
static struct tokens tokens;

static void setup(void)
{
	char err[200];
	int fd;

	signal(SIGPIPE, SIG_IGN);
	cr_assert_not_null(mkdtemp(root));
	snprintf(sock, sizeof(sock), "%s/api.sock", root);
	svc = calloc(1, sizeof(*svc));
	svc->cfg.state = root;
	svc->cfg.max_sandboxes = 4;
	svc->cfg.call_timeout_s = 5;
	snprintf(svc->cfg.tmpl[0].name, sizeof(svc->cfg.tmpl[0].name), "default");
	snprintf(svc->cfg.tmpl[0].id, sizeof(svc->cfg.tmpl[0].id), "abc");
	svc->cfg.ntmpl = 1;
	cr_assert_eq(service_start(svc), 0);
	cr_assert_eq(tokens_parse(&tokens, "alice " TOKEN "\n", strlen("alice " TOKEN "\n"), err,
				  sizeof(err)), 0);
	fd = http_listen_unix(sock, err, sizeof(err));
	cr_assert_geq(fd, 0, "%s", err);
	http = (struct http_server){ .listen_fd = fd, .svc = svc, .tokens = &tokens,
				     .max_file = 1024, .head_timeout_ms = 1000 };
	snprintf(http.unix_path, sizeof(http.unix_path), "%s", sock);
	cr_assert_eq(http_start(&http, 0), 0);
}

static void teardown(void)
{
	http_stop(&http);
	service_stop(svc, 0);
	service_destroy(svc);
	free(svc);
	rmdir(root);   /* only sb/ may be left: */
	{
		char sb[256];

		snprintf(sb, sizeof(sb), "%s/sb", root);
		rmdir(sb);
		rmdir(root);
	}
}

TestSuite(serve_http, .init = setup, .fini = teardown);

struct reply {
	int status;
	char head[2048];
	char body[8192];
};

/* A new connection to the API; a read on it fails after 5 s rather than
 * hang on a connection the server keeps open. */
static int dial(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = 5 };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	strcpy(sa.sun_path, sock);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

/* One request on a new connection (Connection: close), the whole reply. */
static void request(const char *method, const char *url, const char *headers, const char *body,
		    size_t body_len, struct reply *r)
{
	char head[1024], buf[16384];
	size_t got = 0, hl;
	ssize_t n;
	char *sep;
	int fd = dial();

	memset(r, 0, sizeof(*r));
	hl = (size_t)snprintf(head, sizeof(head), "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
			      "%sContent-Length: %zu\r\n\r\n", method, url, headers ? headers : "",
			      body_len);
	cr_assert_eq(write(fd, head, hl), (ssize_t)hl);
	if (body_len)
		/* A large body may be cut short by an early answer: that is fine. */
		(void)!write(fd, body, body_len);
	while ((n = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0)
		got += (size_t)n;
	close(fd);
	buf[got] = '\0';
	cr_assert_eq(sscanf(buf, "HTTP/1.1 %d", &r->status), 1, "reply: %s", buf);
	sep = strstr(buf, "\r\n\r\n");
	cr_assert_not_null(sep);
	snprintf(r->head, sizeof(r->head), "%.*s", (int)(sep - buf), buf);
	snprintf(r->body, sizeof(r->body), "%s", sep + 4);
}

#define AUTH "Authorization: Bearer " TOKEN "\r\n"
#define JSON_CT "Content-Type: application/json\r\n"

/* The body is one JSON error with this code, its message containing want. */
static void assert_error(const struct reply *r, int status, const char *code, const char *want)
{
	json_t *j = json_loads(r->body, 0, NULL);

	cr_assert_eq(r->status, status, "status %d, body %s", r->status, r->body);
	cr_assert_not_null(j, "not JSON: %s", r->body);
	cr_assert_str_eq(json_string_value(json_object_get(j, "code")), code);
	cr_assert(strstr(json_string_value(json_object_get(j, "error")), want), "%s", r->body);
	json_decref(j);
}

Test(serve_http, a_daemon_asked_for_tls_fails_cleanly)
{
	struct http_server h = { .listen_fd = -1, .svc = svc };
	char err[200];

	h.listen_fd = http_listen_unix("/tmp/serve-http-tls.sock", err, sizeof(err));
	cr_assert_geq(h.listen_fd, 0, "%s", err);
	/* No key or certificate either: with our GnuTLS stand-ins it must
	 * fail at set-up, never reach a TLS session. */
	cr_assert_eq(http_start(&h, MHD_USE_TLS), -EIO);
	cr_assert_null(h.daemon);
	snprintf(h.unix_path, sizeof(h.unix_path), "/tmp/serve-http-tls.sock");
	http_stop(&h);
	cr_assert_eq(access("/tmp/serve-http-tls.sock", F_OK), -1);
}

Test(serve_http, health_needs_no_token_everything_else_does)
{
	struct reply r;

	request("GET", "/health", NULL, NULL, 0, &r);
	cr_assert_eq(r.status, 200);
	cr_assert(strstr(r.body, "\"status\":\"ok\""), "%s", r.body);
	request("GET", "/sandboxes", NULL, NULL, 0, &r);
	assert_error(&r, 401, "unauthorized", "token");
	cr_assert(strstr(r.head, "WWW-Authenticate: Bearer"), "%s", r.head);
	request("GET", "/sandboxes", "Authorization: Bearer " TOKEN "x\r\n", NULL, 0, &r);
	assert_error(&r, 401, "unauthorized", "token");
	request("GET", "/sandboxes", "Authorization: Basic " TOKEN "\r\n", NULL, 0, &r);
	assert_error(&r, 401, "unauthorized", "token");
	request("GET", "/sandboxes", AUTH, NULL, 0, &r);
	cr_assert_eq(r.status, 200);
	cr_assert_str_eq(r.body, "{\"sandboxes\":[]}\n");
	/* Without a token no route is told from another: 401, not 404. */
	request("GET", "/nope", NULL, NULL, 0, &r);
	assert_error(&r, 401, "unauthorized", "token");
}

/* The raw reply to `text` sent whole on a new connection, read to its end. */
static void raw(const char *text, char *out, size_t len)
{
	size_t got = 0;
	ssize_t n;
	int fd = dial();

	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	while (got < len - 1 && (n = read(fd, out + got, len - 1 - got)) > 0)
		got += (size_t)n;
	out[got] = '\0';
	close(fd);
}

/* Two Content-Length headers, or one with chunked encoding: 400, and the
 * connection closed (the request that would follow is never served). */
Test(serve_http, an_ambiguous_body_length_is_400_and_closes)
{
	static const char *const cases[] = {
		"POST /sandboxes HTTP/1.1\r\nHost: x\r\n" AUTH JSON_CT
		"Content-Length: 2\r\nContent-Length: 40\r\n\r\n{}"
		"GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /sandboxes HTTP/1.1\r\nHost: x\r\n" AUTH JSON_CT
		"Content-Length: 7\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
		"GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
	};
	char buf[8192];

	for (size_t i = 0; i < 2; i++) {
		raw(cases[i], buf, sizeof(buf));
		cr_assert(!strncmp(buf, "HTTP/1.1 400", 12), "case %zu: %.200s", i, buf);
		cr_assert(strstr(buf, "ambiguous"), "case %zu: %.300s", i, buf);
		cr_assert_null(strstr(buf + 12, "HTTP/1.1 "), "case %zu: a second reply: %s", i, buf);
	}
}

/* 300 connections that never finish a request head, from a client with no
 * token, do not hold the API: /health and an authorised call answer at
 * once, and every one of them is cut within the head timeout (1 s here). */
Test(serve_http, half_sent_requests_do_not_hold_the_api, .timeout = 60)
{
	enum { N = 300 };
	static const char head[] = "GET /sandboxes HTTP/1.1\r\nHost: x\r\n";
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fds[N], open_n = 0;
	struct reply r;

	strcpy(sa.sun_path, sock);
	for (int i = 0; i < N; i++) {
		fds[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
		cr_assert_geq(fds[i], 0);
		if (connect(fds[i], (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			(void)!write(fds[i], head, sizeof(head) - 1);
			open_n++;
		}
	}
	cr_assert_gt(open_n, 100, "only %d connections", open_n);
	request("GET", "/health", NULL, NULL, 0, &r);
	cr_assert_eq(r.status, 200);
	request("GET", "/sandboxes", AUTH, NULL, 0, &r);
	cr_assert_eq(r.status, 200);
	/* Each staller's end comes within the timeout (and a tick). */
	for (int i = 0; i < N; i++) {
		struct pollfd p = { .fd = fds[i], .events = POLLIN };
		char b[64];

		cr_assert_eq(poll(&p, 1, 5000), 1, "connection %d still held after 5 s", i);
		while (read(fds[i], b, sizeof(b)) > 0)
			;
		close(fds[i]);
	}
	/* And the server lets go of them: nothing waits once they are closed. */
	for (int i = 0; i < 100; i++) {
		unsigned w;

		pthread_mutex_lock(&http.guard.lock);
		w = http.guard.waiting;
		pthread_mutex_unlock(&http.guard.lock);
		if (!w)
			return;
		usleep(50000);
	}
	cr_assert_fail("connections still waiting 5 s after their clients closed");
}

Test(serve_http, unknown_routes_sandboxes_and_methods)
{
	struct reply r;

	request("GET", "/nope", AUTH, NULL, 0, &r);
	assert_error(&r, 404, "not_found", "no route");
	request("GET", "/sandboxes/0123abcd", AUTH, NULL, 0, &r);
	assert_error(&r, 404, "not_found", "no sandbox '0123abcd'");
	request("DELETE", "/sandboxes/0123abcd", AUTH, NULL, 0, &r);
	assert_error(&r, 404, "not_found", "no sandbox");
	request("POST", "/sandboxes/0123abcd/exec", AUTH JSON_CT, "{\"argv\":[\"true\"]}", 17, &r);
	assert_error(&r, 404, "not_found", "no sandbox");
	request("GET", "/sandboxes/0123abcd/files?path=/etc/hostname", AUTH, NULL, 0, &r);
	assert_error(&r, 404, "not_found", "no sandbox");
	request("PATCH", "/sandboxes/0123abcd", AUTH, NULL, 0, &r);
	assert_error(&r, 405, "method_not_allowed", "allowed: GET, DELETE");
	cr_assert(strstr(r.head, "Allow: GET, DELETE"), "%s", r.head);
}

Test(serve_http, bad_bodies_are_4xx_with_a_message)
{
	static char big[HTTP_MAX_JSON_BODY + 16];
	struct reply r;

	request("POST", "/sandboxes", AUTH JSON_CT, "{\"cpus\":", 8, &r);
	assert_error(&r, 400, "bad_request", "malformed JSON");
	request("POST", "/sandboxes", AUTH JSON_CT, "{\"gpus\":1}", 10, &r);
	assert_error(&r, 400, "bad_request", "unknown member \"gpus\"");
	request("POST", "/sandboxes", AUTH "Content-Type: text/plain\r\n", "{}", 2, &r);
	assert_error(&r, 415, "unsupported_media_type", "application/json");
	memset(big, ' ', sizeof(big));
	request("POST", "/sandboxes", AUTH JSON_CT, big, sizeof(big), &r);
	assert_error(&r, 413, "too_large", "larger than");
	request("POST", "/sandboxes", AUTH JSON_CT, "{\"template\":\"other\"}", 20, &r);
	assert_error(&r, 400, "bad_request", "no template 'other'");
	request("POST", "/sandboxes/0123abcd/exec", AUTH JSON_CT, "{\"argv\":[]}", 11, &r);
	assert_error(&r, 400, "bad_request", "\"argv\"");
	request("PUT", "/sandboxes/0123abcd/files?path=/a", AUTH, big, 2048, &r);
	assert_error(&r, 413, "too_large", "1024 bytes");
}

Test(serve_http, metrics_count_the_failures_by_cause)
{
	struct reply r;

	request("GET", "/sandboxes", NULL, NULL, 0, &r);
	request("GET", "/sandboxes/zz", AUTH, NULL, 0, &r);
	request("GET", "/metrics", AUTH, NULL, 0, &r);
	cr_assert_eq(r.status, 200);
	cr_assert(strstr(r.head, "Content-Type: text/plain; version=0.0.4"), "%s", r.head);
	cr_assert(strstr(r.body, "mayfly_serve_failures_total{cause=\"auth\"} 1\n"), "%s", r.body);
	cr_assert(strstr(r.body, "mayfly_serve_failures_total{cause=\"not_found\"} 1\n"));
	cr_assert(strstr(r.body, "mayfly_serve_sandboxes{state=\"running\"} 0\n"));
}

Test(serve_http, listen_refuses_addresses_off_loopback)
{
	char err[200];
	int fd;

	cr_assert_eq(http_listen_tcp("listen", "0.0.0.0:8080", false, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "loopback"), "%s", err);
	cr_assert_eq(http_listen_tcp("listen", "192.168.1.1:8080", false, err, sizeof(err)), -EINVAL);
	cr_assert_eq(http_listen_tcp("listen", "[::]:8080", false, err, sizeof(err)), -EINVAL);
	cr_assert_eq(http_listen_tcp("listen", "localhost:8080", false, err, sizeof(err)), -EINVAL);
	cr_assert_eq(http_listen_tcp("listen", "127.0.0.1:0", false, err, sizeof(err)), -EINVAL);
	cr_assert_eq(http_listen_tcp("listen", "127.0.0.1:x", false, err, sizeof(err)), -EINVAL);
	fd = http_listen_tcp("listen", "127.0.0.1:0x", false, err, sizeof(err));
	cr_assert_eq(fd, -EINVAL);
}

Test(serve_http, a_second_service_on_a_live_socket_is_refused)
{
	char err[200];

	cr_assert_eq(http_listen_unix(sock, err, sizeof(err)), -EADDRINUSE);
	cr_assert(strstr(err, "another service"), "%s", err);
}
