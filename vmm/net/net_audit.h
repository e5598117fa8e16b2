/* net_audit.h - one audit record per proxied connection attempt, written by a thread of its own so the I/O thread never waits on the disk. */
#ifndef MAYFLY_NET_NET_AUDIT_H
#define MAYFLY_NET_NET_AUDIT_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>

#include "policy/audit.h"
#include "net/proxy.h"

#define NET_AUDIT_SLOTS (4 * NET_MAX_CONNS)   /* records not yet written */

struct net_audit {
	struct audit_log *log;         /* NULL: nothing to record */
	char sandbox[40];
	pthread_mutex_t lock;
	pthread_cond_t cond;
	json_t *queue[NET_AUDIT_SLOTS];   /* lock */
	unsigned head, len;            /* lock */
	bool stop;                     /* lock */
	bool failed;                   /* lock: an append failed: no more connections (fail closed) */
	bool started;
	pthread_t thread;
};

/* Start the writer (after the jail, before the VM's threads; stop signals
 * blocked by the caller), filtered as the agent role.
 * A no-op with log NULL. 0 or -errno. */
int net_audit_start(struct net_audit *a, struct audit_log *log, const char *sandbox)
	__attribute__((warn_unused_result));

/* The proxy's hooks (I/O thread): admit a new connection only while the
 * queue has room for the record of every connection open (its own
 * included) and the log has not failed; queue an attempt's record. */
bool net_audit_admit(void *opaque, unsigned open);
void net_audit_record(void *opaque, const struct net_outcome *o);

/* Write what is queued, stop the writer. Safe when never started. */
void net_audit_stop(struct net_audit *a);

#endif
