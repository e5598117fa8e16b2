/* run.h - the agent-facing commands: mayfly run (a fresh VM per command), mayfly exec and mayfly cp (into a running VM). */
#ifndef MAYFLY_AGENT_RUN_H
#define MAYFLY_AGENT_RUN_H

#include <stdint.h>

#include "cli.h"

/* Each parses the arguments of its command (argv[0] is the command's
 * name) into c and returns the process exit code: the command's own, or
 * RUN_EXIT_* from agent/session.h. */
int cmd_run(struct cli *c, int argc, char **argv, uint64_t start_ns);
int cmd_exec(struct cli *c, int argc, char **argv);
int cmd_cp(struct cli *c, int argc, char **argv);

#endif
