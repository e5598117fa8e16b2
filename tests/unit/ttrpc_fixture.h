/* ttrpc_fixture.h - a ttrpc server of vmm/shim/ on a socket in a fresh directory, and raw frames to and from it (tests only). */
#ifndef MAYFLY_TESTS_TTRPC_FIXTURE_H
#define MAYFLY_TESTS_TTRPC_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "shim/ttrpc.h"
#include "shim/ttrpc_server.h"

struct ttrpc_fixture {
	char dir[64];                /* /tmp/mayfly-ttrpc.XXXXXX */
	char path[128];              /* dir/ttrpc.sock */
	int listen_fd;
	struct ttrpc_server *srv;
};

/* A directory, a listening socket in it and a server on it with cfg.
 * Fails the test on any error. */
void ttrpc_fixture_start(struct ttrpc_fixture *f, const struct ttrpc_server_config *cfg);

/* ttrpc_server_stop (the test fails unless it returns want), then the
 * socket, its file and the directory go. */
void ttrpc_fixture_stop(struct ttrpc_fixture *f, unsigned grace_ms, int want);

/* A client's connection to it (blocking, close-on-exec). */
int ttrpc_fixture_connect(const struct ttrpc_fixture *f);

/* A request frame for service/method with payload on stream_id, sent
 * whole; the test fails if it cannot be. */
void ttrpc_fixture_send(int fd, uint32_t stream_id, const char *service, const char *method,
			const void *payload, size_t len);

/* The next frame within timeout_ms: 1 with *fr (free fr->body), 0 at the
 * end of the stream, -ETIMEDOUT, or another -errno. */
int ttrpc_fixture_recv(int fd, int timeout_ms, struct ttrpc_frame *fr);

/* The next frame, which must be a response: decoded into *resp (release
 * it), its stream id returned. Fails the test otherwise. */
uint32_t ttrpc_fixture_response(int fd, int timeout_ms, struct ttrpc_response *resp);

/* Wait up to timeout_ms for the server's counts to come down to conns
 * connections and calls calls; the test fails otherwise. */
void ttrpc_fixture_settle(struct ttrpc_fixture *f, unsigned conns, unsigned calls, int timeout_ms);

#endif
