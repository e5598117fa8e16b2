// checks.mjs - what client.mjs (SDK v1, MCP 2025) and client2.mjs (SDK v2, MCP
// 2026-07-28) both check through their connected client: the four tools, a
// command, a file written then read, one sandbox across calls, a listing, a
// refusal, an unknown tool. Each point prints "PASS what" or "FAIL what # detail".
let failed = 0;

export function tap(ok, what, detail) {
  if (ok) {
    console.log(`PASS ${what}`);
  } else {
    failed++;
    console.log(`FAIL ${what} # ${JSON.stringify(detail).slice(0, 300)}`);
  }
}

// The exit status: 0 when every point passed.
export function status() {
  return failed ? 1 : 0;
}

// Every point on client (connected), named with the prefix.
export async function checkTools(client, prefix) {
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort().join(",");
  tap(names === "list_files,read_file,run_command,write_file", `${prefix}tools/list names the four tools`, names);

  let r = await client.callTool({ name: "run_command", arguments: { command: "uname -s; echo $((6 * 7))" } });
  tap(!r.isError && r.structuredContent?.stdout === "Linux\n42\n" && r.structuredContent?.exit_code === 0,
      `${prefix}run_command runs in the Linux guest`, r);

  const text = "written by the MCP SDK\nline two\n";
  r = await client.callTool({ name: "write_file", arguments: { path: "/tmp/sdk.txt", content: text } });
  tap(!r.isError && r.structuredContent?.bytes === text.length, `${prefix}write_file`, r);

  r = await client.callTool({ name: "read_file", arguments: { path: "/tmp/sdk.txt" } });
  tap(!r.isError && r.structuredContent?.content === text, `${prefix}read_file returns what write_file wrote`, r);

  r = await client.callTool({ name: "run_command", arguments: { command: ["wc", "-l", "/tmp/sdk.txt"] } });
  tap(!r.isError && /^2 /.test(r.structuredContent?.stdout ?? ""), `${prefix}the same sandbox across calls`, r);

  r = await client.callTool({ name: "list_files", arguments: { path: "/tmp" } });
  tap(!r.isError && r.structuredContent?.entries?.some((e) => e.name === "sdk.txt" && e.type === "file"),
      `${prefix}list_files shows the file`, r);

  r = await client.callTool({ name: "run_command", arguments: { command: "echo refuse-me" } });
  tap(r.isError === true && /refused by the approver/.test(r.content?.[0]?.text ?? ""),
      `${prefix}a refusal reaches the client as a tool error`, r);

  let threw = null;
  try {
    await client.callTool({ name: "no_such_tool", arguments: {} });
  } catch (e) {
    threw = e;
  }
  tap(threw !== null && /-32602/.test(String(threw.code ?? threw.message)),
      `${prefix}an unknown tool is a JSON-RPC error`, String(threw));
}
