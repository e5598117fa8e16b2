/* ctl.h - mayfly pause and mayfly fork: a running VM of boot --vsock saved through its control socket. */
#ifndef MAYFLY_CMD_CTL_H
#define MAYFLY_CMD_CTL_H

#include <stdbool.h>

#include "cmd/cli.h"

/* `mayfly pause` (fork false) or `mayfly fork` (argv[0] is the command):
 * its arguments parsed, then ctl_client_save. The exit code (enum
 * ctl_exit, control/ctl_msg.h). */
int cmd_ctl(struct cli *c, int argc, char **argv, bool fork);

#endif
