/* fake_agent.h - a guest agent that lies, on the other end of a socket pair, for the host side's unit tests. */
#ifndef MAYFLY_TEST_FAKE_AGENT_H
#define MAYFLY_TEST_FAKE_AGENT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent_client/client.h"

struct fake_agent {
	int fd;                       /* the agent's end */
	struct agent_client *client;  /* the host's end, ready to use (fd set, ids from 1) */
	pthread_t thread;
	bool started;
	void (*script)(struct fake_agent *a);
	void *arg;
	_Atomic bool stop;            /* the test is done: scripts end their loops */
	_Atomic int signals;          /* SIGNAL frames seen by fake_read_frames */
	_Atomic uint32_t last_signal;
	_Atomic int stdin_frames;     /* STDIN frames with data seen by fake_read_frames */
	_Atomic uint64_t stdin_bytes; /* and their bytes */
	_Atomic bool stdin_ended;     /* an empty STDIN frame (the end of stdin) seen */
};

/* A connected pair; the client's cancel_fd is -1. */
void fake_init(struct fake_agent *a);
/* Run script on a thread of its own. */
void fake_start(struct fake_agent *a, void (*script)(struct fake_agent *), void *arg);
/* Stop the script (stop flag, then the socket shut down), join, close both ends. */
void fake_fini(struct fake_agent *a);

/* Send a frame of `type` for `id`; fill (may be NULL) adds the payload.
 * false when the host is gone (the script should end). */
bool fake_send(struct fake_agent *a, uint8_t type, uint32_t id,
	       void (*fill)(struct proto_writer *, void *), void *opaque);
/* The same, from raw payload bytes. */
bool fake_send_bytes(struct fake_agent *a, uint8_t type, uint32_t id, const void *p, uint32_t n);
/* Read whatever frames the host sent, counting SIGNALs and STDINs; waits up to
 * timeout_ms for the first byte. false on EOF. */
bool fake_read_frames(struct fake_agent *a, int timeout_ms);

#endif
