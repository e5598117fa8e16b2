/* snapshot.c - mayfly snapshot create: an agent-ready VM saved for run and boot --snapshot. */
#include "cmd/snapshot.h"
#include "launch/guest_files.h"
#include "launch/snapshot_make.h"
#include "lib/exitcode.h"
#include "lib/log.h"
#include "seccomp/seccomp.h"

#include <string.h>

int cmd_snapshot(struct cli *c, int argc, char **argv, uint64_t start_ns)
{
	int code;

	if (argc < 2 || strcmp(argv[1], "create")) {
		log_say("usage: mayfly snapshot create [options] --out DIR (see mayfly snapshot "
			"create --help)");
		return RUN_EXIT_MAYFLY;
	}
	code = cli_parse_or_exit(c, CLI_SNAPSHOT, argc - 1, argv + 1, RUN_EXIT_MAYFLY);
	if (code >= 0)
		return code;
	code = agent_vm_config(&c->vm, c->verbose, false);
	if (code)
		return code;
	log_init(c->vm.id, c->vm.log_level);
	if (seccomp_setup(c->no_seccomp))
		return RUN_EXIT_MAYFLY;
	return snapshot_make(&c->vm, c->setups, c->nsetup, c->out, start_ns, true, &c->jail,
			     &c->net);
}
