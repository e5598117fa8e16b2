/* http.c - the proxy's request head: CONNECT and absolute-URI requests parsed strictly, and the head rewritten for the server. */
#include "net/http.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>

static int fail(const char **why, const char *msg)
{
	*why = msg;
	return -EINVAL;
}

/* The end of the head: the first CRLF CRLF, or 0. */
static size_t head_end(const uint8_t *buf, size_t len)
{
	for (size_t i = 3; i < len; i++)
		if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' && buf[i - 3] == '\r')
			return i + 1;
	return 0;
}

/* "host[:port]" or "[v6][:port]" from s[0, n) into req (port stays as
 * set when none is given and need_port is false). */
static int authority(const char *s, size_t n, bool need_port, struct net_request *req,
		     const char **why)
{
	const char *host = s, *colon = NULL;
	size_t hlen;
	struct net_addr a;

	if (!n)
		return fail(why, "no host");
	if (memchr(s, '@', n))
		return fail(why, "user information in the address");
	if (s[0] == '[') {
		const char *close = memchr(s, ']', n);

		if (!close)
			return fail(why, "an IPv6 address without its ']'");
		host = s + 1;
		hlen = (size_t)(close - host);
		if (close + 1 < s + n) {
			if (close[1] != ':')
				return fail(why, "bytes after the IPv6 address");
			colon = close + 1;
		}
	} else {
		colon = memchr(s, ':', n);
		hlen = colon ? (size_t)(colon - s) : n;
	}
	if (colon) {
		if (!net_port_parse(colon + 1, (size_t)(s + n - colon - 1), &req->port))
			return fail(why, "the port must be 1-65535");
	} else if (need_port) {
		return fail(why, "CONNECT needs host:port");
	}
	if (!hlen || hlen > NET_HOST_MAX)
		return fail(why, "bad host name length");
	memcpy(req->host, host, hlen);
	req->host[hlen] = '\0';
	if (s[0] == '[') {
		if (!net_addr_parse(req->host, &a) || net_addr_is_v4(&a) || !strchr(req->host, ':'))
			return fail(why, "not an IPv6 address in brackets");
		return 0;
	}
	if (net_addr_parse(req->host, &a) && !strchr(req->host, ':'))
		return 0;                       /* a v4 literal */
	if (!net_host_valid(req->host))
		return fail(why, "not a host name");
	return 0;
}

int net_http_parse(const uint8_t *buf, size_t len, struct net_request *req, const char **why)
{
	size_t end = head_end(buf, len), line_end, sp1, sp2;
	const char *s = (const char *)buf;

	memset(req, 0, sizeof(*req));
	if (!end) {
		/* The request line alone must still look like one: a client
		 * that sends garbage is told so at once, not after 8 KiB. */
		for (size_t i = 0; i < len; i++)
			if (buf[i] != '\r' && buf[i] != '\n' && buf[i] != '\t' &&
			    (buf[i] < 0x20 || buf[i] > 0x7e))
				return fail(why, "a control or non-ASCII byte in the request head");
		if (len >= NET_HEAD_MAX) {
			*why = "request head too long";
			return -E2BIG;
		}
		return -EAGAIN;
	}
	for (size_t i = 0; i < end; i++) {
		if (buf[i] == '\t' || buf[i] == '\r' || buf[i] == '\n')
			continue;
		if (buf[i] < 0x20 || buf[i] > 0x7e)
			return fail(why, "a control or non-ASCII byte in the request head");
	}
	/* Every line ends in CRLF: no bare CR or LF. */
	for (size_t i = 0; i < end; i++)
		if ((buf[i] == '\r' && (i + 1 == end || buf[i + 1] != '\n')) ||
		    (buf[i] == '\n' && (i == 0 || buf[i - 1] != '\r')))
			return fail(why, "a bare CR or LF in the request head");
	line_end = (size_t)((const uint8_t *)memchr(buf, '\r', end) - buf);
	/* Header lines: "Name: value", no folding (a line starting with
	 * white space continues the last one in old HTTP: refused). */
	for (size_t i = line_end + 2; i + 2 < end;) {
		const char *cr = memchr(s + i, '\r', end - i);
		const char *colon = memchr(s + i, ':', (size_t)(cr - (s + i)));

		if (!colon || colon == s + i || s[i] == ' ' || s[i] == '\t' ||
		    memchr(s + i, ' ', (size_t)(colon - (s + i))) ||
		    memchr(s + i, '\t', (size_t)(colon - (s + i))))
			return fail(why, "a malformed header line");
		i = (size_t)(cr - s) + 2;
	}
	sp1 = 0;
	while (sp1 < line_end && s[sp1] != ' ')
		sp1++;
	sp2 = sp1 + 1;
	while (sp2 < line_end && s[sp2] != ' ')
		sp2++;
	if (sp1 == 0 || sp1 > NET_METHOD_MAX || sp2 >= line_end || sp2 == sp1 + 1)
		return fail(why, "not a request line (METHOD TARGET HTTP/1.x)");
	if (line_end - sp2 - 1 != 8 || memcmp(s + sp2 + 1, "HTTP/1.", 7) ||
	    (s[sp2 + 8] != '0' && s[sp2 + 8] != '1'))
		return fail(why, "not HTTP/1.0 or HTTP/1.1");
	req->minor = (size_t)(s[sp2 + 8] - '0');
	for (size_t i = 0; i < sp1; i++)
		if (s[i] < 'A' || s[i] > 'Z')
			return fail(why, "a method is upper-case letters");
	memcpy(req->method, s, sp1);
	req->head_len = end;
	if (sp1 == 7 && !memcmp(s, "CONNECT", 7)) {
		req->kind = NET_REQ_CONNECT;
		return authority(s + sp1 + 1, sp2 - sp1 - 1, true, req, why);
	}
	{
		const char *t = s + sp1 + 1, *slash;
		size_t tlen = sp2 - sp1 - 1;
		int rc;

		if (tlen >= 8 && !strncasecmp(t, "https://", 8))
			return fail(why, "https:// through a plain request: use CONNECT");
		if (tlen < 7 || strncasecmp(t, "http://", 7))
			return fail(why, "a proxy request needs an absolute http:// URI or CONNECT");
		t += 7;
		tlen -= 7;
		slash = memchr(t, '/', tlen);
		if (memchr(t, '?', slash ? (size_t)(slash - t) : tlen) ||
		    memchr(t, '#', slash ? (size_t)(slash - t) : tlen))
			return fail(why, "a query right after the host");
		req->kind = NET_REQ_HTTP;
		req->port = 80;
		rc = authority(t, slash ? (size_t)(slash - t) : tlen, false, req, why);
		if (rc)
			return rc;
		req->path_off = slash ? (size_t)(slash - s) : 0;
		req->path_len = slash ? tlen - (size_t)(slash - t) : 0;
	}
	return 0;
}

/* Headers the proxy owns: they describe the hop to the proxy, or are
 * replaced (Host). */
static bool hop_header(const char *line, size_t n)
{
	static const char *const names[] = { "host", "connection", "keep-alive",
					     "proxy-connection", "proxy-authorization" };
	const char *colon = memchr(line, ':', n);
	size_t nlen = colon ? (size_t)(colon - line) : n;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (nlen == strlen(names[i]) && !strncasecmp(line, names[i], nlen))
			return true;
	return false;
}

static bool put(char *out, size_t cap, size_t *off, const char *s, size_t n)
{
	if (n > cap - *off)
		return false;
	memcpy(out + *off, s, n);
	*off += n;
	return true;
}

int net_http_rewrite(const uint8_t *buf, const struct net_request *req, char *out, size_t cap)
{
	const char *s = (const char *)buf, *line, *next;
	const char *end = s + req->head_len - 2;   /* the blank line's CRLF */
	bool v6 = strchr(req->host, ':') != NULL;
	char port[8];
	size_t off = 0;
	int plen = 0;

	if (req->port != 80) {
		port[0] = ':';
		plen = 1;
		for (unsigned v = req->port, d = 10000; d; d /= 10)
			if (v / d || plen > 1 || d == 1)
				port[plen++] = (char)('0' + v / d % 10);
	}
	if (!put(out, cap, &off, req->method, strlen(req->method)) || !put(out, cap, &off, " ", 1))
		return -ENOSPC;
	if (!(req->path_len ? put(out, cap, &off, s + req->path_off, req->path_len) :
			      put(out, cap, &off, "/", 1)))
		return -ENOSPC;
	if (!put(out, cap, &off, req->minor ? " HTTP/1.1\r\nHost: " : " HTTP/1.0\r\nHost: ", 17) ||
	    (v6 && !put(out, cap, &off, "[", 1)) ||
	    !put(out, cap, &off, req->host, strlen(req->host)) ||
	    (v6 && !put(out, cap, &off, "]", 1)) ||
	    !put(out, cap, &off, port, (size_t)plen) || !put(out, cap, &off, "\r\n", 2))
		return -ENOSPC;
	line = (const char *)memchr(s, '\r', req->head_len) + 2;   /* parsed: it is there */
	for (; line < end; line = next) {
		const char *cr = memchr(line, '\r', (size_t)(end - line));

		next = cr + 2;
		if (!hop_header(line, (size_t)(cr - line)) &&
		    !put(out, cap, &off, line, (size_t)(next - line)))
			return -ENOSPC;
	}
	if (!put(out, cap, &off, "Connection: close\r\n\r\n", 21))
		return -ENOSPC;
	return (int)off;
}
