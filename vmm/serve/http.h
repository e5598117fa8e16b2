/* http.h - mayfly serve's HTTP/1.1 front end (libmicrohttpd): a Unix socket or a loopback port, bearer tokens, bodies bounded, each route to the service. */
#ifndef MAYFLY_SERVE_HTTP_H
#define MAYFLY_SERVE_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "vm/config.h"
#include "serve/http_guard.h"
#include "serve/service.h"
#include "serve/tokens.h"

#define HTTP_MAX_JSON_BODY   (16u << 20)   /* a JSON request (exec's stdin included) */
#define HTTP_MAX_CONNECTIONS 256

struct http_server {
	struct MHD_Daemon *daemon;
	int listen_fd;
	char unix_path[CONFIG_VSOCK_PATH_MAX + 1];   /* "": TCP */
	struct service *svc;
	const struct tokens *tokens;   /* NULL: no token asked (a Unix socket only) */
	uint64_t max_file;             /* a PUT body */
	unsigned head_timeout_ms;      /* 0: HTTP_GUARD_TIMEOUT_MS (tests set less) */
	struct http_guard guard;       /* connections still sending a request head */
};

/* A listening socket: a Unix socket at path (mode 0600; a stale socket
 * left there is replaced, anything else is refused), or a TCP port on a
 * loopback address "127.x.y.z:PORT" or "[::1]:PORT" (anything else
 * refused unless any_addr: a TLS listener takes any address named; opt,
 * the option that gave it, names it in err). fd, or -errno with one line
 * in err. */
int http_listen_unix(const char *path, char *err, size_t errlen);
int http_listen_tcp(const char *opt, const char *addr, bool any_addr, char *err, size_t errlen);

/* Serve on h->listen_fd (taken over), a thread per connection.
 * extra_flags: MHD_USE_* added (tests: MHD_USE_TLS must fail). 0 or
 * -errno. */
int http_start(struct http_server *h, unsigned extra_flags);
/* Stop accepting (the socket closed and a Unix socket's path removed);
 * connections in progress go on. */
void http_quiesce(struct http_server *h);
/* End every connection (each waits for its call) and free. */
void http_stop(struct http_server *h);

#endif
