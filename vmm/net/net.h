/* net.h - one sandbox's allow-listed network, start to end: the broker forked before the jail, the proxy attached to the VM's vsock device. */
#ifndef MAYFLY_NET_NET_H
#define MAYFLY_NET_NET_H

#include <stdbool.h>
#include <sys/types.h>

#include "net/broker.h"
#include "net/net_audit.h"
#include "net/proxy.h"
#include "net/rules.h"

struct vm;

struct net_run {
	const struct net_policy *policy;   /* NULL or no rules: no network (nothing runs) */
	struct net_broker broker;
	struct net_proxy proxy;
	bool attached;
	/* --audit: set after net_run_start; a record per attempt. */
	struct audit_log *audit_log;
	struct net_audit audit;
};

/* Whether the policy gives the guest any network. */
bool net_enabled(const struct net_policy *p);

/* Before the jail and the seccomp filters, single-threaded: fork the broker
 * when p has rules (as root it runs as uid/gid). A no-op otherwise. 0, or
 * -errno after one line. */
int net_run_start(struct net_run *n, const struct net_policy *p, uid_t uid, gid_t gid)
	__attribute__((warn_unused_result));

/* After vm_build, before vm_run: guest connections to NET_VSOCK_PORT go to
 * the proxy. A no-op without rules. 0, or -errno after one line (-ENODEV:
 * the VM has no vsock device, so no agent to serve the guest's proxy). */
int net_run_attach(struct net_run *n, struct vm *vm) __attribute__((warn_unused_result));

/* After the jail, before the VM's threads (stop signals blocked): with
 * rules and an audit log, start the writer of the connection records.
 * 0, or -errno after one line. */
int net_run_audit(struct net_run *n, bool unconfined) __attribute__((warn_unused_result));

/* After vm_run (the I/O thread stopped) or instead of it: close every
 * proxied connection, stop and reap the broker. Safe when nothing started. */
void net_run_stop(struct net_run *n);

#endif
