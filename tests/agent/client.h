/* client.h - a small test client for mayfly-agent: start it, speak frames, collect a process's output. */
#ifndef MAYFLY_TEST_AGENT_CLIENT_H
#define MAYFLY_TEST_AGENT_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "protocol.h"

/* A running agent (a child of the test) and one connection to it. */
struct client {
	pid_t agent;
	int fd;
	char dir[64];               /* a temp dir: the socket, and files for the test */
	char sock[128];             /* --unix path, "" in --fd mode */
	uint8_t *buf;               /* received bytes; buf[off..len) not yet returned as frames */
	size_t off, len;
	struct proto_frame f;       /* the last frame from client_recv; f.payload points
	                             * into buf and stays valid until the next client_recv */
};

/* Start the agent ($MAYFLY_AGENT) serving a socketpair (--fd), HELLO done. */
void client_start(struct client *c);
/* Start it on a Unix socket in c->dir (--unix) and connect, HELLO done. */
void client_start_unix(struct client *c);
/* client_start_unix, the agent's NET relay going to c->dir/net.sock. */
void client_start_net(struct client *c);
/* client_start with the agent given --defaults: a file in c->dir holding text. */
void client_start_defaults(struct client *c, const char *text);
/* Another connection to a --unix agent; hello: do the HELLO. Returns the fd. */
int client_connect(struct client *c, bool hello);
/* Close the connection, stop the agent, remove c->dir. */
void client_stop(struct client *c);

/* Send raw bytes / a finished writer's frame (asserts on failure). */
void client_send_raw(struct client *c, const void *p, size_t len);
void client_send(struct client *c, struct proto_writer *w);
/* Writer over a static buffer, begun for (type, id). */
struct proto_writer *client_begin(uint8_t type, uint32_t id);

/* Next frame into c->f: 1, or 0 on EOF, or -ETIMEDOUT after timeout_ms.
 * Each received byte is copied at most about twice, whatever the volume. */
int client_recv(struct client *c, int timeout_ms);
/* Next frame, which must have this type and id (asserts). */
void client_expect(struct client *c, uint8_t type, uint32_t id);
/* Next frame must be ERROR for id with errno err (asserts). */
void client_expect_error(struct client *c, uint32_t id, int err);
/* True when the agent closes the connection within timeout_ms, frames before
 * the EOF ignored. */
bool client_sees_eof(struct client *c, int timeout_ms);

/* EXEC helpers. argv and envp end with NULL. */
void client_exec(struct client *c, uint32_t id, uint32_t flags, uint32_t timeout_ms,
		 uint16_t rows, uint16_t cols, const char *cwd, char *const *argv, char *const *envp);
void client_stdin(struct client *c, uint32_t id, const void *data, uint32_t len);

/* Everything one process produced. */
struct run {
	uint32_t id;
	bool started, exited;
	int error;                  /* ERROR's errno instead of EXEC_STARTED */
	uint32_t pid;
	char *out, *err;            /* NUL-terminated for convenience */
	size_t out_len, err_len;
	size_t out_cap, err_cap;
	uint32_t kind, signo;
	int32_t code;
	uint64_t duration_us;
	int frames_after_exit;      /* must stay 0 */
	int first_output_seq;       /* arrival order (client_collect's frame count) */
	int exit_seq;
	size_t max_chunk;
};
/* Receive until every run in runs[0..n) has its EXIT (or exec ERROR);
 * frames for other ids are not expected (asserts). */
void client_collect(struct client *c, struct run *runs, int n, int timeout_ms);
/* exec + collect one process; argv/envp NULL-terminated. */
void client_run(struct client *c, struct run *r, uint32_t flags, uint32_t timeout_ms,
		const char *cwd, char *const *argv, char *const *envp);
void run_free(struct run *r);

/* Append data[0..n) to the growing, NUL-terminated *s of *len bytes and *cap
 * allocated. Capacity doubles, so gathering N bytes copies O(N), not O(N^2)
 * (under ASan every realloc copies). Asserts on allocation failure. */
void client_append(char **s, size_t *len, size_t *cap, const void *data, size_t n);

#endif
