/* http.h - the proxy's request head from the guest (CONNECT host:port, or an absolute-URI plain HTTP request): a strict, bounded, pure parser. */
#ifndef MAYFLY_NET_HTTP_H
#define MAYFLY_NET_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "net/rules.h"

#define NET_HEAD_MAX   8192     /* a request head (line and headers) longer than this is refused */
#define NET_METHOD_MAX 16

enum net_req_kind { NET_REQ_CONNECT, NET_REQ_HTTP, NET_REQ_SOCKS /* net/socks.h */ };

struct net_request {
	enum net_req_kind kind;
	char method[NET_METHOD_MAX + 1];
	char host[NET_HOST_MAX + 1];   /* lowercase name, or an address literal (no brackets) */
	uint16_t port;                 /* CONNECT: given; HTTP: given or 80 */
	size_t path_off, path_len;     /* HTTP: the origin-form target ("/..."), in the buffer */
	size_t minor;                  /* HTTP/1.minor */
	size_t head_len;               /* bytes of the head, its blank line included */
};

/* Pure: parse buf[0, len), the first bytes a guest client sent. Returns
 *   0        a whole head, *req filled (bytes past head_len are the
 *            client's first data);
 *   -EAGAIN  no blank line yet and len < NET_HEAD_MAX: read more;
 *   -E2BIG   NET_HEAD_MAX bytes without the end of the head;
 *   -EINVAL  anything else malformed or unsupported (https:// in an
 *            absolute URI, a missing CONNECT port, a control byte, a bad
 *            name or port), with *why one short line.
 * Only "CONNECT authority HTTP/1.x" (authority "host:port" or
 * "[v6]:port") and "METHOD http://authority[/path] HTTP/1.x" are taken;
 * lines end in CRLF. */
int net_http_parse(const uint8_t *buf, size_t len, struct net_request *req, const char **why);

/* Pure: the head to send the server for an NET_REQ_HTTP request: the
 * origin-form request line, Host: from the URI, the client's headers
 * without Host, Connection, Keep-Alive, Proxy-Connection and
 * Proxy-Authorization, then "Connection: close" (one request per proxied
 * connection). Bytes written, or -ENOSPC when out (at least head_len +
 * NET_HOST_MAX + 64 bytes always suffices) is too small. */
int net_http_rewrite(const uint8_t *buf, const struct net_request *req, char *out, size_t cap);

#endif
