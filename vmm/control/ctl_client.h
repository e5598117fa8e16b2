/* ctl_client.h - the client end of a VM's control socket: a running VM saved (mayfly pause, fork), suspended and resumed, its agent asked after. */
#ifndef MAYFLY_CONTROL_CTL_CLIENT_H
#define MAYFLY_CONTROL_CTL_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "control/ctl_msg.h"

/* Save the VM of `boot --vsock VSOCK` into `out` (pause, or fork when
 * fork): out checked (new or an empty directory), VSOCK.ctl dialled, the
 * snapshot's files created in a directory beside out and passed to the
 * VM, renamed to out once the VM saved into them; a pause then waits
 * until the VM process and its socket are gone. 0 or an exit code (enum
 * ctl_exit, control/ctl_msg.h) after one line; nothing left behind. */
int ctl_client_save(const char *vsock, const char *out, bool fork);

/* Whether the VM of `boot --vsock VSOCK` has its guest agent up (its own
 * FRESHEN answered), asked over VSOCK.ctl: no connection into the guest.
 * Waits until deadline_ns or cancel_fd (>= 0) is readable. 0; -ENAMETOOLONG
 * when VSOCK has no control socket (too long a path: ask the agent
 * instead); -ECANCELED; else -errno with *why (the VM ended, timed out, not
 * ready). */
int ctl_client_ready(const char *vsock, uint64_t deadline_ns, int cancel_fd, const char **why);

/* One request without descriptors (READY, SUSPEND, RESUME, STOP) to the VM of
 * `boot --vsock VSOCK`, answered as ctl_client_ready is. */
int ctl_client_call(const char *vsock, enum ctl_op op, uint64_t deadline_ns, int cancel_fd,
		    const char **why);

/* DISK_USAGE: whether one of the VM's copy-on-write disks holds its whole
 * --disk-quota (*full: the guest's writes to new blocks fail) and the
 * bytes their overlays hold (*used), answered as ctl_client_ready is. */
int ctl_client_disk_usage(const char *vsock, uint64_t deadline_ns, int cancel_fd, bool *full,
			  uint64_t *used, const char **why);

/* DISK_INSERT: the image open at fd (read access; the caller keeps its
 * descriptor) into the VM's spare disk slot `slot` with serial `id` (""
 * the image's own; at most CTL_DISK_ID_MAX bytes), answered as
 * ctl_client_ready is (-EIO with *why the VM's reason when refused). */
int ctl_client_disk_insert(const char *vsock, unsigned slot, int fd, const char *id,
			   uint64_t deadline_ns, int cancel_fd, const char **why);

#endif
