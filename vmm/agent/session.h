/* session.h - one command run through the guest agent: stdin in, stdout/stderr out (plain or JSON lines), the exit back. */
#ifndef MAYFLY_AGENT_SESSION_H
#define MAYFLY_AGENT_SESSION_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/client.h"

/* What mayfly run / mayfly exec exit with, besides the command's own code.
 * Like timeout(1) and env(1): 124 timed out, 125 mayfly itself failed,
 * 126 could not run the command, 127 command not found, 128+N signal N. */
#define RUN_EXIT_TIMEOUT   124
#define RUN_EXIT_MAYFLY    125
#define RUN_EXIT_AGENT     126
#define RUN_EXIT_NOTFOUND  127

struct exec_spec {
	char **argv;               /* NULL-terminated, argc >= 1 */
	int argc;
	char **env;                /* "K=V", nenv entries */
	int nenv;
	const char *cwd;           /* NULL: the agent's default */
	int stdin_fd;              /* -1: the command's stdin is /dev/null */
	uint32_t timeout_ms;       /* 0: none */
	bool json;                 /* JSON lines on stdout instead of raw streams */
	bool pty;                  /* a pseudo-terminal in the guest: one merged stream */
	uint16_t rows, cols;       /* its size */
	uint64_t deadline_ns;      /* give up waiting for the agent (CLOCK_MONOTONIC); 0: never */
	int signal_fd;             /* -1, or an eventfd: when readable, send *signal_no to CMD */
	_Atomic int *signal_no;
};

struct exec_result {
	int exit_code;             /* what mayfly exits with (RUN_EXIT_* or the command's) */
	uint64_t started_ns;       /* EXEC_STARTED arrived (CLOCK_MONOTONIC), 0 if never */
	uint64_t ended_ns;         /* EXIT arrived */
	char error[256];           /* why, when exit_code is one of mayfly's own */
};

/* Run spec through the agent: EXEC, forward stdin, stream outputs to
 * stdout/stderr as they come (or as JSON lines), wait for EXIT. */
void session_exec(struct agent_client *c, const struct exec_spec *spec, struct exec_result *res);

/* JSON-lines output: one event object per line on stdout. */
void session_json_event(const char *event, const char *fields_fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Write `s` (len bytes) as a JSON string value, escaping as needed. */
void session_json_string(char *out, size_t cap, const uint8_t *s, size_t len);

#endif
