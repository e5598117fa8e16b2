/* bench.h - mayfly bench: boot, restore and run latency, per phase, with percentiles, JSON lines, an SVG and an A/B comparison. */
#ifndef MAYFLY_CMD_BENCH_H
#define MAYFLY_CMD_BENCH_H

#include "cmd/cli.h"

/* argv[0] is "bench", argv[1] the kind (boot, restore, run, compare).
 * version: mayfly's, for the record. Returns the exit code. */
int cmd_bench(struct cli *c, int argc, char **argv, const char *version);

#endif
