/* ttrpc_server.c - ttrpc calls from many connections onto a bounded pool of workers: one poll loop reads and decodes, the workers run the handlers and answer. */
#include "shim/ttrpc_server.h"
#include "shim/ttrpc_client.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/thread.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PEND_SIZE        65536   /* one read of a connection's bytes */
#define ACCEPT_PAUSE_MS  100     /* out of fds: try accepting again after this */
#define FATAL_WRITE_MS   100     /* the loop's last answer to a connection it ends */
#define NS_PER_MS        1000000ULL

/*
 * A connection. The loop thread owns the reading side and the place in
 * s->conns; every call in flight holds a reference, so the fd (and
 * cancel_fd) stay open until the last of them has answered: a closed
 * connection is shut down at once (writes fail, the peer sees the end) but
 * its fd is never reused under a worker's feet.
 */
struct conn {
	int fd;
	int cancel_fd;              /* eventfd: written when it dies or the server stops */
	pthread_mutex_t wlock;      /* one response at a time, whole */
	atomic_bool dead;           /* no more writes (set before the shutdown) */
	unsigned refs;              /* s->lock: the loop's, one per call */
	unsigned inflight;          /* s->lock */
	size_t held;                /* s->lock: bytes its calls hold */
	/* The loop thread's alone. */
	struct ttrpc_reader rd;
	uint8_t *pend;              /* read, not yet fed to rd */
	size_t pend_off, pend_len;
	bool closing;               /* reaped at the end of the loop's turn */
};

struct call {
	struct call *next;
	struct conn *c;
	struct ttrpc_request req;
	uint32_t stream_id;
	int32_t preset;             /* not OK: answer this without a handler */
	const char *preset_msg;
	uint64_t deadline_ns;
	size_t bytes;
};

struct ttrpc_server {
	struct ttrpc_server_config cfg;    /* the zeros replaced by the defaults */
	int listen_fd, wake_fd;            /* wake_fd: an eventfd the loop polls */
	uid_t uid;
	gid_t gid;
	pthread_t loop;
	atomic_bool stopping;
	pthread_mutex_t lock;
	pthread_cond_t work;               /* a call queued, or quit */
	pthread_cond_t done;               /* a call or a worker ended */
	struct call *head, *tail;          /* waiting for a worker */
	unsigned queued, workers, idle, calls;
	size_t held;
	uint64_t served;
	bool quit, abandoned;
	pthread_t *threads;                /* every worker started */
	unsigned nthreads;
	unsigned nconns;                   /* lock (written by the loop, read by stats) */
	/* The loop thread's alone (stop's, once it has ended). */
	struct conn **conns;
	struct pollfd *pfd;
	uint64_t accept_after_ns;
	struct log_limit lim;
};

static void wake(struct ttrpc_server *s)
{
	uint64_t one = 1;

	if (write(s->wake_fd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is full, a wake-up is pending anyway. */
	}
}

/* End a connection's writing: later and running writes fail, the peer
 * sees the end, its calls see cancel_fd. Any thread; idempotent. */
static void conn_kill(struct conn *c)
{
	uint64_t one = 1;

	atomic_store(&c->dead, true);
	shutdown(c->fd, SHUT_RDWR);
	if (write(c->cancel_fd, &one, sizeof(one)) < 0) {
		/* a full counter is readable already */
	}
}

static void conn_unref_locked(struct conn *c)
{
	if (--c->refs)
		return;
	close(c->fd);
	close(c->cancel_fd);
	pthread_mutex_destroy(&c->wlock);
	free(c);
}

/* One whole frame under the write lock, unless the connection is dead;
 * a failed or timed-out write kills it. `try`: give up rather than wait
 * for the lock (the loop thread never waits on a worker's slow peer). */
static void conn_send(struct conn *c, const uint8_t *frame, size_t len, unsigned timeout_ms,
		      bool try)
{
	if (try ? pthread_mutex_trylock(&c->wlock) : pthread_mutex_lock(&c->wlock))
		return;
	if (!atomic_load(&c->dead) && ttrpc_send(c->fd, frame, len, (int)timeout_ms))
		conn_kill(c);
	pthread_mutex_unlock(&c->wlock);
}

/* The loop's last answer to a connection it is ending, if its write
 * lock is free and the peer takes it at once. */
static void conn_fatal(struct conn *c, uint32_t stream_id, int32_t code, const char *why)
{
	struct ttrpc_response resp = { .code = code, .message = why };
	uint8_t *frame;
	size_t len;

	if (!ttrpc_response_encode(&resp, stream_id, &frame, &len)) {
		conn_send(c, frame, len, FATAL_WRITE_MS, true);
		free(frame);
	}
}

static bool conn_may_take(struct ttrpc_server *s, struct conn *c)
{
	bool ok;

	pthread_mutex_lock(&s->lock);
	ok = c->inflight < s->cfg.max_inflight && c->held < TTRPC_SERVER_CONN_BYTES &&
	     s->held < TTRPC_SERVER_BYTES;
	pthread_mutex_unlock(&s->lock);
	return ok;
}

static const struct ttrpc_method *method_find(const struct ttrpc_server *s,
					      const struct ttrpc_request *r, char *why, size_t len)
{
	bool service = false;

	for (size_t i = 0; i < s->cfg.n_methods; i++) {
		const struct ttrpc_method *m = &s->cfg.methods[i];

		if (strcmp(m->service, r->service))
			continue;
		service = true;
		if (!strcmp(m->method, r->method))
			return m;
	}
	/* ttrpc's Go server's words, so containerd logs what it would. */
	snprintf(why, len, service ? "method %s" : "service %s", service ? r->method : r->service);
	return NULL;
}

/* Run one call on a worker and answer it. */
static void call_run(struct ttrpc_server *s, struct call *k)
{
	struct ttrpc_reply reply;
	struct ttrpc_response resp;
	const struct ttrpc_method *m;
	int32_t code = k->preset;
	uint8_t *frame;
	size_t len;
	int rc;

	memset(&reply, 0, sizeof(reply));
	if (code) {
		snprintf(reply.message, sizeof(reply.message), "%s", k->preset_msg);
	} else if (k->deadline_ns && clock_now_ns() >= k->deadline_ns) {
		code = TTRPC_DEADLINE_EXCEEDED;
		snprintf(reply.message, sizeof(reply.message), "the deadline passed before %s/%s ran",
			 k->req.service, k->req.method);
	} else if (!(m = method_find(s, &k->req, reply.message, sizeof(reply.message)))) {
		code = TTRPC_UNIMPLEMENTED;
	} else {
		struct ttrpc_call call = {
			.req = &k->req, .stream_id = k->stream_id, .deadline_ns = k->deadline_ns,
			.cancel_fd = k->c->cancel_fd,
		};

		code = m->fn(s->cfg.opaque, &call, &reply);
		reply.message[sizeof(reply.message) - 1] = '\0';
		if (code < 0 || code > TTRPC_CODE_MAX) {
			log_error("ttrpc: %s/%s returned %d, not a google.rpc code", k->req.service,
				  k->req.method, code);
			snprintf(reply.message, sizeof(reply.message), "%s/%s failed", k->req.service,
				 k->req.method);
			code = TTRPC_INTERNAL;
		}
	}
	if (code != TTRPC_OK) {
		free(reply.payload);
		reply.payload = NULL;
		reply.len = 0;
		if (!reply.message[0])
			snprintf(reply.message, sizeof(reply.message), "%s", ttrpc_code_name(code));
	}
	resp = (struct ttrpc_response){
		.code = code, .message = code ? reply.message : "", .payload = reply.payload,
		.payload_len = reply.len,
	};
	rc = ttrpc_response_encode(&resp, k->stream_id, &frame, &len);
	if (rc == -EMSGSIZE || rc == -EINVAL) {
		log_error("ttrpc: %s/%s answered %s", k->req.service, k->req.method,
			  rc == -EMSGSIZE ? "more than 4 MiB" : "a NULL payload");
		resp = (struct ttrpc_response){
			.code = rc == -EMSGSIZE ? TTRPC_RESOURCE_EXHAUSTED : TTRPC_INTERNAL,
			.message = rc == -EMSGSIZE ? "response over the maximum message size" :
						     "a handler's broken response",
		};
		rc = ttrpc_response_encode(&resp, k->stream_id, &frame, &len);
	}
	free(reply.payload);
	if (rc) {
		conn_kill(k->c);   /* no memory for an answer: the peer must not wait for it */
		return;
	}
	conn_send(k->c, frame, len, s->cfg.write_timeout_ms, false);
	free(frame);
}

/* s->lock held. */
static void call_done_locked(struct ttrpc_server *s, struct call *k)
{
	struct conn *c = k->c;

	c->inflight--;
	c->held -= k->bytes;
	s->held -= k->bytes;
	s->calls--;
	s->served++;
	conn_unref_locked(c);
	ttrpc_request_release(&k->req);
	free(k);
	pthread_cond_broadcast(&s->done);
}

static void server_free(struct ttrpc_server *s)
{
	close(s->wake_fd);
	pthread_cond_destroy(&s->work);
	pthread_cond_destroy(&s->done);
	pthread_mutex_destroy(&s->lock);
	free(s->threads);
	free(s->conns);
	free(s->pfd);
	free(s);
}

static void *worker_main(void *arg)
{
	struct ttrpc_server *s = arg;
	bool last;

	thread_set_name("ttrpc");
	pthread_mutex_lock(&s->lock);
	for (;;) {
		struct call *k;

		while (!s->head && !s->quit)
			pthread_cond_wait(&s->work, &s->lock);
		k = s->head;
		if (!k)
			break;
		s->head = k->next;
		if (!s->head)
			s->tail = NULL;
		s->queued--;
		s->idle--;
		pthread_mutex_unlock(&s->lock);
		call_run(s, k);
		pthread_mutex_lock(&s->lock);
		call_done_locked(s, k);
		s->idle++;
		wake(s);    /* the connection may read again */
	}
	s->idle--;
	s->workers--;
	last = s->abandoned && !s->workers;
	pthread_cond_broadcast(&s->done);
	pthread_mutex_unlock(&s->lock);
	if (last)
		server_free(s);
	return NULL;
}

/* s->lock held: queue k, and start a worker if none is free for it. */
static void call_queue_locked(struct ttrpc_server *s, struct call *k)
{
	pthread_t t;
	int rc;

	if (s->tail)
		s->tail->next = k;
	else
		s->head = k;
	s->tail = k;
	s->queued++;
	if (s->queued > s->idle && s->workers < s->cfg.max_workers) {
		rc = thread_start(&t, worker_main, s);
		if (!rc) {
			s->threads[s->nthreads++] = t;
			s->workers++;
			s->idle++;
		} else {
			log_limited(&s->lim, LOG_ERROR, "ttrpc: cannot start a worker: %s (%u running)",
				    strerror(-rc), s->workers);
		}
	}
	pthread_cond_signal(&s->work);
}

/* The loop's turn at a frame of c. */
static void conn_frame(struct ttrpc_server *s, struct conn *c, struct ttrpc_frame *f,
		       uint64_t now)
{
	const char *why = "";
	struct call *k;
	int rc;

	if (f->h.type != TTRPC_TYPE_REQUEST) {
		free(f->body);   /* not for a server, or a later protocol's: skipped */
		return;
	}
	k = calloc(1, sizeof(*k));
	rc = k ? ttrpc_request_decode(&k->req, f->body, f->h.length, &why) : -ENOMEM;
	free(f->body);
	if (rc) {
		free(k);
		if (rc == -EBADMSG) {
			log_limited(&s->lim, LOG_WARN, "ttrpc: a connection sent a bad request: %s", why);
			conn_fatal(c, f->h.stream_id, TTRPC_INVALID_ARGUMENT, why);
		}
		c->closing = true;
		return;
	}
	k->stream_id = f->h.stream_id;
	k->bytes = sizeof(*k) + f->h.length;
	if (!(k->stream_id & 1)) {
		k->preset = TTRPC_INVALID_ARGUMENT;   /* ttrpc's Go server's words */
		k->preset_msg = "StreamID must be odd for client initiated streams";
	}
	if (k->req.timeout_ns)
		k->deadline_ns = k->req.timeout_ns < 0 ? now : now + (uint64_t)k->req.timeout_ns;
	pthread_mutex_lock(&s->lock);
	k->c = c;
	c->refs++;
	c->inflight++;
	c->held += k->bytes;
	s->held += k->bytes;
	s->calls++;
	call_queue_locked(s, k);
	pthread_mutex_unlock(&s->lock);
}

/* The loop's turn at c: feed what was read, read once more if the
 * connection may take more calls. */
static void conn_pump(struct ttrpc_server *s, struct conn *c)
{
	bool have_read = false;

	while (!c->closing && conn_may_take(s, c)) {
		struct ttrpc_frame f;
		size_t used;
		int rc;

		if (c->pend_off == c->pend_len) {
			ssize_t n;

			if (have_read)
				return;   /* one read a turn: the other connections get theirs */
			n = recv(c->fd, c->pend, PEND_SIZE, MSG_DONTWAIT);
			if (n <= 0) {
				if (n < 0 && (errno == EAGAIN || errno == EINTR))
					return;
				c->closing = true;   /* the peer's end, or its error */
				return;
			}
			c->pend_off = 0;
			c->pend_len = (size_t)n;
			have_read = true;
		}
		rc = ttrpc_reader_feed(&c->rd, c->pend + c->pend_off, c->pend_len - c->pend_off, &used,
				       &f);
		c->pend_off += used;
		if (rc == 1) {
			conn_frame(s, c, &f, clock_now_ns());
		} else if (rc == -EMSGSIZE) {
			char msg[96];

			/* ttrpc's Go server's words (it skips the body; we cannot). */
			snprintf(msg, sizeof(msg), "message length %u exceed maximum message size of %u",
				 f.h.length, TTRPC_MESSAGE_MAX);
			log_limited(&s->lim, LOG_WARN, "ttrpc: a connection sent a frame of %u bytes "
				    "(at most %u): closed", f.h.length, TTRPC_MESSAGE_MAX);
			conn_fatal(c, f.h.stream_id, TTRPC_RESOURCE_EXHAUSTED, msg);
			c->closing = true;
		} else if (rc < 0) {
			c->closing = true;
		}
	}
}

static bool peer_ok(struct ttrpc_server *s, int fd)
{
	struct ucred u;
	socklen_t len = sizeof(u);

	if (s->cfg.any_user)
		return true;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &u, &len) < 0)
		return false;
	if (u.uid == s->uid && u.gid == s->gid)
		return true;
	log_limited(&s->lim, LOG_WARN, "ttrpc: refused a connection from uid %u gid %u (pid %d)",
		    (unsigned)u.uid, (unsigned)u.gid, (int)u.pid);
	return false;
}

static struct conn *conn_new(int fd)
{
	struct conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->fd = fd;
	c->refs = 1;
	c->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	c->pend = malloc(PEND_SIZE);
	if (c->cancel_fd < 0 || !c->pend || pthread_mutex_init(&c->wlock, NULL)) {
		if (c->cancel_fd >= 0)
			close(c->cancel_fd);
		free(c->pend);
		free(c);
		return NULL;
	}
	return c;
}

static void accept_all(struct ttrpc_server *s)
{
	while (s->nconns < s->cfg.max_conns) {
		int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct conn *c;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK) {
				log_limited(&s->lim, LOG_ERROR, "ttrpc: accept: %s", strerror(errno));
				s->accept_after_ns = clock_now_ns() + ACCEPT_PAUSE_MS * NS_PER_MS;
			}
			return;
		}
		if (!peer_ok(s, fd)) {
			close(fd);
			continue;
		}
		c = conn_new(fd);
		if (!c) {
			log_limited(&s->lim, LOG_ERROR, "ttrpc: no memory or fd for a connection");
			close(fd);
			s->accept_after_ns = clock_now_ns() + ACCEPT_PAUSE_MS * NS_PER_MS;
			return;
		}
		s->conns[s->nconns] = c;
		pthread_mutex_lock(&s->lock);
		s->nconns++;
		pthread_mutex_unlock(&s->lock);
	}
}

/* Drop the connections marked closing: the loop's reference goes, the
 * fd closes with the last call's. */
static void conns_reap(struct ttrpc_server *s, bool all)
{
	unsigned kept = 0;

	for (unsigned i = 0; i < s->nconns; i++) {
		struct conn *c = s->conns[i];

		if (!c->closing && !all) {
			s->conns[kept++] = c;
			continue;
		}
		conn_kill(c);
		ttrpc_reader_release(&c->rd);
		free(c->pend);
		c->pend = NULL;
		pthread_mutex_lock(&s->lock);
		conn_unref_locked(c);
		pthread_mutex_unlock(&s->lock);
	}
	pthread_mutex_lock(&s->lock);
	s->nconns = kept;
	pthread_mutex_unlock(&s->lock);
}

static void *loop_main(void *arg)
{
	struct ttrpc_server *s = arg;

	thread_set_name("ttrpc-loop");
	while (!atomic_load(&s->stopping)) {
		uint64_t now = clock_now_ns();
		bool listening = s->nconns < s->cfg.max_conns && now >= s->accept_after_ns;
		unsigned n = 0, base;
		int timeout = -1;
		uint64_t drain;

		s->pfd[n++] = (struct pollfd){ .fd = s->wake_fd, .events = POLLIN };
		if (listening)
			s->pfd[n++] = (struct pollfd){ .fd = s->listen_fd, .events = POLLIN };
		else if (s->nconns < s->cfg.max_conns)
			timeout = (int)((s->accept_after_ns - now) / NS_PER_MS) + 1;
		base = n;
		for (unsigned i = 0; i < s->nconns; i++) {
			struct conn *c = s->conns[i];
			bool may = conn_may_take(s, c);

			if (may && c->pend_off < c->pend_len)
				timeout = 0;   /* frames already read wait for their turn */
			/* Not taking more: only the peer's end (POLLHUP) is watched. */
			s->pfd[n++] = (struct pollfd){ .fd = c->fd, .events = may ? POLLIN : 0 };
		}
		if (poll(s->pfd, n, timeout) < 0 && errno != EINTR) {
			log_limited(&s->lim, LOG_ERROR, "ttrpc: poll: %s", strerror(errno));
			continue;
		}
		if (s->pfd[0].revents && read(s->wake_fd, &drain, sizeof(drain)) < 0) {
			/* EAGAIN: another turn took it */
		}
		if (atomic_load(&s->stopping))
			break;
		if (listening && s->pfd[1].revents)
			accept_all(s);
		for (unsigned i = 0; i < n - base; i++) {
			struct conn *c = s->conns[i];
			short ev = s->pfd[base + i].revents;

			if ((ev & POLLIN) || (!ev && c->pend_off < c->pend_len))
				conn_pump(s, c);
			else if (ev & (POLLHUP | POLLERR | POLLNVAL))
				c->closing = true;   /* gone while we took nothing: its calls are dropped */
		}
		conns_reap(s, false);
	}
	return NULL;
}

int ttrpc_server_start(struct ttrpc_server **out, int listen_fd,
		       const struct ttrpc_server_config *cfg)
{
	struct ttrpc_server *s;
	pthread_condattr_t ca;
	int flags, rc;

	*out = NULL;
	if (!cfg->methods || !cfg->n_methods || listen_fd < 0)
		return -EINVAL;
	for (size_t i = 0; i < cfg->n_methods; i++)
		if (!cfg->methods[i].service || !cfg->methods[i].method || !cfg->methods[i].fn)
			return -EINVAL;
	flags = fcntl(listen_fd, F_GETFL);
	if (flags < 0 || fcntl(listen_fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return -errno;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->cfg = *cfg;
	if (!s->cfg.max_conns)
		s->cfg.max_conns = TTRPC_SERVER_CONNS;
	if (!s->cfg.max_workers)
		s->cfg.max_workers = TTRPC_SERVER_WORKERS;
	if (!s->cfg.max_inflight)
		s->cfg.max_inflight = TTRPC_SERVER_INFLIGHT;
	if (!s->cfg.write_timeout_ms)
		s->cfg.write_timeout_ms = TTRPC_SERVER_WRITE_MS;
	s->listen_fd = listen_fd;
	s->uid = geteuid();
	s->gid = getegid();
	s->threads = calloc(s->cfg.max_workers, sizeof(*s->threads));
	s->conns = calloc(s->cfg.max_conns, sizeof(*s->conns));
	s->pfd = calloc(s->cfg.max_conns + 2, sizeof(*s->pfd));
	s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!s->threads || !s->conns || !s->pfd || s->wake_fd < 0) {
		rc = s->wake_fd < 0 ? -errno : -ENOMEM;
		goto err_alloc;
	}
	/* Waits in ttrpc_server_stop are bounded on the monotonic clock. */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->work, NULL);
	pthread_cond_init(&s->done, &ca);
	pthread_condattr_destroy(&ca);
	rc = thread_start(&s->loop, loop_main, s);
	if (rc) {
		server_free(s);
		return rc;
	}
	*out = s;
	return 0;

err_alloc:
	if (s->wake_fd >= 0)
		close(s->wake_fd);
	free(s->threads);
	free(s->conns);
	free(s->pfd);
	free(s);
	return rc;
}

void ttrpc_server_stats(struct ttrpc_server *s, struct ttrpc_server_stats *st)
{
	pthread_mutex_lock(&s->lock);
	*st = (struct ttrpc_server_stats){
		.conns = s->nconns, .calls = s->calls, .workers = s->workers, .served = s->served,
	};
	pthread_mutex_unlock(&s->lock);
}

/* s->lock held: wait until *count is 0 or the deadline; true when 0. */
static bool wait_zero_locked(struct ttrpc_server *s, const unsigned *count, uint64_t deadline_ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(deadline_ns / 1000000000ULL),
		.tv_nsec = (long)(deadline_ns % 1000000000ULL),
	};

	while (*count)
		if (pthread_cond_timedwait(&s->done, &s->lock, &ts) == ETIMEDOUT)
			return !*count;
	return true;
}

int ttrpc_server_stop(struct ttrpc_server *s, unsigned grace_ms)
{
	uint64_t deadline = clock_now_ns() + grace_ms * NS_PER_MS;
	bool all_done;

	if (!s)
		return 0;
	atomic_store(&s->stopping, true);
	wake(s);
	pthread_join(s->loop, NULL);
	/* The loop is gone: its connections are ours. Parked handlers hear
	 * of the stop; the answers of the calls in flight still go out. */
	for (unsigned i = 0; i < s->nconns; i++) {
		uint64_t one = 1;

		if (write(s->conns[i]->cancel_fd, &one, sizeof(one)) < 0) {
			/* already readable */
		}
	}
	pthread_mutex_lock(&s->lock);
	wait_zero_locked(s, &s->calls, deadline);
	s->quit = true;
	pthread_cond_broadcast(&s->work);
	all_done = wait_zero_locked(s, &s->workers, deadline);
	pthread_mutex_unlock(&s->lock);
	conns_reap(s, true);
	if (!all_done) {
		pthread_mutex_lock(&s->lock);
		if (s->workers) {
			/* A handler that does not return: its worker frees the rest. */
			log_error("ttrpc: %u calls still running %u ms after the stop: left behind",
				  s->calls, grace_ms);
			for (unsigned i = 0; i < s->nthreads; i++)
				pthread_detach(s->threads[i]);
			s->abandoned = true;
			pthread_mutex_unlock(&s->lock);
			return -ETIMEDOUT;
		}
		pthread_mutex_unlock(&s->lock);   /* the last one ended meanwhile */
	}
	for (unsigned i = 0; i < s->nthreads; i++)
		pthread_join(s->threads[i], NULL);
	server_free(s);
	return 0;
}
