/* mcp_modern.c - MCP 2026-07-28: every request carries its protocol version, capabilities and client in params._meta; results carry resultType and the server's identity. */
#include "mcp/mcp_modern.h"
#include "lib/log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define KEY_VERSION      "io.modelcontextprotocol/protocolVersion"
#define KEY_CAPABILITIES "io.modelcontextprotocol/clientCapabilities"
#define KEY_CLIENT       "io.modelcontextprotocol/clientInfo"
#define KEY_SERVER       "io.modelcontextprotocol/serverInfo"
#define KEY_SUBSCRIPTION "io.modelcontextprotocol/subscriptionId"
/* The tools and what we answer never change while the binary is the
 * same, and carry nothing of the user's: an hour, shareable. */
#define CACHE_TTL_MS     3600000

static json_t *meta_of(json_t *params)
{
	json_t *meta = json_object_get(params, "_meta");

	return json_is_object(meta) ? meta : NULL;
}

bool mcp_modern_claimed(json_t *params)
{
	return json_object_get(meta_of(params), KEY_VERSION) != NULL;
}

int mcp_modern_check(json_t *params, char *caller, size_t callerlen, json_t **data,
		     char *msg, size_t msglen)
{
	json_t *meta = meta_of(params), *client = json_object_get(meta, KEY_CLIENT);
	const char *version = json_string_value(json_object_get(meta, KEY_VERSION));
	const char *name = json_string_value(json_object_get(client, "name"));
	char escaped[64];

	*data = NULL;
	if (!version) {
		snprintf(msg, msglen, "invalid params: _meta[\"%s\"] must be a string", KEY_VERSION);
		return MCP_INVALID_PARAMS;
	}
	if (!json_is_object(json_object_get(meta, KEY_CAPABILITIES))) {
		snprintf(msg, msglen, "invalid params: _meta[\"%s\"] must be an object (MCP %s "
			 "requires it on every request)", KEY_CAPABILITIES, MCP_MODERN_VERSION);
		return MCP_INVALID_PARAMS;
	}
	if (client && (!name || !json_is_string(json_object_get(client, "version")))) {
		snprintf(msg, msglen, "invalid params: _meta[\"%s\"] must be an object with a name "
			 "and a version", KEY_CLIENT);
		return MCP_INVALID_PARAMS;
	}
	if (strcmp(version, MCP_MODERN_VERSION)) {
		/* The 2025 revisions are spoken after initialize, not per request. */
		*data = json_pack("{s:[s], s:s}", "supported", MCP_MODERN_VERSION, "requested", version);
		snprintf(msg, msglen, "Unsupported protocol version");
		return MCP_UNSUPPORTED_VERSION;
	}
	log_escape(escaped, sizeof(escaped), name ? name : "unknown");
	snprintf(caller, callerlen, "mcp:%s", escaped);
	return 0;
}

int mcp_modern_complete(json_t *result, bool cacheable)
{
	json_t *meta = json_object_get(result, "_meta");
	int rc = 0;

	if (!meta) {
		meta = json_object();
		rc |= json_object_set_new(result, "_meta", meta);
	}
	rc |= json_object_set_new(meta, KEY_SERVER, json_pack("{s:s, s:s}", "name", MCP_SERVER_NAME,
								"version", MCP_SERVER_VERSION));
	rc |= json_object_set_new(result, "resultType", json_string("complete"));
	if (cacheable) {
		rc |= json_object_set_new(result, "ttlMs", json_integer(CACHE_TTL_MS));
		rc |= json_object_set_new(result, "cacheScope", json_string("public"));
	}
	return rc ? -ENOMEM : 0;
}

json_t *mcp_modern_discover(void)
{
	json_t *r = json_pack("{s:[s], s:{s:{s:b}}, s:s}", "supportedVersions", MCP_MODERN_VERSION,
			      "capabilities", "tools", "listChanged", 0,
			      "instructions", MCP_INSTRUCTIONS);

	if (r && mcp_modern_complete(r, true)) {
		json_decref(r);
		r = NULL;
	}
	return r;
}

json_t *mcp_modern_listen(struct mcp_server *s, json_t *id, json_t *params, bool *bad)
{
	json_t *ack, *r;

	*bad = json_object_get(params, "notifications") &&
	       !json_is_object(json_object_get(params, "notifications"));
	if (*bad)
		return NULL;
	/* First on the subscription, and nothing after it: an empty filter
	 * says no notification type is honoured. */
	ack = json_pack("{s:s, s:s, s:{s:{s:O}, s:{}}}", "jsonrpc", "2.0",
			"method", "notifications/subscriptions/acknowledged",
			"params", "_meta", KEY_SUBSCRIPTION, id, "notifications");
	if (!ack)
		return NULL;
	mcp_send(s, ack);
	json_decref(ack);
	/* The graceful end the spec asks of a server closing a subscription. */
	r = json_pack("{s:{s:O}}", "_meta", KEY_SUBSCRIPTION, id);
	if (r && mcp_modern_complete(r, false)) {
		json_decref(r);
		r = NULL;
	}
	return r;
}
