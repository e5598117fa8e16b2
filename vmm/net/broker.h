/* broker.h - the network broker: a small process forked before the jail that alone may connect out; it re-checks every request and hands back a connected socket. */
#ifndef MAYFLY_NET_BROKER_H
#define MAYFLY_NET_BROKER_H

#include <stdint.h>
#include <sys/types.h>

#include "net/rules.h"

#define NET_CONNECT_TIMEOUT_MS 5000    /* one address */
#define NET_REQUEST_TIMEOUT_MS 10000   /* every address of a name, in all */
/* Requests in progress at once (processes taking them off one socket):
 * a slow resolver or a connect that times out holds up only its own. */
#define NET_BROKER_WORKERS 8
#define NET_REASON_MAX 400

/* One request, one SOCK_SEQPACKET message. */
struct net_broker_req {
	uint32_t id;
	uint16_t port;
	char host[NET_HOST_MAX + 1];   /* NUL-terminated */
};

/* The answer to request `id`: err 0 comes with the connected socket
 * (SCM_RIGHTS). */
struct net_broker_rep {
	uint32_t id;
	int32_t err;                   /* 0, or -errno: -EACCES refused by a rule or a range */
	struct net_addr addr;          /* the address connected to (or refused) */
	int32_t has_addr;
	char rule[NET_RULE_TEXT_MAX];  /* the rule that allowed it, "" when none */
	char reason[NET_REASON_MAX];   /* why not, for the guest's 403 and the log */
};

struct net_broker {
	int fd;                        /* our end: SOCK_SEQPACKET, CLOEXEC; -1: none */
	pid_t pid;
	pid_t owner;                   /* the process that forked it: only it kills and reaps */
};

/* Fork the broker with its own copy of the policy, before the jail and any
 * seccomp filter (it keeps the host's network), while single-threaded. As
 * root it drops to uid/gid; it sets no_new_privs, forks its other
 * NET_BROKER_WORKERS - 1 workers (which die with it), takes its filter,
 * dies with its parent (PDEATHSIG) and ends when every holder of b->fd has
 * closed it. Answers may come out of order: match them by id. 0, or
 * -errno after one log line. */
int net_broker_start(struct net_broker *b, const struct net_policy *p, uid_t uid, gid_t gid)
	__attribute__((warn_unused_result));

/* Close our end; in the process that started it (not in a jailed child,
 * whose PID namespace is another), kill the broker and reap it. */
void net_broker_stop(struct net_broker *b);

/* The broker's loop on `fd` (tests run it on a thread): for each request,
 * match the name and port against the policy again (the VMM asking may be
 * compromised), resolve it (a --resolve entry, else the host's resolver),
 * refuse an address of a refused class (rules.h) unless an address rule
 * names it, connect with NET_CONNECT_TIMEOUT_MS per address and
 * NET_REQUEST_TIMEOUT_MS in all (the resolver's own timeouts, from
 * resolv.conf, come before), answer. Returns at EOF. */
void net_broker_serve(int fd, const struct net_policy *p);

/* The asking side: send a request (non-blocking; -EAGAIN when the socket
 * is full), receive an answer (*conn_fd the connected socket, or -1). 0 or
 * -errno; -EBADMSG for an answer that is not one. */
int net_broker_ask(int fd, uint32_t id, const char *host, uint16_t port);
int net_broker_answer(int fd, struct net_broker_rep *rep, int *conn_fd);

#endif
