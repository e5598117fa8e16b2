/* cli.c - the one command-line front end: one option table and getopt_long for boot, run, exec and cp. */
#include "cmd/cli.h"
#include "bench/density.h"
#include "policy/approve.h"
#include "lib/log.h"
#include "num.h"
#include "lib/sparse.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>

enum { C_BOOT = 1 << CLI_BOOT, C_RUN = 1 << CLI_RUN, C_EXEC = 1 << CLI_EXEC, C_CP = 1 << CLI_CP,
       C_SNAP = 1 << CLI_SNAPSHOT, C_MCP = 1 << CLI_MCP, C_AUDIT = 1 << CLI_AUDIT,
       C_PAUSE = 1 << CLI_PAUSE, C_FORK = 1 << CLI_FORK, C_SERVE = 1 << CLI_SERVE,
       C_BENCH = 1 << CLI_BENCH, C_COMPARE = 1 << CLI_COMPARE };

enum opt_id {
	O_HELP = 'h', O_VERBOSE = 'v',
	O_KERNEL = 256, O_INITRD, O_CMDLINE, O_CMDLINE_APPEND, O_INIT_CMD, O_ROOTFS, O_DISK,
	O_MEM, O_CPUS, O_CONSOLE, O_ID, O_KVM_DEVICE, O_VSOCK, O_TIMEOUT, O_ENV, O_CWD,
	O_STDIN, O_PUT, O_GET, O_TTY, O_JSON, O_CALL_TIMEOUT, O_MAX_GET, O_MAX_OUTPUT,
	O_SNAPSHOT, O_COLD, O_SETUP, O_OUT, O_AUDIT, O_APPROVE, O_APPROVE_TIMEOUT, O_HEAD,
	O_NO_SECCOMP,
	O_NO_JAIL, O_DETACHED, O_UID, O_GID, O_CPU_QUOTA, O_DISK_QUOTA,
	O_SOCKET, O_LISTEN, O_E2B, O_E2B_DOMAIN, O_E2B_CERT, O_E2B_KEY, O_TOKENS, O_STATE, O_POOL, O_MAX_SANDBOXES, O_TEMPLATE, O_EPHEMERAL, O_MEMORY_RESERVE,
	O_ALLOW_NET, O_RESOLVE, O_ROOT, O_USER, O_SPARE_DISKS,
	O_RUNS, O_WARMUP, O_MODE, O_BENCH_JSON, O_SVG, O_TIMINGS, O_COUNT,
};

struct cli_option {
	const char *name;
	int id;
	unsigned cmds;             /* C_* bits: the commands that take it */
	const char *arg;           /* value's name in the usage; NULL: a plain flag */
	const char *help;          /* lines after the first start with '\n' */
};

/* The one table. An option that means something else for another command
 * (--vsock) has one row per meaning. */
static const struct cli_option options[] = {
	{ "snapshot", O_SNAPSHOT, C_BOOT | C_RUN | C_MCP | C_SERVE | C_BENCH, "DIR", "restore the VM saved in DIR (mayfly snapshot create)\n"
	  "instead of booting; --mem, --cpus, --kernel, --rootfs\n"
	  "given must match it" },
	{ "cold", O_COLD, C_RUN | C_MCP, NULL, "boot the kernel instead of restoring the default\n"
	  "snapshot (made once per kernel, rootfs, mem and cpus)" },
	{ "out", O_OUT, C_SNAP, "DIR", "where to write the snapshot (required)" },
	{ "out", O_OUT, C_PAUSE | C_FORK, "DIR", "where to write the snapshot (required): a new\n"
	  "name or an empty directory; it appears whole or not at all" },
	{ "setup", O_SETUP, C_SNAP, "CMD", "a shell command to run in the VM before it is saved\n"
	  "(repeatable, in order; each must exit 0)" },
	{ "kernel", O_KERNEL, C_BOOT | C_RUN | C_SNAP | C_MCP | C_SERVE | C_BENCH, "FILE", CONFIG_KERNEL_FORMATS "\n"
	  "(default: the guest kernel tools/build-guest built)" },
	{ "initrd", O_INITRD, C_BOOT, "FILE",
	  "initial ramdisk (default with the default kernel: its initramfs)" },
	{ "cmdline", O_CMDLINE, C_BOOT, "STR", "kernel command line (default:\n\""
	  CONFIG_DEFAULT_CMDLINE "\")" },
	{ "cmdline-append", O_CMDLINE_APPEND, C_BOOT, "STR", "add to the kernel command line" },
	{ "init-cmd", O_INIT_CMD, C_BOOT, "CMD", "shell command for the guest's init to run;\n"
	  "mayfly then exits with its status" },
	{ "rootfs", O_ROOTFS, C_BOOT, "IMG", "boot from an ext4 image as a copy-on-write root (/dev/vda):\n"
	  "IMG is never written; the guest's writes vanish with the VM;\n"
	  "agent or minimal name tools/build-guest's images" },
	{ "rootfs", O_ROOTFS, C_RUN | C_SNAP | C_MCP | C_SERVE | C_BENCH, "IMG", "root image: agent (Debian 12 with python3, git,\n"
	  "node, gcc...), minimal (busybox) or a path (default:\n"
	  "agent once tools/build-guest --agent built it, else minimal)" },
	{ "disk", O_DISK, C_BOOT | C_RUN, "PATH[,ro]", "add a raw disk, read-write or read-only\n"
	  "(repeatable; /dev/vdb, /dev/vdc... after the rootfs)" },
	{ "spare-disks", O_SPARE_DISKS, C_BOOT, "N", "N empty disk slots after the others, filled while the\n"
	  "VM runs, through its control socket (the containerd\n"
	  "shim puts a pod's containers there)" },
	{ "mem", O_MEM, C_BOOT | C_RUN | C_SNAP | C_MCP | C_SERVE | C_BENCH, "MIB", "guest RAM in MiB (default 256, at most 524288)" },
	{ "cpus", O_CPUS, C_BOOT | C_RUN | C_SNAP | C_MCP | C_SERVE | C_BENCH, "N", "vCPUs (default 1, at most " CONFIG_CPUS_LIMIT ")" },
	{ "console", O_CONSOLE, C_BOOT, NULL, "interactive: stdin goes to the guest console\n"
	  "(Ctrl-A x quits)" },
	{ "id", O_ID, C_BOOT | C_RUN | C_SNAP | C_MCP, "ID", "VM id shown in log lines (default: a random one)" },
	{ "kvm-device", O_KVM_DEVICE, C_BOOT | C_RUN | C_SNAP | C_MCP | C_SERVE | C_BENCH, "PATH", "KVM device (default /dev/kvm)" },
	{ "vsock", O_VSOCK, C_BOOT, "PATH", "add a virtio-vsock device (guest CID 3): host programs\n"
	  "connect to the Unix socket PATH and send \"CONNECT <port>\\n\";\n"
	  "guest connections to port P reach the socket PATH_P;\n"
	  "the guest's init starts its agent (mayfly exec, mayfly cp)" },
	{ "vsock", O_VSOCK, C_EXEC | C_CP, "PATH",
	  "the socket of a VM started with mayfly boot --vsock PATH" },
	{ "vsock", O_VSOCK, C_PAUSE | C_FORK, "PATH",
	  "the VM started with mayfly boot --vsock PATH (its control\nsocket is PATH.ctl)" },
	{ "timeout", O_TIMEOUT, C_RUN | C_EXEC, "SEC", "kill CMD after SEC seconds (exit 124)" },
	{ "env", O_ENV, C_RUN | C_EXEC, "K=V", "environment for CMD (repeatable; PATH has a default)" },
	{ "cwd", O_CWD, C_RUN | C_EXEC, "DIR", "working directory in the guest (default /root)" },
	{ "root", O_ROOT, C_EXEC, "DIR", "run CMD chrooted into the guest's directory DIR (a\n"
	  "container's root, e.g. /run/mayfly/rootfs), as root or\n"
	  "--user; --cwd is then inside DIR (default its /)" },
	{ "user", O_USER, C_EXEC, "UID[:GID]", "with --root: run CMD as UID and GID (default 0),\n"
	  "no supplementary groups" },
	{ "stdin", O_STDIN, C_RUN | C_EXEC, "FILE|-", "feed CMD's stdin from FILE or from ours" },
	{ "put", O_PUT, C_RUN, "LOCAL:GUEST", "copy a file into the VM before CMD (repeatable)" },
	{ "get", O_GET, C_RUN, "GUEST:LOCAL", "copy a file out of the VM after CMD (repeatable);\n"
	  "LOCAL is replaced only once the whole file is in" },
	{ "tty", O_TTY, C_RUN | C_EXEC, NULL, "run CMD on a pseudo-terminal, interactively (our\n"
	  "terminal in raw mode, its size followed); one merged stream" },
	{ "json", O_JSON, C_RUN | C_EXEC, NULL, "one JSON event per line on stdout (started, stdout,\n"
	  "stderr, exit, timings, error) instead of the raw streams" },
	{ "call-timeout", O_CALL_TIMEOUT, C_RUN | C_EXEC | C_CP | C_MCP | C_SERVE, "SEC",
	  "give up on the agent after SEC seconds for each call\n"
	  "other than CMD itself: a file copy, the handshake (default 120)" },
	{ "max-get-bytes", O_MAX_GET, C_RUN | C_CP | C_MCP | C_SERVE, "BYTES",
	  "refuse a file out of the VM larger than BYTES\n(K/M/G suffixes; default 1G)" },
	{ "max-output", O_MAX_OUTPUT, C_RUN | C_EXEC | C_MCP | C_SERVE, "BYTES",
	  "stdout + stderr of CMD past BYTES are dropped and CMD\n"
	  "is killed; the exit event says truncated (default 256M)" },
	{ "audit", O_AUDIT, C_BOOT | C_RUN | C_MCP | C_SERVE, "FILE", "append one hash-chained JSON line per tool call (exec,\n"
	  "file write, file read) and --allow-net connection\n"
	  "attempt to FILE (mayfly audit verify FILE); boot records\n"
	  "the connection attempts" },
	{ "approve", O_APPROVE, C_RUN | C_MCP | C_SERVE, "CMD", "before each exec or file write, run CMD (sh -c) with\n"
	  "the call as JSON on stdin: exit 0 allows it, anything\n"
	  "else refuses it (run exits 123)" },
	{ "approve-timeout", O_APPROVE_TIMEOUT, C_RUN | C_MCP | C_SERVE, "SEC",
	  "an approver that has not exited after SEC seconds\n"
	  "is killed and the call refused (default 30)" },
	{ "head", O_HEAD, C_AUDIT, "HASH", "the chain must contain the line whose sha256 is HASH\n"
	  "(a head printed before): lines cut off the end show" },
	{ "no-seccomp", O_NO_SECCOMP, C_BOOT | C_RUN | C_SNAP | C_MCP | C_SERVE | C_BENCH, NULL,
	  "debugging only: no per-thread seccomp filters (a warning says so)" },
	{ "disk-quota", O_DISK_QUOTA, C_BOOT | C_RUN | C_SNAP | C_MCP | C_BENCH, "BYTES",
	  "the root's copy-on-write overlay (host RAM) holds at most\n"
	  "BYTES; guest writes past it get I/O errors (default 512M)" },
	{ "no-jail", O_NO_JAIL, C_BOOT | C_RUN | C_SNAP | C_MCP | C_SERVE | C_BENCH, NULL,
	  "run the VMM unjailed, with all our privileges\n"
	  "(debugging only; see docs/security.md)" },
	{ "timings", O_TIMINGS, C_BOOT, "FILE", "when the VM ends, append its phases (ms since start)\n"
	  "and VM exits to FILE as one JSON line (docs/bench.md)" },
	{ "detached", O_DETACHED, C_BOOT, NULL, "the VM goes on when the process that started this\n"
	  "one ends (mayfly serve's sandboxes outlive it)" },
	{ "uid", O_UID, C_BOOT | C_RUN | C_SNAP | C_MCP | C_SERVE | C_BENCH, "UID",
	  "started as root, the jailed VMM's uid (default 65534)" },
	{ "gid", O_GID, C_BOOT | C_RUN | C_SNAP | C_MCP | C_SERVE | C_BENCH, "GID",
	  "started as root, the jailed VMM's gid (default 65534)" },
	{ "cpu-quota", O_CPU_QUOTA, C_BOOT | C_RUN | C_SNAP | C_MCP | C_SERVE | C_BENCH, "PCT",
	  "CPU time per vCPU, in percent of one host CPU\n"
	  "(cgroup cpu.max; default 100, at most 1000)" },
	{ "allow-net", O_ALLOW_NET, C_BOOT | C_RUN | C_SNAP | C_MCP, "RULE", "let the guest reach RULE through its agent's HTTP proxy\n"
	  "(HTTP_PROXY=http://127.0.0.1:3128 in every command):\n"
	  "HOST, *.SUFFIX, HOST:PORT, an IP or CIDR with an optional\n"
	  ":PORT ([IPV6]:PORT); repeatable. Loopback, private,\n"
	  "link-local and metadata addresses only when a rule names\n"
	  "them. None: no network at all (see docs/security.md)" },
	{ "resolve", O_RESOLVE, C_BOOT | C_RUN | C_SNAP | C_MCP, "HOST:ADDR", "HOST resolves to ADDR for --allow-net, not through\n"
	  "the host's DNS (repeatable)" },
	{ "socket", O_SOCKET, C_SERVE, "PATH", "serve the API on the Unix socket PATH, mode 0600\n"
	  "(default: STATE/api.sock)" },
	{ "listen", O_LISTEN, C_SERVE, "ADDR", "serve it on a loopback TCP port instead:\n"
	  "127.0.0.1:PORT or [::1]:PORT (needs --tokens)" },
	{ "e2b", O_E2B, C_SERVE, "ADDR", "also speak E2B's sandbox protocol (its SDKs' API and\n"
	  "envd) on the loopback TCP port ADDR: 127.0.0.1:PORT\n"
	  "or [::1]:PORT (with --e2b-cert, any address named);\n"
	  "an API key is a token (needs --tokens; docs/e2b.md)" },
	{ "e2b-cert", O_E2B_CERT, C_SERVE, "FILE", "serve --e2b over TLS with this certificate chain\n"
	  "(PEM; needs --e2b-key)" },
	{ "e2b-key", O_E2B_KEY, C_SERVE, "FILE", "the private key (PEM) of --e2b-cert" },
	{ "e2b-domain", O_E2B_DOMAIN, C_SERVE, "DOMAIN", "the domain E2B's sandboxes are named under\n"
	  "(PORT-ID.DOMAIN; default localhost)" },
	{ "tokens", O_TOKENS, C_SERVE, "FILE", "bearer tokens, one \"NAME TOKEN\" a line (mode 0600);\n"
	  "NAME is the audit log's caller (default: none asked)" },
	{ "state", O_STATE, C_SERVE, "DIR", "the service's state (default ~/.cache/mayfly/serve,\n"
	  "/var/lib/mayfly/serve as root); the sandboxes a\nprevious service left there are taken over" },
	{ "ephemeral", O_EPHEMERAL, C_SERVE, NULL, "sandboxes end with the service: a drain stops them,\n"
	  "and a start removes what a previous one left" },
	{ "pool", O_POOL, C_SERVE, "N", "keep N restored VMs ready for creates (default 0)" },
	{ "max-sandboxes", O_MAX_SANDBOXES, C_SERVE, "N", "at most N sandboxes at once (default 64)" },
	{ "memory-reserve", O_MEMORY_RESERVE, C_SERVE, "MIB", "refuse creates, resumes and forks (503) while the\n"
	  "host has under MIB MiB available (MemAvailable;\ndefault 256, 0: never)" },
	{ "template", O_TEMPLATE, C_SERVE, "NAME=DIR", "another template: the snapshot in DIR, with a warm\n"
	  "pool of its own; a create names it \"template\":\"NAME\"\n(repeatable, at most 7)" },
	{ "runs", O_RUNS, C_BENCH, "N", "measured runs (default 10, at most 100000)" },
	{ "warmup", O_WARMUP, C_BENCH, "N", "runs before them, one at a time, left out of every\n"
	  "statistic (default 1)" },
	{ "mode", O_MODE, C_BENCH, "MODE", "sequential (one VM after another, the default),\n"
	  "staggered:MS (one start every MS ms, whether or not\n"
	  "the last ended) or burst:N (N VMs at once, then the\n"
	  "next N), at most 256 VMs alive" },
	{ "count", O_COUNT, C_BENCH, "N", "density: idle VMs kept alive at once (default 10,\n"
	  "at most 4096)" },
	{ "json", O_BENCH_JSON, C_BENCH, "FILE", "write every run's record and the summaries to FILE as\n"
	  "JSON lines (docs/bench.md); - for stdout" },
	{ "svg", O_SVG, C_BENCH | C_COMPARE, "FILE", "draw the total's CDF and the median steps to FILE" },
	{ "verbose", O_VERBOSE, C_BOOT | C_RUN | C_EXEC | C_CP | C_SNAP | C_MCP | C_PAUSE | C_FORK | C_SERVE, NULL,
	  "more log lines on stderr (-vv: debug); with run, the\nguest console too" },
	{ "help", O_HELP, C_BOOT | C_RUN | C_EXEC | C_CP | C_SNAP | C_MCP | C_AUDIT | C_PAUSE | C_FORK | C_SERVE |
	  C_BENCH | C_COMPARE, NULL,
	  "this text" },
};
#define NR_OPTIONS (sizeof(options) / sizeof(options[0]))

static const char *const intros[CLI_NR_CMDS] = {
	[CLI_BOOT] = ("usage: mayfly boot [options]\n\n"
		"Boot a microVM and stream its serial console to stdout.\n"),
	[CLI_RUN] = ("usage: mayfly run [options] [--] CMD [ARG...]\n\n"
		"Restore a fresh microVM from a snapshot of the agent-ready guest (or boot one\n"
		"with --cold), run CMD in it through the guest agent, stream its stdout and\n"
		"stderr here, tear the VM down, and exit with CMD's exit code.\n"),
	[CLI_EXEC] = ("usage: mayfly exec --vsock PATH [options] [--] CMD [ARG...]\n\n"
		"Run CMD in a VM started with `mayfly boot --vsock PATH` (several calls, one VM).\n"),
	[CLI_CP] = ("usage: mayfly cp --vsock PATH [options] SRC DST\n\n"
		"Copy a file into or out of a VM started with `mayfly boot --vsock PATH`.\n"
		"The guest side is written :/absolute/path, e.g. mayfly cp --vsock s ./a :/root/a\n"),
	[CLI_SNAPSHOT] = ("usage: mayfly snapshot create [options] --out DIR\n\n"
		"Boot a VM from the copy-on-write rootfs, wait for its agent, run each --setup\n"
		"command, then save the agent-ready VM to DIR: `memory` (sparse), `state`,\n"
		"and the root's overlay. mayfly run --snapshot DIR restores it in milliseconds.\n"),
	[CLI_MCP] = ("usage: mayfly mcp [options]\n\n"
		"A Model Context Protocol server on stdin/stdout (JSON-RPC 2.0, one message per\n"
		"line; MCP 2026-07-28, or 2025-11-25 and before after initialize): one VM (from\n"
		"the default snapshot) for the session, tools run_command, read_file,\n"
		"write_file and list_files in it.\n"),
	[CLI_SERVE] = ("usage: mayfly serve [options]\n\n"
		"An HTTP/1.1 JSON API (docs/openapi.yaml) for many sandboxes at once, each a\n"
		"jailed VM restored from the default snapshot (or --snapshot DIR), kept across\n"
		"calls: create, exec (streamed JSON lines), files, pause, resume, fork, delete,\n"
		"/metrics, /health.\n"),
	[CLI_AUDIT] = ("usage: mayfly audit verify [--head HASH] FILE\n\n"
		"Check an audit log written by --audit: every line whole and in its place in\n"
		"the hash chain. Prints the number of records and the chain's head.\n"),
	[CLI_PAUSE] = ("usage: mayfly pause --vsock PATH --out DIR\n\n"
		"Save the running VM of `mayfly boot --vsock PATH` into DIR (a snapshot: mayfly\n"
		"boot --snapshot DIR resumes it, processes and files as they were), then end it.\n"),
	[CLI_BENCH] = ("usage: mayfly bench boot|restore|run|fork [options] [--] [CMD [ARG...]]\n\n"
		"Time VMs: each run is one `mayfly run --json` process, timed from just before\n"
		"its exec to its exit, with every phase of the VM in between. boot boots cold\n"
		"(run --cold), restore restores --snapshot DIR or the default snapshot (made\n"
		"first if needed, untimed), run does what mayfly run does, fork forks one\n"
		"parent VM (mayfly boot --vsock) per run and restores the child from it.\n"
		"CMD (default true) must exit 0. Prints each phase's p50, p90, p95, p99, min\n"
		"and max. mayfly bench density --count N restores N idle VMs from one\n"
		"snapshot, kept alive at once, and prints what each more one costs.\n"),
	[CLI_COMPARE] = ("usage: mayfly bench compare [--svg FILE] A.json B.json\n\n"
		"Does B differ from A? For each phase both reached, a two-sided permutation\n"
		"test of the difference of the means (9999 relabelings; Bonferroni over the\n"
		"phases, family-wise alpha 0.01) and B's change in percent.\n"),
	[CLI_FORK] = ("usage: mayfly fork --vsock PATH --out DIR\n\n"
		"Save the running VM of `mayfly boot --vsock PATH` into DIR, as mayfly pause\n"
		"does, and let it go on running: each mayfly boot --snapshot DIR is a child.\n"),
};

static const char *const trailers[CLI_NR_CMDS] = {
	[CLI_BOOT] = ("Exit: 0 guest reset or powered off (with --init-cmd: the command's status),\n"
		"1 internal error, 2 bad usage, 3 bad kernel, initrd or disk, 4 no usable\n"
		"/dev/kvm, 5 KVM lacks a capability, 6 guest triple fault, 7 KVM error,\n"
		"8 guest panic, 128+N stopped by signal N.\n"),
	[CLI_RUN] = ("A first SIGINT or SIGTERM goes to CMD; a second one ends the VM.\n"
		"Exit: CMD's code; 123 the approver refused a call, 124 timed out, 125 mayfly,\n"
		"the VM or the audit log failed, 126 the agent failed or CMD could not run,\n"
		"127 CMD not found, 128+N CMD killed by signal N.\n"),
	[CLI_EXEC] = ("Exit: as mayfly run.\n"),
	[CLI_CP] = ("Exit: 0 copied, 125 bad usage, 126 the copy failed (one line says why).\n"),
	[CLI_SNAPSHOT] = ("Exit: 0 saved; a --setup command's own code when it fails; 125 mayfly or\n"
		"the VM failed, 126 the agent failed (one line says why).\n"),
	[CLI_MCP] = ("A tool result is one JSON message: --max-output and --max-get-bytes are\n"
		"capped at 16M here, whatever is given.\n"
		"Exit: 0 at the end of stdin; 125 mayfly or the VM failed, 126 the agent\n"
		"failed (one line on stderr says why).\n"),
	[CLI_SERVE] = ("SIGTERM or SIGINT drains: calls in flight get 10 s, then every VM stops.\n"
		"Exit: 0 after a drain; 2 bad usage; 125 the service could not start.\n"),
	[CLI_AUDIT] = ("Exit: 0 the chain is intact, 1 it is not (one line names the first bad\n"
		"line), 2 bad usage or the file cannot be read.\n"),
	[CLI_PAUSE] = ("Exit: 0 saved and the VM ended, 1 the save failed, 2 bad usage, 3 no VM\n"
		"control socket at PATH.ctl (or not a mayfly one), 4 DIR exists and is not\n"
		"empty, 5 busy: a call is in flight (retry after it), 6 this VM cannot be\n"
		"saved (one line says why; it goes on running).\n"),
	[CLI_FORK] = ("Exit: as mayfly pause; the VM goes on running in every case.\n"),
	[CLI_BENCH] = ("Exit: 0 every run ended well, 1 internal error, 2 bad usage, 125 a run failed\n"
		"(one line names it and why).\n"),
	[CLI_COMPARE] = ("Exit: as diff(1): 0 no phase differs, 1 one or more do, 2 bad usage or a\n"
		"file that is not mayfly bench --json's.\n"),
};

void cli_usage(enum cli_cmd cmd, FILE *out)
{
	fputs(intros[cmd], out);
	fputc('\n', out);
	for (size_t i = 0; i < NR_OPTIONS; i++) {
		const struct cli_option *o = &options[i];
		char head[64];
		const char *h = o->help;

		if (!(o->cmds & (1u << cmd)))
			continue;
		if (o->id == O_VERBOSE || o->id == O_HELP)
			snprintf(head, sizeof(head), "  -%c, --%s", o->id, o->name);
		else
			snprintf(head, sizeof(head), "  --%s%s%s", o->name, o->arg ? " " : "",
				 o->arg ? o->arg : "");
		/* The help column starts at 22; a long head gets a line of its own. */
		fprintf(out, "%-21s", head);
		if (strlen(head) > 20)
			fprintf(out, "\n%21s", "");
		for (; *h; h++) {
			fputc(*h, out);
			if (*h == '\n')
				fprintf(out, "%21s", "");
		}
		fputc('\n', out);
	}
	fputc('\n', out);
	fputs(trailers[cmd], out);
}

static enum cli_result fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static enum cli_result fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return CLI_ERROR;
}

/* The one way a number is read from the command line. */
static enum cli_result number(const char *name, const char *val, uint64_t min, uint64_t max,
			      bool size, uint64_t *out, char *err, size_t errlen)
{
	int rc = size ? num_parse_size(val, min, max, out) : num_parse_u64(val, min, max, out);

	if (rc == -EINVAL)
		return fail(err, errlen, "bad --%s '%s': not a whole number%s", name, val,
			    size ? " (with an optional K, M, G or T)" : "");
	if (rc)
		return fail(err, errlen, "bad --%s '%s': must be from %llu to %llu%s", name, val,
			    (unsigned long long)min, (unsigned long long)max, size ? " bytes" : "");
	return CLI_OK;
}

/* A string of the config, its own copy of fewer than `max` bytes. */
static enum cli_result set(const char **field, size_t max, const char *name, const char *val,
			   char *err, size_t errlen)
{
	int rc = config_set(field, val, max);

	if (rc == -ENAMETOOLONG)
		return fail(err, errlen, "--%s is longer than %zu bytes", name, max - 1);
	if (rc)
		return fail(err, errlen, "out of memory");
	return CLI_OK;
}
#define SET_PATH(field, name, val) set(&(field), CONFIG_PATH_MAX, name, val, err, errlen)
#define SET_CMDLINE(field, name, val) set(&(field), CONFIG_CMDLINE_MAX, name, val, err, errlen)

/* One of the config's small inline strings (its id, the vsock path). */
static enum cli_result set_inline(char *field, size_t cap, const char *name, const char *val,
				  char *err, size_t errlen)
{
	size_t n = strlen(val);

	if (n >= cap)
		return fail(err, errlen, "--%s is longer than %zu bytes", name, cap - 1);
	memcpy(field, val, n + 1);
	return CLI_OK;
}
#define SET_INLINE(field, name, val) set_inline(field, sizeof(field), name, val, err, errlen)

static enum cli_result nonempty(const char **field, const char *name, const char *val, char *err,
				size_t errlen)
{
	if (!*val)
		return fail(err, errlen, "--%s needs a value", name);
	*field = val;
	return CLI_OK;
}

/* --disk PATH[,ro|,rw]: a comma is only ever the option's. */
static enum cli_result add_disk(struct vm_config *vm, const char *val, char *err, size_t errlen)
{
	const char *comma = strchr(val, ',');
	size_t len = comma ? (size_t)(comma - val) : strlen(val);
	struct disk_config *d;
	char *path;

	if (vm->nr_disks >= CONFIG_MAX_DISKS)
		return fail(err, errlen, "at most %d disks, the rootfs included", CONFIG_MAX_DISKS);
	if (!len || (comma && strcmp(comma, ",ro") && strcmp(comma, ",rw")))
		return fail(err, errlen, "bad --disk '%s': want PATH, PATH,ro or PATH,rw", val);
	d = &vm->disks[vm->nr_disks];
	if (len >= CONFIG_PATH_MAX)
		return fail(err, errlen, "--disk is longer than %d bytes", CONFIG_PATH_MAX - 1);
	path = strndup(val, len);
	if (!path || CONFIG_SET_PATH(d->path, path)) {
		free(path);
		return fail(err, errlen, "out of memory");
	}
	free(path);
	d->read_only = comma && !strcmp(comma, ",ro");
	vm->nr_disks++;
	return CLI_OK;
}

/* --user UID[:GID], numbers only: the host cannot read the guest's names. */
static enum cli_result set_user(struct run_opts *r, const char *val, char *err, size_t errlen)
{
	const char *colon = strchr(val, ':');
	size_t len = colon ? (size_t)(colon - val) : strlen(val);
	char uid[16];
	uint64_t n;

	if (len >= sizeof(uid))
		return fail(err, errlen, "bad --user '%s': want UID or UID:GID", val);
	memcpy(uid, val, len);
	uid[len] = '\0';
	/* (uint32_t)-1 is setuid's "unchanged": never an id. */
	if (number("user", uid, 0, 0xfffffffeULL, false, &n, err, errlen))
		return CLI_ERROR;
	r->uid = (uint32_t)n;
	r->gid = 0;
	if (colon) {
		if (number("user", colon + 1, 0, 0xfffffffeULL, false, &n, err, errlen))
			return CLI_ERROR;
		r->gid = (uint32_t)n;
	}
	r->has_user = true;
	return CLI_OK;
}

/* Split "A:B" at the first (--get: GUEST:LOCAL) or last (--put:
 * LOCAL:GUEST) colon; both halves non-empty, the guest half absolute. */
static enum cli_result add_file(struct run_opts *r, bool get, char *val, char *err, size_t errlen)
{
	int *cnt = get ? &r->nget : &r->nput;
	struct run_file *f = get ? &r->gets[*cnt] : &r->puts[*cnt];
	char *colon = get ? strchr(val, ':') : strrchr(val, ':');

	if (*cnt >= RUN_MAX_FILES)
		return fail(err, errlen, "at most %d --%s", RUN_MAX_FILES, get ? "get" : "put");
	if (!colon || colon == val || !colon[1] || (get ? val : colon + 1)[0] != '/')
		return fail(err, errlen, "bad --%s '%s': want %s with an absolute guest path",
			    get ? "get" : "put", val, get ? "GUEST:LOCAL" : "LOCAL:GUEST");
	*colon = '\0';
	f->guest = get ? val : colon + 1;
	f->local = get ? colon + 1 : val;
	(*cnt)++;
	return CLI_OK;
}

/* bench --mode: sequential, staggered:MS or burst:N. */
static enum cli_result bench_mode(struct cli *c, const char *val, char *err, size_t errlen)
{
	const char *colon = strchr(val, ':');
	uint64_t n;

	if (!strcmp(val, "sequential")) {
		c->bench.mode = BENCH_SEQUENTIAL;
		return CLI_OK;
	}
	if (colon && colon - val == 9 && !strncmp(val, "staggered", 9)) {
		if (number("mode staggered:MS", colon + 1, 1, 3600 * 1000, false, &n, err, errlen))
			return CLI_ERROR;
		c->bench.mode = BENCH_STAGGERED;
	} else if (colon && colon - val == 5 && !strncmp(val, "burst", 5)) {
		if (number("mode burst:N", colon + 1, 1, BENCH_MAX_ACTIVE, false, &n, err, errlen))
			return CLI_ERROR;
		c->bench.mode = BENCH_BURST;
	} else {
		return fail(err, errlen, "bad --mode '%s': want sequential, staggered:MS or burst:N", val);
	}
	c->bench.mode_arg = (unsigned)n;
	return CLI_OK;
}

/* bench: a VM option (one run takes too) is passed on to each run. */
static enum cli_result forward(struct cli *c, int id, char *val, char *err, size_t errlen)
{
	for (size_t i = 0; i < NR_OPTIONS; i++) {
		const struct cli_option *o = &options[i];

		if (o->id != id || !(o->cmds & C_BENCH) || !(o->cmds & C_RUN) || id == O_VERBOSE)
			continue;
		if (c->bench.nforward >= CLI_MAX_FORWARD)
			return fail(err, errlen, "at most %d options for mayfly bench", CLI_MAX_FORWARD);
		c->bench.forward[c->bench.nforward][0] = o->name;
		c->bench.forward[c->bench.nforward++][1] = o->arg ? val : NULL;
		break;
	}
	return CLI_OK;
}

static enum cli_result apply(struct cli *c, enum cli_cmd cmd, int id, char *val, char *err,
			     size_t errlen)
{
	struct vm_config *vm = &c->vm;
	struct run_opts *r = &c->run;
	uint64_t n = 0;

	switch (id) {
	case O_KERNEL:
		c->kernel_given = true;
		return SET_PATH(vm->kernel, "kernel", val);
	case O_SNAPSHOT:
		if (!*val)
			return fail(err, errlen, "--snapshot needs a directory");
		c->snapshot = val;
		return CLI_OK;
	case O_COLD: c->cold = true; return CLI_OK;
	case O_NO_SECCOMP: c->no_seccomp = true; return CLI_OK;
	case O_OUT:
		if (!*val)
			return fail(err, errlen, "--out needs a directory");
		c->out = val;
		return CLI_OK;
	case O_SETUP:
		if (c->nsetup >= CLI_MAX_SETUP)
			return fail(err, errlen, "at most %d --setup", CLI_MAX_SETUP);
		c->setups[c->nsetup++] = val;
		return CLI_OK;
	case O_INITRD: return SET_PATH(vm->initrd, "initrd", val);
	case O_CMDLINE: return SET_CMDLINE(vm->cmdline, "cmdline", val);
	case O_CMDLINE_APPEND: return SET_CMDLINE(vm->cmdline_append, "cmdline-append", val);
	case O_INIT_CMD: return SET_CMDLINE(vm->init_cmd, "init-cmd", val);
	case O_ROOTFS:
		if (!*val)
			return fail(err, errlen, "--rootfs needs an image path");
		c->rootfs_given = true;
		return SET_PATH(vm->rootfs, "rootfs", val);
	case O_DISK: return add_disk(vm, val, err, errlen);
	case O_SPARE_DISKS:
		if (number("spare-disks", val, 0, CONFIG_MAX_DISKS - 1, false, &n, err, errlen))
			return CLI_ERROR;
		vm->spare_disks = (unsigned)n;
		c->spare_given = true;
		return CLI_OK;
	case O_MEM:
		if (number("mem", val, 1, CONFIG_MAX_MEM_MIB, false, &vm->mem_mib, err, errlen))
			return CLI_ERROR;
		c->mem_given = true;
		return CLI_OK;
	case O_CPUS:
		if (number("cpus", val, 1, CONFIG_MAX_CPUS, false, &n, err, errlen))
			return CLI_ERROR;
		vm->cpus = (unsigned)n;
		c->cpus_given = true;
		return CLI_OK;
	case O_CONSOLE: vm->console = true; return CLI_OK;
	case O_ID:
		if (!config_id_valid(val))
			return fail(err, errlen, "bad --id '%s': 1-32 of [A-Za-z0-9._-]", val);
		return SET_INLINE(vm->id, "id", val);
	case O_KVM_DEVICE: return SET_PATH(vm->kvm_device, "kvm-device", val);
	case O_VSOCK:
		if (!*val || strlen(val) > CONFIG_VSOCK_PATH_MAX)
			return fail(err, errlen, "--vsock needs a socket path of 1-%d bytes",
				    CONFIG_VSOCK_PATH_MAX);
		if (cmd != CLI_BOOT) {
			r->vsock = val;
			return CLI_OK;
		}
		vm->vsock = true;
		return SET_INLINE(vm->vsock_path, "vsock", val);
	case O_TIMEOUT:
		if (number("timeout", val, 1, RUN_MAX_TIMEOUT_S, false, &n, err, errlen))
			return CLI_ERROR;
		r->timeout_s = (unsigned)n;
		return CLI_OK;
	case O_CALL_TIMEOUT:
		if (number("call-timeout", val, 1, RUN_MAX_TIMEOUT_S, false, &n, err, errlen))
			return CLI_ERROR;
		r->call_timeout_s = (unsigned)n;
		return CLI_OK;
	case O_MAX_GET:
		return number("max-get-bytes", val, 1, 1ULL << 50, true, &r->max_get_bytes, err,
			      errlen);
	case O_MAX_OUTPUT:
		return number("max-output", val, 1, 1ULL << 50, true, &r->max_output, err, errlen);
	case O_ENV:
		if (!strchr(val, '=') || val[0] == '=')
			return fail(err, errlen, "bad --env '%s': want KEY=VALUE", val);
		if (r->nenv >= RUN_MAX_ENV)
			return fail(err, errlen, "at most %d --env", RUN_MAX_ENV);
		r->env[r->nenv++] = val;
		return CLI_OK;
	case O_CWD: r->cwd = val; return CLI_OK;
	case O_ROOT:
		if (!proto_path_canonical(val))
			return fail(err, errlen, "bad --root '%s': want an absolute guest path without "
				    "'.', '..', '//' or a '/' at the end", val);
		r->root = val;
		return CLI_OK;
	case O_USER: return set_user(r, val, err, errlen);
	case O_STDIN: r->stdin_path = val; return CLI_OK;
	case O_PUT: return add_file(r, false, val, err, errlen);
	case O_GET: return add_file(r, true, val, err, errlen);
	case O_TTY: r->tty = true; return CLI_OK;
	case O_JSON: r->json = true; return CLI_OK;
	case O_AUDIT: return nonempty(&r->audit_path, "audit", val, err, errlen);
	case O_APPROVE: return nonempty(&r->approve_cmd, "approve", val, err, errlen);
	case O_APPROVE_TIMEOUT:
		if (number("approve-timeout", val, 1, APPROVE_MAX_TIMEOUT_S, false, &n, err, errlen))
			return CLI_ERROR;
		r->approve_timeout_s = (unsigned)n;
		return CLI_OK;
	case O_HEAD:
		if (strlen(val) != 64 || strspn(val, "0123456789abcdef") != 64)
			return fail(err, errlen, "bad --head '%s': want 64 lowercase hex digits", val);
		c->audit_head = val;
		return CLI_OK;
	case O_DISK_QUOTA:
		return number("disk-quota", val, 4096, 1ULL << 50, true, &vm->disk_quota, err, errlen);
	case O_NO_JAIL: c->jail.disabled = true; return CLI_OK;
	case O_DETACHED: c->jail.detached = true; return CLI_OK;
	case O_TIMINGS: return nonempty(&c->timings, "timings", val, err, errlen);
	case O_UID:
	case O_GID:
		/* 0 is root; (uid_t)-1 means "unchanged" to setresuid. */
		if (number(id == O_UID ? "uid" : "gid", val, 1, 0xfffffffeULL, false, &n, err, errlen))
			return CLI_ERROR;
		if (id == O_UID)
			c->jail.uid = (uid_t)n;
		else
			c->jail.gid = (gid_t)n;
		return CLI_OK;
	case O_CPU_QUOTA:
		if (number("cpu-quota", val, 1, JAIL_MAX_CPU_PCT, false, &n, err, errlen))
			return CLI_ERROR;
		c->jail.cpu_pct = (unsigned)n;
		return CLI_OK;
	case O_ALLOW_NET:
		return net_policy_add_rule(&c->net, val, err, errlen) ? CLI_ERROR : CLI_OK;
	case O_RESOLVE:
		return net_policy_add_resolve(&c->net, val, err, errlen) ? CLI_ERROR : CLI_OK;
	case O_SOCKET: return nonempty(&c->serve.socket, "socket", val, err, errlen);
	case O_LISTEN: return nonempty(&c->serve.listen, "listen", val, err, errlen);
	case O_E2B: return nonempty(&c->serve.e2b, "e2b", val, err, errlen);
	case O_E2B_DOMAIN: return nonempty(&c->serve.e2b_domain, "e2b-domain", val, err, errlen);
	case O_E2B_CERT: return nonempty(&c->serve.e2b_cert, "e2b-cert", val, err, errlen);
	case O_E2B_KEY: return nonempty(&c->serve.e2b_key, "e2b-key", val, err, errlen);
	case O_TOKENS: return nonempty(&c->serve.tokens, "tokens", val, err, errlen);
	case O_STATE: return nonempty(&c->serve.state, "state", val, err, errlen);
	case O_EPHEMERAL: c->serve.ephemeral = true; return CLI_OK;
	case O_POOL:
		if (number("pool", val, 0, 64, false, &n, err, errlen))
			return CLI_ERROR;
		c->serve.pool = (unsigned)n;
		return CLI_OK;
	case O_TEMPLATE: {
		const char *eq = strchr(val, '=');
		size_t len = eq ? (size_t)(eq - val) : 0;

		if (!eq || !len || len > 32 || strspn(val, "abcdefghijklmnopqrstuvwxyz0123456789_-") != len ||
		    !eq[1])
			return fail(err, errlen, "--template %s: want NAME=DIR, NAME of a-z, 0-9, _ and - "
				    "(at most 32)", val);
		if (len == 7 && !strncmp(val, "default", 7))
			return fail(err, errlen, "--template: the name 'default' is the default "
				    "template's (--snapshot DIR)");
		if (c->serve.ntemplates >= CLI_MAX_TEMPLATES)
			return fail(err, errlen, "at most %d --template", CLI_MAX_TEMPLATES);
		c->serve.templates[c->serve.ntemplates++] = val;
		return CLI_OK;
	}
	case O_RUNS:
		if (number("runs", val, 1, BENCH_MAX_RUNS, false, &n, err, errlen))
			return CLI_ERROR;
		c->bench.runs = (unsigned)n;
		return CLI_OK;
	case O_WARMUP:
		if (number("warmup", val, 0, 1000, false, &n, err, errlen))
			return CLI_ERROR;
		c->bench.warmup = (unsigned)n;
		return CLI_OK;
	case O_MODE:
		return bench_mode(c, val, err, errlen);
	case O_COUNT:
		if (number("count", val, 1, DENSITY_MAX_VMS, false, &n, err, errlen))
			return CLI_ERROR;
		c->bench.count = (unsigned)n;
		return CLI_OK;
	case O_BENCH_JSON: return nonempty(&c->bench.json, "json", val, err, errlen);
	case O_SVG: return nonempty(&c->bench.svg, "svg", val, err, errlen);
	case O_MAX_SANDBOXES:
		if (number("max-sandboxes", val, 1, 1024, false, &n, err, errlen))
			return CLI_ERROR;
		c->serve.max_sandboxes = (unsigned)n;
		return CLI_OK;
	case O_MEMORY_RESERVE:
		if (number("memory-reserve", val, 0, 1 << 24, false, &n, err, errlen))
			return CLI_ERROR;
		c->serve.memory_reserve_mib = (unsigned)n;
		return CLI_OK;
	case O_VERBOSE:
		if (vm->log_level < LOG_DEBUG)
			vm->log_level++;
		c->verbose++;
		return CLI_OK;
	}
	return fail(err, errlen, "internal: option %d has no handler", id);
}

/* Which option a failed getopt_long call was about, for the message. */
static const char *offender(char **argv, int index, char *buf, size_t len)
{
	const char *arg = argv[index];
	const char *eq = strchr(arg, '=');

	snprintf(buf, len, "%.*s", eq ? (int)(eq - arg) : (int)strlen(arg), arg);
	return buf;
}

static void defaults(struct cli *c)
{
	config_free(&c->vm);          /* an earlier parse's */
	sparse_zero(c, sizeof(*c));   /* large (net_policy's tables), mostly zero: sparse.h */
	config_init(&c->vm);
	jail_config_init(&c->jail);
	c->run.call_timeout_s = RUN_DEFAULT_CALL_TIMEOUT_S;
	c->run.max_get_bytes = RUN_DEFAULT_MAX_GET_BYTES;
	c->run.max_output = RUN_DEFAULT_MAX_OUTPUT;
	c->run.approve_timeout_s = APPROVE_DEFAULT_TIMEOUT_S;
	c->serve.max_sandboxes = 64;
	c->serve.memory_reserve_mib = 256;
	c->bench.runs = 10;
	c->bench.warmup = 1;
	c->bench.count = 10;
}

void cli_free(struct cli *c)
{
	config_free(&c->vm);
}

enum cli_result cli_parse(struct cli *c, enum cli_cmd cmd, int argc, char **argv, char *err,
			  size_t errlen)
{
	static const char *const names[CLI_NR_CMDS] = { "boot", "run", "exec", "cp",
							 "snapshot create", "mcp", "audit", "pause",
							 "fork", "serve", "bench", "bench compare" };
	struct option longopts[NR_OPTIONS + 1];
	size_t n = 0;
	char what[64];
	int id;

	defaults(c);
	for (size_t i = 0; i < NR_OPTIONS; i++)
		if (options[i].cmds & (1u << cmd))
			longopts[n++] = (struct option){ options[i].name,
							 options[i].arg ? required_argument : no_argument,
							 NULL, options[i].id };
	longopts[n] = (struct option){ 0 };

	/* "+": the command starts at the first argument that is not an
	 * option; ":": a missing value is reported apart from an unknown
	 * option; opterr 0: every message is ours, one line. optind 0 makes
	 * glibc start afresh (tests parse many times in one process). */
	opterr = 0;
	optind = 0;
	while ((id = getopt_long(argc, argv, "+:hv", longopts, NULL)) != -1) {
		if (id == '?') {
			if (optopt && optopt != '?' && strchr(argv[optind - 1], '='))
				return fail(err, errlen, "option %s takes no value",
					    offender(argv, optind - 1, what, sizeof(what)));
			if (optopt && optopt < 256)
				return fail(err, errlen, "unknown option '-%c' (see mayfly %s --help)",
					    optopt, names[cmd]);
			return fail(err, errlen, "unknown option '%s' (see mayfly %s --help)",
				    offender(argv, optind - 1, what, sizeof(what)), names[cmd]);
		}
		if (id == ':')
			return fail(err, errlen, "option %s needs a value",
				    offender(argv, optind - 1, what, sizeof(what)));
		if (id == O_HELP)
			return CLI_HELP;
		if (apply(c, cmd, id, optarg, err, errlen))
			return CLI_ERROR;
		if (cmd == CLI_BENCH && forward(c, id, optarg, err, errlen))
			return CLI_ERROR;
	}
	c->run.argv = argv + optind;
	c->run.argc = argc - optind;
	switch (cmd) {
	case CLI_BOOT:
	case CLI_MCP:
	case CLI_SERVE:
		if (c->run.argc)
			return fail(err, errlen, "unexpected argument '%s' (see mayfly %s --help)",
				    argv[optind], names[cmd]);
		break;
	case CLI_AUDIT:
		/* argv[0] is "verify" (audit_cmd.c checked), the flags follow it. */
		if (c->run.argc != 1)
			return fail(err, errlen, "usage: mayfly audit verify [--head HASH] FILE");
		break;
	case CLI_BENCH:
		break;   /* CMD is optional: true */
	case CLI_COMPARE:
		if (c->run.argc != 2)
			return fail(err, errlen, "mayfly bench compare takes two files: A.json B.json");
		break;
	case CLI_CP:
		if (c->run.argc != 2)
			return fail(err, errlen, "mayfly cp takes SRC and DST, one of them :GUEST_PATH");
		break;
	case CLI_PAUSE:
	case CLI_FORK:
		if (c->run.argc)
			return fail(err, errlen, "unexpected argument '%s' (see mayfly %s --help)",
				    argv[optind], names[cmd]);
		if (!c->run.vsock || !c->out)
			return fail(err, errlen, "--vsock PATH and --out DIR are required");
		break;
	case CLI_SNAPSHOT:
		if (c->run.argc)
			return fail(err, errlen, "unexpected argument '%s' (see mayfly snapshot create "
				    "--help)", argv[optind]);
		if (!c->out)
			return fail(err, errlen, "--out DIR is required");
		break;
	default:
		if (c->run.argc < 1)
			return fail(err, errlen, "no command given (mayfly %s [options] -- CMD [ARG...])",
				    names[cmd]);
	}
	if ((cmd == CLI_EXEC || cmd == CLI_CP) && !c->run.vsock)
		return fail(err, errlen, "--vsock PATH is required (the socket of a VM started "
			    "with mayfly boot --vsock PATH)");
	if (c->run.approve_timeout_s != APPROVE_DEFAULT_TIMEOUT_S && !c->run.approve_cmd)
		return fail(err, errlen, "--approve-timeout goes with --approve CMD");
	if (c->run.has_user && !c->run.root)
		return fail(err, errlen, "--user goes with --root DIR (--root / for the guest's own root)");
	if (c->snapshot && c->cold)
		return fail(err, errlen, "--snapshot and --cold exclude each other");
	if (c->snapshot && (c->vm.initrd[0] || c->vm.cmdline[0] || c->vm.cmdline_append[0] ||
			    c->vm.init_cmd[0] || c->vm.nr_disks))
		return fail(err, errlen, "--snapshot restores a VM whole: no --initrd, --cmdline, "
			    "--cmdline-append, --init-cmd or --disk with it");
	if (c->vm.nr_disks + (c->vm.rootfs[0] ? 1 : 0) > CONFIG_MAX_DISKS)
		return fail(err, errlen, "at most %d disks, the rootfs included", CONFIG_MAX_DISKS);
	if (c->net.nr_resolves && !c->net.nr_rules)
		return fail(err, errlen, "--resolve goes with --allow-net RULE");
	if (cmd == CLI_BOOT && c->net.nr_rules && !c->vm.vsock && !c->snapshot)
		return fail(err, errlen, "--allow-net needs --vsock PATH: the guest agent serves the proxy");
	return CLI_OK;
}

int cli_parse_or_exit(struct cli *c, enum cli_cmd cmd, int argc, char **argv, int error_code)
{
	char err[256];

	switch (cli_parse(c, cmd, argc, argv, err, sizeof(err))) {
	case CLI_HELP:
		cli_usage(cmd, stdout);
		return 0;
	case CLI_ERROR:
		log_say("%s", err);
		return error_code;
	case CLI_OK:
		break;
	}
	return -1;
}
