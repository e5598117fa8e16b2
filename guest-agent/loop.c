/* loop.c - the agent's single-threaded poll loop: pumps, deadlines, the poll set, dispatch, and the sweep that frees. */
#include "agent.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/vm_sockets.h>

/*
 * One iteration: (1) handle what needs no event (frames left by a pause,
 * file reads and listings, deadlines, closing connections), (2) free what
 * ended, (3) poll every fd whose event would be acted on, (4) dispatch.
 * Nothing is freed during (4): an object closed there is only marked, so
 * later poll entries never point at freed memory; each entry is checked
 * against the object's current fd before use.
 */

enum ref_kind { REF_LISTEN, REF_SIGNAL, REF_CONN, REF_STATUS, REF_OUTPUT, REF_STDIN };

struct ref {
	enum ref_kind kind;
	void *obj;
};

struct pollset {
	struct pollfd *fds;
	struct ref *refs;
	size_t n, cap;
};

static void ps_add(struct pollset *ps, int fd, short events, enum ref_kind kind, void *obj)
{
	if (ps->n == ps->cap) {
		size_t cap = ps->cap ? ps->cap * 2 : 64;
		struct pollfd *fds = realloc(ps->fds, cap * sizeof(*fds));
		struct ref *refs;

		if (!fds)
			return;       /* polled next time; nothing is lost by waiting */
		ps->fds = fds;
		refs = realloc(ps->refs, cap * sizeof(*refs));
		if (!refs)
			return;
		ps->refs = refs;
		ps->cap = cap;
	}
	ps->fds[ps->n] = (struct pollfd){ .fd = fd, .events = events };
	ps->refs[ps->n] = (struct ref){ .kind = kind, .obj = obj };
	ps->n++;
}

static void build_pollset(struct agent *a, struct pollset *ps)
{
	ps->n = 0;
	if (a->listen_fd >= 0 && !a->shutting_down)
		ps_add(ps, a->listen_fd, POLLIN, REF_LISTEN, a);
	ps_add(ps, a->sig_fd, POLLIN, REF_SIGNAL, a);
	for (struct conn *c = a->conns; c; c = c->next) {
		short ev = 0;
		bool room = c->out_len < AGENT_OUT_CAP;

		if (c->dead)
			continue;
		if (!c->closing && !a->shutting_down && !conn_paused(c) && c->in_len < AGENT_FRAME_MAX)
			ev |= POLLIN;
		if (c->out_len)
			ev |= POLLOUT;
		ps_add(ps, c->fd, ev, REF_CONN, c);   /* even with no events: POLLHUP */
		if (c->closing)
			continue;
		for (struct proc *p = c->procs; p; p = p->next) {
			if (p->status_fd >= 0)
				ps_add(ps, p->status_fd, POLLIN, REF_STATUS, p);
			/* Back-pressure: a full output buffer leaves the child's pipe full,
			 * and the child blocks in write() until the host reads. */
			if (p->started && room && p->out_fd >= 0)
				ps_add(ps, p->out_fd, POLLIN, REF_OUTPUT, p);
			if (p->started && room && p->err_fd >= 0)
				ps_add(ps, p->err_fd, POLLIN, REF_OUTPUT, p);
			if (p->in_fd >= 0 && p->in_off < p->in_len)
				ps_add(ps, p->in_fd, POLLOUT, REF_STDIN, p);
		}
	}
}

/* Only the host may talk to the agent: over vsock that is CID 2. */
static bool peer_is_host(int fd)
{
	struct sockaddr_vm svm;
	socklen_t len = sizeof(svm);

	if (getpeername(fd, (struct sockaddr *)&svm, &len) < 0)
		return false;
	return svm.svm_family != AF_VSOCK || svm.svm_cid == VMADDR_CID_HOST;
}

static void accept_conns(struct agent *a)
{
	int fd;

	while ((fd = accept4(a->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		/* Over the limit: closed at once rather than left hanging in the backlog. */
		if (a->nconns >= AGENT_MAX_CONNS || a->shutting_down || !peer_is_host(fd)) {
			close(fd);
			continue;
		}
		conn_new(a, fd);
	}
}

/* Returns true when asked to stop (SIGTERM or SIGINT, unless PID 1). */
static bool on_signals(struct agent *a)
{
	struct signalfd_siginfo si;
	bool stop = false;

	while (read(a->sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		if ((si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) && getpid() != 1)
			stop = true;
	procs_reap(a);     /* SIGCHLDs coalesce: reap everything that exited */
	return stop;
}

static void dispatch(struct agent *a, struct pollfd *pfd, struct ref *ref, bool *stop)
{
	struct conn *c = ref->obj;
	struct proc *p = ref->obj;

	switch (ref->kind) {
	case REF_LISTEN:
		accept_conns(a);
		break;
	case REF_SIGNAL:
		*stop |= on_signals(a);
		break;
	case REF_CONN:
		if (!c->dead && (pfd->revents & POLLOUT))
			conn_on_writable(c);
		if (!c->dead && (pfd->revents & POLLIN))
			conn_on_readable(c);
		else if (!c->dead && (pfd->revents & (POLLHUP | POLLERR)))
			conn_close(c, false);   /* gone both ways: nothing to flush to */
		break;
	case REF_STATUS:
		if (p->conn && p->status_fd == pfd->fd)
			proc_on_status(p);
		break;
	case REF_OUTPUT:
		if (p->conn && (p->out_fd == pfd->fd || p->err_fd == pfd->fd))
			proc_on_output(p, pfd->fd);
		break;
	case REF_STDIN:
		if (p->conn && p->in_fd == pfd->fd)
			proc_on_stdin_writable(p);
		break;
	}
}

static void lower(int *timeout_ms, int ms)
{
	if (*timeout_ms < 0 || ms < *timeout_ms)
		*timeout_ms = ms;
}

/* Free dead connections, finished processes and transfers. */
static void sweep(struct agent *a)
{
	struct conn **cp, *c;

	for (cp = &a->conns; (c = *cp);) {
		if (c->dead) {
			*cp = c->next;
			a->nconns--;
			conn_free(c);
			continue;
		}
		procs_sweep(a, c);
		xfers_sweep(c);
		cp = &c->next;
	}
	procs_sweep(a, NULL);
}

int loop_run(struct agent *a)
{
	struct pollset ps = { 0 };
	bool stop = false;
	int rc = 0, timeout_ms, n;
	uint64_t now;

	for (;;) {
		timeout_ms = -1;
		now = now_ms();
		for (struct conn *c = a->conns; c; c = c->next) {
			if ((a->shutting_down || a->quiescing) && !c->closing)
				conn_close(c, true);
			if (c->closing && !c->dead && now >= c->close_deadline_ms)
				conn_close(c, false);      /* the host stopped reading */
			else if (c->closing && !c->dead)
				lower(&timeout_ms, (int)(c->close_deadline_ms - now));
			if (c->dead || c->closing)
				continue;
			conn_process(c);
			if (xfers_pump(c))
				lower(&timeout_ms, 0);
		}
		procs_tick(a, &timeout_ms);
		sweep(a);
		if (a->shutting_down && !a->conns) {
			rc = 1;
			break;
		}
		if (a->quiescing && !a->conns)
			a->quiescing = false;   /* closed: the VMM may pause the guest */
		if (stop || (a->single && !a->conns))
			break;

		build_pollset(a, &ps);
		n = poll(ps.fds, ps.n, timeout_ms);
		if (n < 0 && errno != EINTR) {
			rc = -errno;
			agent_log("poll: %m");
			break;
		}
		for (size_t i = 0; n > 0 && i < ps.n; i++)
			if (ps.fds[i].revents)
				dispatch(a, &ps.fds[i], &ps.refs[i], &stop);
	}
	free(ps.fds);
	free(ps.refs);
	return rc;
}
