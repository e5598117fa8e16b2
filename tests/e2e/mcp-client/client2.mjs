// client2.mjs - the official MCP TypeScript SDK client v2 (@modelcontextprotocol/client,
// from the npm registry) driving `mayfly mcp` over stdio in protocol revision
// 2026-07-28: pinned (server/discover, then stateless requests with the version
// in _meta; the points of checks.mjs), then once more in the SDK's 'auto' mode,
// which probes with server/discover and must not fall back to initialize.
// Prints one line per point, "PASS what" or "FAIL what # detail" (the e2e
// runner numbers them into its TAP); exit 0 when every point passed, 1 otherwise.
//
// usage: node client2.mjs MAYFLY [MAYFLY-MCP-ARGS...]
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { checkTools, status, tap } from "./checks.mjs";

const [mayfly, ...extra] = process.argv.slice(2);

// A client on a fresh `mayfly mcp`, connecting with the SDK's versionNegotiation mode.
function connect(mode) {
  const transport = new StdioClientTransport({
    command: mayfly, args: ["mcp", ...extra], env: process.env, stderr: "inherit",
  });
  const client = new Client({ name: "sdk2-e2e", version: "2.0.0" }, { versionNegotiation: { mode } });
  return { client, connected: client.connect(transport) };
}

let { client, connected } = connect({ pin: "2026-07-28" });
try {
  await connected;   // server/discover (on a sibling process the SDK starts and ends); no initialize
  const discover = client.getDiscoverResult();
  tap(client.getProtocolEra() === "modern" && client.getNegotiatedProtocolVersion() === "2026-07-28" &&
      discover?.supportedVersions?.includes("2026-07-28") && client.getServerVersion()?.name === "mayfly",
      "2026-07-28: server/discover names the revision and the server", discover);
  await checkTools(client, "2026-07-28: ");
} catch (e) {
  tap(false, "2026-07-28: the pinned session ran to its end", String(e?.stack ?? e));
} finally {
  await client.close();
}

({ client, connected } = connect("auto"));
try {
  await connected;   // probes with server/discover as above, and must stay modern
  tap(client.getProtocolEra() === "modern", "auto: the SDK's probe finds the 2026-07-28 era",
      client.getProtocolEra());
  const r = await client.callTool({ name: "run_command", arguments: { command: "echo auto" } });
  tap(!r.isError && r.structuredContent?.stdout === "auto\n", "auto: a command runs", r);
} catch (e) {
  tap(false, "auto: the session ran to its end", String(e?.stack ?? e));
} finally {
  await client.close();
}
process.exit(status());
