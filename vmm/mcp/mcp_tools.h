/* mcp_tools.h - the MCP server's tools: run_command, read_file, write_file, list_files in the guest, each through the gate. */
#ifndef MAYFLY_MCP_MCP_TOOLS_H
#define MAYFLY_MCP_MCP_TOOLS_H

#include <jansson.h>
#include <stddef.h>

#include "mcp/mcp.h"

/* The tools/list result: {"tools": [...]} with each tool's inputSchema. */
json_t *mcp_tools_list(void);

/* Call tool `name` with args (an object, or NULL). 0 with *result a
 * CallToolResult ({"content": [...], "isError": bool, ...}): a refusal,
 * a command that could not run or a file that could not be moved is a
 * result with isError true. -ENOENT with msg for an unknown tool, -EINVAL
 * with msg when args are not valid for it (both JSON-RPC invalid params
 * in MCP 2025; 2026-07-28 makes the second a tool error); -EPIPE when the
 * agent connection is lost for good (the session ends). */
int mcp_tools_call(struct mcp_server *s, const char *name, json_t *args, json_t **result,
		   char *msg, size_t msglen);

/* A CallToolResult with isError true and text as its one text block
 * (NULL without memory). */
json_t *mcp_tools_error(const char *text);

#endif
