/* run.h - the agent-facing commands: mayfly run (a fresh VM per command), mayfly exec and mayfly cp (into a running VM). */
#ifndef MAYFLY_AGENT_RUN_H
#define MAYFLY_AGENT_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "cli.h"
#include "vm_snapshot.h"

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

struct gate;
struct approve_spawner;
/* With --approve (g's approver has a command), before jail_start: fork
 * the approver's spawner (approve_spawner.h) and route g's calls to it,
 * so the VM process goes jailed and filtered. s is set up either way
 * (approve_spawner_stop is safe on it). 0, or the exit code after one line. */
int run_start_spawner(struct gate *g, struct approve_spawner *s);

#endif
