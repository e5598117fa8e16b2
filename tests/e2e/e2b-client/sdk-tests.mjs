// sdk-tests.mjs - the official E2B JS SDK (`e2b` from the npm registry, unmodified)
// driving `mayfly serve --e2b` through its public API only: sandboxes, commands,
// pty, files, directory watches, pause and resume, listing, published ports and
// refusals. Prints TAP:
// one point per case, "ok N - what" or "not ok N - what # why", then the plan
// "1..N". Every case has a time budget, so the script never hangs; it kills
// every sandbox it created and never prints a key or token.
// Exit 0 when every point passed, 1 otherwise.
//
// usage: node sdk-tests.mjs   (configured from the environment)
//   E2B_API_URL, E2B_SANDBOX_URL  http://127.0.0.1:PORT (read by the SDK itself)
//   E2B_API_KEY        a valid key (read by the SDK itself)
//   E2B_TEST_BAD_KEY   a key the server refuses
//   E2B_TEST_TEMPLATE  the template sandboxes are created from (default "base")
//   E2B_TEST_CASES     a comma list of case names to run (default: all)
import http from "node:http";
import { createHash, randomBytes } from "node:crypto";
import {
  Sandbox, AuthenticationError, CommandExitError, FileNotFoundError,
  SandboxNotFoundError, TimeoutError,
} from "e2b";

const template = process.env.E2B_TEST_TEMPLATE || "base";
const badKey = process.env.E2B_TEST_BAD_KEY || "";
const wanted = (process.env.E2B_TEST_CASES || "").split(",").map((s) => s.trim()).filter(Boolean);
const secrets = [process.env.E2B_API_KEY, badKey].filter(Boolean);

// --- helpers -------------------------------------------------------------

// A failed expectation: the case stops and its TAP point says why.
function expect(ok, what, got) {
  if (!ok) throw new Error(`${what}; got ${describe(got)}`);
}

// A value or an error as one short line, with keys and tokens blanked out.
function describe(v) {
  let s = v instanceof Error ? `${v.constructor.name}: ${v.message}` : JSON.stringify(v) ?? String(v);
  for (const secret of secrets) s = s.split(secret).join("***");
  return s.replace(/\s+/g, " ").slice(0, 300);
}

// The error p rejects with; a case fails if it resolves instead.
async function rejection(p, what) {
  const r = await p.then((v) => ({ v }), (e) => ({ e }));
  if (!r.e) throw new Error(`${what} resolved; expected an error`);
  return r.e;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
function within(ms, p, what) {
  let timer;
  const t = new Promise((_, rej) => { timer = setTimeout(() => rej(new Error(`${what}: no result in ${ms / 1000} s`)), ms); });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}
const sha256 = (b) => createHash("sha256").update(b).digest("hex");

// Every sandbox the script made and has not killed yet.
const live = new Set();
async function create(opts = {}) {
  const sbx = await Sandbox.create(template, { timeoutMs: 120_000, ...opts });
  live.add(sbx);
  if (sbx.trafficAccessToken) secrets.push(sbx.trafficAccessToken);
  return sbx;
}
async function kill(sbx) {
  live.delete(sbx);
  return await within(30_000, sbx.kill(), `kill ${sbx.sandboxId}`);
}

// The sandbox most cases share, made by the first case that needs it.
let shared, sharedSbx;
const box = () => (shared ??= create({ metadata: { suite: "e2b" }, envs: { GREETING: "hello" } })
  .then((sbx) => (sharedSbx = sbx)));

// One request to the E2B port, addressed to a published port by its Host header.
function getPublished(host, token) {
  const { hostname, port } = new URL(process.env.E2B_SANDBOX_URL || process.env.E2B_API_URL);
  const headers = { Host: host, ...(token ? { "e2b-traffic-access-token": token } : {}) };
  return new Promise((resolve, reject) => {
    const req = http.get({ hostname, port, path: "/", headers, timeout: 5000 }, (res) => {
      let body = "";
      res.on("data", (d) => (body += d)).on("end", () => resolve({ status: res.statusCode, body }));
    });
    req.on("timeout", () => req.destroy(new Error("request timed out"))).on("error", reject);
  });
}

// --- the cases: [name, budget in s, what the TAP point says, body] --------

const cases = [
  ["create", 120, "Sandbox.create gives a running sandbox with its metadata and template", async () => {
    const sbx = await box();
    expect(typeof sbx.sandboxId === "string" && sbx.sandboxId !== "", "a sandboxId", sbx.sandboxId);
    const info = await sbx.getInfo();
    expect(info.sandboxId === sbx.sandboxId && info.state === "running", "getInfo: the id, state running", info);
    expect(info.metadata?.suite === "e2b", "getInfo: metadata {suite: 'e2b'}", info.metadata);
    expect(info.templateId === template || info.name === template, `getInfo: template ${template}`, info);
  }],

  ["run", 60, "commands.run: stdout, stderr, exit code, the create envs and callbacks", async () => {
    const sbx = await box();
    let out = "", err = "";
    const r = await sbx.commands.run("echo $GREETING; echo err >&2",
      { onStdout: (d) => (out += d), onStderr: (d) => (err += d) });
    expect(r.stdout === "hello\n" && r.stderr === "err\n" && r.exitCode === 0, "hello / err / 0", r);
    expect(out === "hello\n" && err === "err\n", "callbacks saw the same output", { out, err });
  }],

  ["metrics", 120, "getMetrics: the guest's CPUs, memory and disk; a busy loop's CPU share and a file's disk use", async () => {
    const sbx = await box();
    const m = await sbx.getMetrics();
    expect(Array.isArray(m) && m.length === 1, "one sample, now", m);
    const a = m[0];
    expect(a.timestamp instanceof Date && !isNaN(a.timestamp) && a.cpuCount >= 1 &&
      a.memTotal > 64 * 2 ** 20 && a.memUsed > 0 && a.memUsed <= a.memTotal &&
      a.diskTotal > 0 && a.diskUsed > 0 && a.diskUsed <= a.diskTotal, "a sample that holds together", a);
    await sbx.commands.run("timeout 3 sh -c 'while :; do :; done' || true; " +
      "head -c 33554432 /dev/zero >/root/metrics.bin && sync", { timeoutMs: 60_000 });
    const b = (await sbx.getMetrics())[0];
    expect(b.cpuUsedPct > 1 && b.cpuUsedPct <= 100, "the busy loop's share since the last call", b);
    expect(b.diskUsed - a.diskUsed >= 16 * 2 ** 20, "the 32 MiB file in the disk's use",
      { before: a.diskUsed, after: b.diskUsed });
    await sbx.commands.run("rm -f /root/metrics.bin");
  }],

  ["exit", 60, "a non-zero exit throws CommandExitError with the exit code", async () => {
    const e = await rejection((await box()).commands.run("exit 3"), "run('exit 3')");
    expect(e instanceof CommandExitError && e.exitCode === 3, "CommandExitError, exitCode 3", e);
  }],

  ["timeout", 60, "a command over its timeoutMs throws TimeoutError", async () => {
    const sbx = await box();
    const t0 = Date.now();
    const e = await rejection(sbx.commands.run("sleep 30", { timeoutMs: 1000 }), "run('sleep 30')");
    expect(e instanceof TimeoutError, "TimeoutError", e);
    expect(Date.now() - t0 < 10_000, "within 10 s", `${Date.now() - t0} ms`);
  }],

  ["background", 60, "a background command is listed, killed, and ends with a signal", async () => {
    const sbx = await box();
    const h = await sbx.commands.run("sleep 60", { background: true });
    expect(Number.isInteger(h.pid) && h.pid > 0, "a pid", h.pid);
    let pids = (await sbx.commands.list()).map((p) => p.pid);
    expect(pids.includes(h.pid), `commands.list has ${h.pid}`, pids);
    expect(await h.kill() === true, "kill() is true", false);
    const e = await rejection(h.wait(), "wait() after kill");
    expect(e instanceof CommandExitError && e.exitCode !== 0, "CommandExitError, exitCode not 0", e);
    for (let i = 0; i < 10 && pids.includes(h.pid); i++) {   // the listing may lag the end event a little
      await sleep(200);
      pids = (await sbx.commands.list()).map((p) => p.pid);
    }
    expect(!pids.includes(h.pid), `commands.list no longer has ${h.pid}`, pids);
  }],

  ["reattach", 90, "a command outlives its client's stream; commands.connect reattaches to it", async () => {
    const sbx = await box();
    let first = "";
    const h = await sbx.commands.run("rm -f /tmp/reattach-go; echo before; while [ ! -e /tmp/reattach-go ]; do sleep 0.1; done; " +
      "echo after; exit 5", { background: true, timeoutMs: 0, onStdout: (d) => (first += d) });
    for (let i = 0; i < 100 && first !== "before\n"; i++) await sleep(100);
    expect(first === "before\n", "the first client saw 'before'", first);
    await h.disconnect();
    const pids = (await sbx.commands.list()).map((p) => p.pid);
    expect(pids.includes(h.pid), `commands.list still has ${h.pid} after disconnect()`, pids);
    let out = "";
    const again = await sbx.commands.connect(h.pid, { onStdout: (d) => (out += d), timeoutMs: 0 });
    expect(again.pid === h.pid, `connect(${h.pid}) gives a handle of that pid`, again.pid);
    await sbx.files.write("/tmp/reattach-go", "");
    const e = await rejection(again.wait(), "wait() of the reattached command");
    expect(e instanceof CommandExitError && e.exitCode === 5, "CommandExitError, exitCode 5", e);
    expect(out === "after\n", "onStdout saw the output from the reattach on", out);
    const gone = await rejection(sbx.commands.connect(h.pid), "connect to an ended command");
    expect(gone instanceof Error, "an error for a command that ended", gone);
  }],

  ["stdin", 60, "sendStdin and closeStdin feed a background command", async () => {
    const sbx = await box();
    const h = await sbx.commands.run("cat", { background: true, stdin: true });
    await sbx.commands.sendStdin(h.pid, "from stdin\n");
    await sbx.commands.closeStdin(h.pid);
    const r = await h.wait();
    expect(r.stdout === "from stdin\n" && r.exitCode === 0, "cat echoes its stdin, exit 0", r);
  }],

  ["pty", 60, "pty.create, resize and sendInput run an interactive shell", async () => {
    const sbx = await box();
    const dec = new TextDecoder();
    let data = "";
    const h = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => (data += dec.decode(d, { stream: true })) });
    await sbx.pty.resize(h.pid, { cols: 100, rows: 30 });
    // $((6*7)) and stty's answer appear only in the output, not in the echoed input.
    await sbx.pty.sendInput(h.pid, new TextEncoder().encode("echo pty-$((6*7)); stty size; exit\n"));
    const r = await h.wait();
    expect(r.exitCode === 0, "the shell exits 0", r);
    expect(data.includes("pty-42"), "onData has pty-42", data);
    expect(data.includes("30 100"), "stty size after resize is 30 100", data);
  }],

  ["files", 60, "write, read, list, exists, makeDir, rename, remove, a missing file", async () => {
    const { files } = await box();
    expect(await files.makeDir("/tmp/dir") === true, "makeDir of a new dir is true", false);
    const w = await files.write("/tmp/dir/a.txt", "some text\n");
    expect(w.path === "/tmp/dir/a.txt" && w.name === "a.txt", "write names the file", w);
    expect(await files.read("/tmp/dir/a.txt") === "some text\n", "read gives what write wrote", null);
    const list = await files.list("/tmp/dir");
    expect(list.length === 1 && list[0].name === "a.txt" && list[0].type === "file" &&
      list[0].path === "/tmp/dir/a.txt" && list[0].size === 10, "list shows a.txt, a 10-byte file", list);
    expect(await files.exists("/tmp/dir/a.txt") === true, "exists of the file", false);
    expect(await files.exists("/tmp/dir/none") === false, "exists of a missing file is false", true);
    expect(await files.makeDir("/tmp/dir") === false, "makeDir of an existing dir is false", true);
    const m = await files.rename("/tmp/dir/a.txt", "/tmp/dir/b.txt");
    expect(m.path === "/tmp/dir/b.txt", "rename gives the new path", m);
    expect(await files.read("/tmp/dir/b.txt") === "some text\n" && !(await files.exists("/tmp/dir/a.txt")),
      "the content moved to b.txt", null);
    await files.remove("/tmp/dir/b.txt");
    expect(await files.exists("/tmp/dir/b.txt") === false, "exists after remove is false", true);
    const e = await rejection(files.read("/tmp/dir/missing"), "read of a missing file");
    expect(e instanceof FileNotFoundError, "FileNotFoundError", e);
  }],

  ["watch", 60, "files.watchDir reports creates, writes, renames and removes, recursively, until stop()", async () => {
    const sbx = await box();
    const dir = `/tmp/watched-${Date.now()}`;
    await sbx.files.makeDir(dir);
    const events = [];
    const saw = async (e) => { for (let i = 0; i < 100 && !events.includes(e); i++) await sleep(100); return events.includes(e); };
    const h = await sbx.files.watchDir(dir, (e) => events.push(`${e.type} ${e.name}`), { recursive: true });
    await sbx.files.write(`${dir}/a.txt`, "one");
    await sbx.files.makeDir(`${dir}/sub`);
    expect(await saw("create sub"), "an event 'create sub'", events);
    await sbx.commands.run(`echo two > ${dir}/sub/b.txt && mv ${dir}/a.txt ${dir}/c.txt && rm ${dir}/sub/b.txt`);
    expect(await saw("remove sub/b.txt"), "an event 'remove sub/b.txt'", events);
    await h.stop();
    for (const want of ["create a.txt", "create sub/b.txt", "write sub/b.txt", "rename a.txt", "create c.txt"])
      expect(events.includes(want), `an event '${want}'`, events);
    expect(!events.some((e) => e.includes(".mayfly-")), "no event of mayfly's own temporary files", events);
    const n = events.length;
    await sbx.files.write(`${dir}/after-stop.txt`, "x");
    await sleep(500);
    expect(events.length === n, "no event after stop()", events.slice(n));
    const e = await rejection(sbx.files.watchDir(`${dir}/none`, () => {}), "watchDir of a missing directory");
    expect(e instanceof FileNotFoundError, "FileNotFoundError", e);
  }],

  ["bigfile", 300, "a 64 MiB file written as bytes and as a stream reads back intact", async () => {
    const sbx = await box();
    const data = new Uint8Array(randomBytes(64 << 20));
    const sum = sha256(data);
    const inSandbox = async () => (await sbx.commands.run("sha256sum /tmp/big.bin")).stdout.split(" ")[0];
    await sbx.files.write("/tmp/big.bin", data);                  // multipart upload
    let got = await inSandbox();
    expect(got === sum, `sha256sum in the sandbox is ${sum} (Uint8Array upload)`, got);
    const back = await sbx.files.read("/tmp/big.bin", { format: "bytes" });
    expect(back.length === data.length && sha256(back) === sum, "read back: same length and sha256", back.length);
    await sbx.files.remove("/tmp/big.bin");
    await sbx.files.write("/tmp/big.bin", new Blob([data]).stream()); // octet-stream upload
    got = await inSandbox();
    expect(got === sum, `sha256sum in the sandbox is ${sum} (ReadableStream upload)`, got);
    await sbx.files.remove("/tmp/big.bin");
  }],

  ["list", 60, "Sandbox.list shows the sandbox running", async () => {
    const sbx = await box();
    const paginator = Sandbox.list();
    let found;
    while (!found && paginator.hasNext) found = (await paginator.nextItems()).find((s) => s.sandboxId === sbx.sandboxId);
    expect(found?.state === "running", `${sbx.sandboxId} listed, running`, found);
  }],

  ["settimeout", 60, "setTimeout moves the sandbox's end", async () => {
    const sbx = await box();
    await sbx.setTimeout(300_000);
    const left = (await sbx.getInfo()).endAt.getTime() - Date.now();
    expect(left > 200_000 && left <= 310_000, "endAt about 300 s away", `${left} ms`);
  }],

  ["pause", 180, "pause, then Sandbox.connect resumes with files and processes intact", async () => {
    const sbx = await create();
    await sbx.files.write("/tmp/keep.txt", "kept\n");
    // A pause ends the commands started through the API (docs/e2b.md: their
    // streams cannot cross the snapshot); a process started apart survives.
    const pid = (await sbx.commands.run("setsid sleep 600 >/dev/null 2>&1 </dev/null & echo $!")).stdout.trim();
    const h = await sbx.commands.run("sleep 600", { background: true, timeoutMs: 0 });
    expect(await sbx.pause() === true, "pause() is true with a command running", false);
    const ended = await rejection(h.wait(), "wait() of the command the pause ended");
    expect(ended instanceof CommandExitError, "the command ended by the pause: CommandExitError", ended);
    const info = await Sandbox.getInfo(sbx.sandboxId);
    expect(info.state === "paused", "getInfo: state paused", info.state);
    const again = await Sandbox.connect(sbx.sandboxId);
    expect((await again.getInfo()).state === "running", "running after connect", null);
    expect(await again.files.read("/tmp/keep.txt") === "kept\n", "the file survived", null);
    const alive = await again.commands.run(`kill -0 ${pid} && echo alive`);
    expect(/^[0-9]+$/.test(pid) && alive.stdout === "alive\n", `the detached sleep ${pid} still runs`, alive.stdout);
  }],

  ["host", 30, "getHost(8000) names the port and the sandbox", async () => {
    const sbx = await box();
    const host = sbx.getHost(8000);
    expect(host === `8000-${sbx.sandboxId}.${sbx.sandboxDomain}`, `8000-${sbx.sandboxId}.<domain>`, host);
  }],

  ["published-port", 120, "a published port answers its own traffic token only", async () => {
    const [a, b] = await Promise.all([0, 1].map(() => create({ network: { allowPublicTraffic: false } })));
    expect(a.trafficAccessToken && b.trafficAccessToken && a.trafficAccessToken !== b.trafficAccessToken,
      "each sandbox has its own trafficAccessToken", null);
    await a.files.write("/tmp/www/index.html", "published\n");
    await a.commands.run("cd /tmp/www && if command -v python3 >/dev/null; then exec python3 -m http.server 8000; " +
      "else exec busybox httpd -f -p 8000; fi", { background: true, timeoutMs: 0 });
    const host = a.getHost(8000);
    let r;
    for (let i = 0; i < 50 && r?.status !== 200; i++) {      // the server needs a moment to listen
      if (i) await sleep(300);
      r = await getPublished(host, a.trafficAccessToken).catch((e) => ({ status: 0, body: String(e) }));
    }
    expect(r.status === 200 && r.body === "published\n", "200 and index.html with its own token", r);
    r = await getPublished(host, b.trafficAccessToken);
    expect(r.status === 401 || r.status === 403, "401/403 with another sandbox's token", r.status);
    r = await getPublished(host, null);
    expect(r.status === 401 || r.status === 403, "401/403 without a token", r.status);
  }],

  ["websocket", 120, "a published port upgrades to a WebSocket and relays both ways", async () => {
    const sbx = await box();
    // A server that answers any upgrade with 101, then echoes (python3's
    // standard library has no WebSocket server; the relay carries bytes).
    await sbx.files.write("/tmp/ws.py", [
      "import socket",
      "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)",
      "s.bind(('127.0.0.1', 8765)); s.listen(4)",
      "while True:",
      "    c, _ = s.accept(); d = b''",
      "    while b'\\r\\n\\r\\n' not in d:",
      "        x = c.recv(4096)",
      "        if not x: break",
      "        d += x",
      "    c.sendall(b'HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\n\\r\\n')",
      "    while True:",
      "        x = c.recv(4096)",
      "        if not x: break",
      "        c.sendall(x)",
      "    c.close()",
    ].join("\n") + "\n");
    await sbx.commands.run("python3 /tmp/ws.py", { background: true, timeoutMs: 0 });
    const { hostname, port } = new URL(process.env.E2B_SANDBOX_URL || process.env.E2B_API_URL);
    const upgrade = () => new Promise((resolve, reject) => {
      const req = http.request({ hostname, port, path: "/chat", timeout: 5000, headers: {
        Host: sbx.getHost(8765), Connection: "Upgrade", Upgrade: "websocket",
        "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": randomBytes(16).toString("base64"),
        "e2b-traffic-access-token": sbx.trafficAccessToken } });
      req.on("upgrade", (res, socket) => resolve({ status: res.statusCode, socket }));
      req.on("response", (res) => { res.resume(); resolve({ status: res.statusCode }); });
      req.on("timeout", () => req.destroy(new Error("upgrade timed out"))).on("error", reject);
      req.end();
    });
    let r;
    for (let i = 0; i < 50 && r?.status !== 101; i++) {      // the server needs a moment to listen
      if (i) await sleep(300);
      r = await upgrade().catch((e) => ({ status: 0, error: String(e) }));
    }
    expect(r.status === 101 && r.socket, "101 Switching Protocols", r.status ?? r.error);
    const echoed = await within(10_000, new Promise((resolve) => {
      let got = "";
      r.socket.on("data", (d) => { got += d; if (got.length >= 11) resolve(got); });
      r.socket.write("hello ");
      setTimeout(() => r.socket.write("again"), 100);
    }), "the echo");
    r.socket.destroy();
    expect(echoed === "hello again", "both writes echoed back through the relay", echoed);
  }],

  ["many", 300, "ten sandboxes at once, each with its own envs", async () => {
    const outs = await Promise.all([...Array(10).keys()].map(async (i) => {
      const sbx = await create({ envs: { I: String(i) } });
      const out = (await sbx.commands.run("echo $I")).stdout;
      return (await kill(sbx)) === true ? out : "not killed";
    }));
    expect(outs.every((o, i) => o === `${i}\n`), "outputs 0..9, each sandbox killed", outs);
  }],

  ["badkey", 60, "a wrong API key is an AuthenticationError", async () => {
    const r = await Sandbox.create(template, { apiKey: badKey, timeoutMs: 60_000 }).then(
      (s) => { live.add(s); return s; }, (e) => e);
    expect(r instanceof AuthenticationError, "AuthenticationError", r instanceof Sandbox ? "a sandbox" : r);
  }],

  ["kill", 60, "kill ends the sandbox and its commands; a second kill is false; getInfo is not found", async () => {
    const sbx = await create();
    const h = await sbx.commands.run("sleep 600", { background: true, timeoutMs: 0 });
    expect(await kill(sbx) === true, "kill() is true with a command running", false);
    const ended = await rejection(h.wait(), "wait() of a command of a killed sandbox");
    expect(ended instanceof Error, "the command's wait() fails", ended);
    expect(await Sandbox.kill(sbx.sandboxId) === false, "Sandbox.kill again is false", true);
    const e = await rejection(Sandbox.getInfo(sbx.sandboxId), "getInfo of a killed sandbox");
    expect(e instanceof SandboxNotFoundError, "SandboxNotFoundError", e);
  }],
];

// --- the run -------------------------------------------------------------

const names = cases.map((c) => c[0]);
const unknown = wanted.filter((n) => !names.includes(n));
const run = cases.filter(([name]) => !wanted.length || wanted.includes(name));
let n = 0, failed = 0;
for (const name of unknown) {
  failed++;
  console.log(`not ok ${++n} - ${name} # no such case (the cases: ${names.join(",")})`);
}
for (const [name, budget, what, body] of run) {
  const before = new Set(live);
  try {
    await within(budget * 1000, body(), name);
    console.log(`ok ${++n} - ${name}: ${what}`);
  } catch (e) {
    failed++;
    console.log(`not ok ${++n} - ${name}: ${what} # ${describe(e)}`);
  } finally {
    // The sandboxes this case made (all but the shared one), killed even when it failed.
    await Promise.all([...live].filter((s) => !before.has(s) && s !== sharedSbx).map((s) => kill(s).catch(() => {})));
  }
}
// The shared sandbox, and any a timed-out case made after its cleanup ran.
await Promise.all([...live].map((s) => kill(s).catch(() => {})));
console.log(`1..${n}`);
process.exit(failed ? 1 : 0);
