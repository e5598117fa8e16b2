/* net.c - one sandbox's allow-listed network: broker before the jail, proxy on the vsock device, both gone at the end. */
#include "net/net.h"
#include "lib/log.h"
#include "vm/vm.h"

#include <errno.h>
#include <string.h>

bool net_enabled(const struct net_policy *p)
{
	return p && p->nr_rules;
}

int net_run_start(struct net_run *n, const struct net_policy *p, uid_t uid, gid_t gid)
{
	memset(n, 0, sizeof(*n));
	n->broker.fd = -1;
	n->broker.pid = -1;
	if (!net_enabled(p))
		return 0;
	n->policy = p;
	return net_broker_start(&n->broker, p, uid, gid);
}

int net_run_attach(struct net_run *n, struct vm *vm)
{
	int rc;

	if (!n->policy)
		return 0;
	/* The VM does not run yet: no connection comes before the proxy is set up. */
	if (vm_vsock_serve_port(vm, NET_VSOCK_PORT, net_proxy_accept, &n->proxy)) {
		log_say("--allow-net: the VM has no vsock device (its agent serves the proxy)");
		return -ENODEV;
	}
	rc = net_proxy_init(&n->proxy, vm_io_loop(vm), n->policy, n->broker.fd, vm_id(vm));
	if (rc) {
		log_say("--allow-net: cannot watch the network broker: %s", strerror(-rc));
		return rc;
	}
	n->proxy.record = net_audit_record;
	n->proxy.admit = net_audit_admit;
	n->proxy.record_opaque = &n->audit;
	n->attached = true;
	return 0;
}

int net_run_audit(struct net_run *n)
{
	int rc;

	if (!n->attached || !n->audit_log)
		return 0;
	rc = net_audit_start(&n->audit, n->audit_log, n->proxy.vm_id);
	if (rc)
		log_say("--allow-net: cannot start the audit writer: %s", strerror(-rc));
	return rc;
}

void net_run_stop(struct net_run *n)
{
	if (!n->policy)
		return;   /* never started (or zeroed): nothing of ours to close */
	if (n->attached)
		net_proxy_destroy(&n->proxy);   /* the last records */
	n->attached = false;
	net_audit_stop(&n->audit);
	net_broker_stop(&n->broker);
}
