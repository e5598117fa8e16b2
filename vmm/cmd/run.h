/* run.h - the agent-facing commands: mayfly run (a fresh VM per command), mayfly exec and mayfly cp (into a running VM). */
#ifndef MAYFLY_CMD_RUN_H
#define MAYFLY_CMD_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "cmd/cli.h"
#include "vm/snapshot.h"

/* Each parses the arguments of its command (argv[0] is the command's
 * name) into c and returns the process exit code: the command's own, or
 * RUN_EXIT_* from agent/session.h. */
int cmd_run(struct cli *c, int argc, char **argv, uint64_t start_ns);
int cmd_exec(struct cli *c, int argc, char **argv);
int cmd_cp(struct cli *c, int argc, char **argv);

/* The VM a command runs in (run, mcp): the one --snapshot names, else the
 * default snapshot (made on first use), or with --cold (or a --disk, which
 * no default snapshot has) a cold boot. *cfg is c->vm, or restored with
 * snap loaded and *restoring set (the caller frees snap). 0, or the exit
 * code after one line. */
int run_choose_vm(struct cli *c, struct snapshot *snap, bool *restoring,
		  struct vm_config *restored, const struct vm_config **cfg);

#endif
