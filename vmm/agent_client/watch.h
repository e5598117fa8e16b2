/* watch.h - WATCH: a directory's events from the guest agent, on a connection of their own. */
#ifndef MAYFLY_AGENT_CLIENT_WATCH_H
#define MAYFLY_AGENT_CLIENT_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent_client/client.h"

/* WATCH path (absolute): a new connection whose frames are then the
 * directory's events. 0 once the agent answered OK; else -errno with *why
 * (the agent's ERROR: -ENOENT, -ENOTDIR, -EAGAIN too many relays and
 * watches), the client closed. */
int agent_open_watch(struct agent_client *c, agent_dial_fn dial, void *dial_opaque,
		     const char *path, bool recursive, uint64_t deadline_ns, int cancel_fd,
		     const char **why);

/* The next event, waiting timeout_ms at most (-1: for ever) and ending at
 * once when watch_fd (-1: none) hangs up: 1 with *kind (enum
 * proto_watch_kind) and name (cap bytes, NUL-terminated); 0 none in time;
 * -ECONNRESET watch_fd went; else the watch's end, -errno with why (the
 * agent's ERROR, the connection lost, or -EPROTO: a frame no watch sends,
 * the client then broken). */
int agent_watch_next(struct agent_client *c, int timeout_ms, int watch_fd, unsigned *kind,
		     char *name, size_t cap, char *why, size_t whylen);

/* A WATCH_EVENT's payload checked: kind 1..5, a name of 1..cap-1 bytes
 * without NUL, nothing after. 0 or -EPROTO. */
int agent_watch_event(const struct proto_frame *f, unsigned *kind, char *name, size_t cap);

#endif
