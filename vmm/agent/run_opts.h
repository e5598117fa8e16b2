/* run_opts.h - the flags of mayfly run / exec / cp, parsed (pure: no I/O). */
#ifndef MAYFLY_AGENT_RUN_OPTS_H
#define MAYFLY_AGENT_RUN_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RUN_MAX_ENV   256
#define RUN_MAX_FILES 64

/* --put LOCAL:GUEST or --get GUEST:LOCAL, split in place in argv. */
struct run_file {
	const char *local;
	const char *guest;         /* absolute */
};

struct run_opts {
	/* VM (mayfly run) */
	const char *rootfs, *kernel, *id;
	uint64_t mem_mib;
	unsigned cpus;
	int verbose;
	/* a running VM (mayfly exec, mayfly cp) */
	const char *vsock;
	/* the command */
	unsigned timeout_s;        /* 0: none */
	char *env[RUN_MAX_ENV + 1];
	int nenv;
	const char *cwd;
	const char *stdin_path;    /* "-" for mayfly's stdin */
	struct run_file puts[RUN_MAX_FILES], gets[RUN_MAX_FILES];
	int nput, nget;
	bool json;
	bool tty;                  /* run CMD on a pseudo-terminal in the guest */
	char **argv;               /* the command and its arguments (NULL-terminated) */
	int argc;
};

enum run_mode { RUN_MODE_RUN, RUN_MODE_EXEC, RUN_MODE_CP };

/* Parse `mayfly run|exec|cp` arguments. Returns 0, 1 for --help, or -1 with
 * err set to one line. For cp, argv/argc hold SRC and DST. */
int run_opts_parse(struct run_opts *o, enum run_mode mode, int argc, char **argv, char *err,
		   size_t errlen);

#endif
