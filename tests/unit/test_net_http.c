/* test_net_http.c - the proxy's request head: CONNECT and absolute-URI requests taken, garbage and oversize refused without growing. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "net/http.h"

static int parse(const char *s, struct net_request *req, const char **why)
{
	return net_http_parse((const uint8_t *)s, strlen(s), req, why);
}

Test(net_http, connect)
{
	struct net_request req;
	const char *why = "";
	const char *s = "CONNECT Files.Test:443 HTTP/1.1\r\nHost: files.test:443\r\n"
			"User-Agent: curl/8\r\n\r\n\x16\x03\x01";

	cr_assert_eq(parse(s, &req, &why), 0, "%s", why);
	cr_assert_eq(req.kind, NET_REQ_CONNECT);
	cr_assert_str_eq(req.host, "files.test");
	cr_assert_eq(req.port, 443);
	cr_assert_eq(req.head_len, strlen(s) - 3);
	cr_assert_eq(parse("CONNECT [::1]:8443 HTTP/1.0\r\n\r\n", &req, &why), 0);
	cr_assert_str_eq(req.host, "::1");
	cr_assert_eq(parse("CONNECT 127.0.0.1:22 HTTP/1.1\r\n\r\n", &req, &why), 0);
	cr_assert_str_eq(req.host, "127.0.0.1");
}

Test(net_http, absolute_uri)
{
	struct net_request req;
	const char *why = "";
	const char *s = "GET http://files.test:8080/a/b?c=1 HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n";

	cr_assert_eq(parse(s, &req, &why), 0, "%s", why);
	cr_assert_eq(req.kind, NET_REQ_HTTP);
	cr_assert_str_eq(req.method, "GET");
	cr_assert_str_eq(req.host, "files.test");
	cr_assert_eq(req.port, 8080);
	cr_assert_eq(req.path_len, strlen("/a/b?c=1"));
	cr_assert_eq(memcmp(s + req.path_off, "/a/b?c=1", req.path_len), 0);
	cr_assert_eq(parse("HEAD http://files.test HTTP/1.0\r\n\r\n", &req, &why), 0);
	cr_assert_eq(req.port, 80);
	cr_assert_eq(req.path_len, 0);
}

Test(net_http, rewrite_for_the_server)
{
	struct net_request req;
	const char *why = "";
	const char *s = "POST http://files.test:8080/up HTTP/1.1\r\nHost: evil.test\r\n"
			"Proxy-Connection: keep-alive\r\nContent-Length: 3\r\nConnection: keep-alive\r\n"
			"Proxy-Authorization: x\r\nX-A: 1\r\n\r\nabc";
	char out[NET_HEAD_MAX + NET_HOST_MAX + 64];
	int n;

	cr_assert_eq(parse(s, &req, &why), 0, "%s", why);
	n = net_http_rewrite((const uint8_t *)s, &req, out, sizeof(out));
	cr_assert_gt(n, 0);
	out[n] = '\0';
	cr_assert_str_eq(out, "POST /up HTTP/1.1\r\nHost: files.test:8080\r\nContent-Length: 3\r\n"
			 "X-A: 1\r\nConnection: close\r\n\r\n");
	cr_assert_eq(net_http_rewrite((const uint8_t *)s, &req, out, 20), -ENOSPC);
	cr_assert_eq(parse("GET http://[fd00::1]/ HTTP/1.0\r\n\r\n", &req, &why), 0, "%s", why);
	n = net_http_rewrite((const uint8_t *)"GET http://[fd00::1]/ HTTP/1.0\r\n\r\n", &req, out,
			     sizeof(out));
	out[n] = '\0';
	cr_assert_str_eq(out, "GET / HTTP/1.0\r\nHost: [fd00::1]\r\nConnection: close\r\n\r\n");
}

Test(net_http, incomplete_heads_wait)
{
	struct net_request req;
	const char *why = "";

	cr_assert_eq(parse("", &req, &why), -EAGAIN);
	cr_assert_eq(parse("CONNECT a.test:443 HTTP/1.1\r\n", &req, &why), -EAGAIN);
	cr_assert_eq(parse("CONNECT a.test:443 HTTP/1.1\r\nHost: a\r\n\r", &req, &why), -EAGAIN);
}

Test(net_http, malformed_heads)
{
	static const char *const bad[] = {
		"CONNECT a.test HTTP/1.1\r\n\r\n",                 /* no port */
		"CONNECT a.test: HTTP/1.1\r\n\r\n",
		"CONNECT a.test:0 HTTP/1.1\r\n\r\n",
		"CONNECT a.test:65536 HTTP/1.1\r\n\r\n",
		"CONNECT a.test:443 HTTP/2.0\r\n\r\n",
		"CONNECT a.test:443\r\n\r\n",
		"CONNECT  a.test:443 HTTP/1.1\r\n\r\n",
		"CONNECT user@a.test:443 HTTP/1.1\r\n\r\n",
		"CONNECT [::1:443 HTTP/1.1\r\n\r\n",
		"CONNECT [127.0.0.1]:443 HTTP/1.1\r\n\r\n",
		"CONNECT a..test:443 HTTP/1.1\r\n\r\n",
		"CONNECT 1.2.3.256:443 HTTP/1.1\r\n\r\n",
		"GET /relative HTTP/1.1\r\n\r\n",
		"GET https://a.test/ HTTP/1.1\r\n\r\n",
		"GET ftp://a.test/ HTTP/1.1\r\n\r\n",
		"GET http:///x HTTP/1.1\r\n\r\n",
		"GET http://a.test?x HTTP/1.1\r\n\r\n",
		"get http://a.test/ HTTP/1.1\r\n\r\n",
		"GET http://a.test/ HTTP/1.1\nHost: a\r\n\r\n",    /* bare LF */
		"GET http://a.test/ HTTP/1.1\r\nHost a\r\n\r\n",   /* no colon */
		"GET http://a.test/ HTTP/1.1\r\n folded: a\r\n\r\n",
		"GET http://a.test/ HTTP/1.1\r\nX: \x01\r\n\r\n",
		"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\r\n\r\n",
		"SSH-2.0-OpenSSH_9.2\r\n\r\n",
		"AVERYLONGMETHODNAMEX http://a.test/ HTTP/1.1\r\n\r\n",
	};
	struct net_request req;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *why = NULL;

		cr_assert_eq(parse(bad[i], &req, &why), -EINVAL, "case %zu", i);
		cr_assert(why && *why && !strchr(why, '\n'), "case %zu", i);
	}
}

Test(net_http, garbage_is_refused_before_the_end_of_the_head)
{
	struct net_request req;
	const char *why = "";
	const uint8_t tls[] = { 0x16, 0x03, 0x01, 0x02, 0x00 };

	cr_assert_eq(net_http_parse(tls, sizeof(tls), &req, &why), -EINVAL);
}

Test(net_http, a_megabyte_line_is_refused_at_the_cap)
{
	size_t len = 1 << 20;
	char *line = malloc(len);
	struct net_request req;
	const char *why = "";

	cr_assert_not_null(line);
	memcpy(line, "CONNECT ", 8);
	memset(line + 8, 'a', len - 8);
	/* The proxy never holds more than NET_HEAD_MAX: that is what it parses. */
	cr_assert_eq(net_http_parse((uint8_t *)line, NET_HEAD_MAX, &req, &why), -E2BIG);
	cr_assert_eq(net_http_parse((uint8_t *)line, NET_HEAD_MAX - 1, &req, &why), -EAGAIN);
	free(line);
}
