/* snapshot.h - mayfly snapshot create: an agent-ready VM saved for run and boot --snapshot. */
#ifndef MAYFLY_CMD_SNAPSHOT_H
#define MAYFLY_CMD_SNAPSHOT_H

#include <stdint.h>

#include "cmd/cli.h"

/* `mayfly snapshot create` (argv[0] is "snapshot"). The exit code. */
int cmd_snapshot(struct cli *c, int argc, char **argv, uint64_t start_ns);

#endif
