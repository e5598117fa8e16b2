/* session.c - one command through the guest agent: EXEC, stdin forwarding, streamed output, the exit status. */
#include "agent/session.h"
#include "base64.h"
#include "clock.h"
#include "log.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A stream's output state: for JSON, the bytes of a UTF-8 sequence cut by a
 * chunk boundary wait here for the rest. */
struct out_stream {
	const char *name;          /* "stdout" or "stderr" */
	int fd;
	uint8_t carry[4];
	size_t ncarry;
};

void session_json_string(char *out, size_t cap, const uint8_t *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	if (cap < 3)
		return;
	out[o++] = '"';
	for (size_t i = 0; i < len && o + 8 < cap; i++) {
		uint8_t ch = s[i];

		if (ch == '"' || ch == '\\') {
			out[o++] = '\\';
			out[o++] = (char)ch;
		} else if (ch == '\n') {
			out[o++] = '\\';
			out[o++] = 'n';
		} else if (ch < 0x20 || ch == 0x7f) {
			memcpy(out + o, "\\u00", 4);
			out[o + 4] = hex[ch >> 4];
			out[o + 5] = hex[ch & 15];
			o += 6;
		} else {
			out[o++] = (char)ch;
		}
	}
	out[o++] = '"';
	out[o] = '\0';
}

void session_json_event(const char *event, const char *fields_fmt, ...)
{
	char fields[1024];
	va_list ap;

	va_start(ap, fields_fmt);
	vsnprintf(fields, sizeof(fields), fields_fmt, ap);
	va_end(ap);
	printf("{\"event\":\"%s\"%s%s}\n", event, *fields ? "," : "", fields);
	fflush(stdout);
}

/* Length of the UTF-8 sequence starting with byte b, 0 if b cannot start one. */
static size_t utf8_len(uint8_t b)
{
	return b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
}

/* How many leading bytes of s are whole, valid UTF-8; *bad when a byte is
 * invalid (rather than a sequence merely cut at the end). */
static size_t utf8_prefix(const uint8_t *s, size_t len, bool *bad)
{
	size_t i = 0;

	*bad = false;
	while (i < len) {
		size_t n = utf8_len(s[i]);

		if (!n) {
			*bad = true;
			return i;
		}
		if (i + n > len)
			return i;       /* cut: the rest comes in the next chunk */
		for (size_t k = 1; k < n; k++)
			if ((s[i + k] & 0xc0) != 0x80) {
				*bad = true;
				return i;
			}
		i += n;
	}
	return i;
}

static void emit_base64(const char *stream, const uint8_t *s, size_t len)
{
	char *out = malloc(BASE64_LEN(len) + 1);

	if (!out)
		return;
	base64_encode(s, len, out);
	printf("{\"event\":\"%s\",\"data_b64\":\"%s\"}\n", stream, out);
	fflush(stdout);
	free(out);
}

/* JSON: text as "data" (valid UTF-8, escaped), anything else as "data_b64". */
static void emit_json(struct out_stream *st, const uint8_t *data, size_t len)
{
	uint8_t *buf = malloc(st->ncarry + len);
	size_t total = st->ncarry + len, ok;
	bool bad;

	if (!buf)
		return;
	memcpy(buf, st->carry, st->ncarry);
	memcpy(buf + st->ncarry, data, len);
	st->ncarry = 0;
	ok = utf8_prefix(buf, total, &bad);
	if (bad) {
		emit_base64(st->name, buf, total);
	} else {
		char *out = malloc(ok * 6 + 16);

		if (out && ok) {
			session_json_string(out, ok * 6 + 16, buf, ok);
			printf("{\"event\":\"%s\",\"data\":%s}\n", st->name, out);
			fflush(stdout);
		}
		free(out);
		/* At most 3 bytes of a cut sequence remain. */
		st->ncarry = total - ok;
		memcpy(st->carry, buf + ok, st->ncarry);
	}
	free(buf);
}

static void emit_raw(int fd, const uint8_t *data, size_t len)
{
	while (len) {
		ssize_t w = write(fd, data, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;   /* our reader went away: drop, but keep the VM going */
		data += w;
		len -= (size_t)w;
	}
}

static void flush_carry(struct out_stream *st, bool json)
{
	if (json && st->ncarry)
		emit_base64(st->name, st->carry, st->ncarry);
	st->ncarry = 0;
}

static int send_exec(struct agent_client *c, uint32_t id, const struct exec_spec *spec)
{
	struct proto_exec e = {
		.flags = (spec->stdin_fd >= 0 ? PROTO_EXEC_STDIN : 0) | (spec->pty ? PROTO_EXEC_PTY : 0),
		.timeout_ms = spec->timeout_ms,
		.rows = spec->rows, .cols = spec->cols,
		.argc = (uint32_t)spec->argc, .envc = (uint32_t)spec->nenv,
		.argv = spec->argv, .envp = spec->env,
	};
	struct proto_writer w;
	int len;

	snprintf(e.cwd, sizeof(e.cwd), "%s", spec->cwd ? spec->cwd : "");
	proto_begin(&w, c->wbuf, sizeof(c->wbuf), PROTO_EXEC, id);
	len = proto_exec_encode(&w, id, &e);
	return len < 0 ? len : agent_client_send(c, (size_t)len);
}

/* Forward one read of stdin; EOF (or an error) becomes an empty STDIN frame. */
static int forward_stdin(struct agent_client *c, uint32_t id, int *fd)
{
	uint8_t buf[PROTO_CHUNK];
	struct proto_writer w;
	ssize_t n = read(*fd, buf, sizeof(buf));
	int len;

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (n <= 0)
		*fd = -1;
	proto_begin(&w, c->wbuf, sizeof(c->wbuf), PROTO_STDIN, id);
	proto_put_bytes(&w, buf, n > 0 ? (uint32_t)n : 0);
	len = proto_end(&w);
	return len < 0 ? len : agent_client_send(c, (size_t)len);
}

/* The signal source fired: send its signal to the command's process group. */
static int forward_signal(struct agent_client *c, uint32_t id, const struct exec_spec *spec)
{
	struct proto_writer w;
	uint64_t n;
	int len;

	if (read(spec->signal_fd, &n, sizeof(n)) < 0)
		return 0;
	proto_begin(&w, c->wbuf, sizeof(c->wbuf), PROTO_SIGNAL, id);
	proto_put_u32(&w, (uint32_t)atomic_load(spec->signal_no));
	len = proto_end(&w);
	return len < 0 ? len : agent_client_send(c, (size_t)len);
}

static void fail(struct exec_result *res, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void fail(struct exec_result *res, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(res->error, sizeof(res->error), fmt, ap);
	va_end(ap);
	res->exit_code = code;
}

/* Handle one frame about our process. Returns 1 when the run is over. */
static int on_frame(const struct proto_frame *f, const struct exec_spec *spec,
		    struct out_stream *out, struct out_stream *err, struct exec_result *res)
{
	struct proto_reader rd;
	const uint8_t *data;
	uint32_t n, kind = 0, signo = 0, u = 0;
	int32_t code = 0;
	uint64_t dur = 0;
	char msg[200] = "";

	proto_reader_init(&rd, f);
	switch (f->type) {
	case PROTO_EXEC_STARTED:
		proto_get_u32(&rd, &u);
		res->started_ns = clock_now_ns();
		if (spec->json)
			session_json_event("started", "\"pid\":%u", u);
		return 0;
	case PROTO_STDOUT:
	case PROTO_STDERR: {
		struct out_stream *st = f->type == PROTO_STDOUT ? out : err;

		if (!proto_get_bytes(&rd, &data, &n))
			break;
		if (spec->json)
			emit_json(st, data, n);
		else
			emit_raw(st->fd, data, n);
		return 0;
	}
	case PROTO_ERROR:
		/* Once started, an ERROR answers something else we sent (a
		 * signal racing the exit): the EXIT still comes. */
		if (res->started_ns)
			return 0;
		proto_get_u32(&rd, &u);
		proto_get_str(&rd, msg, sizeof(msg));
		fail(res, u == ENOENT ? RUN_EXIT_NOTFOUND : RUN_EXIT_AGENT, "cannot run '%s': %s",
		     spec->argv[0], *msg ? msg : strerror((int)u));
		return 1;
	case PROTO_EXIT:
		if (!proto_get_u32(&rd, &kind) || !proto_get_u32(&rd, &u) ||
		    !proto_get_u32(&rd, &signo) || !proto_get_u64(&rd, &dur))
			break;
		code = (int32_t)u;
		res->ended_ns = clock_now_ns();
		res->exit_code = kind == PROTO_EXIT_CODE ? (code & 0xff) :
				 kind == PROTO_EXIT_TIMEOUT ? RUN_EXIT_TIMEOUT : 128 + (int)(signo & 0x7f);
		if (kind == PROTO_EXIT_TIMEOUT)
			snprintf(res->error, sizeof(res->error), "command timed out after %u ms",
				 spec->timeout_ms);
		if (spec->json)
			session_json_event("exit", "\"code\":%d,\"signal\":%u,\"timed_out\":%s,"
					   "\"duration_us\":%llu,\"exit_code\":%d",
					   kind == PROTO_EXIT_CODE ? code : -1,
					   kind == PROTO_EXIT_CODE ? 0 : signo,
					   kind == PROTO_EXIT_TIMEOUT ? "true" : "false",
					   (unsigned long long)dur, res->exit_code);
		return 1;
	default:
		return 0;   /* replies to other requests, or types we do not know: not ours */
	}
	fail(res, RUN_EXIT_AGENT, "malformed %s frame from the guest agent",
	     proto_type_name(f->type));
	return 1;
}

void session_exec(struct agent_client *c, const struct exec_spec *spec, struct exec_result *res)
{
	struct out_stream out = { .name = "stdout", .fd = STDOUT_FILENO };
	struct out_stream err = { .name = "stderr", .fd = STDERR_FILENO };
	uint32_t id = agent_client_id(c);
	int in_fd = spec->stdin_fd;
	int rc;

	memset(res, 0, sizeof(*res));
	res->exit_code = RUN_EXIT_AGENT;
	rc = send_exec(c, id, spec);
	if (rc) {
		fail(res, RUN_EXIT_AGENT, "cannot send the command to the guest agent: %s",
		     strerror(-rc));
		return;
	}
	for (;;) {
		struct pollfd p[3] = { { .fd = c->fd, .events = POLLIN },
				       { .fd = spec->signal_fd, .events = POLLIN },
				       { .fd = in_fd, .events = POLLIN } };
		struct proto_frame f;

		/* Frames already buffered are handled before waiting again. */
		rc = agent_client_recv(c, &f, 0);
		if (rc == 1) {
			if (f.id == id && on_frame(&f, spec, &out, &err, res))
				break;
			continue;
		}
		if (rc < 0) {
			fail(res, RUN_EXIT_AGENT, "lost the guest agent: %s",
			     rc == -EPIPE ? "connection closed" : strerror(-rc));
			break;
		}
		int wait_ms = -1;

		if (spec->deadline_ns) {
			uint64_t now = clock_now_ns();

			if (now >= spec->deadline_ns) {
				fail(res, RUN_EXIT_TIMEOUT, "no exit status from the guest agent "
				     "within the timeout");
				break;
			}
			wait_ms = (int)((spec->deadline_ns - now) / 1000000 + 1);
		}
		/* A negative fd is skipped by poll: no stdin, no signal source. */
		p[2].fd = in_fd;
		if (poll(p, 3, wait_ms) < 0 && errno != EINTR) {
			fail(res, RUN_EXIT_MAYFLY, "poll: %s", strerror(errno));
			break;
		}
		if ((p[1].revents & POLLIN) && forward_signal(c, id, spec)) {
			fail(res, RUN_EXIT_AGENT, "cannot pass the signal to the guest agent");
			break;
		}
		if (in_fd >= 0 && (p[2].revents & (POLLIN | POLLHUP | POLLERR)) &&
		    forward_stdin(c, id, &in_fd)) {
			fail(res, RUN_EXIT_AGENT, "cannot send stdin to the guest agent");
			break;
		}
	}
	flush_carry(&out, spec->json);
	flush_carry(&err, spec->json);
}
