/* test_net_socks.c - the SOCKS5 parser on the guest's proxy port: greetings, CONNECT requests of each address type, every truncation, and hostile bytes. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "net/socks.h"

static int request(const uint8_t *buf, size_t len, struct net_request *req, uint8_t *code)
{
	const char *why = "";

	*code = 0xee;
	return net_socks_request(buf, len, req, code, &why);
}

Test(net_socks, a_greeting_offering_no_authentication_is_taken)
{
	static const uint8_t g[] = { 5, 3, 2, 1, 0, 0xaa };
	size_t used = 0;

	cr_assert_eq(net_socks_greeting(g, sizeof(g), &used), 0);
	cr_assert_eq(used, 5, "the byte after it is the request's");
	for (size_t n = 0; n < 5; n++)
		cr_assert_eq(net_socks_greeting(g, n, &used), -EAGAIN, "cut at %zu", n);
}

Test(net_socks, greetings_without_it_or_malformed_are_refused)
{
	static const uint8_t auth_only[] = { 5, 1, 2 }, none[] = { 5, 0 }, v4[] = { 4, 1, 0 };
	size_t used;

	cr_assert_eq(net_socks_greeting(auth_only, sizeof(auth_only), &used), -EACCES);
	cr_assert_eq(net_socks_greeting(none, sizeof(none), &used), -EINVAL);
	cr_assert_eq(net_socks_greeting(v4, sizeof(v4), &used), -EINVAL);
	cr_assert_eq(net_socks_greeting(v4, 1, &used), -EINVAL);
}

Test(net_socks, connect_by_name_ipv4_and_ipv6)
{
	static const uint8_t name[] = { 5, 1, 0, 3, 8, 'P', 'y', 'P', 'I', '.', 'o', 'r', 'g', 1, 187,
					'x' };
	static const uint8_t v4[] = { 5, 1, 0, 1, 127, 0, 0, 1, 0x1f, 0x90 };
	static const uint8_t v6[] = { 5, 1, 0, 4, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0,
				      0, 0, 0, 1, 0, 80 };
	struct net_request req;
	uint8_t code;

	cr_assert_eq(request(name, sizeof(name), &req, &code), 0);
	cr_assert_str_eq(req.host, "pypi.org", "lowercased as rules are");
	cr_assert_eq(req.port, 443);
	cr_assert_eq(req.kind, NET_REQ_SOCKS);
	cr_assert_str_eq(req.method, "SOCKS5");
	cr_assert_eq(req.head_len, sizeof(name) - 1, "the byte after it is the client's data");
	for (size_t n = 0; n < sizeof(name) - 1; n++)
		cr_assert_eq(request(name, n, &req, &code), -EAGAIN, "cut at %zu", n);
	cr_assert_eq(request(v4, sizeof(v4), &req, &code), 0);
	cr_assert_str_eq(req.host, "127.0.0.1");
	cr_assert_eq(req.port, 8080);
	cr_assert_eq(request(v6, sizeof(v6), &req, &code), 0);
	cr_assert_str_eq(req.host, "2001:db8::1");
	cr_assert_eq(req.port, 80);
	for (size_t n = 0; n < sizeof(v6); n++)
		cr_assert_eq(request(v6, n, &req, &code), -EAGAIN, "cut at %zu", n);
}

Test(net_socks, a_literal_sent_as_a_name_is_the_literal)
{
	static const uint8_t lit[] = { 5, 1, 0, 3, 9, '1', '0', '.', '0', '.', '0', '.', '1', '7',
				       0, 80 };
	struct net_request req;
	uint8_t code;

	cr_assert_eq(request(lit, sizeof(lit), &req, &code), 0);
	cr_assert_str_eq(req.host, "10.0.0.17");
}

Test(net_socks, other_commands_and_address_types_get_their_codes)
{
	static const uint8_t bind[] = { 5, 2, 0, 1, 1, 2, 3, 4, 0, 80 };
	static const uint8_t udp[] = { 5, 3, 0, 1, 1, 2, 3, 4, 0, 80 };
	static const uint8_t atyp[] = { 5, 1, 0, 2, 1, 2, 3, 4, 0, 80 };
	struct net_request req;
	uint8_t code;

	cr_assert_eq(request(bind, sizeof(bind), &req, &code), -EINVAL);
	cr_assert_eq(code, NET_SOCKS_BAD_COMMAND);
	cr_assert_eq(request(udp, 5, &req, &code), -EINVAL, "known wrong before the address");
	cr_assert_eq(code, NET_SOCKS_BAD_COMMAND);
	cr_assert_eq(request(atyp, sizeof(atyp), &req, &code), -EINVAL);
	cr_assert_eq(code, NET_SOCKS_BAD_ADDRESS_TYPE);
}

Test(net_socks, hostile_requests_are_refused_not_trusted)
{
	static const uint8_t rsv[] = { 5, 1, 1, 1, 1, 2, 3, 4, 0, 80 };
	static const uint8_t port0[] = { 5, 1, 0, 1, 1, 2, 3, 4, 0, 0 };
	static const uint8_t empty[] = { 5, 1, 0, 3, 0, 0, 80 };
	static const uint8_t nul[] = { 5, 1, 0, 3, 3, 'a', 0, 'b', 0, 80 };
	static const uint8_t dot[] = { 5, 1, 0, 3, 2, 'a', '.', 0, 80 };
	static const uint8_t space[] = { 5, 1, 0, 3, 3, 'a', ' ', 'b', 0, 80 };
	static const uint8_t ver[] = { 4, 1, 0, 1, 1, 2, 3, 4, 0, 80 };
	uint8_t longname[4 + 1 + 255 + 2] = { 5, 1, 0, 3, 255 };
	struct net_request req;
	uint8_t code;

	cr_assert_eq(request(rsv, sizeof(rsv), &req, &code), -EINVAL);
	cr_assert_eq(code, NET_SOCKS_FAILURE);
	cr_assert_eq(request(port0, sizeof(port0), &req, &code), -EINVAL);
	cr_assert_eq(request(empty, sizeof(empty), &req, &code), -EINVAL);
	cr_assert_eq(request(nul, sizeof(nul), &req, &code), -EINVAL);
	cr_assert_eq(request(dot, sizeof(dot), &req, &code), -EINVAL);
	cr_assert_eq(request(space, sizeof(space), &req, &code), -EINVAL);
	cr_assert_eq(request(ver, sizeof(ver), &req, &code), -EINVAL);
	memset(longname + 5, 'a', 255);
	longname[sizeof(longname) - 1] = 80;
	cr_assert_eq(request(longname, sizeof(longname), &req, &code), -EINVAL,
		     "255 bytes: longer than any name a rule holds");
	cr_assert_eq(code, NET_SOCKS_FAILURE);
}

Test(net_socks, replies_and_refusal_codes)
{
	uint8_t r[NET_SOCKS_REPLY_LEN];
	static const uint8_t want[NET_SOCKS_REPLY_LEN] = { 5, 2, 0, 1, 0, 0, 0, 0, 0, 0 };

	net_socks_reply(NET_SOCKS_NOT_ALLOWED, r);
	cr_assert_eq(memcmp(r, want, sizeof(want)), 0);
	cr_assert_eq(net_socks_code(403, 0), NET_SOCKS_NOT_ALLOWED);
	cr_assert_eq(net_socks_code(403, -EACCES), NET_SOCKS_NOT_ALLOWED);
	cr_assert_eq(net_socks_code(502, -ECONNREFUSED), NET_SOCKS_REFUSED);
	cr_assert_eq(net_socks_code(502, -EHOSTUNREACH), NET_SOCKS_HOST_UNREACHABLE);
	cr_assert_eq(net_socks_code(502, -ENETUNREACH), NET_SOCKS_NET_UNREACHABLE);
	cr_assert_eq(net_socks_code(502, -ETIMEDOUT), NET_SOCKS_TTL_EXPIRED);
	cr_assert_eq(net_socks_code(503, 0), NET_SOCKS_FAILURE);
}
