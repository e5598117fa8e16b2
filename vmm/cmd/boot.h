/* boot.h - mayfly boot: a VM with a console, cold or from a snapshot; with --vsock, one that exec, cp, pause and fork reach. */
#ifndef MAYFLY_CMD_BOOT_H
#define MAYFLY_CMD_BOOT_H

#include <stdint.h>

#include "cmd/cli.h"

/* Parse boot's arguments (argv[0] is "boot") into c, launch the VM and
 * return the exit code (lib/exitcode.h). */
int cmd_boot(struct cli *c, int argc, char **argv, uint64_t start_ns);

#endif
