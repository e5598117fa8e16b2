/* sock_io.c - a whole buffer over a stream socket, before a deadline: the helpers' request and answer (the approver's spawner, the audit log's writer). */
#include "lib/sock_io.h"
#include "lib/clock.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>

int sock_move_all(int fd, void *buf, size_t len, bool out, uint64_t deadline_ns)
{
	uint8_t *p = buf;

	while (len) {
		struct pollfd pf = { .fd = fd, .events = out ? POLLOUT : POLLIN };
		ssize_t n;

		if (deadline_ns) {
			uint64_t now = clock_now_ns();

			if (now >= deadline_ns)
				return -ETIMEDOUT;
			if (poll(&pf, 1, (int)((deadline_ns - now + 999999) / 1000000)) < 0 &&
			    errno != EINTR)
				return -errno;
		}
		n = out ? send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT) :
			  recv(fd, p, len, MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
			if (!deadline_ns)
				poll(&pf, 1, -1);
			continue;
		}
		if (n < 0)
			return errno == ECONNRESET ? -EPIPE : -errno;
		if (n == 0)
			return -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}
