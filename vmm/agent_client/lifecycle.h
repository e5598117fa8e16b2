/* lifecycle.h - the guest agent's life-cycle requests: FRESHEN with the connect, NET, QUIESCE before a save. */
#ifndef MAYFLY_AGENT_CLIENT_LIFECYCLE_H
#define MAYFLY_AGENT_CLIENT_LIFECYCLE_H

#include <stdint.h>

#include "agent_client/client.h"

/* agent_client_connect to a restored guest's agent, which takes the host's
 * wall clock and 32 fresh random bytes (FRESHEN) before anything else: two
 * VMs from one snapshot must not share a clock offset or a random
 * sequence. FRESHEN goes in the connect's own write (agent_first), so it
 * costs no round trip of its own; deadline_ns bounds both. 0 (connected
 * and freshened) or -errno with *why. */
int agent_connect_fresh(struct agent_client *c, agent_dial_fn dial, void *dial_opaque,
			uint64_t deadline_ns, int cancel_fd, const char **why);

/* NET: the agent serves the guest's proxy on guest_port, relaying each
 * connection to the host on vsock_port (docs/protocol.md). 0 or -errno
 * with *why. */
int agent_tell_net(struct agent_client *c, uint32_t guest_port, uint32_t vsock_port,
		   uint64_t deadline_ns, const char **why);

/* PORT: a new connection joined to 127.0.0.1:port in the guest (a
 * published port). PORT goes in the connect's own write; 0 once the agent
 * answered OK: from then on c->fd carries that TCP connection's bytes,
 * raw, and the first of the guest's are already in c->rbuf[c->rstart,
 * c->rstart + c->rlen), to be passed on first. Else -errno with *why
 * (-ECONNREFUSED: nothing listens on port; -EAGAIN: the agent relays as
 * many connections as it takes), the client closed. */
int agent_open_port(struct agent_client *c, agent_dial_fn dial, void *dial_opaque, uint16_t port,
		    uint64_t deadline_ns, int cancel_fd, const char **why);

/* A new connection whose one request (first's frame, which sets *id) must
 * be answered OK (name: the request's, for the messages): 0, or -errno
 * with *why (the agent's ERROR: its errno), the client closed. */
int agent_open_with(struct agent_client *c, agent_dial_fn dial, void *dial_opaque,
		    const struct agent_first *first, const uint32_t *id, const char *name,
		    uint64_t deadline_ns, int cancel_fd, const char **why);

/* QUIESCE: the agent syncs the guest's file systems, stops its proxy and
 * closes every connection, ours last, and refuses work until a FRESHEN.
 * Waits (30 s at most) for the OK and then for the connection's end, so
 * nothing is in flight; the client is closed on success. 0 or -errno with
 * *why. */
int agent_quiesce(struct agent_client *c, const char **why);

#endif
