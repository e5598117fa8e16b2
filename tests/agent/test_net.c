/* test_net.c - mayfly-agent's NET: the proxy on 127.0.0.1 relays each client to the host, every later EXEC gets the proxy environment, QUIESCE stops it. */
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "client.h"

#define ARGV(...) ((char *const[]){ __VA_ARGS__, NULL })

static struct client c;
static int host = -1;          /* the "host" end: a Unix listener at net.sock */
static unsigned port;

/* A free TCP port on 127.0.0.1 (the kernel's pick, released again). */
static unsigned free_port(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert_eq(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&sin, &sl), 0);
	close(fd);
	return ntohs(sin.sin_port);
}

static void setup(void)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };

	client_start_net(&c);
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/net.sock", c.dir);
	host = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_eq(bind(host, (struct sockaddr *)&sun, sizeof(sun)), 0);
	cr_assert_eq(listen(host, 16), 0);
	port = free_port();
}

static void teardown(void)
{
	close(host);
	client_stop(&c);
}

TestSuite(net, .init = setup, .fini = teardown, .timeout = 30);

static void net(uint32_t id, uint32_t proxy_port)
{
	struct proto_writer *w = client_begin(PROTO_NET, id);

	proto_put_u32(w, proxy_port);
	proto_put_u32(w, 1080);
	client_send(&c, w);
}

static int dial(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
		close(fd);
		return -errno;
	}
	return fd;
}

static ssize_t recv_wait(int fd, char *buf, size_t cap)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	cr_assert_eq(poll(&p, 1, 5000), 1, "nothing came in 5 s");
	return recv(fd, buf, cap, 0);
}

/* The proxy started with nothing at net.sock: the relay can reach no
 * host, so every client is refused. */
static void proxy_without_host(void)
{
	close(host);
	host = -1;
	net(5, port);
	client_expect(&c, PROTO_OK, 5);
}

Test(net, the_proxy_relays_a_client_to_the_host_and_back)
{
	static const char req[] = "CONNECT files.test:443 HTTP/1.1\r\n\r\n";
	static const char ans[] = "HTTP/1.1 403 Forbidden\r\n\r\nmayfly: no\n";
	char buf[256];
	int cl, hs;

	net(5, port);
	client_expect(&c, PROTO_OK, 5);
	cl = dial();
	cr_assert_geq(cl, 0, "%s", strerror(-cl));
	cr_assert_eq(send(cl, req, sizeof(req) - 1, 0), (ssize_t)sizeof(req) - 1);
	hs = accept(host, NULL, NULL);
	cr_assert_geq(hs, 0);
	cr_assert_eq(recv_wait(hs, buf, sizeof(buf)), (ssize_t)sizeof(req) - 1);
	cr_assert_eq(memcmp(buf, req, sizeof(req) - 1), 0);
	cr_assert_eq(send(hs, ans, sizeof(ans) - 1, 0), (ssize_t)sizeof(ans) - 1);
	close(hs);
	cr_assert_eq(recv_wait(cl, buf, sizeof(buf)), (ssize_t)sizeof(ans) - 1);
	cr_assert_eq(recv_wait(cl, buf, sizeof(buf)), 0, "the host's close reaches the client");
	close(cl);
}

Test(net, every_later_exec_gets_the_proxy_environment)
{
	struct run r;
	char want[256];

	client_run(&c, &r, 0, 10000, NULL, ARGV("/bin/sh", "-c", "echo \"[$HTTP_PROXY]\""), NULL);
	cr_assert_str_eq(r.out, "[]\n", "no NET: no proxy");
	run_free(&r);
	net(5, port);
	client_expect(&c, PROTO_OK, 5);
	client_run(&c, &r, 0, 10000, NULL,
		   ARGV("/bin/sh", "-c", "echo $HTTP_PROXY $HTTPS_PROXY $ALL_PROXY $http_proxy "
			"$https_proxy $all_proxy $NO_PROXY $no_proxy"), NULL);
	snprintf(want, sizeof(want), "%1$s %1$s %1$s %1$s %1$s %1$s localhost,127.0.0.1,::1 "
		 "localhost,127.0.0.1,::1\n", "http://127.0.0.1:PORT");
	{
		char url[64], *p;

		snprintf(url, sizeof(url), "%u", port);
		while ((p = strstr(want, "PORT"))) {
			memmove(p + strlen(url), p + 4, strlen(p + 4) + 1);
			memcpy(p, url, strlen(url));
		}
	}
	cr_assert_str_eq(r.out, want);
	run_free(&r);
	/* A command's own setting wins. */
	client_run(&c, &r, 0, 10000, NULL, ARGV("/bin/sh", "-c", "echo $HTTPS_PROXY"),
		   ARGV("HTTPS_PROXY=http://mine:1"));
	cr_assert_str_eq(r.out, "http://mine:1\n");
	run_free(&r);
}

Test(net, a_host_that_takes_no_connection_gets_the_client_a_503)
{
	char buf[512];
	ssize_t n;
	int cl;

	proxy_without_host();
	cl = dial();
	cr_assert_geq(cl, 0);
	n = recv_wait(cl, buf, sizeof(buf) - 1);
	cr_assert_gt(n, 0);
	buf[n] = '\0';
	cr_assert(strstr(buf, "503") && strstr(buf, "mayfly:"), "%s", buf);
	close(cl);
}

/* A request longer than the relay's first read: the rest is read before
 * the close, or the close would be a reset that loses the 503. */
Test(net, a_refused_clients_long_request_still_gets_the_whole_503)
{
	static const char head[] = "GET http://x/ HTTP/1.1\r\nX-Pad: ";
	static char req[3000];
	char buf[512];
	size_t have = 0;
	ssize_t n = 0;
	int cl;

	proxy_without_host();
	memset(req, 'a', sizeof(req));
	memcpy(req, head, sizeof(head) - 1);
	memcpy(req + sizeof(req) - 4, "\r\n\r\n", 4);
	cl = dial();
	cr_assert_geq(cl, 0);
	cr_assert_eq(send(cl, req, sizeof(req), 0), (ssize_t)sizeof(req));
	while (have < sizeof(buf) - 1 && (n = recv_wait(cl, buf + have, sizeof(buf) - 1 - have)) > 0)
		have += (size_t)n;
	cr_assert_geq(n, 0, "recv: %s after %zu bytes", strerror(errno), have);
	buf[have] = '\0';
	cr_assert(strstr(buf, "503") && strstr(buf, "more proxy connections\n"), "%s", buf);
	close(cl);
}

/* The same refusal in SOCKS5's terms: the greeting answered (no
 * authentication), the request refused with "general failure" (REP 1).
 * The request follows the greeting at once (as the host's proxy allows):
 * no answer to wait for before it, so no timing in the test. */
Test(net, a_host_that_takes_no_connection_gets_a_socks5_client_a_general_failure)
{
	static const uint8_t hello_req[] = { 5, 1, 0, 5, 1, 0, 1, 127, 0, 0, 1, 0, 80 };
	uint8_t buf[16];
	size_t got = 0;
	ssize_t n;
	int cl;

	proxy_without_host();
	cl = dial();
	cr_assert_geq(cl, 0);
	cr_assert_eq(send(cl, hello_req, sizeof(hello_req), 0), (ssize_t)sizeof(hello_req));
	while (got < sizeof(buf) && (n = recv_wait(cl, (char *)buf + got, sizeof(buf) - got)) > 0)
		got += (size_t)n;
	cr_assert_eq(got, 12, "%zu bytes: %02x %02x", got, buf[0], buf[1]);
	cr_assert(buf[0] == 5 && buf[1] == 0, "greeting answer %02x %02x", buf[0], buf[1]);
	cr_assert(buf[2] == 5 && buf[3] == 1 && buf[4] == 0 && buf[5] == 1,
		  "reply %02x %02x %02x %02x", buf[2], buf[3], buf[4], buf[5]);
	close(cl);
}

/* A refused SOCKS5 client waits for its request (up to 2 s): meanwhile a
 * relayed client's bytes still flow, and the request, when it comes, is
 * answered. The relay used to sit on the refused client alone. */
Test(net, a_refused_client_that_waits_holds_up_no_other)
{
	static const uint8_t hello[] = { 5, 1, 0 }, req[] = { 5, 1, 0, 1, 127, 0, 0, 1, 0, 80 };
	struct pollfd p;
	uint8_t buf[16];
	int relayed, hs, refused;

	net(5, port);
	client_expect(&c, PROTO_OK, 5);
	relayed = dial();
	cr_assert_geq(relayed, 0);
	hs = accept(host, NULL, NULL);
	cr_assert_geq(hs, 0);
	close(host);   /* the next client is refused */
	host = -1;
	refused = dial();
	cr_assert_geq(refused, 0);
	cr_assert_eq(send(refused, hello, sizeof(hello), 0), (ssize_t)sizeof(hello));
	cr_assert_eq(recv_wait(refused, (char *)buf, 2), 2);
	cr_assert(buf[0] == 5 && buf[1] == 0, "greeting answer %02x %02x", buf[0], buf[1]);
	/* The relay now waits for the refused client's request. */
	cr_assert_eq(send(relayed, "ping", 4, 0), 4);
	cr_assert_eq(recv_wait(hs, (char *)buf, sizeof(buf)), 4);
	cr_assert_eq(memcmp(buf, "ping", 4), 0);
	p = (struct pollfd){ .fd = refused, .events = POLLIN };
	cr_assert_eq(poll(&p, 1, 0), 0, "the refused client was closed before its request");
	cr_assert_eq(send(refused, req, sizeof(req), 0), (ssize_t)sizeof(req));
	cr_assert_eq(recv_wait(refused, (char *)buf, sizeof(buf)), 10);
	cr_assert(buf[0] == 5 && buf[1] == 1, "reply %02x %02x", buf[0], buf[1]);
	close(refused);
	close(hs);
	close(relayed);
}

/* Sixteen refused clients wait at most; the seventeenth has the oldest
 * answered at once (503), long before its 2 s are up, and no other. */
Test(net, a_seventeenth_waiting_client_has_the_oldest_answered)
{
	struct pollfd p;
	char buf[512];
	int cl[17];
	ssize_t n;

	proxy_without_host();
	for (int i = 0; i < 17; i++) {
		cl[i] = dial();
		cr_assert_geq(cl[i], 0);
	}
	p = (struct pollfd){ .fd = cl[0], .events = POLLIN };
	cr_assert_eq(poll(&p, 1, 1000), 1, "the oldest waiting client was not answered");
	n = recv(cl[0], buf, sizeof(buf) - 1, 0);
	cr_assert_gt(n, 0);
	buf[n] = '\0';
	cr_assert(strstr(buf, "503") && strstr(buf, "mayfly:"), "%s", buf);
	p = (struct pollfd){ .fd = cl[1], .events = POLLIN };
	cr_assert_eq(poll(&p, 1, 0), 0, "the second waiting client was answered too");
	for (int i = 0; i < 17; i++)
		close(cl[i]);
}

Test(net, quiesce_stops_the_proxy)
{
	struct timespec ms5 = { 0, 5000000 };
	int fd = -1;

	net(5, port);
	client_expect(&c, PROTO_OK, 5);
	fd = dial();
	cr_assert_geq(fd, 0);
	close(fd);
	client_send(&c, client_begin(PROTO_QUIESCE, 6));
	client_expect(&c, PROTO_OK, 6);
	/* The relay is killed: its listener goes with the process. A connect
	 * that meets the listener while it closes may succeed or be reset;
	 * once it is gone, every connect is refused. */
	for (int i = 0; i < 1000 && (fd = dial()) != -ECONNREFUSED; i++) {
		if (fd >= 0)
			close(fd);
		nanosleep(&ms5, NULL);
	}
	cr_assert_eq(fd, -ECONNREFUSED, "dial: %s", strerror(fd < 0 ? -fd : 0));
}

Test(net, bad_requests)
{
	struct proto_writer *w;

	net(5, 0);
	client_expect_error(&c, 5, EINVAL);
	net(6, 65536);
	client_expect_error(&c, 6, EINVAL);
	w = client_begin(PROTO_NET, 7);
	proto_put_u32(w, port);
	client_send(&c, w);
	client_expect_error(&c, 7, EPROTO);
}

Test(net, the_hosts_refusal_reaches_a_client_still_sending)
{
	static char big[1 << 20];
	static const char ans[] = "HTTP/1.1 431 Request Header Fields Too Large\r\n\r\nmayfly: long\n";
	char buf[8192], got[512] = "";
	size_t sent = 0, have = 0;
	int cl, hs;

	net(5, port);
	client_expect(&c, PROTO_OK, 5);
	cl = dial();
	cr_assert_geq(cl, 0);
	memcpy(big, "CONNECT ", 8);
	memset(big + 8, 'a', sizeof(big) - 8);
	hs = accept(host, NULL, NULL);
	cr_assert_geq(hs, 0);
	/* The host reads a little, refuses, closes; the client is still sending. */
	while (sent < sizeof(buf)) {
		ssize_t n = send(cl, big + sent, sizeof(big) - sent, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n > 0)
			sent += (size_t)n;
		cr_assert_gt(recv_wait(hs, buf, sizeof(buf)), 0);
	}
	cr_assert_eq(send(hs, ans, sizeof(ans) - 1, 0), (ssize_t)sizeof(ans) - 1);
	close(hs);
	for (int i = 0; i < 200 && sent < sizeof(big); i++) {
		ssize_t n = send(cl, big + sent, sizeof(big) - sent, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n > 0)
			sent += (size_t)n;
		else if (errno != EAGAIN)
			break;
		usleep(1000);
	}
	for (;;) {
		struct pollfd p = { .fd = cl, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, 5000) != 1)
			break;
		n = recv(cl, got + have, sizeof(got) - 1 - have, 0);
		if (n <= 0)
			break;
		have += (size_t)n;
	}
	got[have] = '\0';
	cr_assert_str_eq(got, ans);
	close(cl);
}
