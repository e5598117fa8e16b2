/* transfer.c - files into and out of the guest through its agent: bounded in size and time, the user's file replaced only whole. */
#include "agent_client/transfer.h"
#include "lib/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void stats_begin(struct transfer_stats *st, SHA2_CTX *ctx)
{
	if (st)
		st->bytes = 0;
	SHA256Init(ctx);
}

static void stats_add(struct transfer_stats *st, SHA2_CTX *ctx, const uint8_t *data, size_t n)
{
	if (!st)
		return;
	st->bytes += n;
	SHA256Update(ctx, data, n);
}

static void stats_end(struct transfer_stats *st, SHA2_CTX *ctx)
{
	if (st)
		SHA256Final(st->sha256, ctx);
}

/* Where a put's bytes come from: a file, or memory. */
struct source {
	int fd;                       /* -1: mem */
	const char *name;             /* the file's, for messages */
	const uint8_t *mem;
	size_t len, off;
};

/* The next chunk: its size, 0 at the end, or -errno with why. */
static ssize_t source_read(struct source *src, uint8_t *buf, size_t cap, char *why, size_t whylen)
{
	ssize_t n;

	if (src->fd < 0) {
		n = (ssize_t)(src->len - src->off < cap ? src->len - src->off : cap);
		memcpy(buf, src->mem + src->off, (size_t)n);
		src->off += (size_t)n;
		return n;
	}
	do
		n = read(src->fd, buf, cap);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		n = -errno;
		snprintf(why, whylen, "cannot read '%s': %s", src->name, strerror(errno));
	}
	return n;
}

int transfer_put_begin(struct transfer_put *p, struct agent_client *c, const char *guest,
		       uint32_t mode, uint32_t flags, uint64_t deadline_ns, struct transfer_stats *st,
		       char *why, size_t whylen)
{
	struct proto_writer w;
	int rc, len;

	why[0] = '\0';
	*p = (struct transfer_put){ .c = c, .id = agent_client_id(c), .deadline_ns = deadline_ns,
				    .st = st };
	stats_begin(st, &p->ctx);
	proto_begin(&w, c->wbuf, sizeof(c->wbuf), PROTO_FILE_WRITE, p->id);
	proto_put_str(&w, guest);
	proto_put_u32(&w, mode);
	proto_put_u32(&w, flags);
	len = proto_end(&w);
	rc = len < 0 ? len : agent_client_send(c, (size_t)len, deadline_ns);
	if (!rc)
		rc = agent_client_wait_ok(c, p->id, deadline_ns, why, whylen);
	return rc ? agent_client_lost(rc, why, whylen) : 0;
}

int transfer_put_data(struct transfer_put *p, const void *data, size_t n, char *why,
		      size_t whylen)
{
	const uint8_t *b = data;

	while (n) {
		uint32_t k = n < PROTO_CHUNK ? (uint32_t)n : PROTO_CHUNK;
		struct proto_writer w;
		int rc, len;

		proto_begin(&w, p->c->wbuf, sizeof(p->c->wbuf), PROTO_FILE_DATA, p->id);
		proto_put_bytes(&w, b, k);
		len = proto_end(&w);
		rc = len < 0 ? len : agent_client_send(p->c, (size_t)len, p->deadline_ns);
		if (rc) {
			p->c->broken = true;
			return agent_client_lost(rc, why, whylen);
		}
		stats_add(p->st, &p->ctx, b, k);
		b += k;
		n -= k;
	}
	return 0;
}

int transfer_put_end(struct transfer_put *p, char *why, size_t whylen)
{
	struct proto_writer w;
	int rc, len;

	stats_end(p->st, &p->ctx);
	proto_begin(&w, p->c->wbuf, sizeof(p->c->wbuf), PROTO_FILE_END, p->id);
	len = proto_end(&w);
	rc = len < 0 ? len : agent_client_send(p->c, (size_t)len, p->deadline_ns);
	if (!rc)
		rc = agent_client_wait_ok(p->c, p->id, p->deadline_ns, why, whylen);
	return rc ? agent_client_lost(rc, why, whylen) : 0;
}

void transfer_put_abort(struct transfer_put *p)
{
	stats_end(p->st, &p->ctx);
	/* The agent waits for more: this connection is out of step, and
	 * closing it is what ends the write (a replacing one leaves nothing). */
	p->c->broken = true;
}

/* FILE_WRITE, the OK, FILE_DATA of each chunk, FILE_END and its OK. */
static int send_file(struct agent_client *c, struct source *src, const char *guest, uint32_t mode,
		     uint32_t flags, uint64_t deadline_ns, struct transfer_stats *st, char *why,
		     size_t whylen)
{
	uint8_t chunk[PROTO_CHUNK];
	struct transfer_put p;
	ssize_t n;
	int rc;

	rc = transfer_put_begin(&p, c, guest, mode, flags, deadline_ns, st, why, whylen);
	if (rc)
		return rc;
	while ((n = source_read(src, chunk, sizeof(chunk), why, whylen)) > 0) {
		rc = transfer_put_data(&p, chunk, (size_t)n, why, whylen);
		if (rc)
			break;
	}
	if (n < 0 || rc) {
		transfer_put_abort(&p);
		return rc ? rc : agent_client_lost((int)n, why, whylen);
	}
	return transfer_put_end(&p, why, whylen);
}

int transfer_put(struct agent_client *c, const char *local, const char *guest,
		 uint64_t deadline_ns, struct transfer_stats *st, char *why, size_t whylen)
{
	int fd = open(local, O_RDONLY | O_CLOEXEC), rc;

	rc = transfer_put_fd(c, fd < 0 ? -errno : fd, local, guest, deadline_ns, st, why, whylen);
	if (fd >= 0)
		close(fd);
	return rc;
}

int transfer_put_fd(struct agent_client *c, int fd, const char *local, const char *guest,
		    uint64_t deadline_ns, struct transfer_stats *st, char *why, size_t whylen)
{
	struct source src = { .fd = fd, .name = local };
	struct stat sb;
	int rc;

	why[0] = '\0';
	if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		rc = fd < 0 ? fd : -EINVAL;
		snprintf(why, whylen, "cannot read '%s': %s", local,
			 rc == -EINVAL ? "not a regular file" : strerror(-rc));
		return rc;
	}
	return send_file(c, &src, guest, sb.st_mode & 07777, PROTO_WRITE_CREATE | PROTO_WRITE_TRUNC,
			 deadline_ns, st, why, whylen);
}

int transfer_put_mem(struct agent_client *c, const void *data, size_t len, const char *guest,
		     uint32_t mode, bool append, uint64_t deadline_ns, struct transfer_stats *st,
		     char *why, size_t whylen)
{
	struct source src = { .fd = -1, .mem = data, .len = len };

	why[0] = '\0';
	return send_file(c, &src, guest, mode & 07777,
			 PROTO_WRITE_CREATE | (append ? PROTO_WRITE_APPEND : PROTO_WRITE_TRUNC),
			 deadline_ns, st, why, whylen);
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

/* Where a get's bytes go: each chunk as it comes, by the deadline. 0 or
 * -errno with why. */
typedef int (*sink_fn)(void *opaque, const uint8_t *data, size_t n, uint64_t deadline_ns,
		       char *why, size_t whylen);

int transfer_read_begin(struct transfer_read *r, struct agent_client *c, const char *guest,
			uint64_t max_bytes, const char *limit_name, uint64_t deadline_ns,
			struct transfer_stats *st, char *why, size_t whylen)
{
	struct proto_writer w;
	int rc, len;

	why[0] = '\0';
	*r = (struct transfer_read){ .c = c, .id = agent_client_id(c), .max = max_bytes,
				     .limit_name = limit_name, .deadline_ns = deadline_ns, .st = st };
	stats_begin(st, &r->ctx);
	proto_begin(&w, c->wbuf, sizeof(c->wbuf), PROTO_FILE_READ, r->id);
	proto_put_str(&w, guest);
	len = proto_end(&w);
	rc = len < 0 ? len : agent_client_send(c, (size_t)len, deadline_ns);
	if (rc) {
		stats_end(st, &r->ctx);
		c->broken = true;
		return agent_client_lost(rc, why, whylen);
	}
	return 0;
}

ssize_t transfer_read_next(struct transfer_read *r, const uint8_t **data, char *why,
			   size_t whylen)
{
	struct proto_frame f;
	bool refused = false;
	int rc;

	for (;;) {
		struct proto_reader rd;
		uint32_t n;

		rc = agent_client_recv(r->c, &f, r->deadline_ns);
		if (rc <= 0) {
			rc = rc ? rc : -ETIMEDOUT;
			break;
		}
		rc = 0;
		if (f.id != r->id)
			continue;
		if (f.type == PROTO_FILE_END)
			break;
		if (f.type == PROTO_ERROR) {
			rc = agent_client_error(&f, why, whylen);
			refused = rc != -EPROTO;
			break;
		}
		proto_reader_init(&rd, &f);
		if (f.type != PROTO_FILE_DATA || !proto_get_bytes(&rd, data, &n) || !proto_done(&rd)) {
			snprintf(why, whylen, "the guest agent sent a malformed %s frame",
				 proto_type_name(f.type));
			rc = -EPROTO;
			break;
		}
		if (n > r->max - r->total) {
			snprintf(why, whylen, "the guest's file is larger than %s (%llu bytes)",
				 r->limit_name, (unsigned long long)r->max);
			rc = -EFBIG;
			break;
		}
		if (!n)
			continue;
		r->total += n;
		stats_add(r->st, &r->ctx, *data, n);
		return n;
	}
	stats_end(r->st, &r->ctx);
	/* Unless the agent refused, it may still be sending this file: what
	 * comes after would be read as answers to the next call. */
	if (rc && !refused)
		r->c->broken = true;
	return rc ? agent_client_lost(rc, why, whylen) : 0;
}

/* FILE_READ, then FILE_DATA to the sink until FILE_END, at most max_bytes. */
static int recv_file(struct agent_client *c, const char *guest, uint64_t max_bytes,
		     const char *limit_name, sink_fn sink, void *opaque, uint64_t deadline_ns,
		     struct transfer_stats *st, char *why, size_t whylen)
{
	struct transfer_read r;
	const uint8_t *data;
	ssize_t n;
	int rc;

	rc = transfer_read_begin(&r, c, guest, max_bytes, limit_name, deadline_ns, st, why, whylen);
	if (rc)
		return rc;
	while ((n = transfer_read_next(&r, &data, why, whylen)) > 0) {
		rc = sink(opaque, data, (size_t)n, deadline_ns, why, whylen);
		if (rc) {
			/* The agent is still sending: out of step. */
			c->broken = true;
			return agent_client_lost(rc, why, whylen);
		}
	}
	return (int)n;
}

struct file_sink {
	struct transfer_target *t;
	const char *local;
};

static int to_file(void *opaque, const uint8_t *data, size_t n, uint64_t deadline_ns, char *why,
		   size_t whylen)
{
	struct file_sink *fs = opaque;
	int rc = write_target(fs->t, data, n, deadline_ns);

	if (rc)
		snprintf(why, whylen, "cannot write '%s': %s", fs->local,
			 rc == -ETIMEDOUT ? "its reader does not read" : strerror(-rc));
	return rc;
}

int transfer_get(struct agent_client *c, const char *guest, const char *local,
		 uint64_t max_bytes, uint64_t deadline_ns, struct transfer_stats *st, char *why,
		 size_t whylen)
{
	struct transfer_target t = { .fd = -1 };
	int rc;

	why[0] = '\0';
	rc = transfer_target_open(local, &t, why, whylen);
	if (rc)
		return rc;
	rc = transfer_get_into(c, guest, &t, max_bytes, deadline_ns, st, why, whylen);
	return transfer_target_close(&t, rc, why, whylen);
}

int transfer_get_into(struct agent_client *c, const char *guest, struct transfer_target *t,
		      uint64_t max_bytes, uint64_t deadline_ns, struct transfer_stats *st,
		      char *why, size_t whylen)
{
	struct file_sink fs = { t, t->name };

	why[0] = '\0';
	return recv_file(c, guest, max_bytes, "--max-get-bytes", to_file, &fs, deadline_ns, st, why,
			 whylen);
}

struct mem_sink {
	uint8_t *data;
	size_t len, cap;
};

static int to_mem(void *opaque, const uint8_t *data, size_t n, uint64_t deadline_ns, char *why,
		  size_t whylen)
{
	struct mem_sink *m = opaque;

	(void)deadline_ns;
	if (m->cap - m->len < n + 1) {
		/* Doubling: gathering N bytes copies O(N). */
		size_t cap = m->cap ? m->cap : 1;
		uint8_t *p;

		while (cap - m->len < n + 1)
			cap *= 2;
		p = realloc(m->data, cap);
		if (!p) {
			snprintf(why, whylen, "out of memory");
			return -ENOMEM;
		}
		m->data = p;
		m->cap = cap;
	}
	/* An empty file comes as (NULL, 0): memcpy wants a pointer even then. */
	if (n)
		memcpy(m->data + m->len, data, n);
	m->len += n;
	m->data[m->len] = '\0';
	return 0;
}

int transfer_get_mem(struct agent_client *c, const char *guest, uint64_t max_bytes,
		     uint8_t **data, size_t *len, uint64_t deadline_ns, struct transfer_stats *st,
		     char *why, size_t whylen)
{
	struct mem_sink m = { 0 };
	int rc;

	why[0] = '\0';
	rc = recv_file(c, guest, max_bytes, "the limit", to_mem, &m, deadline_ns, st, why, whylen);
	if (!rc && !m.data)
		rc = to_mem(&m, NULL, 0, 0, why, whylen);   /* an empty file: "" */
	if (rc) {
		free(m.data);
		m.data = NULL;
		m.len = 0;
	}
	*data = m.data;
	*len = m.len;
	return rc;
}

/* A directory entry's name as a guest file system can hold it: not empty, no
 * '/', not "." or ".." (the agent skips those). Anything else is a lie that a
 * caller printing or joining the name must never see. */
static bool entry_name_ok(const char *name)
{
	return name[0] && !strchr(name, '/') && strcmp(name, ".") && strcmp(name, "..");
}

/* One LIST_ENTRIES frame, each entry to fn. 1 more to come, 0 done, -EPROTO. */
static int list_frame(const struct proto_frame *f, transfer_entry_fn fn, void *opaque)
{
	char name[PROTO_MAX_PATH];   /* not thread-local: every thread would write it (sparse.h) */
	struct proto_reader rd;
	uint32_t more, count;

	proto_reader_init(&rd, f);
	if (!proto_get_u32(&rd, &more) || !proto_get_u32(&rd, &count) || more > 1)
		return -EPROTO;
	for (uint32_t i = 0; i < count; i++) {
		uint32_t type, mode;
		uint64_t size;

		if (!proto_get_str(&rd, name, sizeof(name)) || !proto_get_u32(&rd, &type) ||
		    !proto_get_u32(&rd, &mode) || !proto_get_u64(&rd, &size) || mode > 07777 ||
		    type > PROTO_FT_SYMLINK || !entry_name_ok(name))
			return -EPROTO;
		fn(opaque, name, type, mode, size);
	}
	return proto_done(&rd) ? (int)more : -EPROTO;
}

int transfer_list(struct agent_client *c, const char *guest, transfer_entry_fn fn, void *opaque,
		  uint64_t deadline_ns, char *why, size_t whylen)
{
	uint32_t id = agent_client_id(c);
	struct proto_writer w;
	struct proto_frame f;
	int rc, len;

	why[0] = '\0';
	proto_begin(&w, c->wbuf, sizeof(c->wbuf), PROTO_LIST, id);
	proto_put_str(&w, guest);
	len = proto_end(&w);
	rc = len < 0 ? len : agent_client_send(c, (size_t)len, deadline_ns);
	while (!rc) {
		rc = agent_client_next(c, id, &f, deadline_ns);
		if (rc)
			break;
		if (f.type == PROTO_ERROR)
			return agent_client_error(&f, why, whylen);   /* in step: it sent nothing else */
		rc = f.type == PROTO_LIST_ENTRIES ? list_frame(&f, fn, opaque) : -EPROTO;
		if (rc == 0)
			return 0;
		rc = rc == 1 ? 0 : rc;
	}
	/* Entries may still be on their way: the stream is out of step. */
	c->broken = true;
	return agent_client_lost(rc, why, whylen);
}
