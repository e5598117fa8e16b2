/* vsock_host.c - virtio-vsock's front door on the host: the Unix listener, local connections, the CONNECT line, connection timeouts. */
#include "virtio/vsock_conn.h"
#include "lib/clock.h"
#include "lib/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

/* ---- deadlines: one timerfd, armed for the earliest ---- */

static uint64_t ms_from_now(unsigned ms)
{
	return clock_now_ns() + (uint64_t)ms * 1000000ULL;
}

static void arm_timer(struct virtio_vsock *v, uint64_t at)
{
	struct itimerspec its = {
		.it_value = { .tv_sec = (time_t)(at / 1000000000ULL),
			      .tv_nsec = (long)(at % 1000000000ULL) },
	};

	if (timerfd_settime(v->timer_fd, TFD_TIMER_ABSTIME, &its, NULL) < 0) {
		log_limited(&v->lim_timer, LOG_WARN, "virtio-vsock %s: cannot arm the connection "
			    "timer: %s", v->mmio.name, strerror(errno));
		return;
	}
	v->timer_at = at;
}

void vsock_conn_set_deadline(struct vsock_conn *c, unsigned ms)
{
	struct virtio_vsock *v = c->v;

	c->deadline = ms_from_now(ms);
	if (!v->timer_at || c->deadline < v->timer_at)
		arm_timer(v, c->deadline);
}

/* ---- the CONNECT line ---- */

/* Firecracker's parser (read_local_stream_port, in its vsock muxer) is the
 * reference, since hybrid-vsock clients are written against it: the line
 * splits on whitespace; the first word is "connect" in any case; the second
 * is a u32 as Rust parses one (an optional '+', decimal digits, leading
 * zeros allowed, at most 2^32 - 1, so VMADDR_PORT_ANY too: the guest
 * refuses that port itself); further words are ignored. It takes Unicode
 * text; this takes ASCII only: the words are ASCII anyway, and a byte that
 * is neither printable nor whitespace is refused, not guessed at. */
static bool line_space(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\v' || ch == '\f' || ch == '\r';
}

/* The next word of line[*pos, len): its start and length (0 at the end). */
static size_t next_word(const char *line, size_t len, size_t *pos, const char **word)
{
	size_t start;

	while (*pos < len && line_space(line[*pos]))
		(*pos)++;
	start = *pos;
	while (*pos < len && !line_space(line[*pos]))
		(*pos)++;
	*word = line + start;
	return *pos - start;
}

int vsock_host_parse_connect(const char *line, size_t len, uint32_t *port)
{
	const char *w;
	size_t pos = 0, n;
	uint64_t val = 0;

	for (size_t i = 0; i < len; i++)
		if (!line_space(line[i]) && (line[i] < 0x21 || line[i] > 0x7e))
			return -EINVAL;
	n = next_word(line, len, &pos, &w);
	if (n != 7 || strncasecmp(w, "connect", 7))
		return -EINVAL;
	n = next_word(line, len, &pos, &w);
	if (n && *w == '+') {
		w++;
		n--;
	}
	if (!n)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (w[i] < '0' || w[i] > '9')
			return -EINVAL;
		val = val * 10 + (uint64_t)(w[i] - '0');
		if (val > UINT32_MAX)
			return -EINVAL;
	}
	*port = (uint32_t)val;
	return 0;
}

static uint32_t alloc_port(struct virtio_vsock *v)
{
	for (;;) {
		uint32_t port = v->next_port++;
		bool used = false;

		if (v->next_port == 0xffffffffu)
			v->next_port = VSOCK_HOST_PORT_BASE;
		for (struct vsock_conn *c = v->conns; c && !used; c = c->next)
			used = c->host_initiated && c->hashed && c->local_port == port;
		if (!used)
			return port;   /* at most VSOCK_MAX_CONNS tries */
	}
}

/* Take what the client sent up to the newline, never past it: bytes after
 * the line are its first data for the guest and stay in the socket. */
void vsock_host_read_line(struct vsock_conn *c)
{
	struct virtio_vsock *v = c->v;
	char peek[VSOCK_LINE_MAX];
	ssize_t n = recv(c->fd, peek, VSOCK_LINE_MAX - c->line_len, MSG_PEEK | MSG_DONTWAIT);
	char *nl;
	size_t take;
	uint32_t port;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		vsock_conn_free(c);   /* gone mid-line: the guest never heard of it */
		return;
	}
	if (vsock_hold_line(c))
		return;
	nl = memchr(peek, '\n', (size_t)n);
	take = nl ? (size_t)(nl - peek) + 1 : (size_t)n;
	if (recv(c->fd, c->line + c->line_len, take, MSG_DONTWAIT) != (ssize_t)take) {
		vsock_conn_free(c);
		return;
	}
	c->line_len += (uint32_t)take;
	if (!nl) {
		if (c->line_len == VSOCK_LINE_MAX) {
			log_limited(&v->lim_line, LOG_WARN, "virtio-vsock %s: host client sent no "
				    "CONNECT line in %d bytes: closed", v->mmio.name, VSOCK_LINE_MAX);
			vsock_conn_free(c);
		}
		return;
	}
	if (vsock_host_parse_connect(c->line, c->line_len - 1, &port)) {
		log_limited(&v->lim_line, LOG_WARN, "virtio-vsock %s: host client sent a bad "
			    "CONNECT line: closed", v->mmio.name);
		vsock_conn_free(c);
		return;
	}
	if (!virtio_mmio_live(&v->mmio)) {
		/* No driver (yet, or any more) to answer: say so now, not in 2 s. */
		log_debug("virtio-vsock: host connects to port %u before the guest driver is up",
			  port);
		vsock_conn_free(c);
		return;
	}
	c->host_initiated = true;
	c->peer_port = port;
	c->local_port = alloc_port(v);
	vsock_conn_hash(c);
	c->state = CONN_CONNECTING;
	c->pending |= PEND_REQUEST;
	vsock_conn_set_deadline(c, v->response_timeout_ms);
	if (vsock_conn_watch(c)) {
		vsock_conn_free(c);
		return;
	}
	v->conns_host++;
	log_debug("virtio-vsock: host connects to guest port %u from %u", c->peer_port,
		  c->local_port);
	vsock_conn_mark(c);
}

/* A host client's socket, accepted or local: it has the line timeout to
 * say CONNECT. false when out of memory (fd closed). */
static bool host_client(struct virtio_vsock *v, int fd)
{
	struct vsock_conn *c = vsock_conn_new(v, fd, CONN_LINE);

	if (!c) {
		close(fd);
		return false;
	}
	vsock_conn_set_deadline(c, v->line_timeout_ms);
	if (vsock_conn_watch(c))
		vsock_conn_free(c);
	return true;
}

static void cap_reached(struct virtio_vsock *v)
{
	log_limited(&v->lim_cap_host, LOG_WARN, "virtio-vsock %s: %u connections open: host "
		    "clients wait", v->mmio.name, v->max_conns);
}

static void pause_listener(struct virtio_vsock *v)
{
	if (!v->listen_paused && !event_loop_mod(v->loop, v->listen_fd, 0))
		v->listen_paused = true;
}

void vsock_listen_event(void *opaque, uint32_t events)
{
	struct virtio_vsock *v = opaque;

	(void)events;
	pthread_mutex_lock(&v->mmio.lock);
	vsock_sync(v);
	/* Held for a live snapshot: clients wait in the backlog. */
	if (v->held)
		pause_listener(v);
	for (int i = 0; i < 16 && !v->held; i++) {
		int fd;

		/* At the cap, clients wait in the backlog for a free slot
		 * rather than being turned away at once. */
		if (v->nr_conns >= v->max_conns) {
			cap_reached(v);
			pause_listener(v);
			break;
		}
		fd = accept4(v->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			/* Out of fds: stop watching until a connection closes,
			 * or the pending client would spin the loop. */
			if (errno == EMFILE || errno == ENFILE) {
				log_limited(&v->lim_accept, LOG_WARN, "virtio-vsock %s: cannot "
					    "accept: %s", v->mmio.name, strerror(errno));
				pause_listener(v);
			}
			break;
		}
		if (!host_client(v, fd))
			break;
	}
	pthread_mutex_unlock(&v->mmio.lock);
}

/* ---- local connections: a socketpair instead of the listener ---- */

int virtio_vsock_connect_local(struct virtio_vsock *v)
{
	int sv[2], rc = 0;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	/* The device's end is non-blocking, as an accepted socket is. */
	if (fcntl(sv[0], F_SETFL, O_NONBLOCK) < 0) {
		rc = -errno;
		goto err_pair;
	}
	/* The event loop is the I/O thread's alone: queue the socket and wake
	 * it (vsock_host_take_local). The queue is bounded like a backlog. */
	pthread_mutex_lock(&v->local_lock);
	if (v->local_len == VSOCK_LOCAL_BACKLOG)
		rc = -EAGAIN;
	else
		v->local_fds[(v->local_head + v->local_len++) % VSOCK_LOCAL_BACKLOG] = sv[0];
	pthread_mutex_unlock(&v->local_lock);
	if (rc)
		goto err_pair;
	vsock_wake_io(v);
	return sv[1];

err_pair:
	close(sv[0]);
	close(sv[1]);
	return rc;
}

void vsock_host_take_local(struct virtio_vsock *v)
{
	for (;;) {
		int fd = -1;
		bool full = v->nr_conns >= v->max_conns;

		pthread_mutex_lock(&v->local_lock);
		v->local_waiting = full && v->local_len;
		if (!full && v->local_len) {
			fd = v->local_fds[v->local_head];
			v->local_head = (v->local_head + 1) % VSOCK_LOCAL_BACKLOG;
			v->local_len--;
		}
		pthread_mutex_unlock(&v->local_lock);
		if (v->local_waiting)
			cap_reached(v);
		if (fd < 0 || !host_client(v, fd))
			return;
	}
}

void vsock_host_slot_freed(struct virtio_vsock *v)
{
	/* Not taken here: a slot frees in the middle of walks over the
	 * connections, which a new one must not join. */
	if (v->local_waiting && v->loop)
		vsock_wake_io(v);
}

void vsock_host_drop_local(struct virtio_vsock *v)
{
	pthread_mutex_lock(&v->local_lock);
	for (; v->local_len; v->local_len--) {
		close(v->local_fds[v->local_head]);
		v->local_head = (v->local_head + 1) % VSOCK_LOCAL_BACKLOG;
	}
	pthread_mutex_unlock(&v->local_lock);
	pthread_mutex_destroy(&v->local_lock);
}

void vsock_timer_event(void *opaque, uint32_t events)
{
	struct virtio_vsock *v = opaque;
	uint64_t count, now = clock_now_ns(), next = 0;
	struct vsock_conn *c, *following;

	(void)events;
	if (read(v->timer_fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
		return;
	pthread_mutex_lock(&v->mmio.lock);
	vsock_sync(v);
	v->timer_at = 0;
	for (c = v->conns; c; c = following) {
		following = c->next;   /* c may be freed; a reset never frees another */
		if (!c->deadline || c->deadline > now)
			continue;
		c->deadline = 0;
		switch (c->state) {
		case CONN_LINE:
			log_debug("virtio-vsock: host client sent no CONNECT line in time");
			vsock_conn_free(c);
			break;
		case CONN_CONNECTING:
			log_limited(&v->lim_silent, LOG_WARN, "virtio-vsock %s: guest did not answer "
				    "a connection to port %u in %u ms", v->mmio.name, c->peer_port,
				    v->response_timeout_ms);
			vsock_conn_reset(c);
			break;
		case CONN_OPEN:
			vsock_conn_reset(c);   /* a closing connection's host never took the last bytes */
			break;
		case CONN_CLOSING:
			break;                 /* none: it waits for its RST to go out */
		}
	}
	/* Resets above set new deadlines: re-arm for the earliest left. */
	for (c = v->conns; c; c = c->next)
		if (c->deadline && (!next || c->deadline < next))
			next = c->deadline;
	if (next)
		arm_timer(v, next);
	vsock_rx_pump(v);
	pthread_mutex_unlock(&v->mmio.lock);
}

/* ---- the listener ---- */

int vsock_host_listen(struct virtio_vsock *v, const char *path, const char **why)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, rc;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		*why = "socket path too long";
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		*why = "cannot create a socket";
		return -errno;
	}
	/* A socket file nobody listens on is a leftover (of a VM that was
	 * killed): replace it. A live one, or any other file, is not ours. */
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			*why = "the path exists and is not a socket";
			rc = -EEXIST;
			goto err_fd;
		}
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EAGAIN) {
			*why = "another process is listening on the socket";
			rc = -EADDRINUSE;
			goto err_fd;
		}
		close(fd);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0 || unlink(path) < 0) {
			*why = "cannot replace the stale socket file";
			rc = -errno;
			goto err_fd;
		}
	} else if (errno != ENOENT) {
		*why = "cannot look at the socket path";
		rc = -errno;
		goto err_fd;
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		*why = "cannot bind the socket";
		rc = -errno;
		goto err_fd;
	}
	if (lstat(path, &st) < 0 || listen(fd, 64) < 0) {
		*why = "cannot listen on the socket";
		rc = -errno;
		goto err_unlink;
	}
	v->listen_fd = fd;
	v->sock_dev = st.st_dev;
	v->sock_ino = st.st_ino;
	memcpy(v->path, path, strlen(path) + 1);
	return 0;

err_unlink:
	unlink(path);
err_fd:
	if (fd >= 0)
		close(fd);
	return rc;
}

void vsock_host_unlisten(struct virtio_vsock *v)
{
	struct stat st;

	if (v->listen_fd < 0)
		return;
	close(v->listen_fd);
	v->listen_fd = -1;
	/* Only the file we bound: a later mayfly may have replaced it. */
	if (lstat(v->path, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_dev == v->sock_dev &&
	    st.st_ino == v->sock_ino)
		unlink(v->path);
}
