/* transfer.h - files into and out of the guest through its agent, bounded, never damaging the user's file. */
#ifndef MAYFLY_AGENT_TRANSFER_H
#define MAYFLY_AGENT_TRANSFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/client.h"

/* Copy a local file to the guest (mode from the local file), finishing by
 * deadline_ns (CLOCK_MONOTONIC). 0 or -errno with why (the agent's
 * message when it refused). */
int transfer_put(struct agent_client *c, const char *local, const char *guest,
		 uint64_t deadline_ns, struct transfer_stats *st, char *why, size_t whylen);

/* Write data[0..len) to the guest's file `guest`: created with `mode`
 * (exactly, no umask) if missing, else emptied first, or appended to.
 * st (NULL: none) says what went. 0 or -errno with why. */
int transfer_put_mem(struct agent_client *c, const void *data, size_t len, const char *guest,
		     uint32_t mode, bool append, uint64_t deadline_ns, struct transfer_stats *st,
		     char *why, size_t whylen);

/* Copy a guest file to `local`, finishing by deadline_ns. A regular file
 * (or a new name; a symbolic link is followed) is written to a temporary
 * file beside it and renamed over it only once the whole file is in: a
 * failure never touches what was there, and nothing is left behind.
 * Anything else (a pipe, /dev/stdout) is written directly and never
 * removed. More than max_bytes from the agent is refused (-EFBIG); the
 * connection is then abandoned (the agent is still sending). 0 or -errno
 * with why. */
int transfer_get(struct agent_client *c, const char *guest, const char *local,
		 uint64_t max_bytes, uint64_t deadline_ns, struct transfer_stats *st, char *why,
		 size_t whylen);

/* Read the guest's file into *data (malloc'd, len bytes and a NUL after
 * them; the caller frees it), at most max_bytes (-EFBIG beyond: the
 * connection is then abandoned, as with transfer_get). 0 or -errno with
 * why; *data NULL on failure. */
int transfer_get_mem(struct agent_client *c, const char *guest, uint64_t max_bytes,
		     uint8_t **data, size_t *len, uint64_t deadline_ns, struct transfer_stats *st,
		     char *why, size_t whylen);

/* One directory entry: name (no NUL, at most PROTO_MAX_PATH - 1 bytes),
 * type PROTO_FT_*, mode (07777 at most), size. */
typedef void (*transfer_entry_fn)(void *opaque, const char *name, uint32_t type, uint32_t mode,
				  uint64_t size);

/* List the guest's directory `guest`: each entry to fn, in the agent's
 * order, until its last LIST_ENTRIES frame, by deadline_ns. 0 or -errno
 * with why (the agent's message when it refused; a frame out of shape is
 * -EPROTO and the connection is then abandoned). */
int transfer_list(struct agent_client *c, const char *guest, transfer_entry_fn fn, void *opaque,
		  uint64_t deadline_ns, char *why, size_t whylen);

#endif
