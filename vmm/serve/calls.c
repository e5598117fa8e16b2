/* calls.c - mayfly serve's tool calls into a sandbox through its guest agent: exec (streamed as JSON lines), signals, files; each approved and audited. */
#include "serve/calls.h"
#include "agent_client/client.h"
#include "agent_client/events.h"
#include "agent_client/lifecycle.h"
#include "agent_client/session.h"
#include "agent_client/transfer.h"
#include "agent_client/watch.h"
#include "control/ctl_client.h"
#include "launch/vm_agent.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "protocol.h"
#include "serve/guest_fs.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define EXEC_GRACE_S   10   /* past the exec's timeout, for the agent's EXIT to arrive */

struct exec_stream {
	struct service *svc;
	struct sandbox *sb;
	struct api_exec req;
	struct gate gate;
	char caller[80];
	json_t *call;
	uint64_t start_ns;
	struct exec_slot slot;
	int out_r, out_w;          /* the JSON lines: the call's thread writes, HTTP reads */
	int client_fd;             /* the reader's connection (-1: none): its hang-up ends the read */
	int sig_r;
	int winch_r;               /* the pty's sizes, or -1 */
	int stdin_fd;              /* a memfd with the body's stdin, or -1 */
	pthread_t thread;
	char **env;                /* the sandbox's, then the call's */
	struct agent_client client;
};

static void result(struct call_result *r, int status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void result(struct call_result *r, int status, const char *code, const char *fmt, ...)
{
	va_list ap;

	r->status = status;
	r->code = code;
	va_start(ap, fmt);
	vsnprintf(r->error, sizeof(r->error), fmt, ap);
	va_end(ap);
}

/* An agent call's failure as an HTTP status. */
static void agent_failed(struct call_result *r, int rc, const char *what, const char *why)
{
	int status = 502;
	const char *code = "agent";

	switch (-rc) {
	case ENOENT: status = 404; code = "not_found"; break;
	case EACCES: case EPERM: case EROFS: status = 403; code = "permission"; break;
	case EEXIST: case ENOTEMPTY: case EISDIR: case ENOTDIR: case EBUSY:
		status = 409; code = "conflict"; break;
	case EFBIG: status = 413; code = "too_large"; break;
	case ENOSPC: case EDQUOT: status = 507; code = "no_space"; break;
	case EINVAL: case ENAMETOOLONG: case ELOOP: status = 400; code = "bad_request"; break;
	case ETIMEDOUT: status = 504; code = "timeout"; break;
	case ECANCELED: status = 503; code = "shutting_down"; break;
	}
	result(r, status, code, "%s: %s", what, why && why[0] ? why : strerror(-rc));
}

static void gate_for(struct gate *g, struct service *svc, struct sandbox *sb, const char *caller)
{
	*g = svc->gate;
	g->sandbox = sb->id;
	g->caller = caller;
}

static int connect_agent(struct service *svc, struct sandbox *sb, struct agent_client *c,
			 struct call_result *r)
{
	const char *why = "";
	int rc = agent_client_connect(c, agent_dial_unix, sb->vsock, PROTO_AGENT_PORT,
				      clock_now_ns() + svc->cfg.call_timeout_s * NS_PER_S, svc->stop_fd,
				      &why);

	if (rc)
		agent_failed(r, rc, "cannot reach the sandbox's agent", why);
	return rc;
}

/* Ask the approver; on a refusal r says so (403 "refused"). */
static int ask(struct gate *g, json_t *call, uint64_t *t0, struct call_result *r)
{
	char why[300];
	int rc;

	if (!call) {
		result(r, 500, "internal", "out of memory");
		return -ENOMEM;
	}
	rc = gate_ask(g, call, t0, why, sizeof(why));
	if (rc == -EPERM)
		result(r, 403, "refused", "%s", why);
	else if (rc)
		result(r, 500, "audit", "%s", why);
	return rc;
}

/* The command's guest pid: E2B's front end names commands by it. */
static void on_started(void *opaque, uint32_t pid)
{
	struct exec_stream *s = opaque;

	pthread_mutex_lock(&s->svc->lock);
	s->slot.pid = pid;
	pthread_mutex_unlock(&s->svc->lock);
}

static void *exec_main(void *arg)
{
	struct exec_stream *s = arg;
	struct service *svc = s->svc;
	struct call_result r;
	struct exec_result res;
	struct exec_spec spec;
	char why[300];
	FILE *out = fdopen(s->out_w, "w");

	if (!out)
		goto out_record;
	s->out_w = -1;   /* the FILE has it */
	memset(&res, 0, sizeof(res));
	res.exit_code = RUN_EXIT_AGENT;
	if (connect_agent(svc, s->sb, &s->client, &r)) {
		snprintf(res.error, sizeof(res.error), "%.200s", r.error);
		event_error(out, r.error);
		goto out_close;
	}
	session_spec_init(&spec);
	spec.argv = (char **)s->req.argv;
	spec.argc = s->req.argc;
	spec.env = s->env;
	spec.nenv = s->sb->nenv + s->req.nenv;
	spec.cwd = s->req.cwd;
	spec.stdin_fd = s->stdin_fd;
	spec.json = true;
	spec.json_out = out;
	spec.signal_fd = s->sig_r;
	spec.pty = s->req.pty;
	spec.rows = s->req.rows;
	spec.cols = s->req.cols;
	spec.winch_fd = s->winch_r;
	spec.started = on_started;
	spec.started_opaque = s;
	spec.timeout_ms = s->req.timeout_s * 1000;
	spec.max_output = svc->cfg.max_output;
	if (s->req.timeout_s)
		spec.deadline_ns = clock_now_ns() + (s->req.timeout_s + EXEC_GRACE_S) * NS_PER_S;
	session_exec(&s->client, &spec, &res);
	if (res.error[0])
		event_error(out, res.error);
out_close:
	fclose(out);
out_record:
	if (gate_record_exec(&s->gate, s->call, s->start_ns, &res, why, sizeof(why)))
		log_warn("serve: %s", why);
	if (res.error[0] && !res.ended_ns)
		metrics_fail(&svc->metrics, F_AGENT);
	metrics_observe(&svc->metrics, M_EXEC, clock_now_ns() - s->start_ns);
	agent_client_close(&s->client);
	return NULL;
}

static void free_stream(struct exec_stream *s)
{
	int fds[] = { s->out_r, s->out_w, s->sig_r, s->slot.sig_w, s->stdin_fd, s->slot.stdin_w,
		      s->winch_r, s->slot.winch_w };

	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	json_decref(s->call);
	api_exec_free(&s->req);
	free(s->env);
	free(s);
}

/* A pipe whose writing end (ours) never blocks: 0 (-1 < 0 for the
 * caller's checks) or -errno. */
static int open_pipe(int *r, int *w)
{
	int p[2];

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	fcntl(p[1], F_SETFL, O_NONBLOCK);
	*r = p[0];
	*w = p[1];
	return -1;
}

/* stdin from the body: a memfd the session reads to its end. */
static int stdin_memfd(const struct api_exec *req)
{
	size_t off = 0;
	int fd;

	if (!req->stdin_data)
		return -1;
	fd = memfd_create("mayfly-stdin", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (off < req->stdin_len) {
		ssize_t n = write(fd, req->stdin_data + off, req->stdin_len - off);

		if (n < 0) {
			int rc = -errno;

			close(fd);
			return rc;
		}
		off += (size_t)n;
	}
	lseek(fd, 0, SEEK_SET);
	return fd;
}

/* The EXEC frame's payload the call makes, near enough from above: each
 * string with its length word, and room for the fixed fields. */
static size_t exec_frame_size(const struct api_exec *req, char *const *env, int nenv)
{
	size_t n = 256 + (req->cwd ? strlen(req->cwd) : 0);

	for (int i = 0; i < req->argc; i++)
		n += 4 + strlen(req->argv[i]);
	for (int i = 0; i < nenv; i++)
		n += 4 + strlen(env[i]);
	return n;
}

int calls_exec_start(struct service *svc, struct sandbox *sb, const char *caller,
		     struct api_exec *req, struct exec_stream **out, struct call_result *r)
{
	struct exec_stream *s = calloc(1, sizeof(*s));   /* large: the client's buffers */
	int pout[2], psig[2], rc;
	struct exec_spec spec;

	if (!s) {
		result(r, 500, "internal", "out of memory");
		return -ENOMEM;
	}
	s->svc = svc;
	s->sb = sb;
	s->req = *req;
	memset(req, 0, sizeof(*req));
	s->out_r = s->out_w = s->sig_r = s->slot.sig_w = s->stdin_fd = -1;
	s->slot.stdin_w = s->winch_r = s->slot.winch_w = s->client_fd = -1;
	snprintf(s->caller, sizeof(s->caller), "%s", caller);
	gate_for(&s->gate, svc, sb, s->caller);
	s->env = calloc((size_t)(sb->nenv + s->req.nenv) + 1, sizeof(*s->env));
	if (!s->env) {
		result(r, 500, "internal", "out of memory");
		rc = -ENOMEM;
		goto out_free;
	}
	if (sb->nenv)
		memcpy(s->env, sb->env, (size_t)sb->nenv * sizeof(*s->env));
	if (s->req.nenv)
		memcpy(s->env + sb->nenv, s->req.env, (size_t)s->req.nenv * sizeof(*s->env));
	if (exec_frame_size(&s->req, s->env, sb->nenv + s->req.nenv) > PROTO_MAX_PAYLOAD) {
		result(r, 400, "bad_request", "the command, its arguments and its environment "
		       "(the sandbox's too) are over the guest agent's %u-byte request",
		       PROTO_MAX_PAYLOAD);
		rc = -E2BIG;
		goto out_free;
	}
	rc = s->req.stdin_open ? open_pipe(&s->stdin_fd, &s->slot.stdin_w) : stdin_memfd(&s->req);
	if (rc >= -1 && !s->req.stdin_open)
		s->stdin_fd = rc;
	if (rc >= -1 && s->req.pty)
		rc = open_pipe(&s->winch_r, &s->slot.winch_w);
	if (rc >= -1 && pipe2(pout, O_CLOEXEC) == 0) {
		s->out_r = pout[0];
		s->out_w = pout[1];
		if (pipe2(psig, O_CLOEXEC | O_NONBLOCK) == 0) {
			s->sig_r = psig[0];
			s->slot.sig_w = psig[1];
		}
	}
	if (s->slot.sig_w < 0) {
		rc = rc < -1 ? rc : -errno;
		result(r, 500, "internal", "cannot set up the call: %s", strerror(-rc));
		goto out_free;
	}
	/* What the approver and the audit log see: the call as the session will make it. */
	session_spec_init(&spec);
	spec.argv = (char **)s->req.argv;
	spec.argc = s->req.argc;
	spec.env = s->env;
	spec.nenv = sb->nenv + s->req.nenv;
	spec.cwd = s->req.cwd;
	spec.timeout_ms = s->req.timeout_s * 1000;
	s->call = gate_exec_call(&spec, s->req.stdin_data, s->req.stdin_len);
	rc = ask(&s->gate, s->call, &s->start_ns, r);
	if (rc)
		goto out_free;
	pthread_mutex_lock(&svc->lock);
	s->slot.id = ++svc->next_exec;
	s->slot.next = sb->execs;
	sb->execs = &s->slot;
	pthread_mutex_unlock(&svc->lock);
	rc = -pthread_create(&s->thread, NULL, exec_main, s);
	if (rc) {
		result(r, 500, "internal", "cannot start the call: %s", strerror(-rc));
		goto out_unlink;
	}
	*out = s;
	return 0;
out_unlink:
	pthread_mutex_lock(&svc->lock);
	for (struct exec_slot **p = &sb->execs; *p; p = &(*p)->next)
		if (*p == &s->slot) {
			*p = s->slot.next;
			break;
		}
	pthread_mutex_unlock(&svc->lock);
out_free:
	free_stream(s);
	return rc;
}

uint64_t calls_exec_id(const struct exec_stream *s)
{
	return s->slot.id;
}

void calls_exec_watch(struct exec_stream *s, int client_fd)
{
	s->client_fd = client_fd;
}

int calls_exec_fd(const struct exec_stream *s)
{
	return s->out_r;
}

ssize_t calls_exec_read(struct exec_stream *s, char *buf, size_t len)
{
	/* POLLRDHUP only on the client: a byte it sends must not wake us
	 * (nothing would read it), its going must. */
	struct pollfd p[2] = { { .fd = s->out_r, .events = POLLIN },
			       { .fd = s->client_fd, .events = POLLRDHUP } };
	ssize_t n;

	for (;;) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (p[0].revents)
			break;
		if (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR))
			return -ECONNRESET;   /* the client went: the command goes too */
	}
	do
		n = read(s->out_r, buf, len);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

void calls_exec_end(struct exec_stream *s)
{
	struct service *svc = s->svc;
	uint8_t kill_sig = SIGKILL;

	/* A reader gone early: nobody wants the rest, so the command goes. */
	close(s->out_r);
	s->out_r = -1;
	if (write(s->slot.sig_w, &kill_sig, 1) < 0 && errno != EAGAIN)
		log_warn("serve: cannot signal exec %llu: %s", (unsigned long long)s->slot.id,
			 strerror(errno));
	pthread_join(s->thread, NULL);
	pthread_mutex_lock(&svc->lock);
	for (struct exec_slot **p = &s->sb->execs; *p; p = &(*p)->next)
		if (*p == &s->slot) {
			*p = s->slot.next;
			break;
		}
	pthread_mutex_unlock(&svc->lock);
	service_put(svc, s->sb);
	free_stream(s);
}

uint64_t calls_exec_of_pid(struct service *svc, struct sandbox *sb, uint32_t pid)
{
	uint64_t id = 0;

	pthread_mutex_lock(&svc->lock);
	for (struct exec_slot *e = sb->execs; e && !id; e = e->next)
		if (pid && e->pid == pid)
			id = e->id;
	pthread_mutex_unlock(&svc->lock);
	return id;
}

/* The running exec of sb with id: its slot, the lock held (NULL: none,
 * the lock released). */
static struct exec_slot *slot_locked(struct service *svc, struct sandbox *sb, uint64_t id)
{
	pthread_mutex_lock(&svc->lock);
	for (struct exec_slot *e = sb->execs; e; e = e->next)
		if (e->id == id)
			return e;
	pthread_mutex_unlock(&svc->lock);
	return NULL;
}

int calls_exec_input(struct service *svc, struct sandbox *sb, uint64_t exec_id, const void *data,
		     size_t len, struct call_result *r)
{
	struct exec_slot *e = slot_locked(svc, sb, exec_id);
	ssize_t n = 0;

	if (!e) {
		result(r, 404, "not_found", "no running exec %llu", (unsigned long long)exec_id);
		return 404;
	}
	if (e->stdin_w < 0) {
		pthread_mutex_unlock(&svc->lock);
		result(r, 409, "conflict", "the command's stdin is closed");
		return 409;
	}
	/* All or nothing: the pipe holds 64 KiB the command has not read. */
	if (len && (size_t)fcntl(e->stdin_w, F_GETPIPE_SZ) >= len)
		n = write(e->stdin_w, data, len);
	pthread_mutex_unlock(&svc->lock);
	if (len && (n < 0 || (size_t)n != len)) {
		result(r, 503, "busy", "the command has not read its earlier input: try again");
		return 503;
	}
	result(r, 200, NULL, "%s", "");
	return 0;
}

int calls_exec_close_stdin(struct service *svc, struct sandbox *sb, uint64_t exec_id,
			   struct call_result *r)
{
	struct exec_slot *e = slot_locked(svc, sb, exec_id);

	if (!e) {
		result(r, 404, "not_found", "no running exec %llu", (unsigned long long)exec_id);
		return 404;
	}
	if (e->stdin_w >= 0)
		close(e->stdin_w);   /* the session sends the end of stdin */
	e->stdin_w = -1;
	pthread_mutex_unlock(&svc->lock);
	result(r, 200, NULL, "%s", "");
	return 0;
}

int calls_exec_resize(struct service *svc, struct sandbox *sb, uint64_t exec_id, uint16_t rows,
		      uint16_t cols, struct call_result *r)
{
	struct exec_slot *e = slot_locked(svc, sb, exec_id);
	uint16_t size[2] = { rows, cols };
	ssize_t n = -1;

	if (!e) {
		result(r, 404, "not_found", "no running exec %llu", (unsigned long long)exec_id);
		return 404;
	}
	if (e->winch_w >= 0)
		n = write(e->winch_w, size, sizeof(size));
	pthread_mutex_unlock(&svc->lock);
	if (n != (ssize_t)sizeof(size)) {
		result(r, 409, "conflict", "the command has no pty, or too many resizes pending");
		return 409;
	}
	result(r, 200, NULL, "%s", "");
	return 0;
}

json_t *calls_exec_list(struct service *svc, struct sandbox *sb)
{
	json_t *a = json_array();

	pthread_mutex_lock(&svc->lock);
	for (struct exec_slot *e = sb->execs; a && e; e = e->next) {
		/* The slot is its stream's, whose request stays as it started. */
		const struct exec_stream *s = (const void *)((const char *)e -
							   offsetof(struct exec_stream, slot));
		json_t *argv = json_array();

		for (int i = 0; argv && i < s->req.argc; i++)
			json_array_append_new(argv, json_string(s->req.argv[i]));
		if (e->pid)
			json_array_append_new(a, json_pack("{s:I, s:I, s:o*}", "pid", (json_int_t)e->pid,
							   "exec", (json_int_t)e->id, "argv", argv));
		else
			json_decref(argv);
	}
	pthread_mutex_unlock(&svc->lock);
	return a;
}

int calls_signal(struct service *svc, struct sandbox *sb, uint64_t exec_id, int signo,
		 struct call_result *r)
{
	uint8_t b = (uint8_t)signo;
	int rc = 404;

	pthread_mutex_lock(&svc->lock);
	for (struct exec_slot *e = sb->execs; e; e = e->next)
		if (e->id == exec_id) {
			rc = write(e->sig_w, &b, 1) == 1 ? 0 : 503;
			break;
		}
	pthread_mutex_unlock(&svc->lock);
	if (rc == 404)
		result(r, 404, "not_found", "no running exec %llu in sandbox %s",
		       (unsigned long long)exec_id, sb->id);
	else if (rc)
		result(r, 503, "busy", "too many signals pending for exec %llu",
		       (unsigned long long)exec_id);
	else
		result(r, 202, NULL, "%s", "");
	return rc;
}

/* One file call: approve, connect, run its op (or stream), record. */
struct file_call {
	struct service *svc;
	struct sandbox *sb;
	const char *path;
	struct agent_client *c;
	uint64_t deadline;
	struct transfer_stats st;
	char why[300];
	struct gate g;
	json_t *call;
	uint64_t t0;
};

typedef int (*file_op)(struct file_call *fc, void *opaque);

/* Approve and connect. 0; else r says why, and what the call holds is
 * released (a connect failure recorded). */
static int file_call_begin(struct file_call *fc, struct service *svc, struct sandbox *sb,
			   const char *caller, const char *tool, const char *op, const char *path,
			   const char *to, struct call_result *r)
{
	*fc = (struct file_call){ .svc = svc, .sb = sb, .path = path };
	fc->call = gate_file_call(tool, path, NULL);
	gate_for(&fc->g, svc, sb, caller);
	if (fc->call && op)
		json_object_set_new(fc->call, "op", json_string(op));
	/* A rename's target: the approver and the log see both paths. */
	if (fc->call && to)
		json_object_set_new(fc->call, "to", json_string(to));
	/* A failure is counted by its cause where its HTTP error is sent. */
	if (ask(&fc->g, fc->call, &fc->t0, r)) {
		json_decref(fc->call);
		return -EPERM;
	}
	fc->c = calloc(1, sizeof(*fc->c));
	if (!fc->c) {
		result(r, 500, "internal", "out of memory");
	} else if (connect_agent(svc, sb, fc->c, r)) {
		free(fc->c);
		fc->c = NULL;
	} else {
		fc->deadline = clock_now_ns() + svc->cfg.call_timeout_s * NS_PER_S;
		return 0;
	}
	snprintf(fc->why, sizeof(fc->why), "%.250s", r->error);
	if (gate_record_file(&fc->g, fc->call, fc->t0, -EIO, fc->why, &fc->st, fc->why,
			     sizeof(fc->why)))
		result(r, 500, "audit", "%s", fc->why);
	json_decref(fc->call);
	return -EIO;
}

/* A write the guest's disk failed with an I/O error: when its overlay
 * holds its whole quota (asked of the VM), that is why, said so. */
static int disk_full_why(struct file_call *fc, int rc)
{
	const char *why = "";
	uint64_t used;
	bool full;

	if (rc != -EIO ||
	    ctl_client_disk_usage(fc->sb->vsock, clock_now_ns() + 5 * NS_PER_S, fc->svc->stop_fd,
				  &full, &used, &why) || !full)
		return rc;
	snprintf(fc->why, sizeof(fc->why), "no space left on the sandbox's disk: its disk quota "
		 "is used up (%llu MiB of it written; deleting files gives none back)",
		 (unsigned long long)(used >> 20));
	return -ENOSPC;
}

/* The call ended with rc (0, or -errno with fc->why): r set, the agent
 * closed, the call recorded. */
static void file_call_end(struct file_call *fc, int rc, struct call_result *r)
{
	if (rc)
		agent_failed(r, disk_full_why(fc, rc), fc->path, fc->why);
	else
		result(r, 200, NULL, "%s", "");
	agent_client_close(fc->c);
	free(fc->c);
	fc->c = NULL;
	if (gate_record_file(&fc->g, fc->call, fc->t0, rc, fc->why, &fc->st, fc->why,
			     sizeof(fc->why)))
		result(r, 500, "audit", "%s", fc->why);
	json_decref(fc->call);
}

static void file_call(struct service *svc, struct sandbox *sb, const char *caller, const char *tool,
		      const char *op, const char *path, file_op fn, void *opaque,
		      struct call_result *r)
{
	struct file_call fc;

	if (!file_call_begin(&fc, svc, sb, caller, tool, op, path,
			     op && !strcmp(op, "rename") ? opaque : NULL, r))
		file_call_end(&fc, fn(&fc, opaque), r);
}

struct file_put {
	struct file_call fc;
	struct transfer_put tp;
	uint64_t max;
	char path[API_MAX_PATH + 1];
};

int calls_put_begin(struct service *svc, struct sandbox *sb, const char *caller, const char *path,
		    uint32_t mode, struct file_put **out, struct call_result *r)
{
	struct file_put *p = calloc(1, sizeof(*p));
	int rc;

	*out = NULL;
	if (!p) {
		result(r, 500, "internal", "out of memory");
		return -ENOMEM;
	}
	snprintf(p->path, sizeof(p->path), "%s", path);
	p->max = svc->cfg.max_file;
	rc = file_call_begin(&p->fc, svc, sb, caller, "write_file", NULL, p->path, NULL, r);
	if (rc) {
		free(p);
		return rc;
	}
	rc = transfer_put_begin(&p->tp, p->fc.c, p->path, mode, PROTO_WRITE_REPLACE,
				p->fc.deadline, &p->fc.st, p->fc.why, sizeof(p->fc.why));
	if (rc) {
		file_call_end(&p->fc, rc, r);
		free(p);
		return rc;
	}
	*out = p;
	return 0;
}

int calls_put_data(struct file_put *p, const void *data, size_t n)
{
	if (n > p->max - p->fc.st.bytes) {
		snprintf(p->fc.why, sizeof(p->fc.why), "the body is larger than %llu bytes",
			 (unsigned long long)p->max);
		return -EFBIG;
	}
	return transfer_put_data(&p->tp, data, n, p->fc.why, sizeof(p->fc.why));
}

void calls_put_end(struct file_put *p, int rc, struct call_result *r)
{
	if (!rc)
		rc = transfer_put_end(&p->tp, p->fc.why, sizeof(p->fc.why));
	else
		transfer_put_abort(&p->tp);
	file_call_end(&p->fc, rc, r);
	if (r->status == 200)
		r->status = 204;
	free(p);
}

struct file_get {
	struct file_call fc;
	struct transfer_read tr;
	const uint8_t *pending;    /* the rest of the last piece, into the client's buffer */
	size_t npending;
	int rc;
	bool done;
	char path[API_MAX_PATH + 1];
};

int calls_get_begin(struct service *svc, struct sandbox *sb, const char *caller, const char *path,
		    struct file_get **out, uint64_t *size, struct call_result *r)
{
	struct file_get *g = calloc(1, sizeof(*g));
	struct proto_stat st = { 0 };
	int rc;

	*out = NULL;
	*size = UINT64_MAX;
	if (!g) {
		result(r, 500, "internal", "out of memory");
		return -ENOMEM;
	}
	snprintf(g->path, sizeof(g->path), "%s", path);
	rc = file_call_begin(&g->fc, svc, sb, caller, "read_file", NULL, g->path, NULL, r);
	if (rc) {
		free(g);
		return rc;
	}
	/* Its size first: an error is the reply's status, and the body's
	 * length tells the client a stream cut short. */
	rc = guest_fs_stat(g->fc.c, g->path, &st, g->fc.deadline, g->fc.why, sizeof(g->fc.why));
	if (!rc && st.type == PROTO_FT_DIR)
		rc = -EISDIR;
	if (!rc && st.type == PROTO_FT_FILE && st.size > svc->cfg.max_file) {
		snprintf(g->fc.why, sizeof(g->fc.why), "the file is %llu bytes, more than the "
			 "service's limit of %llu", (unsigned long long)st.size,
			 (unsigned long long)svc->cfg.max_file);
		rc = -EFBIG;
	}
	if (!rc)
		rc = transfer_read_begin(&g->tr, g->fc.c, g->path, svc->cfg.max_file,
					 "the service's limit", g->fc.deadline, &g->fc.st, g->fc.why,
					 sizeof(g->fc.why));
	if (rc) {
		file_call_end(&g->fc, rc, r);
		free(g);
		return rc;
	}
	if (st.type == PROTO_FT_FILE)
		*size = st.size;
	service_hold(svc, sb);     /* the stream's own, put back at its end */
	*out = g;
	return 0;
}

ssize_t calls_get_read(struct file_get *g, void *buf, size_t len)
{
	ssize_t n;

	if (!g->npending && !g->done) {
		n = transfer_read_next(&g->tr, &g->pending, g->fc.why, sizeof(g->fc.why));
		if (n <= 0) {
			g->done = true;
			g->rc = (int)n;
			g->npending = 0;
		} else {
			g->npending = (size_t)n;
		}
	}
	if (g->done)
		return g->rc;
	n = (ssize_t)(len < g->npending ? len : g->npending);
	memcpy(buf, g->pending, (size_t)n);
	g->pending += n;
	g->npending -= (size_t)n;
	return n;
}

void calls_get_end(struct file_get *g)
{
	struct call_result r = { 0 };

	/* A reader gone before the end: the agent may still be sending. */
	if (!g->done) {
		g->fc.c->broken = true;
		g->rc = -ECONNABORTED;
		snprintf(g->fc.why, sizeof(g->fc.why), "the HTTP client went before the end");
	}
	file_call_end(&g->fc, g->rc, &r);
	if (r.status >= 400)
		log_info("serve: GET %s of sandbox %s: %s", g->path, g->fc.sb->id, r.error);
	service_put(g->fc.svc, g->fc.sb);
	free(g);
}

static const char *type_name(uint32_t type)
{
	switch (type) {
	case PROTO_FT_FILE: return "file";
	case PROTO_FT_DIR: return "dir";
	case PROTO_FT_SYMLINK: return "symlink";
	}
	return "other";
}

static void add_entry(void *opaque, const char *name, uint32_t type, uint32_t mode, uint64_t size)
{
	json_array_append_new(opaque, json_pack("{s:s, s:s, s:i, s:I}", "name", name, "type",
						type_name(type), "mode", (int)mode,
						"size", (json_int_t)size));
}

int calls_child_path(char *out, size_t cap, const char *dir, const char *name)
{
	size_t len = strlen(dir);
	int n = snprintf(out, cap, "%s%s%s", dir, len && dir[len - 1] == '/' ? "" : "/", name);

	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

struct list_args {
	json_t *entries;
	bool mtime;
};

static int list_op(struct file_call *fc, void *opaque)
{
	struct list_args *la = opaque;
	int rc = transfer_list(fc->c, fc->path, add_entry, la->entries, fc->deadline, fc->why,
			       sizeof(fc->why));
	json_t *f;
	size_t i;

	if (rc || !la->mtime)
		return rc;
	/* LIST_ENTRIES carries no time: a stat each, on the same connection. */
	json_array_foreach(la->entries, i, f) {
		const char *name = json_string_value(json_object_get(f, "name"));
		char child[API_MAX_PATH + 1];
		struct proto_stat st;
		bool found;

		if (i == CALLS_LIST_STAT_MAX)
			break;
		if (calls_child_path(child, sizeof(child), fc->path, name))
			continue;
		rc = guest_fs_stat_if(fc->c, child, &st, &found, fc->deadline, fc->why,
				      sizeof(fc->why));
		if (rc)
			return rc;
		if (found)
			json_object_set_new(f, "mtime", json_real((double)st.mtime_ns / 1e9));
	}
	return 0;
}

void calls_file_list(struct service *svc, struct sandbox *sb, const char *caller, const char *path,
		     bool mtime, json_t **out, struct call_result *r)
{
	struct list_args la = { json_array(), mtime };

	file_call(svc, sb, caller, "list_files", NULL, path, list_op, &la, r);
	if (r->status != 200) {
		json_decref(la.entries);
		la.entries = NULL;
	}
	*out = la.entries;
}

static int stat_op(struct file_call *fc, void *opaque)
{
	struct proto_stat *st = opaque;

	return guest_fs_stat(fc->c, fc->path, st, fc->deadline, fc->why, sizeof(fc->why));
}

void calls_file_stat(struct service *svc, struct sandbox *sb, const char *caller, const char *path,
		     json_t **out, struct call_result *r)
{
	struct proto_stat st = { 0 };

	file_call(svc, sb, caller, "read_file", "stat", path, stat_op, &st, r);
	*out = r->status != 200 ? NULL :
	       json_pack("{s:s, s:s, s:i, s:I, s:f}", "path", path, "type", type_name(st.type),
			 "mode", (int)st.mode, "size", (json_int_t)st.size,
			 "mtime", (double)st.mtime_ns / 1e9);
}

static int sysinfo_op(struct file_call *fc, void *opaque)
{
	return guest_fs_sysinfo(fc->c, "/", opaque, fc->deadline, fc->why, sizeof(fc->why));
}

void calls_metrics(struct service *svc, struct sandbox *sb, const char *caller,
		   struct proto_sysinfo *si, double *cpu_pct, struct call_result *r)
{
	uint64_t busy, total;

	*cpu_pct = 0;
	file_call(svc, sb, caller, "read_file", "metrics", "/", sysinfo_op, si, r);
	if (r->status != 200)
		return;
	pthread_mutex_lock(&svc->lock);
	busy = si->cpu_busy - sb->cpu_busy;
	total = si->cpu_total - sb->cpu_total;
	/* Counters that went back: a restore or another boot, so since boot. */
	if (si->cpu_busy < sb->cpu_busy || si->cpu_total <= sb->cpu_total ||
	    busy > total) {
		busy = si->cpu_busy;
		total = si->cpu_total;
	}
	sb->cpu_busy = si->cpu_busy;
	sb->cpu_total = si->cpu_total;
	pthread_mutex_unlock(&svc->lock);
	*cpu_pct = total ? 100.0 * (double)busy / (double)total : 0;
}

static int mkdir_op(struct file_call *fc, void *opaque)
{
	return guest_fs_mkdir(fc->c, fc->path, 0755, *(bool *)opaque, fc->deadline, fc->why,
			      sizeof(fc->why));
}

void calls_mkdir(struct service *svc, struct sandbox *sb, const char *caller, const char *path,
		 bool parents, struct call_result *r)
{
	file_call(svc, sb, caller, "write_file", "mkdir", path, mkdir_op, &parents, r);
	if (r->status == 200)
		r->status = 201;
}

static int rename_op(struct file_call *fc, void *opaque)
{
	return guest_fs_rename(fc->c, fc->path, opaque, fc->deadline, fc->why, sizeof(fc->why));
}

void calls_rename(struct service *svc, struct sandbox *sb, const char *caller, const char *from,
		  const char *to, struct call_result *r)
{
	file_call(svc, sb, caller, "write_file", "rename", from, rename_op, (void *)to, r);
}

static int remove_op(struct file_call *fc, void *opaque)
{
	return guest_fs_remove(fc->c, fc->path, *(bool *)opaque, fc->deadline, fc->why,
			       sizeof(fc->why));
}

void calls_remove(struct service *svc, struct sandbox *sb, const char *caller, const char *path,
		  bool recursive, struct call_result *r)
{
	file_call(svc, sb, caller, "write_file", "remove", path, remove_op, &recursive, r);
	if (r->status == 200)
		r->status = 204;
}

/* A call on a guest agent connection of its own that outlives its
 * request (a published port's connection, a watch): approved at its
 * start, recorded at its end; it holds no sandbox (its VM's end ends it). */
struct side_call {
	struct gate g;
	char sandbox[API_ID_MAX + 1];   /* the gate's: the sandbox may go first */
	json_t *call;                   /* taken */
	uint64_t t0;
	struct agent_client c;
};

static int side_begin(struct side_call *sc, struct service *svc, struct sandbox *sb,
		      const char *caller, json_t *call, struct call_result *r)
{
	snprintf(sc->sandbox, sizeof(sc->sandbox), "%s", sb->id);
	gate_for(&sc->g, svc, sb, caller);
	sc->g.sandbox = sc->sandbox;
	sc->call = call;
	if (!call) {
		result(r, 500, "internal", "out of memory");
		return -ENOMEM;
	}
	if (ask(&sc->g, sc->call, &sc->t0, r)) {
		json_decref(sc->call);
		return -EPERM;
	}
	return 0;
}

/* Its record (rc, err: how it ended), then its connection closed. */
static void side_end(struct side_call *sc, int rc, const char *err)
{
	char why[300];

	agent_client_close(&sc->c);
	if (gate_record_file(&sc->g, sc->call, sc->t0, rc, err, NULL, why, sizeof(why)))
		log_warn("serve: sandbox %s: %s: %s", sc->sandbox,
			 json_string_value(json_object_get(sc->call, "tool")), why);
	json_decref(sc->call);
}

struct port_conn {
	struct side_call sc;
	size_t early_off, early_len;
};

int calls_port_open(struct service *svc, struct sandbox *sb, const char *caller, unsigned port,
		    struct port_conn **out, struct call_result *r)
{
	struct port_conn *pc = calloc(1, sizeof(*pc));
	const char *why = "";
	int rc;

	if (!pc) {
		result(r, 500, "internal", "out of memory");
		return -ENOMEM;
	}
	rc = side_begin(&pc->sc, svc, sb, caller,
			json_pack("{s:s, s:i}", "tool", "port", "port", (int)port), r);
	if (rc) {
		free(pc);
		return rc;
	}
	rc = agent_open_port(&pc->sc.c, agent_dial_unix, sb->vsock, (uint16_t)port,
			     clock_now_ns() + svc->cfg.call_timeout_s * NS_PER_S, svc->stop_fd, &why);
	if (!rc) {
		pc->early_off = pc->sc.c.rstart;
		pc->early_len = pc->sc.c.rlen;
		*out = pc;
		return 0;
	}
	if (rc == -ECONNREFUSED)
		result(r, 502, "port_closed", "nothing listens on port %u in sandbox %s", port, sb->id);
	else if (rc == -EAGAIN)
		result(r, 503, "busy", "sandbox %s relays as many connections as it takes: %s",
		       sb->id, why);
	else
		agent_failed(r, rc, "cannot reach the sandbox's agent", why);
	side_end(&pc->sc, rc, r->error);
	free(pc);
	return rc;
}

int calls_port_fd(const struct port_conn *pc)
{
	return pc->sc.c.fd;
}

const uint8_t *calls_port_early(struct port_conn *pc, size_t *len)
{
	const uint8_t *p = pc->sc.c.rbuf + pc->early_off;

	*len = pc->early_len;
	pc->early_len = 0;
	return p;
}

void calls_port_close(struct port_conn *pc, uint64_t bytes_in, uint64_t bytes_out,
		      const char *err)
{
	json_object_set_new(pc->sc.call, "bytes_in", json_integer((json_int_t)bytes_in));
	json_object_set_new(pc->sc.call, "bytes_out", json_integer((json_int_t)bytes_out));
	side_end(&pc->sc, err ? -EIO : 0, err);
	free(pc);
}

struct watch_conn {
	struct side_call sc;
	uint64_t events;
};

int calls_watch_open(struct service *svc, struct sandbox *sb, const char *caller, const char *path,
		     bool recursive, struct watch_conn **out, struct call_result *r)
{
	struct watch_conn *w = calloc(1, sizeof(*w));
	const char *why = "";
	int rc;

	if (!w) {
		result(r, 500, "internal", "out of memory");
		return -ENOMEM;
	}
	rc = side_begin(&w->sc, svc, sb, caller, json_pack("{s:s, s:s, s:b}", "tool", "watch",
							   "path", path, "recursive", recursive), r);
	if (rc) {
		free(w);
		return rc;
	}
	rc = agent_open_watch(&w->sc.c, agent_dial_unix, sb->vsock, path, recursive,
			      clock_now_ns() + svc->cfg.call_timeout_s * NS_PER_S, svc->stop_fd, &why);
	if (!rc) {
		*out = w;
		return 0;
	}
	if (rc == -EAGAIN)
		result(r, 503, "busy", "sandbox %s relays and watches as much as it takes: %s",
		       sb->id, why);
	else if (rc == -ENOTDIR)
		result(r, 400, "bad_request", "%s", why);
	else
		agent_failed(r, rc, "cannot watch", why);
	side_end(&w->sc, rc, r->error);
	free(w);
	return rc;
}

int calls_watch_next(struct watch_conn *w, int timeout_ms, int client_fd, unsigned *kind,
		     char *name, size_t cap, char *why, size_t whylen)
{
	int rc = agent_watch_next(&w->sc.c, timeout_ms, client_fd, kind, name, cap, why, whylen);

	w->events += rc == 1;
	return rc;
}

void calls_watch_close(struct watch_conn *w, const char *err)
{
	json_object_set_new(w->sc.call, "events", json_integer((json_int_t)w->events));
	side_end(&w->sc, err ? -EIO : 0, err);
	free(w);
}
