/* port_msg.c - a published port's pure parts: its host name, its traffic token, the guest server's response head checked as hostile input. */
#include "serve/port_msg.h"

#include <errno.h>
#include <sha2.h>
#include <string.h>
#include <strings.h>

static bool id_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_';
}

int port_parse_host(const char *host, const char *domain, unsigned *port,
		    char id[PORT_ID_MAX + 1])
{
	size_t dlen = strlen(domain), hlen, i = 0, id_len;
	const char *dot, *colon;
	unsigned p = 0;

	if (!host || !dlen)
		return 0;
	hlen = strlen(host);
	/* "...DOMAIN" whole, or "...DOMAIN:N" when DOMAIN has no port of its own. */
	colon = strrchr(host, ':');
	if (hlen > dlen && host[hlen - dlen - 1] == '.' && !strcasecmp(host + hlen - dlen, domain)) {
		hlen -= dlen + 1;
	} else if (colon && !strchr(domain, ':') && (size_t)(colon - host) > dlen &&
		   host[colon - host - dlen - 1] == '.' &&
		   !strncasecmp(colon - dlen, domain, dlen) && colon[1]) {
		for (const char *q = colon + 1; *q; q++)
			if (*q < '0' || *q > '9')
				return 0;
		hlen = (size_t)(colon - host) - dlen - 1;
	} else {
		return 0;
	}
	/* host[0..hlen) is "PORT-ID": no dot in it (a deeper name is not ours). */
	dot = memchr(host, '.', hlen);
	if (dot)
		return 0;
	while (i < hlen && host[i] >= '0' && host[i] <= '9' && i < 5)
		p = p * 10 + (unsigned)(host[i++] - '0');
	if (!i || host[0] == '0' || i >= hlen || host[i] != '-' || !p || p > 65535)
		return 0;
	id_len = hlen - i - 1;
	if (!id_len || id_len > PORT_ID_MAX)
		return 0;
	for (size_t k = 0; k < id_len; k++)
		if (!id_char(host[i + 1 + k]))
			return 0;
	memcpy(id, host + i + 1, id_len);
	id[id_len] = '\0';
	*port = p;
	return 1;
}

void port_traffic_token(const uint8_t key[PORT_KEY_LEN], const char *id,
			char out[PORT_TOKEN_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	uint8_t pad[64], inner[SHA256_DIGEST_LENGTH], mac[SHA256_DIGEST_LENGTH];
	SHA2_CTX ctx;

	/* HMAC (RFC 2104): the key is shorter than SHA-256's block. */
	for (int round = 0; round < 2; round++) {
		memset(pad, round ? 0x5c : 0x36, sizeof(pad));
		for (size_t i = 0; i < PORT_KEY_LEN; i++)
			pad[i] ^= key[i];
		SHA256Init(&ctx);
		SHA256Update(&ctx, pad, sizeof(pad));
		if (round)
			SHA256Update(&ctx, inner, sizeof(inner));
		else
			SHA256Update(&ctx, (const uint8_t *)id, strlen(id));
		SHA256Final(round ? mac : inner, &ctx);
	}
	for (size_t i = 0; i < PORT_TOKEN_LEN / 2; i++) {
		out[2 * i] = hex[mac[i] >> 4];
		out[2 * i + 1] = hex[mac[i] & 15];
	}
	out[PORT_TOKEN_LEN] = '\0';
}

bool port_token_equal(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char diff = la != lb;

	for (size_t i = 0; i < lb; i++)
		diff |= (unsigned char)(a[i < la ? i : 0] ^ b[i]);
	return !diff && la == lb;
}

/* RFC 9110's tchar. */
static bool token_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int bad(const char **why, const char *msg)
{
	*why = msg;
	return -EPROTO;
}

static bool name_is(const char *buf, const struct port_header *hd, const char *name)
{
	return hd->name_len == strlen(name) && !strncasecmp(buf + hd->name, name, hd->name_len);
}

/* The header lines of buf[start..end) (each ending in \r\n or \n). */
static int parse_headers(const char *buf, size_t start, size_t end, struct port_head *h,
			 const char **why)
{
	size_t pos = start;

	while (pos < end) {
		const char *nl = memchr(buf + pos, '\n', end - pos);
		size_t line_end = (size_t)(nl - buf), n = 0, v, ve;
		struct port_header *hd;

		if (line_end > pos && buf[line_end - 1] == '\r')
			line_end--;
		if (buf[pos] == ' ' || buf[pos] == '\t')
			return bad(why, "the guest's server folded a header line (obsolete in HTTP/1.1)");
		while (pos + n < line_end && token_char(buf[pos + n]))
			n++;
		if (!n || pos + n >= line_end || buf[pos + n] != ':')
			return bad(why, "the guest's server sent a malformed header line");
		if (h->nheaders == PORT_MAX_HEADERS)
			return bad(why, "the guest's server sent more than 100 headers");
		for (v = pos + n + 1; v < line_end && (buf[v] == ' ' || buf[v] == '\t'); v++)
			;
		for (ve = line_end; ve > v && (buf[ve - 1] == ' ' || buf[ve - 1] == '\t'); ve--)
			;
		for (size_t k = v; k < ve; k++)
			if ((buf[k] < ' ' && buf[k] != '\t') || buf[k] == 0x7f)
				return bad(why, "the guest's server sent a control character in a header");
		hd = &h->headers[h->nheaders++];
		*hd = (struct port_header){ (uint32_t)pos, (uint32_t)n, (uint32_t)v, (uint32_t)(ve - v) };
		pos = (size_t)(nl - buf) + 1;
	}
	return 0;
}

/* Content-Length: digits only, every copy the same (RFC 9112, 6.3). */
static int body_length(const char *buf, struct port_head *h, const char **why)
{
	h->content_length = -1;
	for (unsigned i = 0; i < h->nheaders; i++) {
		const struct port_header *hd = &h->headers[i];
		int64_t n = 0;

		if (name_is(buf, hd, "Transfer-Encoding"))
			return bad(why, "the guest's server sent Transfer-Encoding to an HTTP/1.0 request");
		if (!name_is(buf, hd, "Content-Length"))
			continue;
		if (!hd->value_len || hd->value_len > 18)
			return bad(why, "the guest's server sent a bad Content-Length");
		for (uint32_t k = 0; k < hd->value_len; k++) {
			char c = buf[hd->value + k];

			if (c < '0' || c > '9')
				return bad(why, "the guest's server sent a bad Content-Length");
			n = n * 10 + (c - '0');
		}
		if (h->content_length >= 0 && h->content_length != n)
			return bad(why, "the guest's server sent two different Content-Lengths");
		h->content_length = n;
	}
	return 0;
}

int port_parse_head(const char *buf, size_t len, struct port_head *h, const char **why)
{
	size_t scan = len < PORT_HEAD_MAX ? len : PORT_HEAD_MAX, end = 0, line;
	const char *nl;
	int rc;

	/* The blank line: "\r\n\r\n", or bare "\n\n" as RFC 9112 lets a recipient take. */
	for (size_t i = 0; i + 1 < scan && !end; i++) {
		if (buf[i] == '\0')
			return bad(why, "the guest's server sent a NUL in its response head");
		if (buf[i] == '\n' && buf[i + 1] == '\n')
			end = i + 2;
		else if (buf[i] == '\n' && buf[i + 1] == '\r' && i + 2 < scan && buf[i + 2] == '\n')
			end = i + 3;
	}
	if (!end) {
		if (len >= PORT_HEAD_MAX) {
			*why = "the guest's server sent a response head over 32 KiB";
			return -E2BIG;
		}
		return 0;
	}
	memset(h, 0, sizeof(*h));
	h->head_len = end;
	nl = memchr(buf, '\n', end);
	line = (size_t)(nl - buf);
	if (line && buf[line - 1] == '\r')
		line--;
	/* "HTTP/1.x SP DDD [SP reason]" */
	if (line < 12 || strncmp(buf, "HTTP/1.", 7) || (buf[7] != '0' && buf[7] != '1') ||
	    buf[8] != ' ' || buf[9] < '1' || buf[9] > '5' || buf[10] < '0' || buf[10] > '9' ||
	    buf[11] < '0' || buf[11] > '9' || (line > 12 && buf[12] != ' '))
		return bad(why, "the guest's server sent no HTTP/1.x status line");
	h->status = (unsigned)((buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0'));
	/* The blank line's own line break is not a header. */
	rc = parse_headers(buf, (size_t)(nl - buf) + 1, end - (buf[end - 2] == '\r' ? 2 : 1), h, why);
	return rc ? rc : body_length(buf, h, why) ? -EPROTO : 1;
}

bool port_hop_header(const char *name, size_t len)
{
	static const char *const hop[] = {
		"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
		"Proxy-Authorization", "TE", "Trailer", "Transfer-Encoding", "Upgrade",
		"Content-Length", "Date", "Host",
	};

	for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
		if (len == strlen(hop[i]) && !strncasecmp(name, hop[i], len))
			return true;
	return false;
}
