/* port_msg.h - a published port's pure parts: the sandbox host name (PORT-ID.DOMAIN), the per-sandbox traffic token, and the guest server's response head, which is hostile. */
#ifndef MAYFLY_SERVE_PORT_MSG_H
#define MAYFLY_SERVE_PORT_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PORT_TOKEN_LEN    32           /* hex digits of a traffic token */
#define PORT_KEY_LEN      32           /* the service's secret the tokens come from */
#define PORT_HEAD_MAX     (32u << 10)  /* a response head, status line to blank line */
#define PORT_MAX_HEADERS  100
#define PORT_ID_MAX       32           /* API_ID_MAX */

/* host (a Host header) as "PORT-ID.DOMAIN", with or without ":N" after it
 * (DOMAIN compared without case; it may hold its own ":N"): 1 with *port
 * (1..65535) and id (its characters [A-Za-z0-9_-], 1..PORT_ID_MAX); 0
 * when host names no sandbox's port. */
int port_parse_host(const char *host, const char *domain, unsigned *port,
		    char id[PORT_ID_MAX + 1]);

/* The sandbox id's traffic token: HMAC-SHA256(key, id), its first 16
 * bytes in hex. A fork, another id, has its own; the key (the service's,
 * kept in its state directory) keeps them across restarts. */
void port_traffic_token(const uint8_t key[PORT_KEY_LEN], const char *id,
			char out[PORT_TOKEN_LEN + 1]);
/* a == b in time that does not depend on where they differ. */
bool port_token_equal(const char *a, const char *b);

/* One header of a parsed head: offsets into its buffer. */
struct port_header {
	uint32_t name, name_len, value, value_len;
};

/* A response head, as port_parse_head found it. */
struct port_head {
	unsigned status;               /* 100..599 */
	size_t head_len;               /* bytes up to and with the blank line */
	int64_t content_length;        /* -1: none (the body ends at the close) */
	unsigned nheaders;
	struct port_header headers[PORT_MAX_HEADERS];
};

/* buf[0..len) from the start of a response: 1 and *h when a whole head
 * is there; 0 when more is needed (len < PORT_HEAD_MAX); -EPROTO with
 * why (one line) when it is not HTTP/1.x's (a bad status line or header,
 * obsolete line folding, a NUL, conflicting or bad Content-Length,
 * Transfer-Encoding at all: the request was HTTP/1.0, more than
 * PORT_MAX_HEADERS headers) and -E2BIG when no head ends within
 * PORT_HEAD_MAX bytes. */
int port_parse_head(const char *buf, size_t len, struct port_head *h, const char **why);

/* True for the headers a proxy never passes on (RFC 9110, 7.6.1), and for
 * those mayfly sets itself: Connection, Keep-Alive, Proxy-*, TE, Trailer,
 * Transfer-Encoding, Upgrade, Content-Length, Date, Host. */
bool port_hop_header(const char *name, size_t len);

#endif
