/* cli.h - the one command-line front end: every command's flags, from one option table, into one typed request. */
#ifndef MAYFLY_CMD_CLI_H
#define MAYFLY_CMD_CLI_H

#include <stddef.h>
#include <stdio.h>

#include "vm/config.h"
#include "bench/runner.h"
#include "cmd/run_opts.h"
#include "jail/jail.h"
#include "net/rules.h"

enum cli_cmd { CLI_BOOT, CLI_RUN, CLI_EXEC, CLI_CP, CLI_SNAPSHOT, CLI_MCP, CLI_AUDIT, CLI_PAUSE,
	       CLI_FORK, CLI_SERVE, CLI_BENCH, CLI_COMPARE, CLI_NR_CMDS };

#define CLI_MAX_SETUP 64
#define CLI_MAX_TEMPLATES 7    /* serve: --template, beside the default */
#define CLI_MAX_FORWARD 64     /* bench: the options each run is given */

/* A parsed command line. vm is what boot and run build (run adds its own
 * rootfs and vsock); run is the agent call of run, exec and cp. Strings in
 * run point into argv, which cli_parse may split in place (--put, --get). */
struct cli {
	struct vm_config vm;
	struct run_opts run;
	struct jail_config jail;   /* boot, run: --no-jail, --uid, --gid, --cpu-quota */
	struct net_policy net;     /* boot, run, snapshot, mcp: --allow-net, --resolve (never in a snapshot) */
	int verbose;               /* -v count; vm.log_level follows it */
	/* Which VM fields the user set (a snapshot must then agree with them). */
	bool mem_given, cpus_given, kernel_given, rootfs_given, spare_given;
	/* Snapshots */
	const char *snapshot;      /* boot, run: --snapshot DIR */
	bool cold;                 /* run: --cold, boot instead of the default snapshot */
	bool no_seccomp;           /* boot, run, snapshot: --no-seccomp */
	char *setups[CLI_MAX_SETUP];   /* snapshot create: --setup CMD, in order */
	int nsetup;
	const char *out;           /* snapshot create, pause, fork: --out DIR */
	const char *audit_head;    /* audit verify: --head HASH */
	const char *timings;       /* boot: --timings FILE */
	struct {                   /* mayfly serve */
		const char *socket, *listen, *tokens, *state;
		const char *e2b, *e2b_domain;   /* --e2b ADDR, --e2b-domain DOMAIN */
		const char *e2b_cert, *e2b_key; /* --e2b-cert FILE, --e2b-key FILE: TLS */
		unsigned pool, max_sandboxes;
		unsigned memory_reserve_mib;   /* --memory-reserve */
		bool ephemeral;    /* --ephemeral: sandboxes end with the service */
		const char *templates[CLI_MAX_TEMPLATES];   /* --template NAME=DIR */
		int ntemplates;
	} serve;
	struct {                   /* mayfly bench (boot, restore, run; compare) */
		unsigned runs, warmup;
		unsigned count;        /* density: --count N */
		enum bench_mode mode;
		unsigned mode_arg;     /* staggered: ms between starts; burst: VMs at once */
		const char *json, *svg;    /* --json FILE, --svg FILE */
		/* The VM options given, which each run is given: the option's
		 * name (without "--") and its value (NULL: a flag), in order. */
		const char *forward[CLI_MAX_FORWARD][2];
		int nforward;
	} bench;
};

enum cli_result {
	CLI_OK = 0,
	CLI_HELP = 1,              /* --help: print cli_usage, exit 0 */
	CLI_ERROR = -1,            /* err holds one line, no newline */
};

/* Parse argv[1..argc) of `cmd` (argv[0] is the command's name) with
 * getopt_long: "--flag value" and "--flag=value", flags before the
 * command (run, exec) or the two paths (cp). Defaults as documented. c is
 * zeroed or from an earlier cli_parse (whose strings it gives back). */
enum cli_result cli_parse(struct cli *c, enum cli_cmd cmd, int argc, char **argv, char *err,
			  size_t errlen);

/* Give back what cli_parse allocated (the VM config's strings). */
void cli_free(struct cli *c);

/* cli_parse for a command's entry point: -1 to go on; otherwise the exit
 * code, after printing the usage (--help: 0) or the error's one line
 * (error_code). */
int cli_parse_or_exit(struct cli *c, enum cli_cmd cmd, int argc, char **argv, int error_code);

/* Print `cmd`'s usage, options generated from the same table. */
void cli_usage(enum cli_cmd cmd, FILE *out);

#endif
