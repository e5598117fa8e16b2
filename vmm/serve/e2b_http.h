/* e2b_http.h - E2B's sandbox protocol on a listener of its own (serve --e2b ADDR:PORT): the control plane the e2b SDKs call, and each sandbox's envd named by the E2b-Sandbox-Id header, translated to the service's own calls (docs/e2b.md). */
#ifndef MAYFLY_SERVE_E2B_HTTP_H
#define MAYFLY_SERVE_E2B_HTTP_H

#include <pthread.h>
#include <stdint.h>

#include "serve/http_guard.h"
#include "serve/tls_front.h"
#include "serve/service.h"
#include "serve/tokens.h"

/* What create and connect answer as envdVersion: the envd whose API this
 * is (the SDK turns features on by it). */
#define E2B_ENVD_VERSION "0.5.7"
#define E2B_DOMAIN_MAX   128
#define E2B_DEFAULT_TIMEOUT_S 300   /* a create without "timeout", as E2B's */
/* Connections at once: the SDK holds one per command or watch it streams. */
#define E2B_MAX_CONNECTIONS 512
#define E2B_ENVD_PORT    49983      /* envd's port: PORT-ID.DOMAIN with it is envd's */

struct e2b_keeper;
struct e2b_watchers;

struct e2b_server {
	struct MHD_Daemon *daemon;
	int listen_fd;
	struct service *svc;
	const struct tokens *tokens;   /* an API key, and an envd access token, is one of them */
	char domain[E2B_DOMAIN_MAX + 1];   /* sandboxes' host names: PORT-ID.DOMAIN */
	uint8_t traffic_key[32];       /* published ports' tokens come from it (e2b_start) */
	/* Published ports' WebSockets, each a relay thread (e2b_port.c):
	 * e2b_stop makes ws_stop_fd readable and waits for ws_count 0. */
	int ws_stop_fd;
	struct thread_crew ws;
	uint64_t max_file;             /* a file up or down */
	unsigned head_timeout_ms;      /* 0: HTTP_GUARD_TIMEOUT_MS */
	struct http_guard guard;
	struct tls_front *tls;         /* --e2b-cert/--e2b-key: TLS on listen_fd; NULL: plain */
	struct e2b_keeper *keeper;     /* commands whose client went (e2b_proc.c) */
	struct e2b_watchers *watchers; /* CreateWatcher's (e2b_watch.c) */
};

/* Serve on e->listen_fd (taken over; http_listen_tcp's), a thread per
 * connection; through e->tls when it is set. 0 or -errno. */
int e2b_start(struct e2b_server *e);
/* Stop accepting; connections in progress go on. */
void e2b_quiesce(struct e2b_server *e);
/* End every connection and free. */
void e2b_stop(struct e2b_server *e);

#endif
