/* run_opts.h - what mayfly run / exec / cp are asked to do with the guest agent (pure data; cli.c fills it). */
#ifndef MAYFLY_CMD_RUN_OPTS_H
#define MAYFLY_CMD_RUN_OPTS_H

#include <stdbool.h>
#include <stdint.h>

#include "agent_client/session.h"

#define RUN_MAX_ENV   EXEC_MAX_ENV
#define RUN_MAX_FILES 64

/* Defaults, documented in docs/usage.md and in each command's --help. */
#define RUN_DEFAULT_CALL_TIMEOUT_S 120           /* each --put, --get, cp, connect */
#define RUN_DEFAULT_MAX_GET_BYTES  (1ULL << 30)  /* 1 GiB per --get / cp out of the VM */
#define RUN_DEFAULT_MAX_OUTPUT     (256ULL << 20) /* stdout + stderr of one command */
#define RUN_MAX_TIMEOUT_S          (7 * 24 * 3600)

/* --put LOCAL:GUEST or --get GUEST:LOCAL, split in place in argv. */
struct run_file {
	const char *local;
	const char *guest;         /* absolute */
};

struct run_opts {
	/* a running VM (mayfly exec, mayfly cp) */
	const char *vsock;
	/* the command */
	unsigned timeout_s;        /* 0: none */
	char *env[RUN_MAX_ENV + 1];
	int nenv;
	const char *cwd;
	const char *root;          /* exec --root: chrooted there (canonical absolute), or NULL */
	bool has_user;             /* exec --user, with --root: */
	uint32_t uid, gid;         /* run as these (not UINT32_MAX) */
	const char *stdin_path;    /* "-" for mayfly's stdin */
	struct run_file puts[RUN_MAX_FILES], gets[RUN_MAX_FILES];
	int nput, nget;
	bool json;
	bool tty;                  /* run CMD on a pseudo-terminal in the guest */
	char **argv;               /* the command and its arguments (NULL-terminated) */
	int argc;
	/* bounds on what the agent may make the host do */
	unsigned call_timeout_s;   /* each agent call but the command itself */
	uint64_t max_get_bytes;    /* one file copied out of the VM */
	uint64_t max_output;       /* the command's stdout + stderr */
	/* every tool call: approved before (NULL: all allowed), recorded after (NULL: not) */
	const char *audit_path;
	const char *approve_cmd;
	unsigned approve_timeout_s;
};

#endif
