/* client.h - the host end of the guest agent protocol: connect through hybrid vsock, exchange frames, copy files; every wait bounded. */
#ifndef MAYFLY_AGENT_CLIENT_CLIENT_H
#define MAYFLY_AGENT_CLIENT_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol.h"

#define AGENT_FRAME_MAX (PROTO_HEADER_LEN + PROTO_MAX_PAYLOAD)
/* Room for several frames: they are decoded in place, and the unread
 * rest is moved to the front only when the tail runs short. */
#define AGENT_RBUF      (2 * AGENT_FRAME_MAX)

/* exec -> agent ready, the longest a new VM's agent is waited for (nested
 * emulation needs ~5 s). */
#define AGENT_BOOT_TIMEOUT_S 60

/* What a call moved, for the audit log: a file's or a stream's bytes and
 * their sha256. Filled as far as the call went, also when it failed. */
struct transfer_stats {
	uint64_t bytes;
	uint8_t sha256[32];
};

/* Everything the agent sends is the guest's: a frame that breaks the
 * protocol, a number out of range or a call past its deadline ends the
 * call with an error, never a hang or a crash of the host. */
struct agent_client {
	int fd;
	int cancel_fd;                /* readable: give up now (-ECANCELED); -1: never */
	bool broken;                  /* a call was abandoned midway: the stream is out of step */
	uint32_t next_id;
	size_t rstart, rlen;          /* undecoded bytes: rbuf[rstart, rstart + rlen) */
	uint8_t rbuf[AGENT_RBUF];
	uint8_t wbuf[AGENT_FRAME_MAX];
};

/* Opens a new stream to the VM's hybrid-vsock front door: a Unix socket
 * connect, or an in-process connection. fd or -errno. */
typedef int (*agent_dial_fn)(void *opaque);

/* Connect to the guest agent on vsock `port`: dial, send "CONNECT
 * <port>\n" and HELLO in one write, wait for "OK <n>\n", then HELLO_OK.
 * Retries while the guest boots (the VMM refuses the CONNECT until the
 * agent listens) until deadline_ns (CLOCK_MONOTONIC); cancel_fd (-1:
 * none) readable ends every wait at once. 0, or -errno with *why set:
 * -ETIMEDOUT, -ECANCELED, -ENOENT/-ECONNREFUSED (no VM on a socket path
 * after a few seconds), -EPROTO. */
int agent_client_connect(struct agent_client *c, agent_dial_fn dial, void *dial_opaque,
			 uint32_t port, uint64_t deadline_ns, int cancel_fd, const char **why);

/* Frames sent right behind HELLO, in the connect's one write: the agent
 * reads them in order once HELLO is answered, so their trip overlaps the
 * connect's. build writes them into buf (cap bytes), with ids from
 * agent_client_id, on each try (a retry rebuilds them); their length or
 * -errno. */
struct agent_first {
	int (*build)(struct agent_client *c, uint8_t *buf, size_t cap, void *opaque);
	void *opaque;
};

/* agent_client_connect with first's frames (NULL: none) sent ahead; on 0
 * their answers are next on the connection, the caller's to read. */
int agent_client_connect_first(struct agent_client *c, agent_dial_fn dial, void *dial_opaque,
			       uint32_t port, const struct agent_first *first,
			       uint64_t deadline_ns, int cancel_fd, const char **why);

/* A dialer for the Unix socket path `opaque` (a VM's --vsock socket). */
int agent_dial_unix(void *opaque);

void agent_client_close(struct agent_client *c);

/* Send the frame built in c->wbuf (length len) by deadline_ns (0: no
 * deadline; cancel_fd still ends the wait). 0, -ETIMEDOUT, -ECANCELED or
 * -errno; after a failure the client is broken (a frame may be cut). */
int agent_client_send(struct agent_client *c, size_t len, uint64_t deadline_ns);

/* The next frame: 1 with *f (valid until the next call), 0 when none came
 * by deadline_ns (0: wait forever; a deadline already past still takes
 * what is buffered or readable now), -ECANCELED, -EPIPE when the agent
 * closed the connection, -EPROTO for a malformed frame, or -errno. */
int agent_client_recv(struct agent_client *c, struct proto_frame *f, uint64_t deadline_ns);

/* True when a whole frame is buffered (recv returns it without waiting). */
bool agent_client_has_frame(const struct agent_client *c);

/* A new request id. */
uint32_t agent_client_id(struct agent_client *c);

/* The next frame of request `id` into *f (others skipped). 0, -ETIMEDOUT,
 * or the connection's failure. */
int agent_client_next(struct agent_client *c, uint32_t id, struct proto_frame *f,
		      uint64_t deadline_ns);

/* Wait for the OK or ERROR answering request `id`, skipping frames of
 * other ids. 0; the ERROR's -errno with its message in why; -EPROTO for
 * any other answer (the client is then broken); -ETIMEDOUT; or the
 * connection's failure (why then empty: see agent_client_lost). */
int agent_client_wait_ok(struct agent_client *c, uint32_t id, uint64_t deadline_ns, char *why,
			 size_t whylen);

/* Say in why (unless it already says something) how a call that failed
 * with rc lost the agent: no answer in time, the VM ended, the agent
 * closed the connection or broke the protocol. Returns rc. */
int agent_client_lost(int rc, char *why, size_t whylen);

/* The errno of an ERROR frame, range-checked (1..4095, else EPROTO), and
 * its message into why (printable ASCII: other bytes as \xNN). */
int agent_client_error(const struct proto_frame *f, char *why, size_t whylen);

#endif
