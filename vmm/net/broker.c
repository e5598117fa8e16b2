/* broker.c - the network broker process: re-check, resolve, refuse internal ranges, connect with a timeout, pass the socket back. */
#include "net/broker.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "seccomp/seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netdb.h>
#include <netinet/in.h>
#include <nss.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_ADDRS 16

static void reason(struct net_broker_rep *rep, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void reason(struct net_broker_rep *rep, int err, const char *fmt, ...)
{
	va_list ap;

	rep->err = err;
	va_start(ap, fmt);
	vsnprintf(rep->reason, sizeof(rep->reason), fmt, ap);
	va_end(ap);
}

/* The name's addresses: the --resolve entry alone, an address literal
 * itself, else the host's resolver. How many, or 0 with the reason set. */
static unsigned resolve(const struct net_policy *p, const char *host, struct net_addr *out,
			struct net_broker_rep *rep)
{
	const struct net_resolve *fixed = net_policy_resolve(p, host);
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res, *ai;
	unsigned n = 0;
	int rc;

	if (fixed) {
		out[0] = fixed->addr;
		return 1;
	}
	if (net_addr_parse(host, &out[0]))
		return 1;
	rc = getaddrinfo(host, NULL, &hints, &res);
	if (rc) {
		reason(rep, -EHOSTUNREACH, "cannot resolve %s: %s", host, gai_strerror(rc));
		return 0;
	}
	for (ai = res; ai && n < MAX_ADDRS; ai = ai->ai_next) {
		memset(&out[n], 0, sizeof(out[n]));
		if (ai->ai_family == AF_INET) {
			out[n].b[10] = out[n].b[11] = 0xff;
			memcpy(out[n].b + 12, &((struct sockaddr_in *)ai->ai_addr)->sin_addr, 4);
			n++;
		} else if (ai->ai_family == AF_INET6) {
			memcpy(out[n].b, &((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr, 16);
			n++;
		}
	}
	freeaddrinfo(res);
	if (!n)
		reason(rep, -EHOSTUNREACH, "%s has no address", host);
	return n;
}

/* A non-blocking connect, waited for at most timeout_ms. fd or -errno. */
static int connect_to(const struct net_addr *a, uint16_t port, int timeout_ms)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t sl;
	struct pollfd pfd;
	int fd, err = 0, rc;
	socklen_t el = sizeof(err);

	if (net_addr_is_v4(a)) {
		struct sockaddr_in *in = (struct sockaddr_in *)&ss;

		in->sin_family = AF_INET;
		in->sin_port = htons(port);
		memcpy(&in->sin_addr, a->b + 12, 4);
		sl = sizeof(*in);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(port);
		memcpy(&in6->sin6_addr, a->b, 16);
		sl = sizeof(*in6);
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&ss, sl) < 0 && errno != EINPROGRESS) {
		rc = -errno;
		close(fd);
		return rc;
	}
	pfd = (struct pollfd){ .fd = fd, .events = POLLOUT };
	do
		rc = poll(&pfd, 1, timeout_ms);
	while (rc < 0 && errno == EINTR);
	if (rc == 0)
		err = ETIMEDOUT;
	else if (rc < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
		err = errno;
	if (err) {
		close(fd);
		return -err;
	}
	return fd;
}

/* The decision for one request; a connected fd, or -1 with rep->err set. */
static int decide(const struct net_policy *p, struct net_broker_req *req,
		  struct net_broker_rep *rep)
{
	struct net_addr addrs[MAX_ADDRS];
	const struct net_rule *rule;
	uint64_t deadline;
	unsigned n;
	int fd = -1;

	req->host[NET_HOST_MAX] = '\0';
	if (!req->port || (!net_addr_parse(req->host, &addrs[0]) && !net_host_valid(req->host))) {
		reason(rep, -EINVAL, "a malformed request");
		return -1;
	}
	rule = net_policy_match(p, req->host, req->port);
	if (!rule) {
		reason(rep, -EACCES, "%s port %u is not allowed by any --allow-net rule", req->host,
		       req->port);
		return -1;
	}
	snprintf(rep->rule, sizeof(rep->rule), "%s", rule->text);
	n = resolve(p, req->host, addrs, rep);
	deadline = clock_now_ns() + NET_REQUEST_TIMEOUT_MS * 1000000ULL;
	for (unsigned i = 0; i < n; i++) {
		enum net_class c = net_addr_class(&addrs[i]);
		uint64_t now = clock_now_ns();
		char text[46];
		int left_ms;

		rep->addr = addrs[i];
		rep->has_addr = 1;
		net_addr_format(&addrs[i], text);
		/* DNS rebinding: an allowed name may resolve anywhere; an
		 * internal address only when a rule names it. */
		if (c != NET_CLASS_PUBLIC && !net_policy_opens(p, &addrs[i], req->port)) {
			reason(rep, -EACCES, c == NET_CLASS_UNSPECIFIED ?
			       "%s resolves to %s (%s): never connected to" :
			       "%s resolves to %s (%s), which no --allow-net rule names (a range "
			       "inside that one)",
			       req->host, text, net_class_name(c));
			continue;
		}
		if (now >= deadline) {
			reason(rep, -ETIMEDOUT, "cannot connect to %s port %u within %d s", req->host,
			       req->port, NET_REQUEST_TIMEOUT_MS / 1000);
			break;
		}
		left_ms = (int)((deadline - now + 999999) / 1000000);
		fd = connect_to(&addrs[i], req->port,
				left_ms < NET_CONNECT_TIMEOUT_MS ? left_ms : NET_CONNECT_TIMEOUT_MS);
		if (fd >= 0) {
			rep->err = 0;
			rep->reason[0] = '\0';
			return fd;
		}
		reason(rep, fd, "cannot connect to %s port %u: %s", text, req->port, strerror(-fd));
	}
	return -1;
}

static int send_answer(int fd, const struct net_broker_rep *rep, int conn_fd)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} cm = { 0 };
	struct iovec iov = { .iov_base = (void *)rep, .iov_len = sizeof(*rep) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (conn_fd >= 0) {
		msg.msg_control = cm.buf;
		msg.msg_controllen = sizeof(cm.buf);
		cm.h.cmsg_level = SOL_SOCKET;
		cm.h.cmsg_type = SCM_RIGHTS;
		cm.h.cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(&cm.h), &conn_fd, sizeof(int));
	}
	do
		n = sendmsg(fd, &msg, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)sizeof(*rep) ? 0 : -EIO;
}

void net_broker_serve(int fd, const struct net_policy *p)
{
	for (;;) {
		struct net_broker_req req;
		struct net_broker_rep rep;
		ssize_t n = recv(fd, &req, sizeof(req), 0);
		int conn;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		memset(&rep, 0, sizeof(rep));
		if (n != (ssize_t)sizeof(req)) {
			reason(&rep, -EINVAL, "a malformed request");
			conn = -1;
		} else {
			rep.id = req.id;
			conn = decide(p, &req, &rep);
		}
		if (send_answer(fd, &rep, conn) && errno == EPIPE)
			return;
		if (conn >= 0)
			close(conn);
	}
}

int net_broker_ask(int fd, uint32_t id, const char *host, uint16_t port)
{
	struct net_broker_req req = { .id = id, .port = port };
	size_t len = strlen(host);

	if (len > NET_HOST_MAX)
		return -ENAMETOOLONG;
	memcpy(req.host, host, len + 1);
	if (send(fd, &req, sizeof(req), MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof(req))
		return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
	return 0;
}

int net_broker_answer(int fd, struct net_broker_rep *rep, int *conn_fd)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} cm;
	struct iovec iov = { .iov_base = rep, .iov_len = sizeof(*rep) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf,
			      .msg_controllen = sizeof(cm.buf) };
	struct cmsghdr *h;
	ssize_t n;

	*conn_fd = -1;
	n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return -errno;
	if (n == 0)
		return -EPIPE;
	for (h = CMSG_FIRSTHDR(&msg); h; h = CMSG_NXTHDR(&msg, h))
		if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS &&
		    h->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(conn_fd, CMSG_DATA(h), sizeof(int));
	rep->reason[sizeof(rep->reason) - 1] = '\0';
	rep->rule[sizeof(rep->rule) - 1] = '\0';
	if (n != (ssize_t)sizeof(*rep) || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
	    (rep->err == 0) != (*conn_fd >= 0)) {
		if (*conn_fd >= 0)
			close(*conn_fd);
		*conn_fd = -1;
		return -EBADMSG;
	}
	return 0;
}

/* The other workers, forked before the filter (which allows no fork): each
 * takes requests off the one socket (a SOCK_SEQPACKET message goes whole
 * to one reader) and answers on it, so a stuck request holds one worker.
 * They die with the first (PDEATHSIG). Fewer when a fork fails. */
static void fork_workers(void)
{
	pid_t first = getpid();

	for (int i = 1; i < NET_BROKER_WORKERS; i++) {
		pid_t w = fork();

		if (w < 0)
			return;
		if (w == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != first)
				_exit(0);
			return;
		}
	}
}

/* The child: nothing of the parent's but stdio and its socket, fewer
 * privileges, its workers, its filter, then serve. */
static void __attribute__((noreturn)) broker_main(int fd, const struct net_policy *p, pid_t parent,
						  uid_t uid, gid_t gid)
{
	sigset_t none;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(0);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (dup2(fd, 3) < 0)
		_exit(1);
	close_range(4, ~0U, 0);
	if (geteuid() == 0 &&
	    (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0))
		_exit(1);
	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	prctl(PR_SET_NAME, "mayfly-broker", 0, 0, 0);   /* mayfly-<role>, within comm's 15 */
	fork_workers();
	/* /etc/hosts, then DNS, both inside libc: the host's nsswitch.conf
	 * could name a module (mdns, systemd's resolve) whose loading needs
	 * an executable mapping, which the filter never allows. */
	__nss_configure_lookup("hosts", "files dns");
	seccomp_enter(SECCOMP_ROLE_BROKER);
	net_broker_serve(3, p);
	_exit(0);
}

int net_broker_start(struct net_broker *b, const struct net_policy *p, uid_t uid, gid_t gid)
{
	pid_t parent = getpid();
	int sv[2], rc;

	b->fd = -1;
	b->pid = -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		rc = -errno;
		log_say("network broker: cannot create a socket pair: %s", strerror(-rc));
		return rc;
	}
	fflush(NULL);
	b->pid = fork();
	if (b->pid < 0) {
		rc = -errno;
		log_say("network broker: cannot fork: %s", strerror(-rc));
		close(sv[0]);
		close(sv[1]);
		return rc;
	}
	if (b->pid == 0) {
		close(sv[0]);
		broker_main(sv[1], p, parent, uid, gid);
	}
	close(sv[1]);
	b->fd = sv[0];
	b->owner = parent;
	return 0;
}

void net_broker_stop(struct net_broker *b)
{
	if (b->fd >= 0)
		close(b->fd);
	b->fd = -1;
	if (b->pid > 0 && b->owner == getpid()) {
		kill(b->pid, SIGKILL);
		while (waitpid(b->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	b->pid = -1;
}
