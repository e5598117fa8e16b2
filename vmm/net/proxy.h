/* proxy.h - the host side of the guest's HTTP proxy: each guest connection to vsock port NET_VSOCK_PORT is checked, connected through the broker and relayed, in the I/O thread. */
#ifndef MAYFLY_NET_PROXY_H
#define MAYFLY_NET_PROXY_H

#include <stdint.h>

#include "lib/event.h"
#include "lib/log.h"
#include "net/broker.h"
#include "net/http.h"
#include "net/rules.h"

#define NET_VSOCK_PORT     1080        /* the host port the guest agent's proxy connects to */
#define NET_GUEST_PROXY_PORT 3128      /* where the agent serves the proxy, on 127.0.0.1 */
#define NET_MAX_CONNS      64          /* open proxied connections per sandbox */
#define NET_MAX_BYTES      (16ULL << 30)   /* bytes each way per sandbox, all connections */
#define NET_RELAY_BUF      (64 * 1024) /* per direction and connection, as vsock's packets */
#define NET_LINGER_MAX     (4u << 20)  /* a refused client's bytes read and dropped, at most */

/* What one connection attempt came to: the log line and the audit record. */
struct net_outcome {
	const char *vm_id;
	const char *method;            /* "CONNECT", "GET"... ; "" when the head did not parse */
	const char *host;
	uint16_t port;
	const char *addr;              /* the address connected to (or refused), "" if none */
	bool allowed;
	const char *rule;              /* the rule that allowed it, "" if none */
	const char *reason;            /* why refused, "" when allowed */
	uint64_t bytes_up, bytes_down; /* guest to server, server to guest */
};

struct net_conn;

struct net_proxy {
	struct event_loop *loop;
	const struct net_policy *policy;
	int broker_fd;                 /* not ours */
	char vm_id[40];
	struct net_conn *conns;
	unsigned nr_conns;
	uint32_t next_id;
	/* Limits (tests lower them). */
	unsigned max_conns;
	uint64_t max_bytes;
	uint16_t tls_port;             /* CONNECT to it needs the SNI check: 443 */
	uint64_t bytes_up, bytes_down; /* totals for the sandbox */
	uint64_t allowed, refused;
	/* Each attempt's outcome, besides the log (the audit log); may be NULL.
	 * Called on the I/O thread. */
	void (*record)(void *opaque, const struct net_outcome *o);
	/* Whether a new connection may open, `open` being open already (the
	 * audit log keeps room for each one's record); NULL: always. */
	bool (*admit)(void *opaque, unsigned open);
	void *record_opaque;
	struct log_limit lim_allow, lim_refuse, lim_cap;
};

/* Set up the proxy on `loop` (before it starts): watch the broker's socket.
 * 0 or -errno. */
int net_proxy_init(struct net_proxy *px, struct event_loop *loop, const struct net_policy *p,
		   int broker_fd, const char *vm_id) __attribute__((warn_unused_result));

/* A guest connection to NET_VSOCK_PORT (the vsock device's hook, I/O
 * thread): a new socket pair, one end ours, the other returned for the
 * device to relay the guest's bytes to. fd, or -errno (-EAGAIN at the
 * connection cap: the guest gets a reset). */
int net_proxy_accept(void *opaque);

/* Once the I/O thread has stopped: close every connection. */
void net_proxy_destroy(struct net_proxy *px);

#endif
