/* transfer.h - files into and out of the guest through its agent, bounded, never damaging the user's file. */
#ifndef MAYFLY_AGENT_TRANSFER_H
#define MAYFLY_AGENT_TRANSFER_H

#include <stddef.h>
#include <stdint.h>

#include "agent/client.h"

/* Copy a local file to the guest (mode from the local file), finishing by
 * deadline_ns (CLOCK_MONOTONIC). 0 or -errno with why (the agent's
 * message when it refused). */
int transfer_put(struct agent_client *c, const char *local, const char *guest,
		 uint64_t deadline_ns, char *why, size_t whylen);

/* Copy a guest file to `local`, finishing by deadline_ns. A regular file
 * (or a new name; a symbolic link is followed) is written to a temporary
 * file beside it and renamed over it only once the whole file is in: a
 * failure never touches what was there, and nothing is left behind.
 * Anything else (a pipe, /dev/stdout) is written directly and never
 * removed. More than max_bytes from the agent is refused (-EFBIG); the
 * connection is then abandoned (the agent is still sending). 0 or -errno
 * with why. */
int transfer_get(struct agent_client *c, const char *guest, const char *local,
		 uint64_t max_bytes, uint64_t deadline_ns, char *why, size_t whylen);

#endif
