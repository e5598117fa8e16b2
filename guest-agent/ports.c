/* ports.c - PORT: a host connection handed to a child that joins it to 127.0.0.1:port in the guest (a published port's TCP connection). */
#include "agent.h"
#include "pump.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int port_request(struct conn *c, const struct proto_frame *f)
{
	struct proto_reader r;
	uint32_t port;
	unsigned busy = 0;

	proto_reader_init(&r, f);
	if (!proto_get_u32(&r, &port) || !proto_done(&r))
		return -EPROTO;
	if (!port || port > 65535)
		return conn_send_error(c, f->id, EINVAL, "PORT: port %u out of range", port);
	/* The connection becomes a byte pipe: nothing of it may be left behind. */
	if (c->nprocs || c->nxfers)
		return conn_send_error(c, f->id, EBUSY,
				       "PORT: the connection has processes or transfers");
	for (unsigned i = 0; i < AGENT_MAX_PORTS; i++)
		busy += c->a->port_pids[i] > 0;
	if (busy == AGENT_MAX_PORTS)
		return conn_send_error(c, f->id, EAGAIN, "PORT: %d connections already relayed",
				       AGENT_MAX_PORTS);
	c->port = port;
	c->port_id = f->id;
	return 0;
}

static bool write_all(int fd, const uint8_t *p, size_t len)
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

/* 127.0.0.1:port, waiting AGENT_PORT_CONNECT_MS at most (a listener whose
 * backlog is full would hold a blocking connect). fd or -errno. */
static int dial_local(unsigned port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), err = 0;
	socklen_t len = sizeof(err);
	struct pollfd pfd;

	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0)
		return fd;
	if (errno != EINPROGRESS) {
		err = errno;
		close(fd);
		return -err;
	}
	pfd = (struct pollfd){ .fd = fd, .events = POLLOUT };
	if (poll(&pfd, 1, AGENT_PORT_CONNECT_MS) != 1)
		err = ETIMEDOUT;
	else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err) {
		close(fd);
		return -err;
	}
	return fd;
}

/* The relay: hfd is the host's connection, out[len] what the agent had
 * not sent on it yet (HELLO_OK, say). */
static void __attribute__((noreturn)) relay_main(int hfd, unsigned port, uint32_t id,
						 const uint8_t *out, size_t out_len,
						 const uint8_t *rest, size_t rest_len)
{
	uint8_t frame[PROTO_HEADER_LEN + 600];
	struct proto_writer w;
	struct pump p;
	int tfd, n;

	fcntl(hfd, F_SETFL, fcntl(hfd, F_GETFL) & ~O_NONBLOCK);
	if (!write_all(hfd, out, out_len))
		_exit(1);
	net_lo_up();
	tfd = dial_local(port);
	proto_begin(&w, frame, sizeof(frame), tfd < 0 ? PROTO_ERROR : PROTO_OK, id);
	if (tfd < 0) {
		char msg[128];

		snprintf(msg, sizeof(msg), "PORT: connect to 127.0.0.1:%u: %s", port, strerror(-tfd));
		proto_put_u32(&w, (uint32_t)-tfd);
		proto_put_str(&w, msg);
	}
	n = proto_end(&w);
	if (n < 0 || !write_all(hfd, frame, (size_t)n) || tfd < 0)
		_exit(tfd < 0 ? 0 : 1);
	if (pump_open(&p, hfd, tfd))
		_exit(1);
	pump_preload(&p, 0, rest, rest_len);
	pump_run(&p, -1);
	_exit(0);
}

void ports_handover(struct conn *c, const uint8_t *rest, size_t len)
{
	struct agent *a = c->a;
	unsigned slot = 0;
	pid_t pid;

	while (slot < AGENT_MAX_PORTS && a->port_pids[slot] > 0)
		slot++;
	/* port_request checked there was room; a frame before this one
	 * cannot have taken it (one handover per connection). */
	/* --fd: the agent ends with this connection, and a child would die
	 * with it (PR_SET_PDEATHSIG): the agent becomes the relay itself. */
	if (a->single && slot < AGENT_MAX_PORTS && len <= PUMP_BUF)
		relay_main(c->fd, c->port, c->port_id, c->out + c->out_off, c->out_len, rest, len);
	if (slot == AGENT_MAX_PORTS || len > PUMP_BUF || (pid = fork()) < 0) {
		conn_send_error(c, c->port_id, EAGAIN, "PORT: cannot start its relay");
		c->port = 0;
		conn_close(c, true);
		return;
	}
	if (pid == 0) {
		/* Nothing of the agent's but this connection. */
		relay_child_init(c->fd);
		relay_main(3, c->port, c->port_id, c->out + c->out_off, c->out_len, rest, len);
	}
	a->port_pids[slot] = pid;
	/* The child sends what was pending: the parent's copy goes unsent. */
	c->out_len = 0;
	conn_close(c, false);
}

bool ports_reaped(struct agent *a, pid_t pid)
{
	for (unsigned i = 0; i < AGENT_MAX_PORTS; i++)
		if (a->port_pids[i] == pid) {
			a->port_pids[i] = 0;
			return true;
		}
	return false;
}

void ports_stop(struct agent *a)
{
	for (unsigned i = 0; i < AGENT_MAX_PORTS; i++)
		if (a->port_pids[i] > 0)
			kill(a->port_pids[i], SIGKILL);   /* reaped by procs_reap */
}
