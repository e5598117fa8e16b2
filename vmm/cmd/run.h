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

struct launch;
struct gate;

/* The VM a command of the agent runs in (run, mcp). */
struct run_choice {
	struct cli *cli;
	bool restoring;
	struct snapshot snap;         /* restoring: the snapshot loaded */
	struct vm_config restored;    /* its config, with this run's own fields */
};

/* l set up (launch_init) for a VM driven through its agent as c asks:
 * its jail, network, audit log and the calls' gate g; a failed step exits
 * RUN_EXIT_MAYFLY. The caller adds the job, and a prepare step that calls
 * run_choose_vm with choice. */
void run_launch_init(struct launch *l, struct cli *c, struct gate *g, struct run_choice *choice);

/* launch's prepare step for run and mcp: the VM the --snapshot names, else
 * the default snapshot (made on first use), or with --cold (or a --disk,
 * which no default snapshot has) a cold boot; l->cfg and l->snap set. 0,
 * or the exit code after one line. run_choice_free gives back what it
 * loaded. */
int run_choose_vm(struct run_choice *choice, struct launch *l);
void run_choice_free(struct run_choice *choice);

#endif
