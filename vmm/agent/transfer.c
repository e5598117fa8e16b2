/* transfer.c - files into and out of the guest through its agent: bounded in size and time, the user's file replaced only whole. */
#include "agent/transfer.h"
#include "clock.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Wait for the OK or ERROR answering request `id`. */
static int wait_reply(struct agent_client *c, uint32_t id, uint64_t deadline_ns, char *why,
		      size_t whylen)
{
	struct proto_frame f;

	for (;;) {
		int r = agent_client_recv(c, &f, deadline_ns);

		if (r <= 0)
			return r ? r : -ETIMEDOUT;
		if (f.id != id)
			continue;
		if (f.type == PROTO_OK)
			return 0;
		if (f.type == PROTO_ERROR)
			return agent_client_error(&f, why, whylen);
		snprintf(why, whylen, "the guest agent answered with %s", proto_type_name(f.type));
		c->broken = true;
		return -EPROTO;
	}
}

/* A failure of the connection itself, said once. */
static int lost(int rc, char *why, size_t whylen)
{
	if (rc == -ETIMEDOUT)
		snprintf(why, whylen, "no answer from the guest agent in time (--call-timeout)");
	else if (rc == -ECANCELED)
		snprintf(why, whylen, "the VM ended");
	else if (rc == -EPIPE)
		snprintf(why, whylen, "the guest agent closed the connection");
	else if (rc == -EPROTO && !*why)
		snprintf(why, whylen, "the guest agent broke the protocol");
	else if (!*why)
		snprintf(why, whylen, "%s", strerror(-rc));
	return rc;
}

int transfer_put(struct agent_client *c, const char *local, const char *guest,
		 uint64_t deadline_ns, char *why, size_t whylen)
{
	int fd = open(local, O_RDONLY | O_CLOEXEC), rc;

	rc = transfer_put_fd(c, fd < 0 ? -errno : fd, local, guest, deadline_ns, why, whylen);
	if (fd >= 0)
		close(fd);
	return rc;
}

int transfer_put_fd(struct agent_client *c, int fd, const char *local, const char *guest,
		    uint64_t deadline_ns, char *why, size_t whylen)
{
	uint8_t chunk[PROTO_CHUNK];
	uint32_t id = agent_client_id(c);
	struct proto_writer w;
	struct stat st;
	int rc, len;

	why[0] = '\0';
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		rc = fd < 0 ? fd : -EINVAL;
		snprintf(why, whylen, "cannot read '%s': %s", local,
			 rc == -EINVAL ? "not a regular file" : strerror(-rc));
		goto out;
	}
	proto_begin(&w, c->wbuf, sizeof(c->wbuf), PROTO_FILE_WRITE, id);
	proto_put_str(&w, guest);
	proto_put_u32(&w, st.st_mode & 07777);
	proto_put_u32(&w, PROTO_WRITE_CREATE | PROTO_WRITE_TRUNC);
	len = proto_end(&w);
	rc = len < 0 ? len : agent_client_send(c, (size_t)len, deadline_ns);
	if (!rc)
		rc = wait_reply(c, id, deadline_ns, why, whylen);
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
		rc = len < 0 ? len : agent_client_send(c, (size_t)len, deadline_ns);
		if (!n) {
			if (!rc)
				rc = wait_reply(c, id, deadline_ns, why, whylen);
			break;
		}
	}
	if (rc && rc != -EINVAL && !why[0])
		lost(rc, why, whylen);
out:
	return rc;
}

/* New files get 0666 less the umask, as open(2) would give them. */
static mode_t new_file_mode(void)
{
	mode_t mask = umask(0);

	umask(mask);
	return 0666 & ~mask;
}

int transfer_target_open(const char *local, struct transfer_target *t, char *why, size_t whylen)
{
	char dir[PATH_MAX], base[PATH_MAX];
	struct stat st;
	mode_t mode;
	int rc;

	t->fd = -1;
	t->name = local;
	if (stat(local, &st) == 0 && !S_ISREG(st.st_mode)) {
		if (S_ISDIR(st.st_mode)) {
			snprintf(why, whylen, "cannot write '%s': it is a directory", local);
			return -EISDIR;
		}
		/* A pipe or a device: written as it is, never replaced. Opened
		 * non-blocking so a FIFO with no reader fails now instead of
		 * hanging, and a reader that stops reading meets the deadline. */
		t->direct = true;
		t->fd = open(local, O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
		if (t->fd < 0) {
			rc = -errno;
			snprintf(why, whylen, "cannot write '%s': %s", local, strerror(errno));
			return rc;
		}
		return 0;
	}
	/* A symbolic link is followed: its target is what gets replaced. */
	if (!realpath(local, t->final)) {
		struct stat lst;

		if (errno != ENOENT || lstat(local, &lst) == 0 || strlen(local) >= sizeof(t->final)) {
			rc = errno == ENOENT ? -ENOENT : -errno;
			snprintf(why, whylen, "cannot write '%s': %s", local,
				 rc == -ENOENT ? "a dangling symbolic link" : strerror(-rc));
			return rc;
		}
		snprintf(t->final, sizeof(t->final), "%s", local);
	}
	snprintf(dir, sizeof(dir), "%s", t->final);
	snprintf(base, sizeof(base), "%s", t->final);
	snprintf(t->tmp, sizeof(t->tmp), "%s/.%s.mayfly-XXXXXX", dirname(dir), basename(base));
	mode = stat(t->final, &st) == 0 ? st.st_mode & 07777 : new_file_mode();
	t->fd = mkostemp(t->tmp, O_CLOEXEC);
	if (t->fd < 0 || fchmod(t->fd, mode) < 0) {
		rc = -errno;
		snprintf(why, whylen, "cannot write beside '%s': %s", local, strerror(errno));
		if (t->fd >= 0) {
			close(t->fd);
			unlink(t->tmp);
		}
		t->fd = -1;
		return rc;
	}
	return 0;
}

/* Write all of data by the deadline (a direct target may be a pipe). */
static int write_target(struct transfer_target *t, const uint8_t *data, size_t n, uint64_t deadline_ns)
{
	while (n) {
		ssize_t w = write(t->fd, data, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			struct pollfd p = { .fd = t->fd, .events = POLLOUT };
			uint64_t now = clock_now_ns();

			if (now >= deadline_ns)
				return -ETIMEDOUT;
			if (poll(&p, 1, (int)((deadline_ns - now) / 1000000 + 1)) < 0 && errno != EINTR)
				return -errno;
			continue;
		}
		if (w < 0)
			return -errno;
		data += w;
		n -= (size_t)w;
	}
	return 0;
}

int transfer_target_close(struct transfer_target *t, int rc, char *why, size_t whylen)
{
	if (close(t->fd) < 0 && !rc) {
		rc = -errno;
		snprintf(why, whylen, "cannot write '%s': %s", t->final, strerror(errno));
	}
	if (t->direct)
		return rc;
	if (!rc && rename(t->tmp, t->final) < 0) {
		rc = -errno;
		snprintf(why, whylen, "cannot replace '%s': %s", t->final, strerror(errno));
	}
	if (rc)
		unlink(t->tmp);   /* only our own temporary file */
	return rc;
}

int transfer_get(struct agent_client *c, const char *guest, const char *local,
		 uint64_t max_bytes, uint64_t deadline_ns, char *why, size_t whylen)
{
	struct transfer_target t = { .fd = -1 };
	int rc;

	why[0] = '\0';
	rc = transfer_target_open(local, &t, why, whylen);
	if (rc)
		return rc;
	rc = transfer_get_into(c, guest, &t, max_bytes, deadline_ns, why, whylen);
	return transfer_target_close(&t, rc, why, whylen);
}

int transfer_get_into(struct agent_client *c, const char *guest, struct transfer_target *target,
		      uint64_t max_bytes, uint64_t deadline_ns, char *why, size_t whylen)
{
	uint32_t id = agent_client_id(c);
	const char *local = target->name;
	struct proto_writer w;
	struct proto_frame f;
	bool refused = false;
	uint64_t total = 0;
	int rc, len;

	why[0] = '\0';
	proto_begin(&w, c->wbuf, sizeof(c->wbuf), PROTO_FILE_READ, id);
	proto_put_str(&w, guest);
	len = proto_end(&w);
	rc = len < 0 ? len : agent_client_send(c, (size_t)len, deadline_ns);
	while (!rc) {
		struct proto_reader rd;
		const uint8_t *data;
		uint32_t n;

		rc = agent_client_recv(c, &f, deadline_ns);
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
			rc = agent_client_error(&f, why, whylen);
			refused = rc != -EPROTO;
			break;
		}
		proto_reader_init(&rd, &f);
		if (f.type != PROTO_FILE_DATA || !proto_get_bytes(&rd, &data, &n) || !proto_done(&rd)) {
			snprintf(why, whylen, "the guest agent sent a malformed %s frame",
				 proto_type_name(f.type));
			rc = -EPROTO;
			break;
		}
		if (n > max_bytes - total) {
			snprintf(why, whylen, "the guest's file is larger than --max-get-bytes "
				 "(%llu bytes)", (unsigned long long)max_bytes);
			rc = -EFBIG;
			break;
		}
		total += n;
		rc = write_target(target, data, n, deadline_ns);
		if (rc)
			snprintf(why, whylen, "cannot write '%s': %s", local,
				 rc == -ETIMEDOUT ? "its reader does not read" : strerror(-rc));
	}
	/* Unless the agent refused, it may still be sending this file: what
	 * comes after would be read as answers to the next call. */
	if (rc && !refused)
		c->broken = true;
	if (rc && !why[0])
		lost(rc, why, whylen);
	return rc;
}
