/* exec.c - processes started by EXEC: start report, output streaming, stdin, signals, timeouts, reaping, EXIT. */
#include "agent.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

static struct proc *proc_find(struct conn *c, uint32_t id)
{
	for (struct proc *p = c->procs; p; p = p->next)
		if (p->id == id && !p->done && !p->exec_failed)
			return p;
	return NULL;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void proc_drop_stdin(struct proc *p)
{
	close_fd(&p->in_fd);
	free(p->inbuf);
	p->inbuf = NULL;
	p->in_len = p->in_off = p->in_cap = 0;
	p->in_eof = false;
}

int exec_request(struct conn *c, const struct proto_frame *f)
{
	struct proto_exec e;
	struct proc *p = NULL;
	int rc = proto_exec_decode(f, &e);

	if (rc == -EPROTO)
		return -EPROTO;
	if (rc < 0) {
		conn_send_error(c, f->id, -rc, "exec: %s", strerror(-rc));
		return 0;
	}
	if (proc_find(c, f->id)) {
		conn_send_error(c, f->id, EEXIST, "process id %u is in use", f->id);
		goto out;
	}
	if (c->nprocs >= AGENT_MAX_PROCS) {
		conn_send_error(c, f->id, EAGAIN, "%d processes already run on this connection",
				AGENT_MAX_PROCS);
		goto out;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		conn_send_error(c, f->id, ENOMEM, "exec: out of memory");
		goto out;
	}
	p->conn = c;
	p->id = f->id;
	p->status_fd = p->out_fd = p->err_fd = p->in_fd = -1;
	p->pty = e.flags & PROTO_EXEC_PTY;
	p->start_us = now_us();
	rc = spawn_proc(c->a, p, &e);
	if (rc < 0) {
		conn_send_error(c, f->id, -rc, "exec %s: %s", e.argv[0], strerror(-rc));
		free(p);
		goto out;
	}
	/* Microseconds: a duration must never come out below its timeout. */
	if (e.timeout_ms)
		p->deadline_us = p->start_us + (uint64_t)e.timeout_ms * 1000;
	p->next = c->procs;
	c->procs = p;
	c->nprocs++;
out:
	proto_exec_free(&e);
	return 0;
}

/* Send EXIT once the child is reaped and both streams are at EOF: no output
 * can follow it. A process whose exec failed already had its ERROR. */
static void proc_maybe_finish(struct proc *p)
{
	struct proto_writer w;
	uint32_t kind = PROTO_EXIT_CODE, signo = 0;
	int32_t code;

	if (p->done || !p->conn || !p->reaped || p->status_fd >= 0 || p->out_fd >= 0 ||
	    p->err_fd >= 0)
		return;
	proc_drop_stdin(p);
	p->done = true;
	if (p->exec_failed)
		return;
	if (p->timed_out) {
		/* Whatever the leader's own end: the run did not finish in time. */
		kind = PROTO_EXIT_TIMEOUT;
		signo = SIGKILL;
		code = 128 + SIGKILL;
	} else if (WIFSIGNALED(p->wstatus)) {
		signo = (uint32_t)WTERMSIG(p->wstatus);
		kind = PROTO_EXIT_SIGNAL;
		code = 128 + (int32_t)signo;
	} else {
		code = WEXITSTATUS(p->wstatus);
	}
	conn_begin(p->conn, &w, PROTO_EXIT, p->id);
	proto_put_u32(&w, kind);
	proto_put_u32(&w, (uint32_t)code);
	proto_put_u32(&w, signo);
	proto_put_u64(&w, p->end_us - p->start_us);
	conn_end(p->conn, &w);
}

void proc_on_status(struct proc *p)
{
	uint32_t msg[2];
	ssize_t n = read(p->status_fd, msg, sizeof(msg));

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	close_fd(&p->status_fd);
	if (n == 0) {
		/* CLOEXEC closed the child's end: execve succeeded. */
		struct proto_writer w;

		p->started = true;
		conn_begin(p->conn, &w, PROTO_EXEC_STARTED, p->id);
		proto_put_u32(&w, (uint32_t)p->pid);
		conn_end(p->conn, &w);
	} else {
		int err = n == (ssize_t)sizeof(msg) && msg[1] ? (int)msg[1] : EIO;

		p->exec_failed = true;
		conn_send_error(p->conn, p->id, err, "%s: %s",
				spawn_stage_name(n == (ssize_t)sizeof(msg) ? msg[0] : 0), strerror(err));
		close_fd(&p->out_fd);
		close_fd(&p->err_fd);
		proc_drop_stdin(p);
	}
	proc_maybe_finish(p);
}

void proc_on_output(struct proc *p, int fd)
{
	static uint8_t chunk[PROTO_CHUNK];
	bool is_err = fd == p->err_fd;
	ssize_t n;

	/* Several pipes can be ready in one poll round: each read re-checks the
	 * cap, so the buffer never passes it by more than one chunk. */
	if (p->conn->out_len >= AGENT_OUT_CAP)
		return;
	n = read(fd, chunk, sizeof(chunk));
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0) {
		conn_send_data(p->conn, is_err ? PROTO_STDERR : PROTO_STDOUT, p->id, chunk,
			       (uint32_t)n);
		return;
	}
	/* EOF; a PTY master says EIO once the last slave fd is closed. */
	close_fd(is_err ? &p->err_fd : &p->out_fd);
	proc_maybe_finish(p);
}

void proc_on_stdin_writable(struct proc *p)
{
	ssize_t n;

	while (p->in_fd >= 0 && p->in_off < p->in_len) {
		n = write(p->in_fd, p->inbuf + p->in_off, p->in_len - p->in_off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			/* The program closed its stdin (EPIPE): what is left has no reader. */
			proc_drop_stdin(p);
			return;
		}
		p->in_off += (size_t)n;
	}
	p->in_off = p->in_len = 0;
	if (p->in_eof)
		proc_drop_stdin(p);
}

int exec_stdin(struct conn *c, const struct proto_frame *f)
{
	struct proto_reader r;
	const uint8_t *data;
	uint32_t len;
	struct proc *p;
	uint8_t *nb;
	size_t pending;

	proto_reader_init(&r, f);
	if (!proto_get_bytes(&r, &data, &len) || !proto_done(&r))
		return -EPROTO;
	p = proc_find(c, f->id);
	/* No reply either way: stdin to a process that has ended or has no stdin
	 * pipe goes where writes to a closed pipe go. */
	if (!p || p->in_fd < 0 || p->in_eof)
		return 0;
	if (len == 0) {
		p->in_eof = true;
		if (!p->pty)
			goto write;
		/* A terminal has no EOF of its own: the EOF character ends a read. */
		data = (const uint8_t *)"\x04";
		len = 1;
	}
	pending = p->in_len - p->in_off;
	if (p->in_off) {
		memmove(p->inbuf, p->inbuf + p->in_off, pending);
		p->in_off = 0;
		p->in_len = pending;
	}
	/* Bounded: the connection pauses once its processes hold AGENT_STDIN_CAP,
	 * so this stays below that plus one frame. Grown by doubling, then kept. */
	if (pending + len > p->in_cap) {
		size_t cap = p->in_cap ? p->in_cap : PROTO_CHUNK;

		while (cap < pending + len)
			cap *= 2;
		nb = realloc(p->inbuf, cap);
		if (!nb) {
			proc_drop_stdin(p);
			return 0;
		}
		p->inbuf = nb;
		p->in_cap = cap;
	}
	memcpy(p->inbuf + pending, data, len);
	p->in_len = pending + len;
write:
	proc_on_stdin_writable(p);
	return 0;
}

int exec_signal(struct conn *c, const struct proto_frame *f)
{
	struct proto_reader r;
	struct proc *p;
	uint32_t signo;

	proto_reader_init(&r, f);
	if (!proto_get_u32(&r, &signo) || !proto_done(&r))
		return -EPROTO;
	p = proc_find(c, f->id);
	if (signo < 1 || signo >= NSIG) {
		conn_send_error(c, f->id, EINVAL, "no signal %u", signo);
	} else if (!p) {
		conn_send_error(c, f->id, ESRCH, "no process %u", f->id);
	} else if (!p->reaped) {
		kill_group(p->pid, (int)signo);
		conn_send_empty(c, PROTO_OK, f->id);
	} else if (kill(-p->pid, (int)signo) < 0) {
		/* Reaped, its group gone: the pid may be someone else's by now, so
		 * only the group (which pins the id while it lives) is signalled. */
		conn_send_error(c, f->id, ESRCH, "process %u has exited", f->id);
	} else {
		/* The leader is gone, members of its group still hold its output. */
		conn_send_empty(c, PROTO_OK, f->id);
	}
	return 0;
}

int exec_resize(struct conn *c, const struct proto_frame *f)
{
	struct proto_reader r;
	struct winsize ws = { 0 };
	struct proc *p;

	proto_reader_init(&r, f);
	if (!proto_get_u16(&r, &ws.ws_row) || !proto_get_u16(&r, &ws.ws_col) || !proto_done(&r))
		return -EPROTO;
	p = proc_find(c, f->id);
	if (!p || p->out_fd < 0)
		conn_send_error(c, f->id, ESRCH, "no running process %u", f->id);
	else if (!p->pty)
		conn_send_error(c, f->id, ENOTTY, "process %u has no terminal", f->id);
	else if (ioctl(p->out_fd, TIOCSWINSZ, &ws) < 0)  /* the kernel sends SIGWINCH */
		conn_send_error(c, f->id, errno, "resize: %s", strerror(errno));
	else
		conn_send_empty(c, PROTO_OK, f->id);
	return 0;
}

static struct proc *proc_by_pid(struct agent *a, pid_t pid)
{
	for (struct conn *c = a->conns; c; c = c->next)
		for (struct proc *p = c->procs; p; p = p->next)
			if (p->pid == pid && !p->reaped)
				return p;
	for (struct proc *p = a->orphans; p; p = p->next)
		if (p->pid == pid && !p->reaped)
			return p;
	return NULL;
}

void procs_reap(struct agent *a)
{
	struct proc *p;
	pid_t pid;
	int st;

	/* Everything: as PID 1 or a subreaper the agent inherits strangers too. */
	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		if (pid == a->net_pid)
			a->net_pid = 0;
		if (handover_reaped(a, pid))
			continue;
		p = proc_by_pid(a, pid);
		if (!p)
			continue;
		p->reaped = true;
		p->wstatus = st;
		p->end_us = now_us();
		if (p->timed_out)
			p->drain_deadline_us = p->end_us + AGENT_TIMEOUT_DRAIN_MS * 1000;
		proc_maybe_finish(p);
	}
}

/* ms until `when` (us), rounded up so poll never wakes early, folded into
 * *timeout_ms (poll's -1 = none yet). */
static void lower_timeout(int *timeout_ms, uint64_t now, uint64_t when)
{
	uint64_t d = when > now ? (when - now + 999) / 1000 : 0;

	if (d > 60000)
		d = 60000;
	if (*timeout_ms < 0 || (int)d < *timeout_ms)
		*timeout_ms = (int)d;
}

void procs_tick(struct agent *a, int *timeout_ms)
{
	uint64_t now = now_us();
	bool reaped = false;

	for (struct conn *c = a->conns; c; c = c->next) {
		for (struct proc *p = c->procs; p; p = p->next) {
			if (c->closing || c->dead)
				break;      /* its processes moved to the orphans */
			if (p->done)
				continue;
			/* The timeout covers the whole run: the leader and its output. */
			if (p->deadline_us && !p->timed_out) {
				if (now < p->deadline_us) {
					lower_timeout(timeout_ms, now, p->deadline_us);
					continue;
				}
				/* An end that beat the deadline must not read as a timeout. */
				if (!reaped) {
					procs_reap(a);
					reaped = true;
				}
				if (p->done)
					continue;
				p->timed_out = true;
				if (!p->reaped) {
					kill_group(p->pid, SIGKILL);
				} else {
					/* Gone, but its group holds the pipes open (a background job).
					 * The run's time is the timeout's, not the leader's. */
					kill(-p->pid, SIGKILL);
					p->end_us = now;
					p->drain_deadline_us = now + AGENT_TIMEOUT_DRAIN_MS * 1000;
				}
			}
			if (p->timed_out && p->reaped && p->drain_deadline_us) {
				if (now < p->drain_deadline_us) {
					lower_timeout(timeout_ms, now, p->drain_deadline_us);
					continue;
				}
				/* Whatever escaped the process group keeps the pipes open: the
				 * EXIT of a timed-out process does not wait for it. */
				close_fd(&p->out_fd);
				close_fd(&p->err_fd);
				proc_maybe_finish(p);
			}
		}
	}
}

void procs_detach(struct conn *c)
{
	struct proc *p;

	while ((p = c->procs)) {
		c->procs = p->next;
		if (!p->reaped)
			kill_group(p->pid, SIGKILL);
		else if (p->out_fd >= 0 || p->err_fd >= 0)
			kill(-p->pid, SIGKILL);   /* the group outlives its leader */
		close_fd(&p->status_fd);
		close_fd(&p->out_fd);
		close_fd(&p->err_fd);
		proc_drop_stdin(p);
		p->conn = NULL;
		p->next = c->a->orphans;
		c->a->orphans = p;
	}
	c->nprocs = 0;
}

void procs_sweep(struct agent *a, struct conn *c)
{
	struct proc **pp, *p;

	for (pp = c ? &c->procs : &a->orphans; (p = *pp);) {
		if (c ? p->done : p->reaped) {
			*pp = p->next;
			if (c)
				c->nprocs--;
			free(p->inbuf);
			free(p);
		} else {
			pp = &p->next;
		}
	}
}
