/* mcp_modern.h - MCP revision 2026-07-28 (the stateless era) beside the 2025 initialize handshake: each request's _meta envelope checked, server/discover, and the fields its results must carry. */
#ifndef MAYFLY_MCP_MCP_MODERN_H
#define MAYFLY_MCP_MCP_MODERN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "mcp/mcp.h"

#define MCP_MODERN_VERSION "2026-07-28"   /* the per-request (modern) revision we speak */
/* 2026-07-28's own error code: the request's protocol version is not ours. */
#define MCP_UNSUPPORTED_VERSION (-32022)

/* Whether a request's params claim the modern era: params._meta names
 * io.modelcontextprotocol/protocolVersion (whatever its value). A request
 * without the claim is served as 2025 (after initialize), as before. */
bool mcp_modern_claimed(json_t *params);

/* Check a claiming request's envelope. 0: served in 2026-07-28, caller set
 * to "mcp:<clientInfo.name>" ("mcp:unknown" without clientInfo).
 * MCP_INVALID_PARAMS: a required field missing or of the wrong type, msg
 * says which. MCP_UNSUPPORTED_VERSION: another version, *data the error's
 * {"supported": [...], "requested": ...} (the caller's to free). */
int mcp_modern_check(json_t *params, char *caller, size_t callerlen, json_t **data,
		     char *msg, size_t msglen);

/* server/discover's DiscoverResult (complete, with serverInfo and cache
 * hints), or NULL without memory. */
json_t *mcp_modern_discover(void);

/* Make result (not NULL) a 2026-07-28 one in place: resultType
 * "complete", serverInfo in its _meta, and ttlMs/cacheScope when the
 * method's result is cacheable (tools/list). 0 or -ENOMEM. */
int mcp_modern_complete(json_t *result, bool cacheable);

/* subscriptions/listen on request id: we send no change notifications
 * (tools never change), so the subscription is acknowledged with an
 * empty filter and ended at once; returns the closing result (NULL
 * without memory, *bad set when params.notifications is not an object). */
json_t *mcp_modern_listen(struct mcp_server *s, json_t *id, json_t *params, bool *bad);

#endif
