/* client.c - the host end of the agent protocol: hybrid vsock CONNECT, HELLO, frames, file copies. */
#include "agent/client.h"
#include "clock.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define CONNECT_LINE_MAX 64
#define RETRY_NS         (10ULL * 1000 * 1000)   /* between tries while the guest boots */
#define AGENT_SOCKET_WAIT_NS (3ULL * 1000 * 1000 * 1000)   /* for the VMM to create its socket */

static int ms_until(uint64_t deadline_ns)
{
	uint64_t now = clock_now_ns();

	return now >= deadline_ns ? 0 : (int)((deadline_ns - now) / 1000000 + 1);
}

/* Read one "\n"-terminated line of at most CONNECT_LINE_MAX bytes, byte by
 * byte so nothing after it (the agent's first frame) is consumed. */
static int read_line(int fd, char *line, size_t cap, uint64_t deadline_ns)
{
	size_t n = 0;

	while (n + 1 < cap) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int r = poll(&p, 1, ms_until(deadline_ns));
		ssize_t got;

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r ? -errno : -ETIMEDOUT;
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

static int write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		/* MSG_NOSIGNAL: a VMM or agent that hung up is an error here, never
		 * a SIGPIPE; mayfly run's thread writes before vm_run ignores it. */
		ssize_t w = send(fd, p, len, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;   /* a blocking socket: no EAGAIN */
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

/* One try: connect to the VMM's socket and ask for the agent's port. */
static int try_connect(const char *uds_path, uint32_t port, uint64_t deadline_ns)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	char line[CONNECT_LINE_MAX];
	int fd, rc;

	if (strlen(uds_path) >= sizeof(addr.sun_path))
		return -ENAMETOOLONG;
	memcpy(addr.sun_path, uds_path, strlen(uds_path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		rc = -errno;
		goto err_fd;
	}
	snprintf(line, sizeof(line), "CONNECT %u\n", port);
	rc = write_all(fd, line, strlen(line));
	if (!rc)
		rc = read_line(fd, line, sizeof(line), deadline_ns);
	if (!rc && strncmp(line, "OK ", 3))
		rc = -EPROTO;
	if (rc)
		goto err_fd;
	return fd;

err_fd:
	close(fd);
	return rc;
}

int agent_client_connect(struct agent_client *c, const char *uds_path, uint32_t port,
			 uint64_t deadline_ns, const _Atomic bool *cancel, const char **why)
{
	struct proto_writer w;
	struct proto_frame f;
	int fd, rc, len;

	uint64_t socket_deadline = clock_now_ns() + AGENT_SOCKET_WAIT_NS;

	c->fd = -1;
	c->next_id = 1;
	c->rlen = c->consumed = 0;
	for (;;) {
		fd = try_connect(uds_path, port, deadline_ns);
		if (fd >= 0)
			break;
		/* Not up yet: the VMM closed our CONNECT because no agent
		 * listens in the guest yet (retried until the deadline). A missing
		 * or dead socket may be a VM still being built (`mayfly boot
		 * --vsock S & mayfly exec --vsock S`): that gets a few seconds. */
		if ((fd == -ENOENT || fd == -ECONNREFUSED) && clock_now_ns() >= socket_deadline) {
			*why = "no VM is listening on this socket";
			return fd;
		}
		if (fd != -ECONNRESET && fd != -ETIMEDOUT && fd != -ENOENT && fd != -ECONNREFUSED) {
			*why = "cannot connect to the VM's vsock socket";
			return fd;
		}
		if (cancel && atomic_load(cancel)) {
			*why = "the VM ended before its agent answered";
			return -ECANCELED;
		}
		if (clock_now_ns() + RETRY_NS >= deadline_ns) {
			*why = "the guest agent did not answer in time";
			return -ETIMEDOUT;
		}
		struct timespec ts = { 0, (long)RETRY_NS };
		nanosleep(&ts, NULL);
	}
	c->fd = fd;
	proto_begin(&w, c->wbuf, sizeof(c->wbuf), PROTO_HELLO, 0);
	proto_put_u32(&w, PROTO_VERSION);
	len = proto_end(&w);
	rc = len < 0 ? len : agent_client_send(c, (size_t)len);
	if (!rc) {
		rc = agent_client_recv(c, &f, ms_until(deadline_ns));
		rc = rc == 1 ? (f.type == PROTO_HELLO_OK ? 0 : -EPROTO) : rc ? rc : -ETIMEDOUT;
	}
	if (rc) {
		*why = rc == -ETIMEDOUT ? "the guest agent did not answer HELLO in time" :
		       "the guest agent's HELLO reply is not HELLO_OK (version mismatch?)";
		agent_client_close(c);
		return rc;
	}
	return 0;
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

int agent_client_send(struct agent_client *c, size_t len)
{
	return write_all(c->fd, c->wbuf, len);
}

int agent_client_recv(struct agent_client *c, struct proto_frame *f, int timeout_ms)
{
	uint64_t deadline = timeout_ms < 0 ? 0 : clock_now_ns() + (uint64_t)timeout_ms * 1000000;

	/* Drop the frame handed out last time. */
	if (c->consumed) {
		memmove(c->rbuf, c->rbuf + c->consumed, c->rlen - c->consumed);
		c->rlen -= c->consumed;
		c->consumed = 0;
	}
	for (;;) {
		int r = proto_frame_decode(c->rbuf, c->rlen, f);
		struct pollfd p = { .fd = c->fd, .events = POLLIN };
		ssize_t got;

		if (r < 0)
			return -EPROTO;
		if (r > 0) {
			c->consumed = (size_t)r;
			return 1;
		}
		r = poll(&p, 1, timeout_ms < 0 ? -1 : ms_until(deadline));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return 0;
		got = read(c->fd, c->rbuf + c->rlen, sizeof(c->rbuf) - c->rlen);
		if (got < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (got < 0)
			return -errno;
		if (got == 0)
			return -EPIPE;
		c->rlen += (size_t)got;
	}
}

/* An ERROR frame: its message into why (or strerror), its errno negated. */
static int error_reply(const struct proto_frame *f, char *why, size_t whylen)
{
	struct proto_reader rd;
	uint32_t err = EIO;

	proto_reader_init(&rd, f);
	proto_get_u32(&rd, &err);
	if (!proto_get_str(&rd, why, whylen))
		snprintf(why, whylen, "%s", strerror((int)err));
	return -(int)(err ? err : EIO);
}

/* Wait for the OK or ERROR answering request `id`. */
static int wait_reply(struct agent_client *c, uint32_t id, char *why, size_t whylen)
{
	struct proto_frame f;
	int r;

	for (;;) {
		r = agent_client_recv(c, &f, -1);
		if (r <= 0)
			return r ? r : -ETIMEDOUT;
		if (f.id != id)
			continue;
		if (f.type == PROTO_OK)
			return 0;
		if (f.type == PROTO_ERROR)
			return error_reply(&f, why, whylen);
		return -EPROTO;
	}
}

int agent_client_put(struct agent_client *c, const char *local, const char *guest,
		     char *why, size_t whylen)
{
	uint8_t chunk[PROTO_CHUNK];
	uint32_t id = agent_client_id(c);
	struct proto_writer w;
	struct stat st;
	int fd, rc, len;

	fd = open(local, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		rc = fd < 0 ? -errno : -EINVAL;
		snprintf(why, whylen, "cannot read '%s': %s", local,
			 rc == -EINVAL ? "not a regular file" : strerror(-rc));
		goto out;
	}
	proto_begin(&w, c->wbuf, sizeof(c->wbuf), PROTO_FILE_WRITE, id);
	proto_put_str(&w, guest);
	proto_put_u32(&w, st.st_mode & 07777);
	proto_put_u32(&w, PROTO_WRITE_CREATE | PROTO_WRITE_TRUNC);
	len = proto_end(&w);
	rc = len < 0 ? len : agent_client_send(c, (size_t)len);
	if (!rc)
		rc = wait_reply(c, id, why, whylen);
	while (!rc) {
		ssize_t n = read(fd, chunk, sizeof(chunk));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			snprintf(why, whylen, "cannot read '%s': %s", local, strerror(errno));
			break;
		}
		proto_begin(&w, c->wbuf, sizeof(c->wbuf), n ? PROTO_FILE_DATA : PROTO_FILE_END, id);
		if (n)
			proto_put_bytes(&w, chunk, (uint32_t)n);
		len = proto_end(&w);
		rc = len < 0 ? len : agent_client_send(c, (size_t)len);
		if (!n) {
			if (!rc)
				rc = wait_reply(c, id, why, whylen);
			break;
		}
	}
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

int agent_client_get(struct agent_client *c, const char *guest, const char *local,
		     char *why, size_t whylen)
{
	uint32_t id = agent_client_id(c);
	struct proto_writer w;
	struct proto_frame f;
	int fd, rc, len;

	fd = open(local, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		snprintf(why, whylen, "cannot write '%s': %s", local, strerror(errno));
		return -errno;
	}
	proto_begin(&w, c->wbuf, sizeof(c->wbuf), PROTO_FILE_READ, id);
	proto_put_str(&w, guest);
	len = proto_end(&w);
	rc = len < 0 ? len : agent_client_send(c, (size_t)len);
	while (!rc) {
		rc = agent_client_recv(c, &f, -1);
		if (rc <= 0) {
			rc = rc ? rc : -ETIMEDOUT;
			break;
		}
		rc = 0;
		if (f.id != id)
			continue;
		if (f.type == PROTO_FILE_END)
			break;
		if (f.type == PROTO_ERROR) {
			rc = error_reply(&f, why, whylen);
			break;
		}
		if (f.type == PROTO_FILE_DATA) {
			struct proto_reader rd;
			const uint8_t *data;
			uint32_t n;

			proto_reader_init(&rd, &f);
			if (!proto_get_bytes(&rd, &data, &n)) {
				rc = -EPROTO;
				break;
			}
			for (uint32_t done = 0; done < n;) {
				ssize_t wr = write(fd, data + done, n - done);

				if (wr < 0 && errno == EINTR)
					continue;
				if (wr < 0) {
					rc = -errno;
					snprintf(why, whylen, "cannot write '%s': %s", local,
						 strerror(errno));
					break;
				}
				done += (uint32_t)wr;
			}
		}
	}
	if (close(fd) < 0 && !rc)
		rc = -errno;
	if (rc)
		unlink(local);   /* never leave half a file that looks complete */
	return rc;
}
