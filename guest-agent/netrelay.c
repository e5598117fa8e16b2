/* netrelay.c - NET: the guest's HTTP proxy on 127.0.0.1, a child process that relays each client over vsock to the host, which decides (vmm/net/). */
#include "agent.h"
#include "pump.h"

#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <linux/vm_sockets.h>

#define RELAY_MAX   64              /* clients at once: the host's cap per sandbox */
#define HOST_CID    2
#define REFUSE_WAIT_MS 2000         /* for a refused client's greeting or request */
#define REFUSE_MAX  16              /* refused clients awaited at once */
#define SOCKS_VERSION  5            /* a SOCKS5 client's first byte; no HTTP request starts so */

static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
			   "Connection: close\r\n\r\nmayfly: the host took no more proxy connections\n";
/* SOCKS5 (RFC 1928) has no room for the reason: the greeting answered
 * (no authentication), then the request refused with "general failure"
 * and the address 0.0.0.0:0, as the host's proxy answers a busy broker
 * (vmm/net/socks.c); 05 FF to a client that offers no method without
 * authentication. */
static const uint8_t socks_greeted[2] = { SOCKS_VERSION, 0 };
static const uint8_t socks_no_method[2] = { SOCKS_VERSION, 0xff };
static const uint8_t socks_failure[10] = { SOCKS_VERSION, 1, 0, 1, 0, 0, 0, 0, 0, 0 };

/* The host end: vsock CID 2 (or, in host tests, a Unix socket path). */
static int dial_host(const char *unix_path, unsigned port)
{
	int fd;

	if (unix_path) {
		struct sockaddr_un sun = { .sun_family = AF_UNIX };

		if (strlen(unix_path) >= sizeof(sun.sun_path))
			return -1;
		strcpy(sun.sun_path, unix_path);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0)
			return fd;
	} else {
		struct sockaddr_vm svm = { .svm_family = AF_VSOCK, .svm_cid = HOST_CID,
					   .svm_port = port };

		fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && connect(fd, (struct sockaddr *)&svm, sizeof(svm)) == 0)
			return fd;
	}
	if (fd >= 0)
		close(fd);
	return -1;
}

/* A client the host took no connection for, waiting for what it sends
 * next (clients speak first): that says which language the refusal is in.
 * Polled with the pairs: a silent one holds up no other client. */
struct refusal {
	int fd;                         /* -1: a free entry */
	bool greeted;                   /* a SOCKS5 greeting answered: its request awaited */
	uint64_t deadline;              /* now_ms(): then it is answered as is */
};

/* Best effort: the client is blocking until now, each answer fits its
 * buffer, and a client gone already is told nothing. */
static void say(int fd, const void *p, size_t len)
{
	ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);

	(void)n;
}

/* Read what has come (64 KiB at most) first: unread bytes at close send
 * a reset instead of the end, and the client may lose the answer just
 * sent (a request longer than the first read, say). */
static void refusal_close(struct refusal *r)
{
	uint8_t sink[4096];

	for (int i = 0; i < 16 && recv(r->fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; i++)
		;
	close(r->fd);
	r->fd = -1;
}

/* Its time is up (or its entry is wanted): an HTTP client hears 503 and
 * why; a SOCKS5 client whose request never came, only the close. */
static void refusal_expire(struct refusal *r)
{
	if (!r->greeted)
		say(r->fd, busy, sizeof(busy) - 1);
	refusal_close(r);
}

/* It sent something (or hung up): answer in its protocol, and close unless
 * a SOCKS5 request is still to come. */
static void refusal_read(struct refusal *r)
{
	uint8_t in[512];
	ssize_t n = recv(r->fd, in, sizeof(in), MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (r->greeted) {
		if (n > 0)
			say(r->fd, socks_failure, sizeof(socks_failure));
	} else if (n > 0 && in[0] == SOCKS_VERSION) {
		/* "05 NMETHODS METHODS": is 00 (no authentication) offered? */
		size_t methods = n < 2 ? 0 : (size_t)n - 2 < in[1] ? (size_t)n - 2 : in[1];

		if (!memchr(in + 2, 0, methods)) {
			say(r->fd, socks_no_method, sizeof(socks_no_method));
		} else {
			say(r->fd, socks_greeted, sizeof(socks_greeted));
			if ((size_t)n <= 2 + methods) {   /* the request comes next */
				r->greeted = true;
				r->deadline = now_ms() + REFUSE_WAIT_MS;
				return;
			}
			say(r->fd, socks_failure, sizeof(socks_failure));
		}
	} else {
		say(r->fd, busy, sizeof(busy) - 1);
	}
	refusal_close(r);
}

/* The host took no connection: the client waits in a free entry, or in
 * the one nearest its time, whose client is answered now. */
static void refuse_client(struct refusal *refs, int cfd)
{
	struct refusal *r = &refs[0];

	for (int i = 0; i < REFUSE_MAX && r->fd >= 0; i++)
		if (refs[i].fd < 0 || refs[i].deadline < r->deadline)
			r = &refs[i];
	if (r->fd >= 0)
		refusal_expire(r);
	*r = (struct refusal){ .fd = cfd, .deadline = now_ms() + REFUSE_WAIT_MS };
}

static void accept_client(int lfd, struct pump *pairs, struct refusal *refs,
			  const char *unix_path, unsigned port)
{
	int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC), hfd, slot = -1;

	if (cfd < 0)
		return;
	for (int i = 0; i < RELAY_MAX && slot < 0; i++)
		if (pairs[i].fd[0] < 0)
			slot = i;
	hfd = slot < 0 ? -1 : dial_host(unix_path, port);
	if (hfd < 0) {
		refuse_client(refs, cfd);
		return;
	}
	if (pump_open(&pairs[slot], cfd, hfd)) {
		close(cfd);
		close(hfd);
	}
}

/* Poll for at most the nearest refusal's time: -1 (none), or ms >= 0. */
static int refusals_timeout(const struct refusal *refs)
{
	uint64_t first = UINT64_MAX, now = now_ms();

	for (int i = 0; i < REFUSE_MAX; i++)
		if (refs[i].fd >= 0 && refs[i].deadline < first)
			first = refs[i].deadline;
	return first == UINT64_MAX ? -1 : first <= now ? 0 : (int)(first - now);
}

static void __attribute__((noreturn)) relay_main(int lfd, const char *unix_path, unsigned port)
{
	static struct pump pairs[RELAY_MAX];
	static struct refusal refs[REFUSE_MAX];
	struct pollfd pfd[2 * RELAY_MAX + 1 + REFUSE_MAX];

	for (int i = 0; i < RELAY_MAX; i++)
		pump_clear(&pairs[i]);
	for (int i = 0; i < REFUSE_MAX; i++)
		refs[i].fd = -1;
	for (;;) {
		/* pfd: the pairs' two sides each, the listener, the refusals. */
		const int lk = 2 * RELAY_MAX, rk = lk + 1;
		int free_slots = 0;
		uint64_t now;

		for (int i = 0; i < RELAY_MAX; i++) {
			if (pairs[i].fd[0] < 0) {
				free_slots++;
				pfd[2 * i] = pfd[2 * i + 1] = (struct pollfd){ .fd = -1 };
				continue;
			}
			for (int s = 0; s < 2; s++) {
				short ev = pump_events(&pairs[i], s);

				/* Nothing wanted: not polled at all, or a hang-up poll
				 * always reports would spin the loop until the other
				 * side drains. */
				pfd[2 * i + s] = (struct pollfd){ .fd = ev ? pairs[i].fd[s] : -1,
								  .events = ev };
			}
		}
		/* At the cap, clients wait in the listener's backlog. */
		pfd[lk] = (struct pollfd){ .fd = lfd, .events = free_slots ? POLLIN : 0 };
		for (int i = 0; i < REFUSE_MAX; i++)
			pfd[rk + i] = (struct pollfd){ .fd = refs[i].fd, .events = POLLIN };
		if (poll(pfd, (nfds_t)(rk + REFUSE_MAX), refusals_timeout(refs)) < 0) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		for (int i = 0; i < RELAY_MAX; i++) {
			short rev[2] = { pfd[2 * i].revents, pfd[2 * i + 1].revents };

			if ((rev[0] | rev[1]) && !pump_step(&pairs[i], rev))
				pump_close(&pairs[i]);
		}
		now = now_ms();
		for (int i = 0; i < REFUSE_MAX; i++) {
			if (refs[i].fd < 0)
				continue;
			if (pfd[rk + i].revents)
				refusal_read(&refs[i]);
			else if (refs[i].deadline <= now)
				refusal_expire(&refs[i]);
		}
		/* Last: a client refused now takes an entry answered above. */
		if (pfd[lk].revents & POLLIN)
			accept_client(lfd, pairs, refs, unix_path, port);
	}
}

/* lo up: the guest's init leaves it down, and 127.0.0.1 exists only on an
 * interface that is up. Best effort: already up (host tests) is fine. */
void net_lo_up(void)
{
	struct ifreq ifr = { .ifr_name = "lo" };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return;
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0 && !(ifr.ifr_flags & IFF_UP)) {
		ifr.ifr_flags |= IFF_UP;
		if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
			agent_log("NET: cannot bring lo up: %m");
	}
	close(fd);
}

/* The proxy's listener, 127.0.0.1 only: nothing outside the VM reaches it
 * (there is no other interface anyway). */
static int listen_local(unsigned port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(fd, 64) < 0) {
		int err = errno;

		close(fd);
		return -err;
	}
	return fd;
}

void net_stop(struct agent *a)
{
	if (a->net_pid > 0)
		kill(a->net_pid, SIGKILL);   /* reaped by procs_reap, as any child */
	a->net_pid = 0;
	a->net_port = 0;
}

int net_request(struct conn *c, const struct proto_frame *f)
{
	struct agent *a = c->a;
	struct proto_reader r;
	uint32_t listen_port, host_port;
	pid_t pid;
	int lfd;

	proto_reader_init(&r, f);
	if (!proto_get_u32(&r, &listen_port) || !proto_get_u32(&r, &host_port) || !proto_done(&r))
		return -EPROTO;
	if (!listen_port || listen_port > 65535 || !host_port)
		return conn_send_error(c, f->id, EINVAL, "NET: port out of range");
	net_stop(a);
	net_lo_up();
	lfd = listen_local(listen_port);
	if (lfd < 0)
		return conn_send_error(c, f->id, -lfd, "NET: listen on 127.0.0.1:%u: %s",
				       listen_port, strerror(-lfd));
	pid = fork();
	if (pid < 0) {
		int err = errno;

		close(lfd);
		return conn_send_error(c, f->id, err, "NET: fork: %s", strerror(err));
	}
	if (pid == 0) {
		/* Nothing of the agent's but the listener: not its connections. */
		relay_child_init(lfd);
		relay_main(3, a->net_unix, host_port);
	}
	close(lfd);
	a->net_pid = pid;
	a->net_port = listen_port;
	return conn_send_empty(c, PROTO_OK, f->id);
}

int net_env(const struct agent *a, char **envp, int n, const struct proto_exec *e)
{
	static const char *const names[] = { "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy",
					     "https_proxy", "all_proxy", "NO_PROXY", "no_proxy" };
	static char vals[8][64];

	if (!a->net_port)
		return n;
	for (unsigned i = 0; i < 8; i++) {
		size_t len = strlen(names[i]);
		bool given = false;

		for (uint32_t j = 0; j < e->envc && !given; j++)
			given = !strncmp(e->envp[j], names[i], len) && e->envp[j][len] == '=';
		if (given)
			continue;
		if (i < 6)
			snprintf(vals[i], sizeof(vals[i]), "%s=http://127.0.0.1:%u", names[i],
				 a->net_port);
		else
			snprintf(vals[i], sizeof(vals[i]), "%s=localhost,127.0.0.1,::1", names[i]);
		envp[n++] = vals[i];
	}
	return n;
}
