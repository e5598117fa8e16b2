/* pump.c - two sockets joined with a bounded buffer each way: the guest's network proxy clients and published-port connections, and the host's end of a published port's WebSocket. */
#include "pump.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

void pump_clear(struct pump *p)
{
	memset(p, 0, sizeof(*p));
	p->fd[0] = p->fd[1] = -1;
}

int pump_open(struct pump *p, int a, int b)
{
	pump_clear(p);
	p->buf[0] = malloc(PUMP_BUF);
	p->buf[1] = malloc(PUMP_BUF);
	if (!p->buf[0] || !p->buf[1]) {
		free(p->buf[0]);
		free(p->buf[1]);
		pump_clear(p);
		return -ENOMEM;
	}
	p->fd[0] = a;
	p->fd[1] = b;
	fcntl(a, F_SETFL, fcntl(a, F_GETFL) | O_NONBLOCK);
	fcntl(b, F_SETFL, fcntl(b, F_GETFL) | O_NONBLOCK);
	return 0;
}

void pump_preload(struct pump *p, int i, const void *data, size_t len)
{
	if (len > PUMP_BUF - p->off[i] - p->len[i])
		len = PUMP_BUF - p->off[i] - p->len[i];
	memcpy(p->buf[i] + p->off[i] + p->len[i], data, len);
	p->len[i] += len;
}

void pump_close(struct pump *p)
{
	for (int i = 0; i < 2; i++) {
		if (p->fd[i] >= 0)
			close(p->fd[i]);
		free(p->buf[i]);
	}
	pump_clear(p);
}

bool pump_step(struct pump *p, const short *revents)
{
	for (int i = 0; i < 2; i++) {
		int o = !i;

		if (!p->eof[i] && (revents[i] & (POLLIN | POLLHUP | POLLERR)) &&
		    p->off[i] + p->len[i] < PUMP_BUF) {
			ssize_t n = recv(p->fd[i], p->buf[i] + p->off[i] + p->len[i],
					 PUMP_BUF - p->off[i] - p->len[i], MSG_DONTWAIT);

			if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
				p->eof[i] = true;
			else if (n > 0)
				p->len[i] += (size_t)n;
		}
		if (p->len[i]) {
			ssize_t n = send(p->fd[o], p->buf[i] + p->off[i], p->len[i],
					 MSG_DONTWAIT | MSG_NOSIGNAL);

			if (n < 0 && errno != EAGAIN && errno != EINTR) {
				/* fd[o] takes nothing more: drop this direction. */
				p->len[i] = 0;
				p->eof[i] = true;
				p->shut[o] = true;
			}
			if (n > 0) {
				p->moved[i] += (uint64_t)n;
				p->off[i] += (size_t)n;
				p->len[i] -= (size_t)n;
			}
			if (!p->len[i])
				p->off[i] = 0;
		}
		if (p->eof[i] && !p->len[i] && !p->shut[o]) {
			shutdown(p->fd[o], SHUT_WR);
			p->shut[o] = true;
		}
	}
	return !(p->shut[0] && p->shut[1]);
}

short pump_events(const struct pump *p, int i)
{
	short ev = 0;

	if (!p->eof[i] && p->off[i] + p->len[i] < PUMP_BUF)
		ev |= POLLIN;
	if (p->len[!i])
		ev |= POLLOUT;
	return ev;
}

void pump_run(struct pump *p, int stop_fd)
{
	static const short all[2] = { POLLIN | POLLOUT, POLLIN | POLLOUT };

	/* A first step for what was preloaded: nothing may be due to poll. */
	bool more = pump_step(p, all);

	while (more) {
		struct pollfd pfd[3];
		short rev[2];

		for (int s = 0; s < 2; s++) {
			short ev = pump_events(p, s);

			/* Nothing wanted: not polled at all, or a hang-up poll
			 * always reports would spin until the other side drains. */
			pfd[s] = (struct pollfd){ .fd = ev ? p->fd[s] : -1, .events = ev };
		}
		pfd[2] = (struct pollfd){ .fd = stop_fd, .events = POLLIN };
		if (poll(pfd, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[2].revents)
			break;
		rev[0] = pfd[0].revents;
		rev[1] = pfd[1].revents;
		more = pump_step(p, rev);
	}
}
