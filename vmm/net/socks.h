/* socks.h - SOCKS5 on the guest's proxy port (RFC 1928, CONNECT only, no authentication): a strict, bounded, pure parser and the replies. */
#ifndef MAYFLY_NET_SOCKS_H
#define MAYFLY_NET_SOCKS_H

#include <stddef.h>
#include <stdint.h>

#include "net/http.h"

#define NET_SOCKS_VERSION   5        /* a client's first byte: no HTTP request starts so */
#define NET_SOCKS_REPLY_LEN 10       /* a reply with an IPv4 bound address */

/* RFC 1928's reply codes (REP). */
enum net_socks_code {
	NET_SOCKS_OK = 0,
	NET_SOCKS_FAILURE = 1,           /* general failure */
	NET_SOCKS_NOT_ALLOWED = 2,       /* connection not allowed by ruleset */
	NET_SOCKS_NET_UNREACHABLE = 3,
	NET_SOCKS_HOST_UNREACHABLE = 4,
	NET_SOCKS_REFUSED = 5,
	NET_SOCKS_TTL_EXPIRED = 6,       /* also a connect that timed out */
	NET_SOCKS_BAD_COMMAND = 7,
	NET_SOCKS_BAD_ADDRESS_TYPE = 8,
};

/* Pure: the greeting "05 NMETHODS METHODS" at buf[0, len). 0: whole,
 * "no authentication" (00) among the methods, *used its length; -EAGAIN:
 * read more; -EACCES: 00 not offered (answer 05 FF, close); -EINVAL: not
 * a SOCKS5 greeting (no method at all, another version). */
int net_socks_greeting(const uint8_t *buf, size_t len, size_t *used);

/* Pure: the request "05 CMD 00 ATYP ADDR PORT" at buf[0, len) into req:
 * kind NET_REQ_SOCKS, method "SOCKS5", host (a name checked and
 * lowercased as a rule's, or an address literal, IPv4 or IPv6, as text),
 * port, head_len the request's length (bytes after it are the client's
 * first data). 0; -EAGAIN read more; -EINVAL with *code (BAD_COMMAND for
 * BIND and UDP ASSOCIATE, BAD_ADDRESS_TYPE, else FAILURE) and *why one
 * short line. */
int net_socks_request(const uint8_t *buf, size_t len, struct net_request *req, uint8_t *code,
		      const char **why);

/* Pure: the reply "05 code 00 01 0.0.0.0:0" (the bound address is not
 * the guest's business) into out. */
void net_socks_reply(uint8_t code, uint8_t out[NET_SOCKS_REPLY_LEN]);

/* Pure: the reply code for a refusal the proxy would give as an HTTP
 * status (403 not allowed; 502 with the broker's -errno; else failure). */
uint8_t net_socks_code(int status, int err);

#endif
