/* main.c - mayfly's entry point: command line -> configuration -> build the VM -> run it -> exit code. */
#include "clock.h"
#include "config.h"
#include "exitcode.h"
#include "log.h"
#include "vm.h"
#include "agent/run.h"

#include <stdio.h>
#include <string.h>

static const char usage[] =
	"usage: mayfly <command> [options]\n"
	"\n"
	"commands:\n"
	"  boot     boot a microVM from a kernel (see mayfly boot --help)\n"
	"  run      run a command in a fresh microVM and stream its output back\n"
	"  exec     run a command in a VM started with boot --vsock\n"
	"  cp       copy a file into or out of such a VM\n"
	"\n"
	"Exit codes: 0 guest reset or powered off, 1 internal error, 2 bad usage,\n"
	"3 bad kernel or initrd, 4 no usable /dev/kvm, 5 KVM lacks a capability,\n"
	"6 guest triple fault, 7 KVM error, 8 guest panic, 128+N killed by signal N.\n"
	"run, exec: the command's code; 124 timeout, 125 mayfly or VM failure,\n"
	"126 agent failure or cannot run, 127 not found (see mayfly run --help).\n";

static int cmd_boot(int argc, char **argv, uint64_t start_ns)
{
	struct vm_config cfg;
	struct vm vm;
	char err[256];
	int code;

	switch (config_parse(&cfg, argc, argv, err, sizeof(err))) {
	case CONFIG_HELP:
		fputs(config_usage, stdout);
		return 0;
	case CONFIG_ERROR:
		fprintf(stderr, "mayfly: %s\n", err);
		return EXIT_USAGE;
	case CONFIG_OK:
		break;
	}
	if (config_resolve_defaults(&cfg, err, sizeof(err)) != CONFIG_OK) {
		fprintf(stderr, "mayfly: %s\n", err);
		return EXIT_BAD_IMAGE;
	}
	log_init(cfg.id, cfg.log_level);
	code = vm_build(&vm, &cfg, start_ns);
	if (code == 0)
		code = vm_run(&vm);
	vm_destroy(&vm);
	return code;
}

int main(int argc, char **argv)
{
	uint64_t start_ns = clock_now_ns();

	if (argc < 2) {
		fputs("mayfly: missing command (try mayfly --help)\n", stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		fputs(usage, stdout);
		return 0;
	}
	if (!strcmp(argv[1], "boot"))
		return cmd_boot(argc - 2, argv + 2, start_ns);
	if (!strcmp(argv[1], "run"))
		return cmd_run(argc - 2, argv + 2, start_ns);
	if (!strcmp(argv[1], "exec"))
		return cmd_exec(argc - 2, argv + 2);
	if (!strcmp(argv[1], "cp"))
		return cmd_cp(argc - 2, argv + 2);
	fprintf(stderr, "mayfly: unknown command '%s' (try mayfly --help)\n", argv[1]);
	return EXIT_USAGE;
}
