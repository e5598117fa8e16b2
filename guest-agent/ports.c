/* ports.c - PORT: a host connection whose child (handover.c) joins it to 127.0.0.1:port in the guest (a published port's TCP connection). */
#include "agent.h"
#include "pump.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int port_request(struct conn *c, const struct proto_frame *f)
{
	struct proto_reader r;
	uint32_t port;

	proto_reader_init(&r, f);
	if (!proto_get_u32(&r, &port) || !proto_done(&r))
		return -EPROTO;
	if (!port || port > 65535)
		return conn_send_error(c, f->id, EINVAL, "PORT: port %u out of range", port);
	if (handover_check(c, f->id, "PORT"))
		return 0;
	c->handover = HANDOVER_PORT;
	c->handover_id = f->id;
	c->port = port;
	return 0;
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

void port_main(int hfd, unsigned port, uint32_t id, const uint8_t *rest, size_t rest_len)
{
	uint8_t frame[PROTO_HEADER_LEN + 600];
	struct proto_writer w;
	struct pump p;
	int tfd, n;

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
	if (n < 0 || !handover_write(hfd, frame, (size_t)n) || tfd < 0)
		_exit(tfd < 0 ? 0 : 1);
	if (pump_open(&p, hfd, tfd))
		_exit(1);
	pump_preload(&p, 0, rest, rest_len);
	pump_run(&p, -1);
	_exit(0);
}
