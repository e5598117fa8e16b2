/* conn.c - one host connection: bounded input and output buffers, frame dispatch, HELLO/PING/SHUTDOWN. */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct conn *conn_new(struct agent *a, int fd)
{
	int fl = fcntl(fd, F_GETFL);
	struct conn *c;

	/* Never block the loop; never leak the host's socket into a program. */
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		goto err_close;
	c = calloc(1, sizeof(*c));
	if (!c)
		goto err_close;
	/* The output buffer grows on demand; the input holds one whole frame. */
	c->in = malloc(AGENT_FRAME_MAX);
	if (!c->in)
		goto err_free;
	c->a = a;
	c->fd = fd;
	c->next = a->conns;
	a->conns = c;
	a->nconns++;
	return c;

err_free:
	free(c);
err_close:
	close(fd);
	return NULL;
}

/* Room for one whole frame at the tail: compact first, then grow up to the
 * hard size. Failing that the frame fails in conn_end. */
static void out_make_room(struct conn *c)
{
	size_t want = AGENT_FRAME_MAX, size;
	uint8_t *p;

	if (c->out_size - c->out_off - c->out_len >= want)
		return;
	if (c->out_off) {
		memmove(c->out, c->out + c->out_off, c->out_len);
		c->out_off = 0;
	}
	if (c->out_size - c->out_len >= want || c->out_size >= AGENT_OUT_HARD)
		return;
	size = c->out_size ? c->out_size * 2 : 2 * (size_t)AGENT_FRAME_MAX;
	if (size > AGENT_OUT_HARD)
		size = AGENT_OUT_HARD;
	p = realloc(c->out, size);
	if (p) {
		c->out = p;
		c->out_size = size;
	}
}

void conn_begin(struct conn *c, struct proto_writer *w, uint8_t type, uint32_t id)
{
	if (c->dead) {
		proto_begin(w, NULL, 0, type, id);
		return;
	}
	out_make_room(c);
	proto_begin(w, c->out ? c->out + c->out_off + c->out_len : NULL,
		    c->out_size - c->out_off - c->out_len, type, id);
}

int conn_end(struct conn *c, struct proto_writer *w)
{
	int n = proto_end(w);

	if (n < 0) {
		if (!c->dead && !c->closing) {
			agent_log("connection output over its bound; closing it");
			conn_close(c, false);
		}
		return n;
	}
	c->out_len += (size_t)n;
	return 0;
}

int conn_send_empty(struct conn *c, uint8_t type, uint32_t id)
{
	struct proto_writer w;

	conn_begin(c, &w, type, id);
	return conn_end(c, &w);
}

int conn_send_data(struct conn *c, uint8_t type, uint32_t id, const void *data, uint32_t len)
{
	struct proto_writer w;

	conn_begin(c, &w, type, id);
	proto_put_bytes(&w, data, len);
	return conn_end(c, &w);
}

int conn_send_error(struct conn *c, uint32_t id, int err, const char *fmt, ...)
{
	struct proto_writer w;
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	conn_begin(c, &w, PROTO_ERROR, id);
	proto_put_u32(&w, (uint32_t)err);
	proto_put_str(&w, msg);
	return conn_end(c, &w);
}

bool conn_paused(const struct conn *c)
{
	const struct proc *p;
	size_t stdin_backlog = 0;

	if (c->out_len >= AGENT_OUT_CAP)
		return true;
	for (p = c->procs; p; p = p->next)
		stdin_backlog += p->in_len - p->in_off;
	return stdin_backlog >= AGENT_STDIN_CAP;
}

static void conn_finish(struct conn *c)
{
	close(c->fd);
	c->fd = -1;
	c->dead = true;
}

void conn_close(struct conn *c, bool flush)
{
	if (c->dead)
		return;
	procs_detach(c);
	xfers_end_all(c);
	if (!c->closing) {
		c->closing = true;
		c->close_deadline_ms = now_ms() + AGENT_FLUSH_MS;
	}
	if (!flush || c->out_len == 0)
		conn_finish(c);
}

void conn_free(struct conn *c)
{
	xfers_sweep(c);
	free(c->watch_path);
	free(c->in);
	free(c->out);
	free(c);
}

void conn_on_writable(struct conn *c)
{
	ssize_t n;

	while (c->out_len > 0) {
		n = send(c->fd, c->out + c->out_off, c->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			conn_close(c, false);
			return;
		}
		c->out_off += (size_t)n;
		c->out_len -= (size_t)n;
	}
	c->out_off = 0;
	if (c->closing)
		conn_finish(c);
}

/* --- requests handled here ------------------------------------------------------- */

static int req_hello(struct conn *c, const struct proto_frame *f)
{
	struct proto_reader r;
	struct proto_writer w;
	uint32_t version;

	proto_reader_init(&r, f);
	if (!proto_get_u32(&r, &version) || !proto_done(&r))
		return -EPROTO;
	if (version != PROTO_VERSION) {
		conn_send_error(c, f->id, EPROTONOSUPPORT,
				"the agent speaks protocol version %d, not %u", PROTO_VERSION, version);
		conn_close(c, true);
		return 0;
	}
	c->hello = true;
	conn_begin(c, &w, PROTO_HELLO_OK, f->id);
	proto_put_u32(&w, PROTO_VERSION);
	proto_put_str(&w, AGENT_VERSION);
	conn_end(c, &w);
	return 0;
}

static int req_ping(struct conn *c, const struct proto_frame *f)
{
	struct proto_writer w;

	if (f->payload_len)
		return -EPROTO;
	conn_begin(c, &w, PROTO_PONG, f->id);
	proto_put_u64(&w, now_ms() - c->a->start_ms);
	conn_end(c, &w);
	return 0;
}

static int req_shutdown(struct conn *c, const struct proto_frame *f)
{
	if (f->payload_len)
		return -EPROTO;
	conn_send_empty(c, PROTO_OK, f->id);
	/* The loop flushes every connection, then ends the agent (and the VM). */
	c->a->shutting_down = true;
	return 0;
}

typedef int (*req_fn)(struct conn *c, const struct proto_frame *f);

/* Host -> agent requests; every other type gets ERROR ENOSYS. */
static const req_fn handlers[PROTO_SYSINFO + 1] = {
	[PROTO_HELLO] = req_hello,
	[PROTO_PING] = req_ping,
	[PROTO_EXEC] = exec_request,
	[PROTO_STDIN] = exec_stdin,
	[PROTO_SIGNAL] = exec_signal,
	[PROTO_RESIZE] = exec_resize,
	[PROTO_FILE_WRITE] = file_write_request,
	[PROTO_FILE_READ] = file_read_request,
	[PROTO_FILE_DATA] = file_data_request,
	[PROTO_FILE_END] = file_end_request,
	[PROTO_STAT] = stat_request,
	[PROTO_LIST] = list_request,
	[PROTO_MKDIR] = mkdir_request,
	[PROTO_REMOVE] = remove_request,
	[PROTO_SHUTDOWN] = req_shutdown,
	[PROTO_QUIESCE] = quiesce_request,
	[PROTO_FRESHEN] = freshen_request,
	[PROTO_NET] = net_request,
	[PROTO_RENAME] = rename_request,
	[PROTO_PORT] = port_request,
	[PROTO_WATCH] = watch_request,
	[PROTO_SYSINFO] = sysinfo_request,
};

/* A frame the connection cannot go on from: say why (best effort), then close. */
static void conn_malformed(struct conn *c, uint32_t id, int err, const char *why)
{
	if (c->a->verbose)
		agent_log("closing a connection: %s", why);
	conn_send_error(c, id, err, "%s", why);
	conn_close(c, true);
}

static void conn_dispatch(struct conn *c, const struct proto_frame *f)
{
	req_fn fn = f->type < sizeof(handlers) / sizeof(handlers[0]) ? handlers[f->type] : NULL;
	char why[96];

	if (!c->hello && f->type != PROTO_HELLO) {
		conn_malformed(c, f->id, EPROTO, "the first frame must be HELLO");
		return;
	}
	if (!fn) {
		conn_send_error(c, f->id, ENOSYS, "unknown request type %u", f->type);
		return;
	}
	if (freshen_needed(c, f))
		return;
	if (fn(c, f) == -EPROTO) {
		snprintf(why, sizeof(why), "malformed %s payload", proto_type_name(f->type));
		conn_malformed(c, f->id, EPROTO, why);
	}
}

void conn_process(struct conn *c)
{
	struct proto_frame f;
	size_t off = 0;
	char why[96];
	int n;

	while (!c->closing && !c->a->shutting_down && !c->a->quiescing && !conn_paused(c)) {
		n = proto_frame_decode(c->in + off, c->in_len - off, &f);
		if (n == 0)
			break;
		if (n == -EPROTONOSUPPORT) {
			snprintf(why, sizeof(why), "frame version %u; the agent speaks %d",
				 f.version, PROTO_VERSION);
			conn_malformed(c, f.id, EPROTONOSUPPORT, why);
			break;
		}
		if (n < 0) {
			conn_malformed(c, 0, EPROTO, "bad frame length");
			break;
		}
		conn_dispatch(c, &f);
		off += (size_t)n;
		if (c->handover && !c->dead) {
			/* What follows PORT or WATCH is the child's, not frames. */
			handover_start(c, c->in + off, c->in_len - off);
			return;
		}
	}
	if (c->dead)
		return;
	memmove(c->in, c->in + off, c->in_len - off);
	c->in_len -= off;
}

void conn_on_readable(struct conn *c)
{
	ssize_t n;

	if (c->in_len == AGENT_FRAME_MAX) {
		conn_process(c);   /* a whole frame is there: room comes from handling it */
		return;
	}
	n = recv(c->fd, c->in + c->in_len, AGENT_FRAME_MAX - c->in_len, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) {
		/* The host hung up (or the socket failed): its processes die with it. */
		conn_close(c, true);
		return;
	}
	c->in_len += (size_t)n;
	conn_process(c);
}
