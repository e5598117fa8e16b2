/* transfer.h - files into and out of the guest through its agent, bounded, never damaging the user's file. */
#ifndef MAYFLY_AGENT_CLIENT_TRANSFER_H
#define MAYFLY_AGENT_CLIENT_TRANSFER_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sha2.h>

#include "agent_client/client.h"

/* Copy a local file to the guest (mode from the local file), finishing by
 * deadline_ns (CLOCK_MONOTONIC). 0 or -errno with why (the agent's
 * message when it refused). */
int transfer_put(struct agent_client *c, const char *local, const char *guest,
		 uint64_t deadline_ns, struct transfer_stats *st, char *why, size_t whylen);

/* transfer_put with a file opened beforehand (a jailed VMM can no longer
 * open the user's files): fd, or the -errno its open failed with; `local`
 * names it in messages. fd stays open. */
int transfer_put_fd(struct agent_client *c, int fd, const char *local, const char *guest,
		    uint64_t deadline_ns, struct transfer_stats *st, char *why, size_t whylen);

/* Write data[0..len) to the guest's file `guest`: created with `mode`
 * (exactly, no umask) if missing, else emptied first, or appended to.
 * st (NULL: none) says what went. 0 or -errno with why. */
int transfer_put_mem(struct agent_client *c, const void *data, size_t len, const char *guest,
		     uint32_t mode, bool append, uint64_t deadline_ns, struct transfer_stats *st,
		     char *why, size_t whylen);

/* A write whose bytes come in pieces (an HTTP body): transfer_put_begin
 * (FILE_WRITE with flags PROTO_WRITE_*, answered OK), transfer_put_data
 * for each piece, then transfer_put_end (FILE_END, answered OK once the
 * file is on the guest's disk) or transfer_put_abort (the connection is
 * then out of step: close it; the agent drops a PROTO_WRITE_REPLACE
 * write whole). Each 0 or -errno with why; st (NULL: none) says what
 * went. */
struct transfer_put {
	struct agent_client *c;
	uint32_t id;
	uint64_t deadline_ns;
	struct transfer_stats *st;
	SHA2_CTX ctx;
};

int transfer_put_begin(struct transfer_put *p, struct agent_client *c, const char *guest,
		       uint32_t mode, uint32_t flags, uint64_t deadline_ns, struct transfer_stats *st,
		       char *why, size_t whylen);
int transfer_put_data(struct transfer_put *p, const void *data, size_t n, char *why,
		      size_t whylen);
int transfer_put_end(struct transfer_put *p, char *why, size_t whylen);
void transfer_put_abort(struct transfer_put *p);

/* A read whose bytes go out in pieces (an HTTP body): transfer_read_begin
 * (FILE_READ), then transfer_read_next until it returns 0 (FILE_END) or
 * -errno. More than max_bytes in all is -EFBIG (limit_name names the
 * limit in why). After -errno other than the agent's refusal the
 * connection is out of step (marked broken: close it). st (NULL: none)
 * is complete once next returned 0 or -errno. */
struct transfer_read {
	struct agent_client *c;
	uint32_t id;
	uint64_t max, total, deadline_ns;
	const char *limit_name;
	struct transfer_stats *st;
	SHA2_CTX ctx;
};

int transfer_read_begin(struct transfer_read *r, struct agent_client *c, const char *guest,
			uint64_t max_bytes, const char *limit_name, uint64_t deadline_ns,
			struct transfer_stats *st, char *why, size_t whylen);
/* The next piece: its length (> 0) with *data pointing into the client's
 * buffer, valid until the next call on c; 0 at the end; -errno with why. */
ssize_t transfer_read_next(struct transfer_read *r, const uint8_t **data, char *why,
			   size_t whylen);

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

/* Where a --get writes: a temporary file beside the real target, or the
 * target itself when it is not a regular file (direct). */
struct transfer_target {
	int fd;
	bool direct;
	const char *name;          /* `local` as given, for messages */
	char tmp[PATH_MAX + 32];
	char final[PATH_MAX];
};

/* transfer_get in three steps, so that a jailed VMM writes a file that its
 * supervisor opened and commits: open the target for `local` (a temporary
 * file beside it, or a pipe or device as it is); copy the guest file into
 * it (transfer_get_into: nothing committed, 0 or -errno with why); close
 * it, renaming the temporary file over `local` when rc is 0, removing it
 * otherwise (transfer_target_close returns rc, or the rename's -errno).
 * Each 0 or -errno with why. */
int transfer_target_open(const char *local, struct transfer_target *t, char *why, size_t whylen);
int transfer_get_into(struct agent_client *c, const char *guest, struct transfer_target *t,
		      uint64_t max_bytes, uint64_t deadline_ns, struct transfer_stats *st,
		      char *why, size_t whylen);
int transfer_target_close(struct transfer_target *t, int rc, char *why, size_t whylen);

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
