/* ttrpc_client.h - a small synchronous ttrpc client (the shim's events to containerd's $TTRPC_ADDRESS) and the bounded socket I/O the server shares. */
#ifndef MAYFLY_SHIM_TTRPC_CLIENT_H
#define MAYFLY_SHIM_TTRPC_CLIENT_H

#include "shim/ttrpc.h"

#include <stddef.h>
#include <stdint.h>

/* containerd's Events service, where a shim forwards its events. */
#define TTRPC_EVENTS_SERVICE "containerd.services.events.ttrpc.v1.Events"
#define TTRPC_EVENTS_FORWARD "Forward"

/* Connect to a ttrpc server's Unix socket: address is a path, as
 * containerd puts in TTRPC_ADDRESS, optionally "unix://" before it.
 * 0 with *fd (close-on-exec, blocking), -EINVAL (empty),
 * -ENAMETOOLONG (over 107 bytes), or connect's -errno (-ENOENT,
 * -ECONNREFUSED, ...). */
int ttrpc_client_connect(const char *address, int *fd) __attribute__((warn_unused_result));

/* Write all of buf (len) to the stream socket fd within timeout_ms,
 * blocking or not, never raising SIGPIPE. 0, -ETIMEDOUT (part may have
 * gone: the stream is then unusable), -EPIPE / -ECONNRESET (the peer has
 * gone), or another -errno. */
int ttrpc_send(int fd, const void *buf, size_t len, int timeout_ms)
	__attribute__((warn_unused_result));

/*
 * One call on fd: req (its timeout_ns is replaced by timeout_ms's, which
 * the server sees as the call's deadline) on the next odd stream id of
 * this process, then wait up to timeout_ms in all for the response on
 * that stream id (frames of other stream ids or types are skipped; nothing
 * past the response is read). One call at a time per fd.
 * 0 with *resp: the server answered (resp->code says how; release it
 * with ttrpc_response_release). Otherwise nothing to release and the
 * connection is unusable (close it, connect again): -ETIMEDOUT, -EPIPE /
 * -ECONNRESET (the server has gone, also at the end of the stream mid
 * frame), -EBADMSG (a response over TTRPC_MESSAGE_MAX or no Response),
 * -EINVAL (req refused by ttrpc_request_encode), -ENOMEM, another -errno.
 */
int ttrpc_client_call(int fd, const struct ttrpc_request *req, int timeout_ms,
		      struct ttrpc_response *resp) __attribute__((warn_unused_result));

#endif
