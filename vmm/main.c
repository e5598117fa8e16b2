/* main.c - mayfly's entry point: command line -> typed request -> build the VM -> run it -> exit code. */
#include "cmd/audit.h"
#include "cmd/bench.h"
#include "cmd/boot.h"
#include "cmd/cli.h"
#include "cmd/ctl.h"
#include "cmd/mcp.h"
#include "cmd/run.h"
#include "cmd/snapshot.h"
#include "lib/clock.h"
#include "lib/exitcode.h"
#include "lib/log.h"
#include "seccomp/seccomp.h"
#include "serve/serve_cmd.h"
#include "version.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static const char usage[] =
	"usage: mayfly <command> [options]\n"
	"\n"
	"commands:\n"
	"  boot     boot a microVM from a kernel (see mayfly boot --help)\n"
	"  run      run a command in a fresh microVM and stream its output back\n"
	"  exec     run a command in a VM started with boot --vsock\n"
	"  cp       copy a file into or out of such a VM\n"
	"  snapshot create   save an agent-ready VM for run/boot --snapshot\n"
	"  pause    save a boot --vsock VM into a snapshot and end it\n"
	"  fork     save a boot --vsock VM into a snapshot, it goes on running\n"
	"  mcp      a Model Context Protocol server on stdio, one VM per session\n"
	"  audit verify      check an audit log's hash chain (run/mcp --audit)\n"
	"  serve    an HTTP API for many sandboxes (docs/openapi.yaml)\n"
	"  bench    boot, restore and run latency per phase; bench compare A B\n"
	"\n"
	"Exit codes: 0 guest reset or powered off, 1 internal error, 2 bad usage,\n"
	"3 bad kernel or initrd, 4 no usable /dev/kvm, 5 KVM lacks a capability,\n"
	"6 guest triple fault, 7 KVM error, 8 guest panic, 128+N killed by signal N;\n"
	"boot --init-cmd: the command's status (0-255) when the guest reboots after it.\n"
	"run, exec: the command's code; 123 refused by --approve, 124 timeout, 125 mayfly or VM failure,\n"
	"126 agent failure or cannot run, 127 not found (see mayfly run --help).\n"
	"Every command's codes: docs/exit-codes.md.\n"
	"\n"
	"mayfly --version: the version, the commit and how it was built.\n";

static int dispatch(struct cli *c, int argc, char **argv, uint64_t start_ns)
{
	const char *cmd = argv[1];

	if (!strcmp(cmd, "boot"))
		return cmd_boot(c, argc - 1, argv + 1, start_ns);
	if (!strcmp(cmd, "run"))
		return cmd_run(c, argc - 1, argv + 1, start_ns);
	if (!strcmp(cmd, "exec"))
		return cmd_exec(c, argc - 1, argv + 1);
	if (!strcmp(cmd, "cp"))
		return cmd_cp(c, argc - 1, argv + 1);
	if (!strcmp(cmd, "snapshot"))
		return cmd_snapshot(c, argc - 1, argv + 1, start_ns);
	if (!strcmp(cmd, "mcp"))
		return cmd_mcp(c, argc - 1, argv + 1, start_ns);
	if (!strcmp(cmd, "audit"))
		return cmd_audit(c, argc - 1, argv + 1);
	if (!strcmp(cmd, "pause") || !strcmp(cmd, "fork"))
		return cmd_ctl(c, argc - 1, argv + 1, !strcmp(cmd, "fork"));
	if (!strcmp(cmd, "serve"))
		return cmd_serve(c, argc - 1, argv + 1, start_ns);
	if (!strcmp(cmd, "bench"))
		return cmd_bench(c, argc - 1, argv + 1, MAYFLY_VERSION " (commit " MAYFLY_COMMIT ")");
	log_say("unknown command '%s' (try mayfly --help)", cmd);
	return EXIT_USAGE;
}

int main(int argc, char **argv)
{
	uint64_t start_ns = clock_now_ns();
	struct cli *c;
	int code;

	if (argc < 2) {
		fputs("mayfly: missing command (try mayfly --help)\n", stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		fputs(usage, stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		printf("mayfly %s (commit %s, %s build)\n", MAYFLY_VERSION, MAYFLY_COMMIT, MAYFLY_BUILD);
		return 0;
	}
#ifdef MAYFLY_SECCOMP_SELFTEST
	/* mayfly-selftest only (tests/seccomp): the thread of this role makes
	 * one forbidden system call once its filter is in. */
	for (int r = 0; getenv("MAYFLY_SECCOMP_SELFTEST") && seccomp_role_name(r); r++)
		if (!strcmp(getenv("MAYFLY_SECCOMP_SELFTEST"), seccomp_role_name(r)))
			seccomp_selftest(r);
#endif
	/* Large (the network policy's tables) and mostly zero: fresh pages
	 * of our own are written only where an option lands (sparse.h). Not
	 * calloc: from the heap's top it clears what it hands out. */
	c = mmap(NULL, sizeof(*c), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (c == MAP_FAILED) {
		log_say("out of memory");
		return EXIT_INTERNAL;
	}
	code = dispatch(c, argc, argv, start_ns);
	cli_free(c);
	munmap(c, sizeof(*c));
	return code;
}
