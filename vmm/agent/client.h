/* client.h - the host end of the guest agent protocol: connect through hybrid vsock, exchange frames. */
#ifndef MAYFLY_AGENT_CLIENT_H
#define MAYFLY_AGENT_CLIENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol.h"

#define AGENT_RBUF (PROTO_HEADER_LEN + PROTO_MAX_PAYLOAD)

struct agent_client {
	int fd;
	uint32_t next_id;
	size_t rlen;                  /* bytes buffered in rbuf */
	size_t consumed;              /* bytes of rbuf the last frame used */
	uint8_t rbuf[AGENT_RBUF];
	uint8_t wbuf[PROTO_HEADER_LEN + PROTO_MAX_PAYLOAD];
};

/* Connect to the guest agent behind a VM's hybrid vsock socket: connect to
 * `uds_path`, send "CONNECT <port>\n", wait for "OK <n>\n", then HELLO and
 * wait for HELLO_OK. Retries (the guest may still be booting) until
 * `deadline_ns` (CLOCK_MONOTONIC) or until *cancel (may be NULL) turns true.
 * 0, or -errno with *why set (-ECANCELED when cancelled). */
int agent_client_connect(struct agent_client *c, const char *uds_path, uint32_t port,
			 uint64_t deadline_ns, const _Atomic bool *cancel, const char **why);

void agent_client_close(struct agent_client *c);

/* Send the frame built in c->wbuf (length len). 0 or -errno. */
int agent_client_send(struct agent_client *c, size_t len);

/* Wait up to timeout_ms (-1: forever) for the next frame. Returns 1 with *f
 * (valid until the next call), 0 on timeout, -EPIPE when the agent closed
 * the connection, -EPROTO for a malformed frame, or -errno. */
int agent_client_recv(struct agent_client *c, struct proto_frame *f, int timeout_ms);

/* A new request id. */
uint32_t agent_client_id(struct agent_client *c);

/* Copy a local file to the guest (mode from the local file) / a guest file
 * to a local path. 0 or -errno with *why (the agent's message when it
 * refused). */
int agent_client_put(struct agent_client *c, const char *local, const char *guest,
		     char *why, size_t whylen);
int agent_client_get(struct agent_client *c, const char *guest, const char *local,
		     char *why, size_t whylen);

#endif
