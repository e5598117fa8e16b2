/* ttrpc_client.c - one ttrpc call at a time over a Unix socket, every wait bounded by the call's timeout. */
#include "shim/ttrpc_client.h"
#include "lib/clock.h"

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define NS_PER_MS 1000000ULL
#define READ_CHUNK 65536

int ttrpc_client_connect(const char *address, int *fd)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	size_t n;
	int s;

	*fd = -1;
	if (!address)
		return -EINVAL;
	if (!strncmp(address, "unix://", 7))
		address += 7;
	n = strlen(address);
	if (!n)
		return -EINVAL;
	if (n >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	memcpy(a.sun_path, address, n);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int rc = -errno;

		close(s);
		return rc;
	}
	*fd = s;
	return 0;
}

/* Wait for `events` on fd until deadline_ns: 0, -ETIMEDOUT or -errno. */
static int wait_fd(int fd, short events, uint64_t deadline_ns)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = events };
		uint64_t now = clock_now_ns();
		int ms, n;

		if (now >= deadline_ns)
			return -ETIMEDOUT;
		ms = (int)((deadline_ns - now + NS_PER_MS - 1) / NS_PER_MS);
		n = poll(&p, 1, ms);
		if (n > 0)
			return 0;   /* ready, or an error the next call reports */
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

static int send_until(int fd, const uint8_t *p, size_t len, uint64_t deadline_ns)
{
	while (len) {
		ssize_t n = send(fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		int rc;

		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		rc = wait_fd(fd, POLLOUT, deadline_ns);
		if (rc)
			return rc;
	}
	return 0;
}

int ttrpc_send(int fd, const void *buf, size_t len, int timeout_ms)
{
	return send_until(fd, buf, len,
			  clock_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * NS_PER_MS);
}

/* The next frame, reading never past it. 1 with *f; -ETIMEDOUT,
 * -ECONNRESET (the end of the stream), -EBADMSG (over the size), -errno. */
static int read_frame(int fd, struct ttrpc_reader *rd, uint64_t deadline_ns, struct ttrpc_frame *f)
{
	uint8_t buf[READ_CHUNK];

	for (;;) {
		size_t want = ttrpc_reader_want(rd), used;
		ssize_t n;
		int rc;

		if (want > sizeof(buf))
			want = sizeof(buf);
		n = want ? recv(fd, buf, want, MSG_DONTWAIT) : 0;
		if (n == 0 && want)
			return -ECONNRESET;
		if (n < 0) {
			if (errno != EAGAIN && errno != EINTR)
				return -errno;
			rc = wait_fd(fd, POLLIN, deadline_ns);
			if (rc)
				return rc;
			continue;
		}
		rc = ttrpc_reader_feed(rd, buf, (size_t)n, &used, f);
		if (rc)
			return rc == -EMSGSIZE ? -EBADMSG : rc;
	}
}

/* A process's stream ids: odd, as ttrpc's clients number theirs (from 1,
 * by 2, so after 2^31 calls 1 again, never 0). */
static _Atomic uint32_t next_stream = 1;

static uint32_t stream_next(void)
{
	return atomic_fetch_add(&next_stream, 2);
}

int ttrpc_client_call(int fd, const struct ttrpc_request *req, int timeout_ms,
		      struct ttrpc_response *resp)
{
	uint64_t deadline = clock_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * NS_PER_MS;
	struct ttrpc_request r = *req;
	struct ttrpc_reader rd;
	struct ttrpc_frame f;
	uint32_t id = stream_next();
	const char *why;
	uint8_t *frame;
	size_t len;
	int rc;

	memset(resp, 0, sizeof(*resp));
	r.timeout_ns = (int64_t)(timeout_ms > 0 ? timeout_ms : 0) * (int64_t)NS_PER_MS;
	rc = ttrpc_request_encode(&r, id, &frame, &len);
	if (rc)
		return rc;
	rc = send_until(fd, frame, len, deadline);
	free(frame);
	if (rc)
		return rc;
	ttrpc_reader_init(&rd);
	for (;;) {
		rc = read_frame(fd, &rd, deadline, &f);
		if (rc < 0)
			break;
		if (f.h.stream_id != id || f.h.type != TTRPC_TYPE_RESPONSE) {
			free(f.body);   /* a late answer to an earlier call, or not for a client */
			continue;
		}
		rc = ttrpc_response_decode(resp, f.body, f.h.length, &why);
		free(f.body);
		break;
	}
	ttrpc_reader_release(&rd);
	return rc;
}
