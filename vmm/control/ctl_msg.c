/* ctl_msg.c - the control socket's messages: fixed little-endian layouts, every field checked, descriptors passed with SCM_RIGHTS. */
#include "control/ctl_msg.h"
#include "lib/errmsg.h"
#include "snapshot/codec.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v = 0;

	for (int i = 0; i < 4; i++)
		v |= (uint32_t)p[i] << (8 * i);
	return v;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* A string field: n bytes, printable (it reaches a log line), then zeros
 * up to cap. */
static int get_text(char *out, const uint8_t *p, uint32_t n, size_t cap)
{
	if (n > cap)
		return -EBADMSG;
	for (uint32_t i = 0; i < n; i++)
		if (p[i] < 0x20 || p[i] == 0x7f)
			return -EBADMSG;
	for (size_t i = n; i < cap; i++)
		if (p[i])
			return -EBADMSG;
	memcpy(out, p, n);
	out[n] = '\0';
	return 0;
}

void ctl_request_encode(const struct ctl_request *r, uint8_t *buf)
{
	size_t n = strnlen(r->dir, CTL_DIR_MAX);

	memset(buf, 0, CTL_REQUEST_LEN);
	memcpy(buf, CTL_MAGIC, CTL_MAGIC_LEN);
	put32(buf + 8, r->op);
	put32(buf + 12, (uint32_t)n);
	memcpy(buf + 16, r->dir, n);
	put32(buf + 16 + CTL_DIR_MAX, r->slot);
}

int ctl_request_decode(struct ctl_request *r, const uint8_t *buf, size_t len, int nfds,
		       const char **why)
{
	bool saves, insert;
	int want;

	memset(r, 0, sizeof(*r));
	if (len != CTL_REQUEST_LEN || memcmp(buf, CTL_MAGIC, CTL_MAGIC_LEN))
		return errmsg_why(why, -EBADMSG, "not a mayfly control request");
	r->op = get32(buf + 8);
	if (r->op < CTL_OP_PAUSE || r->op > CTL_OP_MAX)
		return errmsg_why(why, -EBADMSG, "unknown control operation %u", r->op);
	saves = r->op == CTL_OP_PAUSE || r->op == CTL_OP_FORK;
	insert = r->op == CTL_OP_DISK_INSERT;
	want = saves ? CTL_NFDS : insert ? 1 : 0;
	if (nfds != want)
		return errmsg_why(why, -EBADMSG, "%d file descriptors with a control request (%d "
				"expected)", nfds, want);
	if (get_text(r->dir, buf + 16, get32(buf + 12), CTL_DIR_MAX) ||
	    (insert && strlen(r->dir) > CTL_DISK_ID_MAX))
		return errmsg_why(why, -EBADMSG, "a malformed %s in a control request",
				insert ? "disk id" : "snapshot name");
	r->slot = get32(buf + 16 + CTL_DIR_MAX);
	if (r->slot && !insert)
		return errmsg_why(why, -EBADMSG, "a slot in a control request that has none");
	return 0;
}

void ctl_reply_encode(const struct ctl_reply *r, uint8_t *buf)
{
	size_t n = strnlen(r->text, CTL_TEXT_MAX);
	const uint64_t nums[5] = { r->memory_bytes, r->overlay_bytes, r->state_bytes,
				   r->paused_us, r->total_us };

	memset(buf, 0, CTL_REPLY_LEN);
	memcpy(buf, CTL_MAGIC, CTL_MAGIC_LEN);
	put32(buf + 8, r->status);
	put32(buf + 12, r->flags);
	for (int i = 0; i < 5; i++)
		put64(buf + 16 + 8 * i, nums[i]);
	put32(buf + 56, (uint32_t)n);
	memcpy(buf + 60, r->text, n);
}

int ctl_reply_decode(struct ctl_reply *r, const uint8_t *buf, size_t len, const char **why)
{
	uint64_t *nums[5] = { &r->memory_bytes, &r->overlay_bytes, &r->state_bytes,
			      &r->paused_us, &r->total_us };

	memset(r, 0, sizeof(*r));
	if (len != CTL_REPLY_LEN || memcmp(buf, CTL_MAGIC, CTL_MAGIC_LEN))
		return errmsg_why(why, -EBADMSG, "not a mayfly control reply");
	r->status = get32(buf + 8);
	r->flags = get32(buf + 12);
	if (r->status > CTL_ST_MAX || (r->flags & ~(CTL_FLAG_OVERLAY | CTL_FLAG_DISK_FULL)))
		return errmsg_why(why, -EBADMSG, "a control reply with status %u, flags 0x%x",
				r->status, r->flags);
	for (int i = 0; i < 5; i++)
		*nums[i] = get64(buf + 16 + 8 * i);
	if (get_text(r->text, buf + 60, get32(buf + 56), CTL_TEXT_MAX))
		return errmsg_why(why, -EBADMSG, "a malformed reason in a control reply");
	return 0;
}

int ctl_socket_path(const char *vsock_path, char *out, size_t len)
{
	int n = snprintf(out, len, "%s" CTL_SUFFIX, vsock_path);

	return n > 0 && (size_t)n < len && n <= 107 ? 0 : -ENAMETOOLONG;
}

int ctl_sockaddr(const char *path, struct sockaddr_un *a)
{
	size_t n = strlen(path);

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	if (n >= sizeof(a->sun_path))
		return -ENAMETOOLONG;
	memcpy(a->sun_path, path, n);
	return 0;
}

int ctl_send(int sock, const void *buf, size_t len, const int *fds, int nfds)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int) * CTL_NFDS)];
	} ctrl;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (nfds < 0 || nfds > CTL_NFDS)
		return -EINVAL;
	if (nfds) {
		memset(&ctrl, 0, sizeof(ctrl));
		m.msg_control = ctrl.buf;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		ctrl.h.cmsg_level = SOL_SOCKET;
		ctrl.h.cmsg_type = SCM_RIGHTS;
		ctrl.h.cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(&ctrl.h), fds, sizeof(int) * (size_t)nfds);
	}
	do
		n = sendmsg(sock, &m, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

/* Every descriptor of every SCM_RIGHTS message into fds; past max_fds
 * (or any other control message) all are closed: -EBADMSG. */
static int take_fds(struct msghdr *m, int *fds, int max_fds, int *nfds)
{
	bool bad = (m->msg_flags & MSG_CTRUNC) != 0;

	*nfds = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		size_t n;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
		    c->cmsg_len < CMSG_LEN(0)) {
			bad = true;
			continue;
		}
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (*nfds < max_fds)
				fds[(*nfds)++] = fd;
			else {
				close(fd);
				bad = true;
			}
		}
	}
	if (!bad)
		return 0;
	for (int i = 0; i < *nfds; i++)
		close(fds[i]);
	*nfds = 0;
	return -EBADMSG;
}

int ctl_recv(int sock, void *buf, size_t len, int *fds, int max_fds, int *nfds, int timeout_ms,
	     int cancel_fd)
{
	union {
		struct cmsghdr h;
		/* Room for more than we take: extra ones arrive and are closed. */
		char buf[CMSG_SPACE(sizeof(int) * (CTL_NFDS + 8))];
	} ctrl;
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctrl.buf,
			    .msg_controllen = sizeof(ctrl.buf) };
	struct pollfd p[2] = { { .fd = sock, .events = POLLIN }, { .fd = cancel_fd, .events = POLLIN } };
	ssize_t n;
	int rc;

	*nfds = 0;
	rc = poll(p, cancel_fd >= 0 ? 2 : 1, timeout_ms);
	if (rc < 0)
		return errno == EINTR ? -ETIMEDOUT : -errno;
	if (rc == 0)
		return -ETIMEDOUT;
	if (cancel_fd >= 0 && (p[1].revents & POLLIN))
		return -ECANCELED;
	do
		n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	rc = take_fds(&m, fds, max_fds, nfds);
	if (!rc && (m.msg_flags & MSG_TRUNC)) {
		for (int i = 0; i < *nfds; i++)
			close(fds[i]);
		*nfds = 0;
		rc = -EMSGSIZE;
	}
	return rc ? rc : (int)n;
}
