/* ctl_client.h - mayfly pause and mayfly fork: a running VM saved through its control socket. */
#ifndef MAYFLY_CONTROL_CTL_CLIENT_H
#define MAYFLY_CONTROL_CTL_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "cli.h"

/* `mayfly pause` (fork false) or `mayfly fork` (argv[0] is the command):
 * --out DIR checked (new or empty), the VM's PATH.ctl dialled, the
 * snapshot's files created in a directory beside DIR and passed to the
 * VM, renamed to DIR once the VM saved into them; a pause then waits
 * until the VM process and its socket are gone. The exit code (enum
 * ctl_exit) after one line on failure; nothing left behind. */
int cmd_ctl(struct cli *c, int argc, char **argv, bool fork);

/* Whether the VM of `boot --vsock VSOCK` has its guest agent up (its own
 * FRESHEN answered), asked over VSOCK.ctl: no connection into the guest.
 * Waits until deadline_ns or cancel_fd (>= 0) is readable. 0; -ENAMETOOLONG
 * when VSOCK has no control socket (too long a path: ask the agent
 * instead); -ECANCELED; else -errno with *why (the VM ended, timed out, not
 * ready). */
int ctl_client_ready(const char *vsock, uint64_t deadline_ns, int cancel_fd, const char **why);

#endif
