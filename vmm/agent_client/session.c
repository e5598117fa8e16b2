/* session.c - one command through the guest agent: EXEC, stdin and signals in, checked output and exit status out. */
#include "agent_client/session.h"
#include "agent_client/events.h"
#include "lib/clock.h"
#include "lib/log.h"

#include <errno.h>
#include <poll.h>
#include <sha2.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define FRAMES_PER_ROUND 64       /* then the deadline and signals are looked at again */
#define SIGNO_MAX        64       /* Linux's _NSIG - 1 */
#define PID_MAX          (1u << 22)  /* Linux's PID_MAX_LIMIT */
#define DURATION_MAX_US  (1ULL << 53) /* exact in every JSON reader */

/* One run's state, for the helpers below. */
struct session {
	struct agent_client *c;
	const struct exec_spec *spec;
	struct exec_result *res;
	uint32_t id;
	int in_fd;                 /* -1 once stdin reached EOF */
	bool forwarded;            /* a signal was passed on */
	uint64_t output;           /* bytes passed on */
	uint64_t grace_ns;         /* killed for its output: the EXIT must come by then */
	struct event_stream out, err;
	SHA2_CTX out_sha, err_sha;
};

void session_spec_init(struct exec_spec *spec)
{
	memset(spec, 0, sizeof(*spec));
	spec->stdin_fd = spec->signal_fd = spec->winch_fd = spec->tty_fd = -1;
	spec->max_output = UINT64_MAX;
	spec->out_fd = STDOUT_FILENO;
	spec->err_fd = STDERR_FILENO;
	spec->json_out = stdout;
	spec->umask = 022;
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

/* The root fields of e from spec, checked as the agent will check them:
 * 0, or -EINVAL with res failed (RUN_EXIT_MAYFLY) and its error saying why. */
static int exec_root(const struct exec_spec *spec, struct proto_exec *e, struct exec_result *res)
{
	e->flags |= PROTO_EXEC_ROOT;
	if (!proto_path_canonical(spec->root)) {
		fail(res, RUN_EXIT_MAYFLY, "the command's root '%.100s' is not a canonical absolute "
		     "path shorter than %d bytes", spec->root, PROTO_MAX_PATH);
		return -EINVAL;
	}
	if (spec->ngroups < 0 || spec->ngroups > PROTO_MAX_GROUPS || (spec->ngroups && !spec->groups)) {
		fail(res, RUN_EXIT_MAYFLY, "the command has %d supplementary groups, at most %d "
		     "are allowed", spec->ngroups, PROTO_MAX_GROUPS);
		return -EINVAL;
	}
	strcpy(e->root, spec->root);   /* shorter than PROTO_MAX_PATH: checked above */
	e->uid = spec->uid;
	e->gid = spec->gid;
	e->umask = spec->umask;
	e->ngroups = (uint32_t)spec->ngroups;
	if (spec->ngroups)
		memcpy(e->groups, spec->groups, (size_t)spec->ngroups * sizeof(e->groups[0]));
	if (!proto_exec_root_valid(e)) {
		fail(res, RUN_EXIT_MAYFLY, "the command's user, group, groups or umask is out of range "
		     "(an id of %u is setuid's 'unchanged'; a umask is at most 0777)", UINT32_MAX);
		return -EINVAL;
	}
	return 0;
}

static int send_exec(struct session *s)
{
	const struct exec_spec *spec = s->spec;
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
	if (spec->root && exec_root(spec, &e, s->res))
		return -EINVAL;
	proto_begin(&w, s->c->wbuf, sizeof(s->c->wbuf), PROTO_EXEC, s->id);
	len = proto_exec_encode(&w, s->id, &e);
	return len < 0 ? len : agent_client_send(s->c, (size_t)len, spec->deadline_ns);
}

static int send_u32(struct session *s, uint8_t type, uint32_t v)
{
	struct proto_writer w;
	int len;

	proto_begin(&w, s->c->wbuf, sizeof(s->c->wbuf), type, s->id);
	proto_put_u32(&w, v);
	len = proto_end(&w);
	return len < 0 ? len : agent_client_send(s->c, (size_t)len, s->spec->deadline_ns);
}

/* What stdin has now, up to cap bytes: the first read (poll said it is
 * ready), then more while a read would not block, so that a writer's
 * small pieces share one frame and nothing waits for more to come. *eof:
 * stdin ended (or failed) after the bytes returned. */
static size_t read_available(int fd, uint8_t *buf, size_t cap, bool *eof)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	size_t got = 0;

	*eof = false;
	while (got < cap) {
		ssize_t n;

		if (got && poll(&p, 1, 0) <= 0)
			break;
		n = read(fd, buf + got, cap - got);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			break;
		if (n <= 0) {
			*eof = true;
			break;
		}
		got += (size_t)n;
	}
	return got;
}

static int send_stdin(struct session *s, const uint8_t *data, uint32_t len)
{
	struct proto_writer w;
	int n;

	proto_begin(&w, s->c->wbuf, sizeof(s->c->wbuf), PROTO_STDIN, s->id);
	proto_put_bytes(&w, data, len);
	n = proto_end(&w);
	return n < 0 ? n : agent_client_send(s->c, (size_t)n, s->spec->deadline_ns);
}

/* Forward what stdin has in one frame; its end (or an error) becomes an
 * empty STDIN frame. */
static int forward_stdin(struct session *s)
{
	uint8_t buf[PROTO_CHUNK];
	bool eof;
	size_t n = read_available(s->in_fd, buf, sizeof(buf), &eof);
	int rc = n ? send_stdin(s, buf, (uint32_t)n) : 0;

	if (!rc && eof) {
		s->in_fd = -1;
		rc = send_stdin(s, buf, 0);
	}
	return rc;
}

/* Each byte of the signal pipe is a signal for the command's process
 * group. Returns 0, or -errno when the agent cannot be told. */
static int forward_signals(struct session *s)
{
	uint8_t sigs[16];
	ssize_t n = read(s->spec->signal_fd, sigs, sizeof(sigs));

	for (ssize_t i = 0; i < n; i++) {
		int rc = send_u32(s, PROTO_SIGNAL, sigs[i]);

		if (rc)
			return rc;
		s->forwarded = true;
	}
	return 0;
}

/* Our terminal changed size: the guest's PTY follows. */
static int forward_resize(struct session *s)
{
	struct proto_writer w;
	struct winsize ws;
	uint8_t drain[16];
	ssize_t n = read(s->spec->winch_fd, drain, sizeof(drain));
	int len;

	if (n < 0)
		return 0;
	if (s->spec->tty_fd < 0) {
		/* The size itself came down the pipe: its last whole message. */
		uint16_t rc[2];

		if (n < (ssize_t)sizeof(rc))
			return 0;
		memcpy(rc, drain + (n / sizeof(rc) - 1) * sizeof(rc), sizeof(rc));
		ws.ws_row = rc[0];
		ws.ws_col = rc[1];
	} else if (ioctl(s->spec->tty_fd, TIOCGWINSZ, &ws) < 0) {
		return 0;
	}
	if (!ws.ws_row || !ws.ws_col)
		return 0;
	proto_begin(&w, s->c->wbuf, sizeof(s->c->wbuf), PROTO_RESIZE, s->id);
	proto_put_u16(&w, ws.ws_row);
	proto_put_u16(&w, ws.ws_col);
	len = proto_end(&w);
	return len < 0 ? len : agent_client_send(s->c, (size_t)len, s->spec->deadline_ns);
}

static void write_raw(int fd, const uint8_t *data, size_t len)
{
	while (len) {
		ssize_t w = write(fd, data, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;   /* our reader went away: drop, but keep the command going */
		data += w;
		len -= (size_t)w;
	}
}

/* Pass output on, up to max_output; past it the command is killed once. */
static int on_output(struct session *s, bool is_err, const uint8_t *data, uint32_t n)
{
	const struct exec_spec *spec = s->spec;
	uint64_t room = spec->max_output - s->output;

	if (n > room) {
		n = (uint32_t)room;
		if (!s->res->truncated) {
			s->res->truncated = true;
			s->grace_ns = clock_now_ns() + SESSION_KILL_GRACE_NS;
			log_warn("the command's output passed --max-output (%llu bytes): killing it",
				 (unsigned long long)spec->max_output);
			if (send_u32(s, PROTO_SIGNAL, SIGKILL))
				return -EPIPE;
		}
	}
	s->output += n;
	if (!n)
		return 0;
	if (!s->res->first_output_ns)
		s->res->first_output_ns = clock_now_ns();
	(is_err ? &s->res->err : &s->res->out)->bytes += n;
	SHA256Update(is_err ? &s->err_sha : &s->out_sha, data, n);
	if (spec->sink)
		spec->sink(spec->sink_opaque, is_err, data, n);
	else if (spec->json)
		event_output(spec->json_out, is_err ? &s->err : &s->out, data, n);
	else
		write_raw(is_err ? spec->err_fd : spec->out_fd, data, n);
	return 0;
}

/* The EXIT frame, every field range-checked. 1 when done, -EPROTO. */
static int on_exit(struct session *s, struct proto_reader *rd)
{
	struct exec_result *res = s->res;
	uint32_t kind, code, signo;
	uint64_t dur;
	bool bad;

	if (!proto_get_u32(rd, &kind) || !proto_get_u32(rd, &code) || !proto_get_u32(rd, &signo) ||
	    !proto_get_u64(rd, &dur) || !proto_done(rd))
		return -EPROTO;
	bad = kind == PROTO_EXIT_CODE ? code > 255 :
	      kind == PROTO_EXIT_SIGNAL || kind == PROTO_EXIT_TIMEOUT ? signo == 0 || signo > SIGNO_MAX :
	      true;
	if (bad || dur > DURATION_MAX_US)
		return -EPROTO;
	res->ended_ns = clock_now_ns();
	res->signo = kind == PROTO_EXIT_CODE ? 0 : (int)signo;
	res->timed_out = kind == PROTO_EXIT_TIMEOUT;
	res->duration_us = dur;
	res->exit_code = kind == PROTO_EXIT_CODE ? (int)code :
			 kind == PROTO_EXIT_TIMEOUT ? RUN_EXIT_TIMEOUT : 128 + (int)signo;
	if (kind == PROTO_EXIT_TIMEOUT)
		snprintf(res->error, sizeof(res->error), "command timed out after %u ms",
			 s->spec->timeout_ms);
	else if (res->truncated)
		snprintf(res->error, sizeof(res->error), "the command's output passed --max-output "
			 "(%llu bytes): the rest was dropped and the command killed",
			 (unsigned long long)s->spec->max_output);
	if (s->spec->json)
		event_exit(s->spec->json_out, kind == PROTO_EXIT_CODE ? (int)code : -1,
			   kind == PROTO_EXIT_CODE ? 0 : (int)signo, kind == PROTO_EXIT_TIMEOUT, dur,
			   res->exit_code, res->truncated);
	return 1;
}

/* One frame from the agent. 1 when the run is over, 0 to go on, -EPROTO
 * for a frame that breaks the protocol. */
static int on_frame(struct session *s, const struct proto_frame *f)
{
	struct proto_reader rd;
	const uint8_t *data;
	uint32_t n, u;
	char msg[200];

	if (f->id != s->id)
		return 0;   /* not about our process */
	proto_reader_init(&rd, f);
	switch (f->type) {
	case PROTO_EXEC_STARTED:
		if (!proto_get_u32(&rd, &u) || !proto_done(&rd) || !u || u > PID_MAX || s->res->started_ns)
			return -EPROTO;
		s->res->started_ns = clock_now_ns();
		s->res->pid = u;
		/* Before the event: whoever reads it may name the pid at once. */
		if (s->spec->started)
			s->spec->started(s->spec->started_opaque, u);
		if (s->spec->json)
			event_started(s->spec->json_out, u);
		return 0;
	case PROTO_STDOUT:
	case PROTO_STDERR:
		if (!s->res->started_ns || !proto_get_bytes(&rd, &data, &n) || !proto_done(&rd))
			return -EPROTO;
		return on_output(s, f->type == PROTO_STDERR, data, n) ? -EPIPE : 0;
	case PROTO_OK:
		return 0;   /* a signal or resize was taken */
	case PROTO_ERROR:
		u = (uint32_t)-agent_client_error(f, msg, sizeof(msg));
		if (u == EPROTO)
			return -EPROTO;
		/* Once started, an ERROR answers something else we sent (a
		 * signal racing the exit): the EXIT still comes. */
		if (s->res->started_ns)
			return 0;
		fail(s->res, u == ENOENT ? RUN_EXIT_NOTFOUND : RUN_EXIT_AGENT, "cannot run '%s': %s",
		     s->spec->argv[0], msg);
		return 1;
	case PROTO_EXIT:
		if (!s->res->started_ns)
			return -EPROTO;
		return on_exit(s, &rd);
	default:
		return -EPROTO;   /* nothing else is ever about a process */
	}
}

/* How long poll may sleep: until the nearest deadline, 0 when frames wait. */
static int poll_ms(const struct session *s, uint64_t now)
{
	uint64_t until = s->spec->deadline_ns;

	if (agent_client_has_frame(s->c))
		return 0;
	if (s->grace_ns && (!until || s->grace_ns < until))
		until = s->grace_ns;
	if (!until)
		return -1;
	return until <= now ? 0 : (int)((until - now + 999999) / 1000000);
}

/* One round: deadlines, then signals, resizes and stdin, then a bounded
 * batch of frames. 1 when the run is over. */
static int session_round(struct session *s)
{
	const struct exec_spec *spec = s->spec;
	struct exec_result *res = s->res;
	uint64_t now = clock_now_ns();
	struct pollfd p[5] = {
		{ .fd = s->c->fd, .events = POLLIN }, { .fd = spec->signal_fd, .events = POLLIN },
		{ .fd = spec->winch_fd, .events = POLLIN }, { .fd = s->in_fd, .events = POLLIN },
		{ .fd = s->c->cancel_fd, .events = POLLIN },
	};
	int rc;

	if (spec->deadline_ns && now >= spec->deadline_ns) {
		fail(res, RUN_EXIT_TIMEOUT, "no exit status from the guest agent within the timeout");
		return 1;
	}
	if (s->grace_ns && now >= s->grace_ns) {
		fail(res, RUN_EXIT_AGENT, "the guest agent kept sending after the command was killed");
		return 1;
	}
	if (poll(p, 5, poll_ms(s, now)) < 0 && errno != EINTR) {
		fail(res, RUN_EXIT_MAYFLY, "poll: %s", strerror(errno));
		return 1;
	}
	if (p[4].revents) {
		fail(res, RUN_EXIT_AGENT, "the VM ended before the command did");
		return 1;
	}
	rc = 0;
	if (p[1].revents & POLLIN)
		rc = forward_signals(s);
	if (!rc && (p[2].revents & POLLIN))
		rc = forward_resize(s);
	if (!rc && s->in_fd >= 0 && (p[3].revents & (POLLIN | POLLHUP | POLLERR)))
		rc = forward_stdin(s);
	for (int i = 0; !rc && i < FRAMES_PER_ROUND; i++) {
		struct proto_frame f;

		/* A deadline of 1 ns (long past) takes what is here, never waits. */
		rc = agent_client_recv(s->c, &f, 1);
		if (rc == 0)
			return 0;
		if (rc < 0)
			break;
		rc = on_frame(s, &f);
		if (rc == 1)
			return 1;
	}
	if (rc == -EPROTO) {
		s->c->broken = true;
		fail(res, RUN_EXIT_AGENT, "the guest agent broke the protocol");
	} else if (rc == -ECANCELED) {
		fail(res, RUN_EXIT_AGENT, "the VM ended before the command did");
	} else if (rc == -ETIMEDOUT) {
		fail(res, RUN_EXIT_TIMEOUT, "the guest agent stopped reading within the timeout");
	} else if (rc < 0) {
		fail(res, RUN_EXIT_AGENT, "lost the guest agent: %s",
		     rc == -EPIPE ? "connection closed" : strerror(-rc));
	}
	return rc < 0 ? 1 : 0;
}

void session_exec(struct agent_client *c, const struct exec_spec *spec, struct exec_result *res)
{
	struct session s = {
		.c = c, .spec = spec, .res = res, .in_fd = spec->stdin_fd,
		.out = { .name = "stdout" }, .err = { .name = "stderr" },
	};
	int rc;

	memset(res, 0, sizeof(*res));
	res->exit_code = RUN_EXIT_AGENT;
	SHA256Init(&s.out_sha);
	SHA256Init(&s.err_sha);
	s.id = agent_client_id(c);
	rc = send_exec(&s);
	if (rc && !res->error[0]) {   /* (a bad root has said why) */
		fail(res, rc == -ETIMEDOUT ? RUN_EXIT_TIMEOUT : RUN_EXIT_AGENT,
		     "cannot send the command to the guest agent: %s", strerror(-rc));
	} else if (!rc) {
		while (!session_round(&s))
			;
	}
	SHA256Final(res->out.sha256, &s.out_sha);
	SHA256Final(res->err.sha256, &s.err_sha);
	if (rc)
		return;
	if (spec->json) {
		event_output_flush(spec->json_out, &s.out);
		event_output_flush(spec->json_out, &s.err);
	}
}
