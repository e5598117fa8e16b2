/* test_net_proxy.c - the host side of the guest's proxy on a real event loop and broker: relays, refusals with reasons, SNI, caps, hostile clients. */
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/event.h"
#include "net/proxy.h"
#include "net/sni.h"
#include "net/socks.h"

static struct net_policy policy;
static struct event_loop loop;
static struct net_proxy px;
static int bsv[2] = { -1, -1 };
static pthread_t broker;
static int listener = -1;
static uint16_t port;
static unsigned nr_allowed, nr_refused;
static struct net_outcome last;
static char last_reason[512], last_addr[64], last_method[32];

static void record(void *opaque, const struct net_outcome *o)
{
	(void)opaque;
	if (o->allowed)
		nr_allowed++;
	else
		nr_refused++;
	last = *o;
	snprintf(last_reason, sizeof(last_reason), "%s", o->reason);
	snprintf(last_addr, sizeof(last_addr), "%s", o->addr);   /* o's strings are the connection's */
	snprintf(last_method, sizeof(last_method), "%s", o->method);
}

static void *serve(void *arg)
{
	(void)arg;
	net_broker_serve(bsv[1], &policy);
	return NULL;
}

/* A rule; "%u" in it is the listener's port. */
static void rule(const char *tmpl)
{
	char text[128], err[256];
	const char *pct = strstr(tmpl, "%u");

	if (pct)
		snprintf(text, sizeof(text), "%.*s%u", (int)(pct - tmpl), tmpl, port);
	else
		snprintf(text, sizeof(text), "%s", tmpl);
	cr_assert_eq(net_policy_add_rule(&policy, text, err, sizeof(err)), 0, "%s", err);
}

static void resolve(const char *text)
{
	char err[256];

	cr_assert_eq(net_policy_add_resolve(&policy, text, err, sizeof(err)), 0, "%s", err);
}

static void setup(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sin);

	memset(&policy, 0, sizeof(policy));
	nr_allowed = nr_refused = 0;
	listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_eq(bind(listener, (struct sockaddr *)&sin, sizeof(sin)), 0);
	cr_assert_eq(listen(listener, 64), 0);
	cr_assert_eq(getsockname(listener, (struct sockaddr *)&sin, &sl), 0);
	port = ntohs(sin.sin_port);
	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, bsv), 0);
	cr_assert_eq(event_loop_init(&loop), 0);
	cr_assert_eq(net_proxy_init(&px, &loop, &policy, bsv[0], "test"), 0);
	px.record = record;
}

static bool started;

static void start(void)
{
	cr_assert_eq(pthread_create(&broker, NULL, serve, NULL), 0);
	started = true;
}

static void teardown(void)
{
	net_proxy_destroy(&px);
	event_loop_destroy(&loop);
	close(bsv[0]);
	if (started)
		pthread_join(broker, NULL);
	started = false;
	if (bsv[1] >= 0)
		close(bsv[1]);
	close(listener);
}

/* Run the loop until fd has something to read (or EOF), at most 10 s. */
static void spin_until_readable(int fd)
{
	uint64_t end = clock_now_ns() + 10000000000ULL;

	while (clock_now_ns() < end) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		if (poll(&p, 1, 0) == 1)
			return;
		event_loop_poll(&loop, 5);
	}
	cr_assert_fail("nothing to read in 10 s");
}

static void spin(int ms)
{
	uint64_t end = clock_now_ns() + (uint64_t)ms * 1000000ULL;

	while (clock_now_ns() < end)
		event_loop_poll(&loop, 5);
}

/* Everything up to EOF (the guest's side of a refused connection). */
static size_t read_all(int fd, char *buf, size_t cap)
{
	size_t len = 0;

	for (;;) {
		ssize_t n;

		spin_until_readable(fd);
		n = recv(fd, buf + len, cap - 1 - len, MSG_DONTWAIT);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	return len;
}

static int guest_connect(const char *head)
{
	int fd = net_proxy_accept(&px);

	cr_assert_geq(fd, 0, "%s", strerror(-fd));
	cr_assert_eq(send(fd, head, strlen(head), 0), (ssize_t)strlen(head));
	return fd;
}

static void expect_refusal(const char *head, const char *status, const char *reason)
{
	char buf[4096];
	int fd = guest_connect(head);

	read_all(fd, buf, sizeof(buf));
	close(fd);
	cr_assert(strstr(buf, status), "'%s'", buf);
	cr_assert(strstr(buf, reason), "'%s'", buf);
	cr_assert(strstr(last_reason, reason), "'%s'", last_reason);
}

/* The server's side of a connection the proxy made for fd: "hello" up,
 * "world!" down, both whole. The server's socket. */
static int hello_world(int fd)
{
	char buf[16];
	int srv = accept(listener, NULL, NULL);

	cr_assert_geq(srv, 0);
	cr_assert_eq(send(fd, "hello", 5, 0), 5);
	spin(50);
	cr_assert_eq(recv(srv, buf, sizeof(buf), MSG_DONTWAIT), 5);
	cr_assert_eq(send(srv, "world!", 6, 0), 6);
	spin_until_readable(fd);
	cr_assert_eq(recv(fd, buf, sizeof(buf), 0), 6);
	cr_assert_eq(memcmp(buf, "world!", 6), 0);
	return srv;
}

Test(net_proxy, connect_relays_both_ways, .init = setup, .fini = teardown)
{
	char head[128], buf[128];
	int fd, srv;

	rule("svc.test:%u");
	rule("127.0.0.1");
	resolve("svc.test:127.0.0.1");
	start();
	snprintf(head, sizeof(head), "CONNECT svc.test:%u HTTP/1.1\r\nHost: svc.test\r\n\r\n", port);
	fd = guest_connect(head);
	spin_until_readable(fd);
	cr_assert_eq(recv(fd, buf, sizeof(buf), 0), 39);
	cr_assert_eq(memcmp(buf, "HTTP/1.1 200 Connection established\r\n\r\n", 39), 0);
	srv = hello_world(fd);
	close(fd);
	spin(50);
	cr_assert_eq(recv(srv, buf, sizeof(buf), MSG_DONTWAIT), 0);   /* the EOF passed on */
	close(srv);
	spin(50);
	cr_assert_eq(px.nr_conns, 0);
	cr_assert_eq(nr_allowed, 1);
	cr_assert_eq(last.bytes_up, 5);
	cr_assert_eq(last.bytes_down, 6);
	cr_assert_str_eq(last_addr, "127.0.0.1");
}

Test(net_proxy, plain_http_is_rewritten_for_the_server, .init = setup, .fini = teardown)
{
	char head[256], buf[512], want[256];
	int fd, srv;
	ssize_t n;

	rule("svc.test:%u");
	rule("127.0.0.1");
	resolve("svc.test:127.0.0.1");
	start();
	snprintf(head, sizeof(head), "GET http://svc.test:%u/x HTTP/1.1\r\nHost: other\r\n"
		 "Proxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n", port);
	fd = guest_connect(head);
	spin(100);
	srv = accept(listener, NULL, NULL);
	cr_assert_geq(srv, 0);
	spin(50);
	n = recv(srv, buf, sizeof(buf) - 1, MSG_DONTWAIT);
	cr_assert_gt(n, 0);
	buf[n] = '\0';
	snprintf(want, sizeof(want), "GET /x HTTP/1.1\r\nHost: svc.test:%u\r\nAccept: */*\r\n"
		 "Connection: close\r\n\r\n", port);
	cr_assert_str_eq(buf, want);
	close(srv);
	close(fd);
	spin(50);
}

Test(net_proxy, refusals_carry_their_reason, .init = setup, .fini = teardown)
{
	char head[128];

	rule("svc.test:%u");
	resolve("svc.test:127.0.0.1");
	start();
	expect_refusal("CONNECT evil.test:443 HTTP/1.1\r\n\r\n", "403 Forbidden",
		       "evil.test port 443 is not allowed");
	snprintf(head, sizeof(head), "CONNECT svc.test:%u HTTP/1.1\r\n\r\n", port + 1);
	expect_refusal(head, "403", "is not allowed by any --allow-net rule");
	/* Allowed by name, but the name resolves to loopback. */
	snprintf(head, sizeof(head), "CONNECT svc.test:%u HTTP/1.1\r\n\r\n", port);
	expect_refusal(head, "403", "loopback");
	expect_refusal("CONNECT svc.test HTTP/1.1\r\n\r\n", "400", "host:port");
	expect_refusal("GET /x HTTP/1.1\r\n\r\n", "400", "absolute http:// URI");
	expect_refusal("\x16\x03\x01\x00\x10", "400", "control");
	cr_assert_eq(nr_refused, 6);
	cr_assert_eq(nr_allowed, 0);
	spin(20);   /* the last client's close is seen */
	cr_assert_eq(px.nr_conns, 0);
}

static uint8_t curl_hello[NET_HELLO_MAX];

static size_t load_hello(void)
{
	FILE *f = fopen("fixtures/tls/hello-curl.bin", "rb");
	size_t n;

	cr_assert_not_null(f);
	n = fread(curl_hello, 1, sizeof(curl_hello), f);
	fclose(f);
	return n;
}

/* CONNECT `host` on the TLS port (the listener's, for the test), then the
 * curl hello, whose server name is files.example.org. */
static int tls_connect(const char *host, char *buf, size_t cap)
{
	char head[128];
	size_t n = load_hello();
	int fd;

	px.tls_port = port;
	snprintf(head, sizeof(head), "CONNECT %s:%u HTTP/1.1\r\n\r\n", host, port);
	fd = guest_connect(head);
	spin_until_readable(fd);
	cr_assert_eq(recv(fd, buf, cap, 0), 39);
	cr_assert_eq(send(fd, curl_hello, n, 0), (ssize_t)n);
	return fd;
}

Test(net_proxy, a_server_name_other_than_the_connect_host_is_refused, .init = setup,
     .fini = teardown)
{
	char buf[128];
	int fd, srv;

	rule("svc.test:%u");
	rule("127.0.0.1");
	resolve("svc.test:127.0.0.1");
	start();
	fd = tls_connect("svc.test", buf, sizeof(buf));
	spin_until_readable(fd);
	cr_assert_eq(recv(fd, buf, sizeof(buf), 0), 0);   /* closed: it heard 200 already */
	close(fd);
	cr_assert_eq(nr_refused, 1);
	cr_assert(strstr(last_reason, "files.example.org differs"), "%s", last_reason);
	/* The server got nothing of the hello. */
	srv = accept(listener, NULL, NULL);
	spin(50);
	cr_assert_eq(recv(srv, buf, sizeof(buf), MSG_DONTWAIT), 0);
	close(srv);
}

Test(net_proxy, the_matching_server_name_goes_through, .init = setup, .fini = teardown)
{
	static uint8_t got[NET_HELLO_MAX];
	size_t n = load_hello(), have = 0;
	char buf[128];
	int fd, srv;

	rule("files.example.org:%u");
	rule("127.0.0.1");
	resolve("files.example.org:127.0.0.1");
	start();
	fd = tls_connect("files.example.org", buf, sizeof(buf));
	srv = accept(listener, NULL, NULL);
	for (int i = 0; i < 100 && have < n; i++) {
		ssize_t r;

		spin(10);
		r = recv(srv, got + have, sizeof(got) - have, MSG_DONTWAIT);
		if (r > 0)
			have += (size_t)r;
	}
	cr_assert_eq(have, n);
	cr_assert_eq(memcmp(got, curl_hello, n), 0);
	close(srv);
	close(fd);
	spin(50);
	cr_assert_eq(nr_allowed, 1);
}

Test(net_proxy, a_megabyte_connect_line_is_refused_within_the_cap, .init = setup, .fini = teardown)
{
	static char line[1 << 20];
	char buf[4096];
	size_t sent = 0;
	int fd = net_proxy_accept(&px);

	start();
	memcpy(line, "CONNECT ", 8);
	memset(line + 8, 'a', sizeof(line) - 8);
	/* The proxy refuses at its head limit, then reads and drops the rest
	 * (into its fixed buffer) until the client closes: a close with bytes
	 * unread would reset the guest's connection and lose the refusal. */
	for (int i = 0; i < 2000 && sent < sizeof(line); i++) {
		ssize_t n = send(fd, line + sent, sizeof(line) - sent, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n > 0)
			sent += (size_t)n;
		else if (errno != EAGAIN)
			break;
		event_loop_poll(&loop, 1);
	}
	cr_assert_eq(sent, sizeof(line), "the refused client's bytes are read and dropped");
	read_all(fd, buf, sizeof(buf));
	cr_assert(strstr(buf, "431"), "%s", buf);
	close(fd);
	spin(20);
	cr_assert_eq(px.nr_conns, 0);
	cr_assert_eq(nr_refused, 1);
}

Test(net_proxy, the_connection_cap, .init = setup, .fini = teardown)
{
	int fds[4];

	start();
	px.max_conns = 4;
	for (int i = 0; i < 4; i++) {
		fds[i] = net_proxy_accept(&px);
		cr_assert_geq(fds[i], 0);
	}
	cr_assert_eq(net_proxy_accept(&px), -EAGAIN);
	close(fds[0]);
	spin(20);
	fds[0] = net_proxy_accept(&px);
	cr_assert_geq(fds[0], 0, "a slot frees when a client leaves");
	for (int i = 0; i < 4; i++)
		close(fds[i]);
	spin(20);
	cr_assert_eq(px.nr_conns, 0);
}

Test(net_proxy, ten_thousand_attempts, .init = setup, .fini = teardown)
{
	start();
	for (int i = 0; i < 10000; i++) {
		char buf[512];
		int fd = guest_connect("CONNECT evil.test:443 HTTP/1.1\r\n\r\n");

		read_all(fd, buf, sizeof(buf));
		close(fd);
		cr_assert(strstr(buf, "403"));
	}
	cr_assert_eq(nr_refused, 10000);
	spin(20);
	cr_assert_eq(px.nr_conns, 0);
}

Test(net_proxy, a_guest_that_never_reads_holds_only_its_buffers, .init = setup, .fini = teardown)
{
	static char chunk[65536];
	char head[128], buf[128];
	size_t sent = 0;
	int fd, srv, fd2;

	rule("127.0.0.1");
	start();
	snprintf(head, sizeof(head), "CONNECT 127.0.0.1:%u HTTP/1.1\r\n\r\n", port);
	fd = guest_connect(head);
	spin_until_readable(fd);
	cr_assert_eq(recv(fd, buf, sizeof(buf), 0), 39);
	srv = accept(listener, NULL, NULL);
	/* The server writes until nothing more is taken; the guest never reads. */
	for (int i = 0; i < 400; i++) {
		ssize_t n = send(srv, chunk, sizeof(chunk), MSG_DONTWAIT);

		if (n > 0)
			sent += (size_t)n;
		event_loop_poll(&loop, 1);
	}
	/* Socket buffers and one relay buffer: a few MiB at most, not 25. */
	cr_assert_lt(sent, 16u << 20, "%zu bytes taken", sent);
	cr_assert_leq(px.bytes_down, sent);
	/* Meanwhile the proxy serves others. */
	fd2 = guest_connect("CONNECT evil.test:443 HTTP/1.1\r\n\r\n");
	read_all(fd2, buf, sizeof(buf));
	cr_assert(strstr(buf, "403"));
	close(fd2);
	close(fd);
	close(srv);
	spin(50);
	cr_assert_eq(px.nr_conns, 0);
}

Test(net_proxy, the_sandbox_byte_cap_closes_connections, .init = setup, .fini = teardown)
{
	static char data[4096];
	char head[128], buf[4096];
	int fd, srv;

	rule("127.0.0.1");
	start();
	px.max_bytes = 1000;
	snprintf(head, sizeof(head), "CONNECT 127.0.0.1:%u HTTP/1.1\r\n\r\n", port);
	fd = guest_connect(head);
	spin_until_readable(fd);
	cr_assert_eq(recv(fd, buf, sizeof(buf), 0), 39);
	srv = accept(listener, NULL, NULL);
	cr_assert_eq(send(srv, data, sizeof(data), 0), (ssize_t)sizeof(data));
	read_all(fd, buf, sizeof(buf));
	close(fd);
	close(srv);
	spin(20);
	cr_assert_eq(px.nr_conns, 0);
	/* Once used up, the next connection is refused with the reason. */
	fd = guest_connect(head);
	read_all(fd, buf, sizeof(buf));
	cr_assert(strstr(buf, "403") && strstr(buf, "byte budget is used up"), "%s", buf);
	close(fd);
	spin(20);
	cr_assert_eq(px.nr_conns, 0);
}

Test(net_proxy, a_broker_gone_refuses_every_waiting_connection, .init = setup, .fini = teardown)
{
	char head[128], buf[1024];
	int fds[3];

	rule("127.0.0.1");
	snprintf(head, sizeof(head), "CONNECT 127.0.0.1:%u HTTP/1.1\r\n\r\n", port);
	/* No broker answers: three connections wait for it. */
	for (int i = 0; i < 3; i++)
		fds[i] = guest_connect(head);
	spin(50);
	cr_assert_eq(px.nr_conns, 3);
	close(bsv[1]);
	bsv[1] = -1;
	for (int i = 0; i < 3; i++) {
		read_all(fds[i], buf, sizeof(buf));
		cr_assert(strstr(buf, "503") && strstr(buf, "broker is gone"), "%s", buf);
		close(fds[i]);
	}
	spin(20);
	cr_assert_eq(px.nr_conns, 0);
	/* Later ones too. */
	fds[0] = guest_connect(head);
	read_all(fds[0], buf, sizeof(buf));
	close(fds[0]);
	cr_assert(strstr(buf, "503"), "%s", buf);
}

Test(net_proxy, a_refused_client_that_never_stops_sending_is_cut_off, .init = setup, .fini = teardown)
{
	static char junk[65536];
	size_t sent = 0;
	int fd = guest_connect("CONNECT evil.test:443 HTTP/1.1\r\n\r\n");

	start();
	memset(junk, 'j', sizeof(junk));
	for (int i = 0; i < 5000 && px.nr_conns; i++) {
		ssize_t n = send(fd, junk, sizeof(junk), MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n > 0)
			sent += (size_t)n;
		event_loop_poll(&loop, 1);
	}
	cr_assert_eq(px.nr_conns, 0, "still open after %zu bytes", sent);
	cr_assert_lt(sent, NET_LINGER_MAX + (2u << 20));
	close(fd);
}

/* ---- SOCKS5 on the same port ---- */

/* A SOCKS5 client: its greeting and CONNECT request to name:p, sent at once
 * (as socks5h clients may pipeline them). */
static int socks_connect(const char *name, uint16_t p)
{
	uint8_t msg[3 + 5 + NET_HOST_MAX + 2] = { 5, 1, 0, 5, 1, 0, 3 };
	size_t len = strlen(name), n = 7;
	int fd = net_proxy_accept(&px);

	cr_assert_geq(fd, 0, "%s", strerror(-fd));
	msg[n++] = (uint8_t)len;
	memcpy(msg + n, name, len);
	n += len;
	msg[n++] = (uint8_t)(p >> 8);
	msg[n++] = (uint8_t)p;
	cr_assert_eq(send(fd, msg, n, 0), (ssize_t)n);
	return fd;
}

Test(net_proxy, socks5_connect_relays_both_ways, .init = setup, .fini = teardown)
{
	static const uint8_t ok[] = { 5, 0, 5, 0, 0, 1, 0, 0, 0, 0, 0, 0 };
	uint8_t buf[64];
	size_t got = 0;
	int fd, srv;

	rule("svc.test:%u");
	rule("127.0.0.1");
	resolve("svc.test:127.0.0.1");
	start();
	fd = socks_connect("svc.test", port);
	while (got < sizeof(ok)) {
		ssize_t n;

		spin_until_readable(fd);
		n = recv(fd, buf + got, sizeof(buf) - got, MSG_DONTWAIT);
		cr_assert_gt(n, 0);
		got += (size_t)n;
	}
	cr_assert_eq(got, sizeof(ok));
	cr_assert_eq(memcmp(buf, ok, sizeof(ok)), 0, "the method, then success");
	srv = hello_world(fd);
	close(fd);
	close(srv);
	spin(50);
	cr_assert_eq(px.nr_conns, 0);
	cr_assert_eq(nr_allowed, 1);
	cr_assert_str_eq(last_method, "SOCKS5");
	cr_assert_eq(last.bytes_up, 5);
}

/* The whole answer to a refused SOCKS5 client, then EOF. */
static void expect_socks_refusal(int fd, const uint8_t *want, size_t len, const char *reason)
{
	char buf[64];

	cr_assert_eq(read_all(fd, buf, sizeof(buf)), len);
	cr_assert_eq(memcmp(buf, want, len), 0, "%02x %02x %02x %02x", (uint8_t)buf[0],
		     (uint8_t)buf[1], (uint8_t)buf[2], (uint8_t)buf[3]);
	cr_assert(strstr(last_reason, reason), "'%s'", last_reason);
	close(fd);
}

Test(net_proxy, socks5_refusals_carry_their_codes, .init = setup, .fini = teardown)
{
	static const uint8_t not_allowed[] = { 5, 0, 5, 2, 0, 1, 0, 0, 0, 0, 0, 0 };
	static const uint8_t refused[] = { 5, 0, 5, 5, 0, 1, 0, 0, 0, 0, 0, 0 };
	static const uint8_t bind_req[] = { 5, 1, 0, 5, 2, 0, 1, 1, 2, 3, 4, 0, 80 };
	static const uint8_t bad_command[] = { 5, 0, 5, 7, 0, 1, 0, 0, 0, 0, 0, 0 };
	static const uint8_t auth_only[] = { 5, 1, 2 }, no_method[] = { 5, 0xff };
	int fd, closed;

	rule("svc.test:%u");
	rule("127.0.0.1");
	resolve("svc.test:127.0.0.1");
	start();
	expect_socks_refusal(socks_connect("evil.test", 443), not_allowed, sizeof(not_allowed),
			     "evil.test port 443 is not allowed by any --allow-net rule");
	/* A port nobody listens on: the broker's ECONNREFUSED. */
	closed = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	{
		struct sockaddr_in sin = { .sin_family = AF_INET,
					   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		socklen_t sl = sizeof(sin);
		char r[32];

		cr_assert_eq(bind(closed, (struct sockaddr *)&sin, sizeof(sin)), 0);
		cr_assert_eq(getsockname(closed, (struct sockaddr *)&sin, &sl), 0);
		snprintf(r, sizeof(r), "svc.test:%u", ntohs(sin.sin_port));
		rule(r);
		expect_socks_refusal(socks_connect("svc.test", ntohs(sin.sin_port)), refused,
				     sizeof(refused), "cannot connect");
	}
	close(closed);
	fd = net_proxy_accept(&px);
	cr_assert_eq(send(fd, bind_req, sizeof(bind_req), 0), (ssize_t)sizeof(bind_req));
	expect_socks_refusal(fd, bad_command, sizeof(bad_command), "only SOCKS5 CONNECT");
	fd = net_proxy_accept(&px);
	cr_assert_eq(send(fd, auth_only, sizeof(auth_only), 0), (ssize_t)sizeof(auth_only));
	expect_socks_refusal(fd, no_method, sizeof(no_method), "no method without authentication");
	spin(50);
	cr_assert_eq(px.nr_conns, 0);
	cr_assert_eq(nr_allowed, 0);
}

/* As curl does: the greeting, its answer awaited, then the request. */
Test(net_proxy, socks5_greeting_then_request_in_turn, .init = setup, .fini = teardown)
{
	static const uint8_t greet[] = { 5, 1, 0 }, method[] = { 5, 0 };
	static const uint8_t ok[] = { 5, 0, 0, 1, 0, 0, 0, 0, 0, 0 };
	uint8_t req[10] = { 5, 1, 0, 1, 127, 0, 0, 1 }, buf[16];
	int fd = net_proxy_accept(&px), srv;

	rule("127.0.0.1:%u");
	start();
	cr_assert_geq(fd, 0);
	cr_assert_eq(send(fd, greet, sizeof(greet), 0), 3);
	spin_until_readable(fd);
	cr_assert_eq(recv(fd, buf, sizeof(buf), MSG_DONTWAIT), 2);
	cr_assert_eq(memcmp(buf, method, 2), 0);
	req[8] = (uint8_t)(port >> 8);
	req[9] = (uint8_t)port;
	cr_assert_eq(send(fd, req, sizeof(req), 0), 10);
	spin_until_readable(fd);
	cr_assert_eq(recv(fd, buf, sizeof(buf), MSG_DONTWAIT), 10);
	cr_assert_eq(memcmp(buf, ok, sizeof(ok)), 0);
	srv = hello_world(fd);
	close(fd);
	close(srv);
	spin(50);
	cr_assert_eq(nr_allowed, 1);
}
