/* main.c - mayfly's entry point: command line -> typed request -> build the VM -> run it -> exit code. */
#include "clock.h"
#include "cli.h"
#include "exitcode.h"
#include "guest_files.h"
#include "log.h"
#include "vm.h"
#include "restore.h"
#include "seccomp/seccomp.h"
#include "jail/jail.h"
#include "agent/run.h"
#include "audit.h"
#include "agent/audit_cmd.h"
#include "agent/mcp_cmd.h"
#include "agent/snapshot_cmd.h"
#include "agent/vm_agent.h"
#include "serve/serve_cmd.h"
#include "control/ctl_client.h"
#include "control/ctl_server.h"

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
	"\n"
	"Exit codes: 0 guest reset or powered off, 1 internal error, 2 bad usage,\n"
	"3 bad kernel or initrd, 4 no usable /dev/kvm, 5 KVM lacks a capability,\n"
	"6 guest triple fault, 7 KVM error, 8 guest panic, 128+N killed by signal N;\n"
	"boot --init-cmd: the command's status (0-255) when the guest reboots after it.\n"
	"run, exec: the command's code; 123 refused by --approve, 124 timeout, 125 mayfly or VM failure,\n"
	"126 agent failure or cannot run, 127 not found (see mayfly run --help).\n";

/* A VM driven by a thread of ours through its agent, then the console as
 * with a plain cold boot: boot --snapshot (the agent freshened: its clock
 * and entropy are this run's before anyone else connects) and boot
 * --allow-net (the agent told to serve the proxy). snap NULL: cold. */
static int boot_with_agent(struct cli *c, const struct vm_config *cfg, const struct snapshot *snap,
			   uint64_t start_ns)
{
	struct vm_agent *va = calloc(1, sizeof(*va));   /* large: the client's buffers */
	struct audit_log audit;
	struct ctl_server ctl;
	struct net_run net;
	struct jail jail;
	char err[300];
	int rc;

	if (!va) {
		log_say("out of memory");
		return EXIT_INTERNAL;
	}
	va->cancel_fd = -1;
	va->keep_running = true;
	va->jail = &jail;
	va->net = &net;
	/* --audit: the connection attempts (exec and cp are other processes,
	 * with logs of their own). Opened before the jail, as the caller. */
	if (c->run.audit_path && audit_open(&audit, c->run.audit_path, err, sizeof(err))) {
		log_say("%s", err);
		free(va);
		return EXIT_INTERNAL;
	}
	/* The broker before the jail: it keeps the host's network. */
	if (net_run_start(&net, &c->net, c->jail.uid, c->jail.gid)) {
		if (c->run.audit_path)
			audit_close(&audit);
		free(va);
		return EXIT_INTERNAL;
	}
	net.audit_log = c->run.audit_path ? &audit : NULL;
	/* The supervisor built nothing: only the VM process destroys a VM. */
	if (jail_start(&jail, &c->jail, cfg, EXIT_INTERNAL, &rc) == JAIL_VM) {
		/* --vsock PATH: mayfly pause and fork talk to PATH.ctl. */
		if (ctl_server_open(&ctl, cfg, snap)) {
			rc = EXIT_INTERNAL;
		} else {
			va->ctl = &ctl;
			rc = vm_agent_run(va, cfg, snap, start_ns);
		}
		ctl_server_stop(&ctl);
		vm_agent_destroy(va);
	}
	net_run_stop(&net);
	if (c->run.audit_path)
		audit_close(&audit);
	free(va);
	return rc;
}

static int boot_restored(struct cli *c, uint64_t start_ns)
{
	struct restore_given given = { c->mem_given, c->cpus_given, c->kernel_given, c->rootfs_given };
	struct vm_config cfg;
	struct snapshot snap;
	const char *why = "";
	int rc = restore_prepare(&snap, c->snapshot, &c->vm, &given, &cfg, &why);

	if (rc) {
		log_say("cannot restore '%s': %s", c->snapshot, why);
		return rc == -EINVAL ? EXIT_USAGE : EXIT_BAD_IMAGE;
	}
	rc = boot_with_agent(c, &cfg, &snap, start_ns);
	snapshot_free(&snap);
	return rc;
}

static int cmd_boot(struct cli *c, int argc, char **argv, uint64_t start_ns)
{
	struct ctl_server ctl;
	struct jail jail;
	struct vm vm;
	char err[256];
	int code;

	code = cli_parse_or_exit(c, CLI_BOOT, argc, argv, EXIT_USAGE);
	if (code >= 0)
		return code;
	log_init(c->vm.id, c->vm.log_level);
	if (seccomp_setup(c->no_seccomp))
		return EXIT_INTERNAL;
	if (c->snapshot)
		return boot_restored(c, start_ns);
	if (guest_files_resolve(&c->vm, err, sizeof(err))) {
		log_say("%s", err);
		return EXIT_BAD_IMAGE;
	}
	if (net_enabled(&c->net))
		return boot_with_agent(c, &c->vm, NULL, start_ns);
	if (jail_start(&jail, &c->jail, &c->vm, EXIT_INTERNAL, &code) == JAIL_SUPERVISOR_DONE)
		return code;
	/* --vsock PATH: mayfly pause and fork talk to PATH.ctl. */
	if (ctl_server_open(&ctl, &c->vm, NULL)) {
		ctl_server_stop(&ctl);
		return EXIT_INTERNAL;
	}
	code = vm_build(&vm, &c->vm, NULL, start_ns);
	if (code == 0)
		code = jail_enter(&jail, &c->vm);
	if (code == 0 && ctl_server_start(&ctl, &vm))
		code = EXIT_INTERNAL;
	if (code == 0)
		code = vm_run(&vm);
	ctl_server_stop(&ctl);
	vm_destroy(&vm);
	return code;
}

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
#ifdef MAYFLY_SECCOMP_SELFTEST
	/* mayfly-selftest only (tests/seccomp): the thread of this role makes
	 * one forbidden system call once its filter is in. */
	for (int r = 0; getenv("MAYFLY_SECCOMP_SELFTEST") && seccomp_role_name(r); r++)
		if (!strcmp(getenv("MAYFLY_SECCOMP_SELFTEST"), seccomp_role_name(r)))
			seccomp_selftest(r);
#endif
	/* Large (every path of a VM config) and mostly zero: fresh pages of
	 * our own are written only where an option lands (sparse.h). Not
	 * calloc: from the heap's top it clears what it hands out. */
	c = mmap(NULL, sizeof(*c), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (c == MAP_FAILED) {
		log_say("out of memory");
		return EXIT_INTERNAL;
	}
	code = dispatch(c, argc, argv, start_ns);
	munmap(c, sizeof(*c));
	return code;
}
