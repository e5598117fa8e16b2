/* mcp.h - a Model Context Protocol server (JSON-RPC 2.0, one message per line) over a pair of fds, its tools run through one guest agent connection. */
#ifndef MAYFLY_MCP_MCP_H
#define MAYFLY_MCP_MCP_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent_client/client.h"
#include "policy/gate.h"

/* The newest 2025 revision (the initialize handshake) we speak; the
 * 2026-07-28 one, per request, is in mcp_modern.h. From 2025-11-25 on, a
 * tool's bad arguments are a tool error the model sees (SEP-1303). */
#define MCP_PROTOCOL_VERSION "2025-11-25"
#define MCP_TOOL_ERRORS_SINCE "2025-11-25"
#define MCP_SERVER_NAME    "mayfly"
#define MCP_SERVER_VERSION "0.1"
#define MCP_INSTRUCTIONS   "A fresh Linux microVM kept for this session: run commands and " \
			   "move files in it with the tools; nothing reaches the host."
/* A message longer than this is answered with an error and dropped. */
#define MCP_LINE_MAX       (32u << 20)
/* Requests waiting while one runs; past it a request is answered "busy". */
#define MCP_QUEUE_MAX      64
/* ... and the bytes of their lines (what they take parsed is of that order:
 * MCP_VALUES_MAX bounds the rest). */
#define MCP_QUEUE_BYTES    (64u << 20)
/* A message with more JSON values, or nested deeper, is refused unparsed:
 * a 31 MiB array of integers would take over 1 GB parsed. */
#define MCP_VALUES_MAX     16384
#define MCP_DEPTH_MAX      64

/* JSON-RPC 2.0 error codes (the spec's; MCP uses them as they are). */
#define MCP_PARSE_ERROR      (-32700)
#define MCP_INVALID_REQUEST  (-32600)
#define MCP_METHOD_NOT_FOUND (-32601)
#define MCP_INVALID_PARAMS   (-32602)
#define MCP_INTERNAL_ERROR   (-32603)
#define MCP_SERVER_BUSY      (-32000)   /* implementation-defined range */

/* What a tool may make the host do (from mayfly mcp's flags). */
struct mcp_limits {
	unsigned call_timeout_s;   /* each file call */
	uint64_t max_get_bytes;    /* read_file */
	uint64_t max_output;       /* run_command's stdout + stderr */
	unsigned max_timeout_s;    /* run_command's timeout argument */
};

/* One session. The caller sets the fields above the line; the rest is
 * mcp_serve's. */
struct mcp_server {
	int in_fd, out_fd;            /* the client's messages, our answers */
	struct agent_client *client;  /* connected to the guest agent */
	struct gate *gate;            /* approval and audit of each tool call */
	struct mcp_limits limits;
	int stop_fd;                  /* -1, or readable: end the session (the VM ended) */
	size_t line_max;              /* 0: MCP_LINE_MAX */
	/* ---- */
	pthread_mutex_t out_lock;     /* one message at a time on out_fd */
	pthread_mutex_t lock;         /* the queue and the state below */
	pthread_cond_t cond;
	json_t *queue[MCP_QUEUE_MAX];
	size_t qbytes[MCP_QUEUE_MAX]; /* each one's line length */
	size_t qhead, qlen, queued_bytes;
	bool eof;                     /* no more input */
	bool initialized;             /* initialize was answered (2025 requests allowed) */
	const char *version;          /* ... with this revision (static; "" before) */
	json_t *current;              /* the id of the request being served */
	bool cancelled;               /* ... and the client cancelled it */
	int sigs[2];                  /* pipe: SIGKILL for the running command */
	int quit[2];                  /* pipe: the worker tells the reader to stop */
	char caller[80];              /* "mcp:<clientInfo.name>" from initialize */
	char modern_caller[80];       /* ... from the 2026 request being served */
	bool started, watching;       /* mcp_start ran; the watcher runs */
	pthread_t rd, wt;             /* the reader and the watcher */
};

/* Serve the client until its input ends (0), stop_fd fires, out_fd
 * breaks or the agent connection is lost (-errno). Both eras: a request
 * whose params._meta names a protocol version is served statelessly in
 * 2026-07-28 (mcp_modern.h), any other in the 2025 revision initialize
 * chose (and refused before initialize), on the same sandbox. Malformed input of
 * any kind gets a JSON-RPC error, never a crash; a line is read whole up
 * to line_max. Requests are served in order, one at a time; ping,
 * server/discover and notifications/cancelled are handled as they
 * arrive (a cancelled
 * run_command is killed and gets no answer). */
int mcp_serve(struct mcp_server *s);

/* Start the session's reader and watcher threads (each enters the agent
 * seccomp role first) without serving yet: a jailed VM process does it
 * before its agent thread starts (vm_agent's start_threads). mcp_serve
 * starts them itself otherwise. 0 or -errno (nothing left started). */
int mcp_start(struct mcp_server *s);

/* Stop and join them, free the queue: after mcp_serve (which does it
 * itself) or instead of it. Idempotent. */
void mcp_stop(struct mcp_server *s);

/* Send one message (a line) to the client. 0 or -errno. Thread-safe. */
int mcp_send(struct mcp_server *s, json_t *msg);

#endif
