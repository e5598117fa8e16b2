/* client.c - the agent test client: spawns $MAYFLY_AGENT, frames requests, gathers replies. */
#include "client.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FRAME_MAX (PROTO_HEADER_LEN + PROTO_MAX_PAYLOAD)
/* Room for a partial frame plus a whole one after it: see client_recv. */
#define RECV_CAP  (2 * FRAME_MAX)

static uint8_t wbuf[FRAME_MAX];
static struct proto_writer writer;

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static const char *agent_path(void)
{
	const char *p = getenv("MAYFLY_AGENT");

	cr_assert(p && *p, "MAYFLY_AGENT must name the mayfly-agent binary (meson sets it)");
	return p;
}

/* Fork and exec the agent; conn >= 0 becomes its fd 10 (for --fd 10).
 * With MAYFLY_AGENT_EMULATOR (qemu-aarch64-static) the agent is another
 * architecture's, run under that emulator: EMULATOR AGENT ARGS... */
static void spawn_agent(struct client *c, char *const *args, int conn)
{
	/* Asserted here: an assert in the forked child would report from a stranger. */
	const char *path = agent_path(), *emulator = getenv("MAYFLY_AGENT_EMULATOR");
	char *argv[16] = { 0 };
	size_t n = 0;
	pid_t pid;

	if (emulator && *emulator) {
		argv[n++] = (char *)emulator;
		argv[n++] = (char *)path;
		path = emulator;
	} else {
		argv[n++] = args[0];
	}
	for (size_t i = 1; args[i]; i++) {
		cr_assert_lt(n, sizeof(argv) / sizeof(argv[0]) - 1);
		argv[n++] = args[i];
	}
	pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		/* Never outlive the test, whatever happens to it. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		/* dup2 onto itself would keep CLOEXEC: clear it explicitly. */
		if (conn >= 0 && (dup2(conn, 10) < 0 || fcntl(10, F_SETFD, 0) < 0))
			_exit(127);
		execv(path, argv);
		_exit(127);
	}
	c->agent = pid;
}

static void client_init(struct client *c)
{
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	strcpy(c->dir, "/tmp/mayfly-agent-test.XXXXXX");
	cr_assert_not_null(mkdtemp(c->dir));
	c->buf = malloc(RECV_CAP);
	cr_assert_not_null(c->buf);
}

static void hello(struct client *c)
{
	struct proto_reader r;
	uint32_t v;

	proto_put_u32(client_begin(PROTO_HELLO, 1), PROTO_VERSION);
	client_send(c, &writer);
	client_expect(c, PROTO_HELLO_OK, 1);
	proto_reader_init(&r, &c->f);
	cr_assert(proto_get_u32(&r, &v) && v == PROTO_VERSION);
}

void client_start(struct client *c)
{
	int sv[2];

	client_init(c);
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	{
		char *args[] = { "mayfly-agent", "--fd", "10", "--home", c->dir, NULL };

		spawn_agent(c, args, sv[1]);
	}
	close(sv[1]);
	c->fd = sv[0];
	hello(c);
}

void client_start_defaults(struct client *c, const char *text)
{
	char path[sizeof(c->dir) + 16];
	int sv[2];
	FILE *f;

	client_init(c);
	snprintf(path, sizeof(path), "%s/defaults", c->dir);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	{
		char *args[] = { "mayfly-agent", "--fd", "10", "--home", c->dir, "--defaults", path,
				 NULL };

		spawn_agent(c, args, sv[1]);
	}
	close(sv[1]);
	c->fd = sv[0];
	hello(c);
}

int client_connect(struct client *c, bool do_hello)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	uint64_t end = mono_ms() + 5000;
	int fd;

	strcpy(sun.sun_path, c->sock);
	for (;;) {
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		cr_assert_geq(fd, 0);
		if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0)
			break;
		close(fd);
		cr_assert_lt(mono_ms(), end, "the agent never listened on %s", c->sock);
		usleep(2000);
	}
	c->fd = fd;
	c->off = c->len = 0;
	if (do_hello)
		hello(c);
	return fd;
}

void client_start_unix(struct client *c)
{
	client_init(c);
	snprintf(c->sock, sizeof(c->sock), "%s/agent.sock", c->dir);
	{
		char *args[] = { "mayfly-agent", "--unix", c->sock, "--home", c->dir, NULL };

		spawn_agent(c, args, -1);
	}
	client_connect(c, true);
}

void client_start_net(struct client *c)
{
	char relay[sizeof(c->dir) + 16];

	client_init(c);
	snprintf(c->sock, sizeof(c->sock), "%s/agent.sock", c->dir);
	snprintf(relay, sizeof(relay), "%s/net.sock", c->dir);
	{
		char *args[] = { "mayfly-agent", "--unix", c->sock, "--home", c->dir, "--net-unix",
				 relay, NULL };

		spawn_agent(c, args, -1);
	}
	client_connect(c, true);
}

void client_stop(struct client *c)
{
	char cmd[128];
	int st;

	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	if (c->agent > 0) {
		if (c->sock[0])
			kill(c->agent, SIGTERM);
		for (int i = 0; i < 400 && waitpid(c->agent, &st, WNOHANG) == 0; i++)
			usleep(5000);
		if (kill(c->agent, SIGKILL) == 0)
			waitpid(c->agent, &st, 0);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", c->dir);
	if (system(cmd) != 0)
		cr_log_warn("could not remove %s", c->dir);
	free(c->buf);
}

struct proto_writer *client_begin(uint8_t type, uint32_t id)
{
	proto_begin(&writer, wbuf, sizeof(wbuf), type, id);
	return &writer;
}

void client_send_raw(struct client *c, const void *p, size_t len)
{
	const uint8_t *b = p;

	while (len > 0) {
		ssize_t n = send(c->fd, b, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		cr_assert_gt(n, 0, "send: %s", strerror(errno));
		b += n;
		len -= (size_t)n;
	}
}

void client_send(struct client *c, struct proto_writer *w)
{
	int n = proto_end(w);

	cr_assert_gt(n, 0, "frame too big for the test's writer");
	client_send_raw(c, w->buf, (size_t)n);
}

int client_recv(struct client *c, int timeout_ms)
{
	uint64_t end = mono_ms() + (uint64_t)timeout_ms;
	struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
	ssize_t n;
	int rc;

	for (;;) {
		/* Frames are consumed in place: c->f.payload points into c->buf. */
		rc = proto_frame_decode(c->buf + c->off, c->len - c->off, &c->f);
		cr_assert_geq(rc, 0, "the agent sent a malformed frame");
		if (rc > 0) {
			c->off += (size_t)rc;
			return 1;
		}
		/*
		 * A partial frame at off: move it to the front only when the room
		 * left after it could not take a whole frame. The frame before it
		 * was consumed since the last move, so each move is shorter than
		 * the bytes received since: the copying stays linear in the volume.
		 */
		if (RECV_CAP - c->len < FRAME_MAX) {
			memmove(c->buf, c->buf + c->off, c->len - c->off);
			c->len -= c->off;
			c->off = 0;
		}
		uint64_t now = mono_ms();

		if (now >= end)
			return -ETIMEDOUT;
		rc = poll(&pfd, 1, (int)(end - now));
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc == 0)
			return -ETIMEDOUT;
		n = recv(c->fd, c->buf + c->len, RECV_CAP - c->len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return 0;
		c->len += (size_t)n;
	}
}

void client_expect(struct client *c, uint8_t type, uint32_t id)
{
	int rc = client_recv(c, 5000);

	cr_assert_eq(rc, 1, "wanted %s for id %u, got %s", proto_type_name(type), id,
		     rc == 0 ? "EOF" : "nothing in 5 s");
	if (c->f.type == PROTO_ERROR && type != PROTO_ERROR) {
		struct proto_reader r;
		uint32_t err = 0;
		char msg[256] = "";

		proto_reader_init(&r, &c->f);
		proto_get_u32(&r, &err);
		proto_get_str(&r, msg, sizeof(msg));
		cr_assert_fail("wanted %s for id %u, got ERROR %u (%s) for id %u",
			       proto_type_name(type), id, err, msg, c->f.id);
	}
	cr_assert_eq(c->f.type, type, "wanted %s, got %s", proto_type_name(type),
		     proto_type_name(c->f.type));
	cr_assert_eq(c->f.id, id);
}

void client_expect_error(struct client *c, uint32_t id, int err)
{
	struct proto_reader r;
	uint32_t got;
	char msg[512];

	client_expect(c, PROTO_ERROR, id);
	proto_reader_init(&r, &c->f);
	cr_assert(proto_get_u32(&r, &got) && proto_get_str(&r, msg, sizeof(msg)) && proto_done(&r));
	cr_assert_eq(got, (uint32_t)err, "wanted errno %d (%s), got %u (%s)", err, strerror(err),
		     got, msg);
}

bool client_sees_eof(struct client *c, int timeout_ms)
{
	uint64_t end = mono_ms() + (uint64_t)timeout_ms;
	int rc;

	do
		rc = client_recv(c, (int)(end > mono_ms() ? end - mono_ms() : 0));
	while (rc == 1);
	return rc == 0;
}

void client_exec(struct client *c, uint32_t id, uint32_t flags, uint32_t timeout_ms,
		 uint16_t rows, uint16_t cols, const char *cwd, char *const *argv, char *const *envp)
{
	struct proto_exec e = { .flags = flags, .timeout_ms = timeout_ms, .rows = rows,
				.cols = cols, .argv = (char **)argv, .envp = (char **)envp };

	while (argv[e.argc])
		e.argc++;
	while (envp && envp[e.envc])
		e.envc++;
	snprintf(e.cwd, sizeof(e.cwd), "%s", cwd ? cwd : "");
	client_begin(PROTO_EXEC, id);
	cr_assert_gt(proto_exec_encode(&writer, id, &e), 0);
	client_send_raw(c, wbuf, writer.len);
}

void client_stdin(struct client *c, uint32_t id, const void *data, uint32_t len)
{
	proto_put_bytes(client_begin(PROTO_STDIN, id), data, len);
	client_send(c, &writer);
}

void client_append(char **s, size_t *len, size_t *cap, const void *data, size_t n)
{
	if (*cap - *len < n + 1 || !*s) {
		size_t want = *cap ? *cap : 4096;

		while (want - *len < n + 1)
			want *= 2;
		*s = realloc(*s, want);
		cr_assert_not_null(*s);
		*cap = want;
	}
	memcpy(*s + *len, data, n);
	*len += n;
	(*s)[*len] = '\0';
}

static bool run_over(const struct run *r)
{
	return r->exited || r->error;
}

void client_collect(struct client *c, struct run *runs, int n, int timeout_ms)
{
	uint64_t end = mono_ms() + (uint64_t)timeout_ms;
	struct proto_reader rd;
	const uint8_t *data;
	uint32_t len, u;
	struct run *r;
	int rc, left, seq = 0;

	for (;;) {
		left = 0;
		for (int i = 0; i < n; i++)
			left += !run_over(&runs[i]);
		if (!left)
			return;
		rc = client_recv(c, (int)(end > mono_ms() ? end - mono_ms() : 0));
		cr_assert_eq(rc, 1, "%d process(es) not finished: %s", left,
			     rc == 0 ? "EOF" : "timed out");
		r = NULL;
		for (int i = 0; i < n; i++)
			if (runs[i].id == c->f.id)
				r = &runs[i];
		cr_assert_not_null(r, "a %s frame for unknown id %u", proto_type_name(c->f.type),
				   c->f.id);
		if (run_over(r))
			r->frames_after_exit++;
		seq++;
		proto_reader_init(&rd, &c->f);
		switch (c->f.type) {
		case PROTO_EXEC_STARTED:
			cr_assert(proto_get_u32(&rd, &r->pid) && proto_done(&rd));
			cr_assert_not(r->started, "EXEC_STARTED twice");
			r->started = true;
			break;
		case PROTO_ERROR:
			cr_assert(proto_get_u32(&rd, &u));
			cr_assert_not(r->started, "ERROR after EXEC_STARTED");
			r->error = (int)u;
			break;
		case PROTO_STDOUT:
		case PROTO_STDERR:
			cr_assert(r->started, "output before EXEC_STARTED");
			cr_assert(proto_get_bytes(&rd, &data, &len) && proto_done(&rd));
			cr_assert_gt(len, 0, "an empty output chunk");
			cr_assert_leq(len, PROTO_CHUNK);
			if (len > r->max_chunk)
				r->max_chunk = len;
			if (!r->first_output_seq)
				r->first_output_seq = seq;
			if (c->f.type == PROTO_STDOUT)
				client_append(&r->out, &r->out_len, &r->out_cap, data, len);
			else
				client_append(&r->err, &r->err_len, &r->err_cap, data, len);
			break;
		case PROTO_EXIT:
			cr_assert(r->started, "EXIT before EXEC_STARTED");
			cr_assert(proto_get_u32(&rd, &r->kind) && proto_get_u32(&rd, &u) &&
				  proto_get_u32(&rd, &r->signo) &&
				  proto_get_u64(&rd, &r->duration_us) && proto_done(&rd));
			r->code = (int32_t)u;
			r->exited = true;
			r->exit_seq = seq;
			break;
		default:
			cr_assert_fail("unexpected %s for process %u", proto_type_name(c->f.type),
				       c->f.id);
		}
	}
}

void client_run(struct client *c, struct run *r, uint32_t flags, uint32_t timeout_ms,
		const char *cwd, char *const *argv, char *const *envp)
{
	uint32_t id = r->id ? r->id : 100;

	memset(r, 0, sizeof(*r));
	r->id = id;
	client_exec(c, id, flags, timeout_ms, 0, 0, cwd, argv, envp);
	client_collect(c, r, 1, 10000);
	cr_assert_eq(r->frames_after_exit, 0);
}

void run_free(struct run *r)
{
	free(r->out);
	free(r->err);
	r->out = r->err = NULL;
	r->out_len = r->err_len = r->out_cap = r->err_cap = 0;
}
