/* tls_front.h - TLS in front of a libmicrohttpd daemon (serve --e2b with --e2b-cert and --e2b-key): OpenSSL ends each client's TLS and hands its plain bytes to the daemon over a socketpair. */
#ifndef MAYFLY_SERVE_TLS_FRONT_H
#define MAYFLY_SERVE_TLS_FRONT_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/thread.h"
#include "serve/http_guard.h"

struct ssl_ctx_st;

#define TLS_MAX_HANDSHAKES 64          /* at once; past it the oldest is cut (http_guard) */

struct tls_front {
	struct ssl_ctx_st *ctx;        /* the certificate and key, TLS 1.2 and up, ALPN http/1.1 */
	int listen_fd;                 /* taken over by tls_front_start */
	int stop_fd;                   /* eventfd: readable once stopping */
	struct MHD_Daemon *daemon;     /* where each connection's plain end goes */
	unsigned handshake_ms;         /* a client's handshake, at most */
	unsigned max_conns;            /* connections at once; more are closed at once */
	pthread_t acceptor;
	struct thread_crew crew;       /* a thread per connection */
	struct http_guard guard;       /* the handshakes in progress */
	bool started;
};

/* The certificate chain (PEM) and its private key (PEM), checked to belong
 * together. 0, or -EINVAL with one line in err. */
int tls_front_load(struct tls_front *t, const char *cert, const char *key, char *err,
		   size_t errlen);
/* Accept on listen_fd (taken over) and hand each connection, once its
 * handshake is done within handshake_ms, to d (MHD_add_connection). 0 or
 * -errno. */
int tls_front_start(struct tls_front *t, int listen_fd, struct MHD_Daemon *d);
/* Stop accepting and end every connection (waits for them); before the
 * daemon stops. Safe on a front never started. */
void tls_front_stop(struct tls_front *t);
/* What tls_front_load made. */
void tls_front_free(struct tls_front *t);

#endif
