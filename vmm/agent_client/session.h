/* session.h - one command run through the guest agent: stdin in, stdout/stderr out (raw or JSON lines), the exit back; bounded in time and bytes. */
#ifndef MAYFLY_AGENT_CLIENT_SESSION_H
#define MAYFLY_AGENT_CLIENT_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "agent_client/client.h"
#include "lib/exitcode.h"


/* How long an agent may keep sending after the command was killed for
 * passing --max-output before the host gives up on it. */
#define SESSION_KILL_GRACE_NS (10ULL * 1000 * 1000 * 1000)

/* Environment entries one command may carry (run --env, an MCP call's env). */
#define EXEC_MAX_ENV 256

struct exec_spec {
	char **argv;               /* NULL-terminated, argc >= 1 */
	int argc;
	char **env;                /* "K=V", nenv entries */
	int nenv;
	const char *cwd;           /* NULL: the agent's default (with root: root's "/") */
	/* NULL: the VM's own root, as the agent's user (root) or the image's
	 * USER. Set: a canonical absolute directory in the guest (a container's
	 * root file system) that CMD is chrooted into, running as exactly uid,
	 * gid and groups with umask (PROTO_EXEC_ROOT, docs/protocol.md). */
	const char *root;
	uint32_t uid, gid;         /* with root; not UINT32_MAX */
	const uint32_t *groups;    /* with root: the supplementary groups, ngroups */
	int ngroups;               /* 0 to PROTO_MAX_GROUPS */
	uint32_t umask;            /* with root: 0 to 0777 (default 022) */
	int stdin_fd;              /* -1: the command's stdin is /dev/null */
	uint32_t timeout_ms;       /* the agent kills the command after this; 0: none */
	bool json;                 /* JSON lines on out instead of raw streams */
	bool pty;                  /* a pseudo-terminal in the guest: one merged stream */
	uint16_t rows, cols;       /* its size */
	uint64_t deadline_ns;      /* give up on the agent (CLOCK_MONOTONIC): 124; 0: never */
	int signal_fd;             /* -1, or a pipe: each byte is a signal to pass on to CMD */
	int winch_fd;              /* -1, or a pipe: readable when our terminal was resized */
	int tty_fd;                /* the terminal whose size RESIZE sends (with winch_fd); -1:
	                            * each 4 bytes on winch_fd are the size (u16 rows, cols) */
	uint64_t max_output;       /* stdout + stderr bytes passed on; past it CMD is killed */
	int out_fd, err_fd;        /* raw streams go here */
	/* Set: raw streams go to this instead (is_err: stderr), in order. */
	void (*sink)(void *opaque, bool is_err, const uint8_t *data, size_t len);
	void *sink_opaque;
	FILE *json_out;            /* JSON lines go here */
	/* NULL, or called (on the session's thread) when the command started,
	 * with its pid in the guest: before its "started" JSON event. */
	void (*started)(void *opaque, uint32_t pid);
	void *started_opaque;
};

struct exec_result {
	int exit_code;             /* what mayfly exits with (RUN_EXIT_* or the command's) */
	uint64_t started_ns;       /* EXEC_STARTED arrived (CLOCK_MONOTONIC), 0 if never */
	uint32_t pid;              /* the command's pid in the guest, 0 if never */
	uint64_t first_output_ns;  /* the first byte of stdout or stderr arrived, 0 if none */
	uint64_t ended_ns;         /* EXIT arrived */
	bool truncated;            /* output passed max_output and was cut */
	int signo;                 /* CMD was killed by this signal; 0 if not */
	bool timed_out;            /* by the agent, for timeout_ms */
	uint64_t duration_us;      /* CMD's run time as the agent measured it */
	struct transfer_stats out, err;   /* what was passed on of each stream */
	char error[256];           /* why, when exit_code is one of mayfly's own */
};

/* Defaults for the fields above: no stdin, signals, deadline or limit;
 * stdout, stderr; no root (umask 022 once one is set). */
void session_spec_init(struct exec_spec *spec);

/* Run spec through the agent: EXEC, forward stdin, stream the outputs as
 * they come, wait for EXIT. Every frame from the agent is checked; the
 * deadline and pending signals are checked between any two frames. A root,
 * user or groups the agent would refuse (proto_exec_root_valid) fail here,
 * before anything is sent: RUN_EXIT_MAYFLY with the reason. */
void session_exec(struct agent_client *c, const struct exec_spec *spec, struct exec_result *res);

#endif
