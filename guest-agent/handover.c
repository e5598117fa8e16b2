/* handover.c - a host connection given to a child of its own, which then speaks on it alone: PORT's relay, WATCH's watcher. */
#include "agent.h"
#include "pump.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

int handover_check(struct conn *c, uint32_t id, const char *what)
{
	unsigned busy = 0;

	/* The connection becomes the child's: nothing of it may be left behind. */
	if (c->nprocs || c->nxfers) {
		conn_send_error(c, id, EBUSY, "%s: the connection has processes or transfers", what);
		return -EBUSY;
	}
	for (unsigned i = 0; i < AGENT_MAX_HANDOVERS; i++)
		busy += c->a->handover_pids[i] > 0;
	if (busy == AGENT_MAX_HANDOVERS) {
		conn_send_error(c, id, EAGAIN, "%s: %d relays and watches run already", what,
				AGENT_MAX_HANDOVERS);
		return -EBUSY;
	}
	return 0;
}

bool handover_write(int fd, const uint8_t *p, size_t len)
{
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
	}
	return true;
}

/* The child's work on hfd: first what the agent had not sent on it yet
 * (HELLO_OK, say). */
static void __attribute__((noreturn)) child_main(struct conn *c, int hfd, const uint8_t *rest,
						 size_t len)
{
	fcntl(hfd, F_SETFL, fcntl(hfd, F_GETFL) & ~O_NONBLOCK);
	if (!handover_write(hfd, c->out + c->out_off, c->out_len))
		_exit(1);
	if (c->handover == HANDOVER_PORT)
		port_main(hfd, c->port, c->handover_id, rest, len);
	watch_main(hfd, c->watch_path, c->watch_recursive, c->handover_id);
}

void handover_start(struct conn *c, const uint8_t *rest, size_t len)
{
	struct agent *a = c->a;
	unsigned slot = 0;
	pid_t pid;

	while (slot < AGENT_MAX_HANDOVERS && a->handover_pids[slot] > 0)
		slot++;
	/* handover_check saw a free slot; a frame before this one cannot
	 * have taken it (one handover per connection). The host sends a
	 * WATCH nothing more. --fd: the agent ends with this connection, and
	 * a child would die with it (PR_SET_PDEATHSIG): the agent becomes
	 * the child itself. */
	if (a->single && slot < AGENT_MAX_HANDOVERS && len <= PUMP_BUF)
		child_main(c, c->fd, rest, len);
	if (slot == AGENT_MAX_HANDOVERS || len > PUMP_BUF || (pid = fork()) < 0) {
		conn_send_error(c, c->handover_id, EAGAIN, "cannot start a child for the connection");
		c->handover = HANDOVER_NONE;
		conn_close(c, true);
		return;
	}
	if (pid == 0) {
		/* Nothing of the agent's but this connection. */
		relay_child_init(c->fd);
		child_main(c, 3, rest, len);
	}
	a->handover_pids[slot] = pid;
	/* The child sends what was pending: the parent's copy goes unsent. */
	c->out_len = 0;
	conn_close(c, false);
}

bool handover_reaped(struct agent *a, pid_t pid)
{
	for (unsigned i = 0; i < AGENT_MAX_HANDOVERS; i++)
		if (a->handover_pids[i] == pid) {
			a->handover_pids[i] = 0;
			return true;
		}
	return false;
}

void handover_stop(struct agent *a)
{
	for (unsigned i = 0; i < AGENT_MAX_HANDOVERS; i++)
		if (a->handover_pids[i] > 0)
			kill(a->handover_pids[i], SIGKILL);   /* reaped by procs_reap */
}
