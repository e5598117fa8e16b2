/* live.h - mayfly serve's live sandboxes: pause (saved as a snapshot, its VM gone), resume, fork into children, through mayfly pause/fork on the VM's control socket. */
#ifndef MAYFLY_SERVE_LIVE_H
#define MAYFLY_SERVE_LIVE_H

#include <jansson.h>
#include <stddef.h>

#include "serve/service.h"

#define LIVE_MAX_FORK 128   /* children of one fork call */
#define LIVE_FORK_PER_CPU 4          /* children restored at once, per online CPU */
#define LIVE_FORK_PARALLEL_MAX 32    /* and at most */

/* Pause sb: the caller held it (calls) and set SB_PAUSING. Leaves it
 * SB_PAUSED (its snapshot in STATE/sb/ID/paused, no process) or, when the
 * pause failed, SB_RUNNING (or SB_EXITED if its VM is gone). 0; or an HTTP
 * status with err: 409 busy (an exec in flight in the VM), 500. */
int live_pause(struct service *svc, struct sandbox *sb, const char *caller, char *err,
	       size_t errlen);
/* live_pause on a thread of its own, which then lets go of sb (calls--):
 * the idle timeout's auto-pause. 0 or -errno (nothing started). */
int live_pause_async(struct service *svc, struct sandbox *sb);
/* Resume sb: the caller held it and set SB_RESUMING. Leaves it SB_RUNNING
 * (its snapshot removed) or SB_PAUSED. 0, or 500/503 with err. */
int live_resume(struct service *svc, struct sandbox *sb, char *err, size_t errlen);
/* Fork the running sb (held) into count new sandboxes, each restored from
 * one snapshot of it with its own copy-on-write memory and disk; sb goes
 * on. The children are restored together, LIVE_FORK_PER_CPU per online
 * CPU (at most LIVE_FORK_PARALLEL_MAX) at a time. All or none: no call
 * sees a child until every child answers (they are listed together); a
 * child that fails, or a drain, discards every child made, leaving
 * nothing. 201 with *children (a JSON array); else an HTTP status with
 * err (409 busy, 503 too many sandboxes or draining, 500). */
int live_fork(struct service *svc, struct sandbox *sb, const char *caller, unsigned count,
	      json_t **children, char *err, size_t errlen);

#endif
