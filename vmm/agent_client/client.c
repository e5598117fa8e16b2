/* client.c - the host end of the agent protocol: hybrid vsock CONNECT, HELLO, frames in place, deadlines. */
#include "agent_client/client.h"
#include "lib/clock.h"
#include "lib/log.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define CONNECT_LINE_MAX 64
#define RETRY_NS         (10ULL * 1000 * 1000)   /* between tries while the guest boots */
#define AGENT_SOCKET_WAIT_NS (3ULL * 1000 * 1000 * 1000)   /* for the VMM to create its socket */
#define ERRNO_MAX        4095                     /* what Linux calls an errno */

/* Wait until fd has `events`, cancel_fd fires or deadline_ns passes (0:
 * never). 1 ready, 0 timed out, -ECANCELED, or -errno. */
static int wait_fd(int fd, short events, int cancel_fd, uint64_t deadline_ns)
{
	for (;;) {
		struct pollfd p[2] = { { .fd = fd, .events = events },
				       { .fd = cancel_fd, .events = POLLIN } };
		uint64_t now = clock_now_ns();
		int ms = -1, r;

		if (deadline_ns) {
			/* Round up: never spin on a deadline less than 1 ms away. */
			ms = now >= deadline_ns ? 0 : (int)((deadline_ns - now + 999999) / 1000000);
		}
		r = poll(p, 2, ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (p[1].revents)
			return -ECANCELED;
		return r > 0;
	}
}

/* Read one "\n"-terminated line of at most CONNECT_LINE_MAX bytes, byte by
 * byte so nothing after it (the agent's first frame) is consumed. */
static int read_line(int fd, char *line, size_t cap, int cancel_fd, uint64_t deadline_ns)
{
	size_t n = 0;

	while (n + 1 < cap) {
		int r = wait_fd(fd, POLLIN, cancel_fd, deadline_ns);
		ssize_t got;

		if (r <= 0)
			return r ? r : -ETIMEDOUT;
		got = read(fd, line + n, 1);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return -ECONNRESET;   /* the VMM closed: nobody listens in the guest yet */
		if (line[n] == '\n') {
			line[n] = '\0';
			return 0;
		}
		n++;
	}
	return -EPROTO;
}

/* Send all of buf by deadline_ns (0: none), giving up when cancel_fd fires.
 * MSG_NOSIGNAL: an agent or VMM that hung up is an error here, never a
 * SIGPIPE; MSG_DONTWAIT: an agent that stops reading cannot hold us past
 * the deadline. */
static int send_all(int fd, const void *buf, size_t len, int cancel_fd, uint64_t deadline_ns)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t w = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			int r = wait_fd(fd, POLLOUT, cancel_fd, deadline_ns);

			if (r <= 0)
				return r ? r : -ETIMEDOUT;
			continue;
		}
		if (w < 0)
			return -errno;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

int agent_dial_unix(void *opaque)
{
	const char *path = opaque;
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd, rc;

	if (strlen(path) >= sizeof(addr.sun_path))
		return -ENAMETOOLONG;
	memcpy(addr.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

/* One try: dial and ask the VMM for the agent's port. HELLO and the
 * caller's first frames go in the same write as the line: the VMM keeps
 * what follows the line in the socket and hands it to the guest once the
 * agent accepted, so their trip overlaps the connect's. The whole write is
 * rebuilt (fresh ids, fresh contents) on each try. */
static int try_connect(struct agent_client *c, agent_dial_fn dial, void *opaque, uint32_t port,
		       const struct agent_first *first, uint64_t deadline_ns)
{
	char line[CONNECT_LINE_MAX];
	struct proto_writer w;
	size_t n = (size_t)snprintf((char *)c->wbuf, sizeof(c->wbuf), "CONNECT %u\n", port);
	int fd, rc, len;

	c->next_id = 1;
	proto_begin(&w, c->wbuf + n, sizeof(c->wbuf) - n, PROTO_HELLO, 0);
	proto_put_u32(&w, PROTO_VERSION);
	len = proto_end(&w);
	if (len < 0)
		return len;
	n += (size_t)len;
	if (first) {
		len = first->build(c, c->wbuf + n, sizeof(c->wbuf) - n, first->opaque);
		if (len < 0)
			return len;
		n += (size_t)len;
	}
	fd = dial(opaque);
	if (fd < 0)
		return fd;
	rc = send_all(fd, c->wbuf, n, c->cancel_fd, deadline_ns);
	if (!rc)
		rc = read_line(fd, line, sizeof(line), c->cancel_fd, deadline_ns);
	if (!rc && strncmp(line, "OK ", 3))
		rc = -EPROTO;
	if (rc) {
		close(fd);
		return rc;
	}
	return fd;
}

static void reset(struct agent_client *c, int cancel_fd)
{
	c->fd = -1;
	c->cancel_fd = cancel_fd;
	c->broken = false;
	c->next_id = 1;
	c->rstart = c->rlen = 0;
}

int agent_client_connect(struct agent_client *c, agent_dial_fn dial, void *dial_opaque,
			 uint32_t port, uint64_t deadline_ns, int cancel_fd, const char **why)
{
	return agent_client_connect_first(c, dial, dial_opaque, port, NULL, deadline_ns, cancel_fd,
					  why);
}

int agent_client_connect_first(struct agent_client *c, agent_dial_fn dial, void *dial_opaque,
			       uint32_t port, const struct agent_first *first,
			       uint64_t deadline_ns, int cancel_fd, const char **why)
{
	uint64_t socket_deadline = clock_now_ns() + AGENT_SOCKET_WAIT_NS;
	struct proto_frame f;
	bool no_frame = false;
	int fd, rc;

	reset(c, cancel_fd);
	for (;;) {
		fd = try_connect(c, dial, dial_opaque, port, first, deadline_ns);
		if (fd >= 0)
			break;
		if (fd == -ECANCELED) {
			*why = "the VM ended before its agent answered";
			return fd;
		}
		/* Not up yet: the VMM closed our CONNECT because no agent
		 * listens in the guest yet (retried until the deadline). A missing
		 * or dead socket may be a VM still being built (`mayfly boot
		 * --vsock S & mayfly exec --vsock S`): that gets a few seconds. */
		if ((fd == -ENOENT || fd == -ECONNREFUSED) && clock_now_ns() >= socket_deadline) {
			*why = "no VM is listening on this socket";
			return fd;
		}
		if (fd != -ECONNRESET && fd != -ETIMEDOUT && fd != -ENOENT && fd != -ECONNREFUSED) {
			*why = "cannot connect to the VM's vsock device";
			return fd;
		}
		if (clock_now_ns() + RETRY_NS >= deadline_ns) {
			*why = "the guest agent did not answer in time";
			return -ETIMEDOUT;
		}
		if (wait_fd(-1, 0, cancel_fd, clock_now_ns() + RETRY_NS) == -ECANCELED) {
			*why = "the VM ended before its agent answered";
			return -ECANCELED;
		}
	}
	c->fd = fd;
	/* HELLO went with the CONNECT line: its answer comes first. */
	rc = agent_client_recv(c, &f, deadline_ns);
	/* -EPROTO from recv: no frame at all (malformed, or another version),
	 * so f says nothing to name. */
	no_frame = rc == -EPROTO;
	rc = rc == 1 ? (f.type == PROTO_HELLO_OK ? 0 : -EPROTO) : rc ? rc : -ETIMEDOUT;
	if (no_frame) {
		*why = "the guest agent answered HELLO with a malformed frame or another protocol "
		       "version";
	} else if (rc == -EPROTO) {
		static _Thread_local char msg[200];

		snprintf(msg, sizeof(msg), "the guest agent answered HELLO with %s, not HELLO_OK",
			 proto_type_name(f.type));
		if (f.type == PROTO_ERROR) {
			char err[120];
			int e = agent_client_error(&f, err, sizeof(err));

			snprintf(msg, sizeof(msg), "the guest agent refused HELLO: %s (%s)", err,
				 strerror(-e));
		}
		*why = msg;
	} else if (rc) {
		*why = rc == -ETIMEDOUT ? "the guest agent did not answer HELLO in time" :
		       rc == -ECANCELED ? "the VM ended before its agent answered" :
		       "lost the guest agent during HELLO";
	}
	if (rc)
		agent_client_close(c);
	return rc;
}

void agent_client_close(struct agent_client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

uint32_t agent_client_id(struct agent_client *c)
{
	return c->next_id++;
}

int agent_client_send(struct agent_client *c, size_t len, uint64_t deadline_ns)
{
	int rc;

	if (c->broken)
		return -EPROTO;
	rc = send_all(c->fd, c->wbuf, len, c->cancel_fd, deadline_ns);
	/* Half a frame may have gone: nothing after it would parse. */
	if (rc)
		c->broken = true;
	return rc;
}

bool agent_client_has_frame(const struct agent_client *c)
{
	struct proto_frame f;

	return proto_frame_decode(c->rbuf + c->rstart, c->rlen, &f) != 0;
}

int agent_client_recv(struct agent_client *c, struct proto_frame *f, uint64_t deadline_ns)
{
	if (c->broken)
		return -EPROTO;
	for (;;) {
		int r = proto_frame_decode(c->rbuf + c->rstart, c->rlen, f);
		ssize_t got;

		if (r < 0) {
			c->broken = true;
			return -EPROTO;
		}
		if (r > 0) {
			/* In place: the frame stays valid until the next call. */
			c->rstart += (size_t)r;
			c->rlen -= (size_t)r;
			if (!c->rlen)
				c->rstart = 0;
			return 1;
		}
		/* A partial frame: make room for the largest one behind it.
		 * Moving only when the tail is short keeps this linear. */
		if (sizeof(c->rbuf) - c->rstart - c->rlen < AGENT_FRAME_MAX) {
			memmove(c->rbuf, c->rbuf + c->rstart, c->rlen);
			c->rstart = 0;
		}
		r = wait_fd(c->fd, POLLIN, c->cancel_fd, deadline_ns);
		if (r < 0)
			return r;
		if (r == 0)
			return 0;
		got = read(c->fd, c->rbuf + c->rstart + c->rlen, sizeof(c->rbuf) - c->rstart - c->rlen);
		if (got < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (got < 0)
			return -errno;
		if (got == 0)
			return -EPIPE;
		c->rlen += (size_t)got;
	}
}

int agent_client_error(const struct proto_frame *f, char *why, size_t whylen)
{
	struct proto_reader rd;
	char msg[256];
	uint32_t err = 0;

	proto_reader_init(&rd, f);
	if (!proto_get_u32(&rd, &err) || err == 0 || err > ERRNO_MAX) {
		snprintf(why, whylen, "the guest agent sent an ERROR with an invalid errno");
		return -EPROTO;
	}
	if (proto_get_str(&rd, msg, sizeof(msg)) && msg[0])
		log_escape(why, whylen, msg);
	else
		snprintf(why, whylen, "%s", strerror((int)err));
	return -(int)err;
}

int agent_client_next(struct agent_client *c, uint32_t id, struct proto_frame *f,
		      uint64_t deadline_ns)
{
	for (;;) {
		int r = agent_client_recv(c, f, deadline_ns);

		if (r <= 0)
			return r ? r : -ETIMEDOUT;
		if (f->id == id)
			return 0;
	}
}

int agent_client_wait_ok(struct agent_client *c, uint32_t id, uint64_t deadline_ns, char *why,
			 size_t whylen)
{
	struct proto_frame f;

	for (;;) {
		int r = agent_client_next(c, id, &f, deadline_ns);

		if (r)
			return r;
		if (f.type == PROTO_OK)
			return 0;
		if (f.type == PROTO_ERROR)
			return agent_client_error(&f, why, whylen);
		snprintf(why, whylen, "the guest agent answered with %s", proto_type_name(f.type));
		c->broken = true;
		return -EPROTO;
	}
}

int agent_client_lost(int rc, char *why, size_t whylen)
{
	if (why[0])
		return rc;
	if (rc == -ETIMEDOUT)
		snprintf(why, whylen, "no answer from the guest agent in time (--call-timeout)");
	else if (rc == -ECANCELED)
		snprintf(why, whylen, "the VM ended");
	else if (rc == -EPIPE)
		snprintf(why, whylen, "the guest agent closed the connection");
	else if (rc == -EPROTO)
		snprintf(why, whylen, "the guest agent broke the protocol");
	else
		snprintf(why, whylen, "%s", strerror(-rc));
	return rc;
}
