/* serve_cmd.h - mayfly serve: the HTTP API for many sandboxes, until SIGTERM drains it. */
#ifndef MAYFLY_SERVE_SERVE_CMD_H
#define MAYFLY_SERVE_SERVE_CMD_H

#include <stdint.h>

#include "cmd/cli.h"

/* Parse serve's arguments, make (or find) the default template, clean
 * what a previous service left in the state directory, serve until
 * SIGTERM or SIGINT, drain. 0 after a drain; 2 bad usage; 125 after one
 * line when the service could not start. */
int cmd_serve(struct cli *c, int argc, char **argv, uint64_t start_ns);

#endif
