/* test_port_msg.c - a published port's pure parts (vmm/serve/port_msg.c): host names that are and are not a sandbox's port, the traffic token against an independent HMAC, and hostile response heads from the guest's server. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/port_msg.h"

Test(port_msg, a_host_names_a_port_and_a_sandbox_under_the_domain)
{
	char id[PORT_ID_MAX + 1];
	unsigned port = 0;

	cr_assert_eq(port_parse_host("3000-sb_1-a.mayfly.test", "mayfly.test", &port, id), 1);
	cr_assert_eq(port, 3000);
	cr_assert_str_eq(id, "sb_1-a");
	cr_assert_eq(port_parse_host("8-X.MAYFLY.Test:49999", "mayfly.test", &port, id), 1);
	cr_assert_eq(port, 8);
	cr_assert_str_eq(id, "X");
	/* A domain with its own port: the host's must be the same. */
	cr_assert_eq(port_parse_host("65535-a.localhost:8080", "localhost:8080", &port, id), 1);
	cr_assert_eq(port, 65535);
	cr_assert_eq(port_parse_host("1-a.localhost:8081", "localhost:8080", &port, id), 0);
}

Test(port_msg, other_hosts_are_not_a_sandboxs)
{
	static const char *const no[] = {
		"mayfly.test", "x.mayfly.test", "3000.mayfly.test", "-a.mayfly.test",
		"0-a.mayfly.test", "03000-a.mayfly.test", "65536-a.mayfly.test",
		"123456-a.mayfly.test", "3000-.mayfly.test", "3000-a.b.mayfly.test",
		"3000-a!.mayfly.test", "3000-a.mayfly.test.evil", "3000-a.evilmayfly.test",
		"3000-a.mayfly.test:", "3000-a.mayfly.test:80x", "3000-a.mayfly.testx",
		"3000-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.mayfly.test", "", "3000-a mayfly.test",
	};
	char id[PORT_ID_MAX + 1];
	unsigned port;

	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		cr_assert_eq(port_parse_host(no[i], "mayfly.test", &port, id), 0, "%s", no[i]);
	cr_assert_eq(port_parse_host(NULL, "mayfly.test", &port, id), 0);
	cr_assert_eq(port_parse_host("3000-a.mayfly.test", "", &port, id), 0);
}

Test(port_msg, the_traffic_token_is_hmac_sha256_of_the_id)
{
	uint8_t key[PORT_KEY_LEN];
	char a[PORT_TOKEN_LEN + 1], b[PORT_TOKEN_LEN + 1];

	for (int i = 0; i < PORT_KEY_LEN; i++)
		key[i] = (uint8_t)i;
	/* python3: hmac.new(bytes(range(32)), b"sb-1", sha256).hexdigest()[:32] */
	port_traffic_token(key, "sb-1", a);
	cr_assert_str_eq(a, "f6c344afb5d7d8b56409a246276a9d91");
	port_traffic_token(key, "sb-2", b);
	cr_assert_str_neq(a, b);
	cr_assert(port_token_equal(a, "f6c344afb5d7d8b56409a246276a9d91"));
	cr_assert(!port_token_equal(a, b));
	cr_assert(!port_token_equal(a, "f6c344afb5d7d8b56409a246276a9d9"));
	cr_assert(!port_token_equal(a, ""));
	cr_assert(!port_token_equal("", a));
}

static int parse(const char *text, struct port_head *h, const char **why)
{
	return port_parse_head(text, strlen(text), h, why);
}

static const char *value(const char *buf, const struct port_head *h, const char *name)
{
	static char out[256];

	for (unsigned i = 0; i < h->nheaders; i++)
		if (h->headers[i].name_len == strlen(name) &&
		    !strncmp(buf + h->headers[i].name, name, h->headers[i].name_len)) {
			snprintf(out, sizeof(out), "%.*s", (int)h->headers[i].value_len,
				 buf + h->headers[i].value);
			return out;
		}
	return NULL;
}

Test(port_msg, a_response_head_is_parsed_with_its_headers_and_length)
{
	static const char ok[] = "HTTP/1.1 201 Created\r\nContent-Type: text/html \r\n"
				 "Content-Length: 12\r\nX-Empty:\r\ncontent-length: 12\r\n\r\nbody";
	static struct port_head h;
	const char *why = NULL;

	cr_assert_eq(parse(ok, &h, &why), 1, "%s", why);
	cr_assert_eq(h.status, 201);
	cr_assert_eq(h.content_length, 12);
	cr_assert_eq(h.head_len, sizeof(ok) - 1 - 4);
	cr_assert_eq(h.nheaders, 4);
	cr_assert_str_eq(value(ok, &h, "Content-Type"), "text/html");
	cr_assert_str_eq(value(ok, &h, "X-Empty"), "");
	/* Bare LFs, no reason phrase, no length (the body ends at the close). */
	cr_assert_eq(parse("HTTP/1.0 404\nServer: x\n\n", &h, &why), 1, "%s", why);
	cr_assert_eq(h.status, 404);
	cr_assert_eq(h.content_length, -1);
	cr_assert_str_eq(value("HTTP/1.0 404\nServer: x\n\n", &h, "Server"), "x");
	cr_assert_eq(parse("HTTP/1.1 100 Continue\r\n\r\n", &h, &why), 1);
	cr_assert_eq(h.status, 100);
	/* Not yet whole. */
	cr_assert_eq(parse("HTTP/1.1 200 OK\r\nA: b\r\n", &h, &why), 0);
	cr_assert_eq(parse("", &h, &why), 0);
}

Test(port_msg, hostile_heads_are_refused_with_a_reason)
{
	static const char *const bad[] = {
		"SSH-2.0-x\r\n\r\n", "HTTP/2 200\r\n\r\n", "HTTP/1.1 20 OK\r\n\r\n",
		"HTTP/1.1 600 X\r\n\r\n", "HTTP/1.1 200OK\r\n\r\n", "HTTP/1.1 099 X\r\n\r\n",
		"HTTP/1.1 200 OK\r\n folded\r\n\r\n", "HTTP/1.1 200 OK\r\nNo colon\r\n\r\n",
		"HTTP/1.1 200 OK\r\n: empty name\r\n\r\n", "HTTP/1.1 200 OK\r\nA b: c\r\n\r\n",
		"HTTP/1.1 200 OK\r\nA: \x01\r\n\r\n", "HTTP/1.1 200 OK\r\nA: b\rc\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1 2\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 9999999999999999999\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n",
	};
	static struct port_head h;
	const char *why;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why = NULL;
		cr_assert_eq(parse(bad[i], &h, &why), -EPROTO, "%zu: %s", i, bad[i]);
		cr_assert_not_null(why);
		cr_assert_not_null(strstr(why, "the guest's server"), "%s", why);
	}
	/* A NUL anywhere in the head. */
	cr_assert_eq(port_parse_head("HTTP/1.1 200 OK\r\nA\0: b\r\n\r\n", 26, &h, &why), -EPROTO);
	/* 101 headers. */
	{
		size_t cap = 32 + 101 * 8, len;
		char *big = malloc(cap);

		len = (size_t)sprintf(big, "HTTP/1.1 200 OK\r\n");
		for (int i = 0; i < 101; i++)
			len += (size_t)sprintf(big + len, "A%02d: b\r\n", i % 100);
		len += (size_t)sprintf(big + len, "\r\n");
		cr_assert_eq(port_parse_head(big, len, &h, &why), -EPROTO);
		free(big);
	}
}

Test(port_msg, a_head_that_never_ends_is_refused_at_its_bound)
{
	char *buf = malloc(PORT_HEAD_MAX + 10);
	static struct port_head h;
	const char *why = NULL;

	memcpy(buf, "HTTP/1.1 200 OK\r\nX: ", 20);
	memset(buf + 20, 'a', PORT_HEAD_MAX + 10 - 20);
	cr_assert_eq(port_parse_head(buf, PORT_HEAD_MAX - 1, &h, &why), 0);
	cr_assert_eq(port_parse_head(buf, PORT_HEAD_MAX + 10, &h, &why), -E2BIG);
	cr_assert_not_null(strstr(why, "32 KiB"));
	free(buf);
}

Test(port_msg, hop_by_hop_headers_are_known_without_case)
{
	cr_assert(port_hop_header("connection", 10));
	cr_assert(port_hop_header("Transfer-Encoding", 17));
	cr_assert(port_hop_header("content-length", 14));
	cr_assert(!port_hop_header("Content-Type", 12));
	cr_assert(!port_hop_header("Connectio", 9));
}
