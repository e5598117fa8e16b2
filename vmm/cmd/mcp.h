/* mcp.h - mayfly mcp: an MCP server on stdio, one VM for the session. */
#ifndef MAYFLY_CMD_MCP_H
#define MAYFLY_CMD_MCP_H

#include <stdint.h>

#include "cmd/cli.h"

/* Parse mcp's arguments, start the VM (as mayfly run chooses it), serve
 * MCP on stdin/stdout until stdin ends. Returns 0, or RUN_EXIT_MAYFLY /
 * RUN_EXIT_AGENT after one line on stderr. */
int cmd_mcp(struct cli *c, int argc, char **argv, uint64_t start_ns);

#endif
