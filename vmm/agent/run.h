/* run.h - the agent-facing commands: mayfly run (a fresh VM per command), mayfly exec and mayfly cp (into a running VM). */
#ifndef MAYFLY_AGENT_RUN_H
#define MAYFLY_AGENT_RUN_H

#include <stdint.h>

/* Each takes the arguments after its command name and returns the process
 * exit code (the command's own, or RUN_EXIT_* from agent/session.h). */
int cmd_run(int argc, char **argv, uint64_t start_ns);
int cmd_exec(int argc, char **argv);
int cmd_cp(int argc, char **argv);

extern const char run_usage[];
extern const char exec_usage[];
extern const char cp_usage[];

#endif
