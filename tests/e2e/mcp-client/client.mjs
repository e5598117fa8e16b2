// client.mjs - the official MCP TypeScript SDK client (@modelcontextprotocol/sdk,
// from the npm registry) driving `mayfly mcp` over stdio: initialize, list the
// tools, run a command, write then read a file, list a directory, a refusal.
// Prints one line per point, "PASS what" or "FAIL what # detail" (the e2e
// runner numbers them into its TAP); exit 0 when every point passed, 1 otherwise.
//
// usage: node client.mjs MAYFLY [MAYFLY-MCP-ARGS...]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [mayfly, ...extra] = process.argv.slice(2);
let failed = 0;
function tap(ok, what, detail) {
  if (ok) {
    console.log(`PASS ${what}`);
  } else {
    failed++;
    console.log(`FAIL ${what} # ${JSON.stringify(detail).slice(0, 300)}`);
  }
}

const transport = new StdioClientTransport({
  command: mayfly, args: ["mcp", ...extra], env: process.env, stderr: "inherit",
});
const client = new Client({ name: "sdk-e2e", version: "1.0.0" });
try {
  await client.connect(transport);   // initialize, then notifications/initialized
  const server = client.getServerVersion();
  tap(server?.name === "mayfly", "initialize answers with serverInfo mayfly", server);

  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort().join(",");
  tap(names === "list_files,read_file,run_command,write_file", "tools/list names the four tools", names);

  let r = await client.callTool({ name: "run_command", arguments: { command: "uname -s; echo $((6 * 7))" } });
  tap(!r.isError && r.structuredContent?.stdout === "Linux\n42\n" && r.structuredContent?.exit_code === 0,
      "run_command runs in the Linux guest", r);

  const text = "written by the MCP SDK\nline two\n";
  r = await client.callTool({ name: "write_file", arguments: { path: "/tmp/sdk.txt", content: text } });
  tap(!r.isError && r.structuredContent?.bytes === text.length, "write_file", r);

  r = await client.callTool({ name: "read_file", arguments: { path: "/tmp/sdk.txt" } });
  tap(!r.isError && r.structuredContent?.content === text, "read_file returns what write_file wrote", r);

  r = await client.callTool({ name: "run_command", arguments: { command: ["wc", "-l", "/tmp/sdk.txt"] } });
  tap(!r.isError && /^2 /.test(r.structuredContent?.stdout ?? ""), "the same sandbox across calls", r);

  r = await client.callTool({ name: "list_files", arguments: { path: "/tmp" } });
  tap(!r.isError && r.structuredContent?.entries?.some((e) => e.name === "sdk.txt" && e.type === "file"),
      "list_files shows the file", r);

  r = await client.callTool({ name: "run_command", arguments: { command: "echo refuse-me" } });
  tap(r.isError === true && /refused by the approver/.test(r.content?.[0]?.text ?? ""),
      "a refusal reaches the client as a tool error", r);

  let threw = null;
  try {
    await client.callTool({ name: "no_such_tool", arguments: {} });
  } catch (e) {
    threw = e;
  }
  tap(threw !== null && /-32602/.test(String(threw.code ?? threw.message)), "an unknown tool is a JSON-RPC error", String(threw));
} catch (e) {
  tap(false, "the session ran to its end", String(e?.stack ?? e));
} finally {
  await client.close();
}
process.exit(failed ? 1 : 0);
