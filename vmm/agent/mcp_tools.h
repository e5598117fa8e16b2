/* mcp_tools.h - the MCP server's tools: run_command, read_file, write_file, list_files in the guest, each through the gate. */
#ifndef MAYFLY_AGENT_MCP_TOOLS_H
#define MAYFLY_AGENT_MCP_TOOLS_H

#include <jansson.h>
#include <stddef.h>

#include "agent/mcp.h"

/* The tools/list result: {"tools": [...]} with each tool's inputSchema. */
json_t *mcp_tools_list(void);

/* Call tool `name` with args (an object, or NULL). 0 with *result a
 * CallToolResult ({"content": [...], "isError": bool, ...}): a refusal,
 * a command that could not run or a file that could not be moved is a
 * result with isError true. -EINVAL with msg when name or args are not
 * a valid call (JSON-RPC invalid params); -EPIPE when the agent
 * connection is lost for good (the session ends). */
int mcp_tools_call(struct mcp_server *s, const char *name, json_t *args, json_t **result,
		   char *msg, size_t msglen);

#endif
