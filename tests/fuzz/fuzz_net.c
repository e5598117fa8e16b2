/* fuzz_net.c - libFuzzer target: what a guest's proxy client sends first (the request head, a SOCKS5 greeting and request, the TLS ClientHello) and what a user writes (--allow-net), through their parsers. */
#include "fuzz_common.h"
#include "net/http.h"
#include "net/rules.h"
#include "net/sni.h"
#include "net/socks.h"

/*
 * Input: one selector byte, then the bytes for that parser
 * (tests/fuzz/make-net-seeds writes the seeds):
 *   0  a request head (net_http_parse, then net_http_rewrite)
 *   1  a ClientHello (net_sni_parse)
 *   2  a rule and a --resolve entry (their parsers, then matching)
 *   3  a SOCKS5 greeting, then its request (net_socks_greeting, then
 *      net_socks_request on the bytes after the greeting)
 * Each parser gets a heap copy of exactly the bytes, so a read past them is
 * caught. Checks besides the sanitizers:
 *  - a parsed head ends inside the input with its blank line; its host is
 *    a valid name or address and its port not 0; the rewrite fits the
 *    documented bound and starts with the method and a '/';
 *  - a head the parser waits on is shorter than NET_HEAD_MAX;
 *  - an SNI found is a valid host name; a hello waited on is shorter than
 *    its record;
 *  - a parsed rule matches its own host (names) or network (addresses);
 *  - a SOCKS5 greeting or request taken ends inside the input, a request's
 *    host is a valid name or address and its port not 0; one waited on is
 *    shorter than the longest request (a 255-byte name); a refused one
 *    names a reply code the protocol has.
 */
static uint8_t *copy(const uint8_t *p, size_t n)
{
	uint8_t *d = malloc(n ? n : 1);

	if (!d)
		fuzz_die("out of memory");
	memcpy(d, p, n);
	return d;
}

static void check_head(const uint8_t *data, size_t len)
{
	uint8_t *buf = copy(data, len);
	struct net_request req;
	const char *why = "";
	int rc = net_http_parse(buf, len, &req, &why);
	size_t cap = req.head_len + NET_HOST_MAX + 64;
	char host[NET_HOST_MAX + 1];
	struct net_addr a;

	if (rc == -EAGAIN && len >= NET_HEAD_MAX)
		fuzz_die("a full head buffer waits for more");
	if (rc == 0) {
		char *out;
		int n;

		if (req.head_len > len || req.head_len < 4 || memcmp(buf + req.head_len - 4, "\r\n\r\n", 4))
			fuzz_die("a head that does not end in its blank line");
		memcpy(host, req.host, sizeof(host));
		if (!req.port || (!net_addr_parse(host, &a) && !net_host_valid(host)))
			fuzz_die("a parsed head with a bad host or port");
		if (req.kind == NET_REQ_HTTP) {
			out = malloc(cap);
			if (!out)
				fuzz_die("out of memory");
			n = net_http_rewrite(buf, &req, out, cap);
			if (n < 0 || (size_t)n > cap || strncmp(out, req.method, strlen(req.method)) ||
			    out[strlen(req.method) + 1] != '/')
				fuzz_die("the rewrite broke its bound or its form");
			free(out);
		}
	}
	free(buf);
}

static void check_hello(const uint8_t *data, size_t len)
{
	uint8_t *buf = copy(data, len);
	char sni[NET_HOST_MAX + 1];
	const char *why = "";
	int rc = net_sni_parse(buf, len, sni, &why);

	if (rc == 0 && (strlen(sni) > NET_HOST_MAX || !net_host_valid(sni)))
		fuzz_die("an SNI that is not a host name");
	if (rc == -EAGAIN && len >= NET_HELLO_MAX)
		fuzz_die("a whole record's worth waits for more");
	free(buf);
}

static void check_rule(const uint8_t *data, size_t len)
{
	char *text = malloc(len + 1);
	struct net_policy *p = calloc(1, sizeof(*p));
	char err[256];

	if (!text || !p)
		fuzz_die("out of memory");
	memcpy(text, data, len);
	text[len] = '\0';
	if (net_policy_add_rule(p, text, err, sizeof(err)) == 0) {
		const struct net_rule *r = &p->rules[0];

		if (r->kind == NET_RULE_HOST && !net_policy_match(p, r->host, r->port ? r->port : 1))
			fuzz_die("a name rule that does not match its own name");
		if (r->kind == NET_RULE_CIDR && !net_policy_match_addr(p, &r->addr, r->port ? r->port : 1))
			fuzz_die("an address rule that does not match its own network");
		net_addr_class(&r->addr);
	}
	net_policy_add_resolve(p, text, err, sizeof(err));
	free(text);
	free(p);
}

#define SOCKS_REQUEST_MAX (4 + 1 + 255 + 2)

static void check_socks(const uint8_t *data, size_t len)
{
	uint8_t *buf = copy(data, len), code = 0;
	char host[NET_HOST_MAX + 1];
	struct net_request req;
	const char *why = "";
	struct net_addr a;
	size_t used = 0;
	int rc = net_socks_greeting(buf, len, &used);

	if (rc == -EAGAIN && len >= 2 + 255)
		fuzz_die("a whole greeting's worth waits for more");
	if (rc == 0 && (used > len || used < 3))
		fuzz_die("a greeting taken past the input");
	free(buf);
	if (rc)
		return;
	len -= used;
	buf = copy(data + used, len);
	rc = net_socks_request(buf, len, &req, &code, &why);
	if (rc == -EAGAIN && len >= SOCKS_REQUEST_MAX)
		fuzz_die("a whole request's worth waits for more");
	if (rc == -EINVAL && code != NET_SOCKS_FAILURE && code != NET_SOCKS_BAD_COMMAND &&
	    code != NET_SOCKS_BAD_ADDRESS_TYPE)
		fuzz_die("a refusal with a reply code the parser does not give");
	if (rc == 0) {
		memcpy(host, req.host, sizeof(host));
		if (req.head_len > len || req.kind != NET_REQ_SOCKS || !req.port ||
		    (!net_addr_parse(host, &a) && !net_host_valid(host)))
			fuzz_die("a parsed SOCKS5 request with a bad length, host or port");
	}
	free(buf);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_log_init();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	switch (data[0] % 4) {
	case 0: check_head(data + 1, size - 1); break;
	case 1: check_hello(data + 1, size - 1); break;
	case 2: check_rule(data + 1, size - 1); break;
	default: check_socks(data + 1, size - 1); break;
	}
	return 0;
}
