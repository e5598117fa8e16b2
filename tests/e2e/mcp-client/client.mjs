// client.mjs - the official MCP TypeScript SDK client v1 (@modelcontextprotocol/sdk,
// from the npm registry) driving `mayfly mcp` over stdio in MCP 2025 (initialize,
// then the points of checks.mjs). Prints one line per point, "PASS what" or
// "FAIL what # detail" (the e2e runner numbers them into its TAP); exit 0 when
// every point passed, 1 otherwise.
//
// usage: node client.mjs MAYFLY [MAYFLY-MCP-ARGS...]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { checkTools, status, tap } from "./checks.mjs";

const [mayfly, ...extra] = process.argv.slice(2);
const transport = new StdioClientTransport({
  command: mayfly, args: ["mcp", ...extra], env: process.env, stderr: "inherit",
});
const client = new Client({ name: "sdk-e2e", version: "1.0.0" });
try {
  await client.connect(transport);   // initialize, then notifications/initialized
  const server = client.getServerVersion();
  tap(server?.name === "mayfly", "initialize answers with serverInfo mayfly", server);
  await checkTools(client, "");
} catch (e) {
  tap(false, "the session ran to its end", String(e?.stack ?? e));
} finally {
  await client.close();
}
process.exit(status());
