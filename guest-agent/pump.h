/* pump.h - two sockets joined: what one sends the other receives, each way with a bounded buffer, each end's EOF passed on as a shutdown. */
#ifndef MAYFLY_AGENT_PUMP_H
#define MAYFLY_AGENT_PUMP_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PUMP_BUF (64 * 1024)        /* per direction */

/* fd[0] and fd[1], non-blocking; buf[i] holds what was read from fd[i]
 * and is still to be written to fd[!i]. */
struct pump {
	int fd[2];
	uint8_t *buf[2];
	size_t off[2], len[2];
	bool eof[2], shut[2];           /* read EOF on fd[i]; shutdown(SHUT_WR) done on fd[i] */
	uint64_t moved[2];              /* bytes from fd[i] written to fd[!i] */
};

/* An empty pump (fds -1). */
void pump_clear(struct pump *p);
/* Join a and b (made non-blocking): 0, or -ENOMEM (nothing closed). */
int pump_open(struct pump *p, int a, int b);
/* Bytes already read from fd[i] (at most PUMP_BUF) to go out first. */
void pump_preload(struct pump *p, int i, const void *data, size_t len);
/* The poll events fd[i] waits for; 0 when it waits for none. */
short pump_events(const struct pump *p, int i);
/* Move what can move after a poll that gave revents[0..1]; false when
 * both directions are done (then pump_close). A side that fails ends
 * only its direction: the other still delivers what it has. */
bool pump_step(struct pump *p, const short *revents);
/* Close both fds and free the buffers; the pump is then empty. */
void pump_close(struct pump *p);
/* Run p alone until both directions are done or stop_fd (-1: none) is
 * readable; p is then the caller's to close. */
void pump_run(struct pump *p, int stop_fd);

#endif
