/* sock_io.h - a whole buffer over a stream socket, before a deadline: the helpers' request and answer (the approver's spawner, the audit log's writer). */
#ifndef MAYFLY_LIB_SOCK_IO_H
#define MAYFLY_LIB_SOCK_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Move len bytes over fd (send when out, else receive), blocking, before
 * deadline_ns (CLOCK_MONOTONIC; 0: none). 0, -EPIPE at the other end's
 * close, -ETIMEDOUT, or -errno. */
int sock_move_all(int fd, void *buf, size_t len, bool out, uint64_t deadline_ns);

#endif
