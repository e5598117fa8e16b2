/* test_net_broker.c - the broker over a socket pair: it re-checks rules, refuses loopback unless named, connects to a loopback listener and passes the socket back. */
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net/broker.h"
#include "seccomp/seccomp.h"

static struct net_policy policy;
static int sv[2] = { -1, -1 };
static pthread_t server;
static int listener = -1;
static uint16_t port;

static void add(const char *rule)
{
	char err[256];

	cr_assert_eq(net_policy_add_rule(&policy, rule, err, sizeof(err)), 0, "%s", err);
}

static void *serve(void *arg)
{
	(void)arg;
	net_broker_serve(sv[1], &policy);
	return NULL;
}

/* A loopback listener on an ephemeral port, and the policy empty. */
static void setup(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sin);

	memset(&policy, 0, sizeof(policy));
	listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(listener, 0);
	cr_assert_eq(bind(listener, (struct sockaddr *)&sin, sizeof(sin)), 0);
	cr_assert_eq(listen(listener, 16), 0);
	cr_assert_eq(getsockname(listener, (struct sockaddr *)&sin, &sl), 0);
	port = ntohs(sin.sin_port);
	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
}

static void start(void)
{
	cr_assert_eq(pthread_create(&server, NULL, serve, NULL), 0);
}

static void teardown(void)
{
	close(sv[0]);
	pthread_join(server, NULL);
	close(sv[1]);
	close(listener);
}

/* Ask and wait for the answer. */
static int ask(const char *host, uint16_t p, struct net_broker_rep *rep)
{
	struct pollfd pfd = { .fd = sv[0], .events = POLLIN };
	int fd = -1;

	cr_assert_eq(net_broker_ask(sv[0], 7, host, p), 0);
	cr_assert_eq(poll(&pfd, 1, 10000), 1);
	cr_assert_eq(net_broker_answer(sv[0], rep, &fd), 0);
	cr_assert_eq(rep->id, 7);
	return fd;
}

Test(net_broker, a_name_resolving_to_loopback_is_refused_unless_named, .init = setup,
     .fini = teardown)
{
	struct net_broker_rep rep;
	char err[256], rule[64];
	int fd;

	snprintf(rule, sizeof(rule), "svc.test:%u", port);
	add(rule);
	cr_assert_eq(net_policy_add_resolve(&policy, "svc.test:127.0.0.1", err, sizeof(err)), 0);
	start();
	fd = ask("svc.test", port, &rep);
	cr_assert_eq(fd, -1);
	cr_assert_eq(rep.err, -EACCES);
	cr_assert(strstr(rep.reason, "127.0.0.1") && strstr(rep.reason, "loopback"), "%s",
		  rep.reason);
}

/* A covering range is not a name for loopback: 0.0.0.0/0 and ::/0 allow the
 * address literal and the name, but the broker connects to neither the
 * host's loopback nor 0.0.0.0 (the host itself). */
Test(net_broker, a_covering_range_does_not_open_loopback, .init = setup, .fini = teardown)
{
	struct net_broker_rep rep;
	char err[256], rule[64];
	int fd;

	add("0.0.0.0/0");
	add("::/0");
	snprintf(rule, sizeof(rule), "svc.test:%u", port);
	add(rule);
	cr_assert_eq(net_policy_add_resolve(&policy, "svc.test:127.0.0.1", err, sizeof(err)), 0);
	cr_assert_eq(net_policy_add_resolve(&policy, "zero.test:0.0.0.0", err, sizeof(err)), 0);
	add("zero.test");
	start();
	fd = ask("127.0.0.1", port, &rep);
	cr_assert_eq(fd, -1, "0.0.0.0/0 opened 127.0.0.1");
	cr_assert_eq(rep.err, -EACCES);
	cr_assert(strstr(rep.reason, "loopback"), "%s", rep.reason);
	fd = ask("svc.test", port, &rep);
	cr_assert_eq(fd, -1, "0.0.0.0/0 opened a name resolving to 127.0.0.1");
	fd = ask("::1", port, &rep);
	cr_assert_eq(fd, -1, "::/0 opened ::1");
	fd = ask("0.0.0.0", port, &rep);
	cr_assert_eq(fd, -1, "0.0.0.0 was connected to");
	fd = ask("zero.test", port, &rep);
	cr_assert_eq(fd, -1, "a name resolving to 0.0.0.0 was connected to");
	cr_assert(strstr(rep.reason, "never"), "%s", rep.reason);
}

Test(net_broker, named_loopback_connects_and_the_socket_comes_back, .init = setup,
     .fini = teardown)
{
	struct net_broker_rep rep;
	char err[256], rule[64], buf[8];
	int fd, peer;

	snprintf(rule, sizeof(rule), "svc.test:%u", port);
	add(rule);
	add("127.0.0.1");
	cr_assert_eq(net_policy_add_resolve(&policy, "svc.test:127.0.0.1", err, sizeof(err)), 0);
	start();
	fd = ask("svc.test", port, &rep);
	cr_assert_geq(fd, 0, "%s", rep.reason);
	cr_assert_eq(rep.err, 0);
	cr_assert_str_eq(rep.rule, rule);
	peer = accept(listener, NULL, NULL);
	cr_assert_geq(peer, 0);
	cr_assert_eq(send(fd, "ping", 4, 0), 4);
	cr_assert_eq(recv(peer, buf, sizeof(buf), 0), 4);
	cr_assert_eq(memcmp(buf, "ping", 4), 0);
	close(peer);
	close(fd);
	/* An address literal, allowed by its own rule. */
	fd = ask("127.0.0.1", port, &rep);
	cr_assert_geq(fd, 0, "%s", rep.reason);
	close(fd);
}

Test(net_broker, the_broker_checks_the_rules_itself, .init = setup, .fini = teardown)
{
	struct net_broker_rep rep;

	add("127.0.0.1:1");
	start();
	/* A compromised VMM asking for anything: the broker says no. */
	cr_assert_eq(ask("127.0.0.1", port, &rep), -1);
	cr_assert_eq(rep.err, -EACCES);
	cr_assert_eq(ask("evil.test", 443, &rep), -1);
	cr_assert_eq(rep.err, -EACCES);
	cr_assert_eq(ask("bad name", 443, &rep), -1);
	cr_assert_eq(rep.err, -EINVAL);
	cr_assert_eq(ask("127.0.0.1", 0, &rep), -1);
	cr_assert_eq(rep.err, -EINVAL);
}

Test(net_broker, a_malformed_request_is_answered_not_trusted, .init = setup, .fini = teardown)
{
	struct net_broker_rep rep;
	struct pollfd pfd = { .fd = -1, .events = POLLIN };
	char junk[7] = "abcdef";
	int fd;

	add("127.0.0.1");
	start();
	pfd.fd = sv[0];
	cr_assert_eq(send(sv[0], junk, sizeof(junk), 0), (ssize_t)sizeof(junk));
	cr_assert_eq(poll(&pfd, 1, 10000), 1);
	cr_assert_eq(net_broker_answer(sv[0], &rep, &fd), 0);
	cr_assert_eq(rep.err, -EINVAL);
	cr_assert_eq(fd, -1);
}

Test(net_broker, a_closed_port_is_an_error_not_a_hang, .init = setup, .fini = teardown)
{
	struct net_broker_rep rep;

	add("127.0.0.1");
	close(listener);   /* nothing listens on `port` now */
	listener = -1;
	start();
	cr_assert_eq(ask("127.0.0.1", port, &rep), -1);
	cr_assert_eq(rep.err, -ECONNREFUSED, "%s", rep.reason);
}

Test(net_broker, the_process_starts_serves_and_is_reaped, .init = setup, .fini = teardown)
{
	struct net_broker b;
	struct net_broker_rep rep;
	struct pollfd pfd;
	int fd = -1;

	add("127.0.0.1");
	start();
	cr_assert_eq(net_broker_start(&b, &policy, 65534, 65534), 0);
	cr_assert_gt(b.pid, 0);
	cr_assert_eq(net_broker_ask(b.fd, 9, "127.0.0.1", port), 0);
	pfd = (struct pollfd){ .fd = b.fd, .events = POLLIN };
	cr_assert_eq(poll(&pfd, 1, 10000), 1);
	cr_assert_eq(net_broker_answer(b.fd, &rep, &fd), 0);
	cr_assert_eq(rep.id, 9);
	cr_assert_geq(fd, 0, "%s", rep.reason);
	close(fd);
	net_broker_stop(&b);
	cr_assert_eq(b.fd, -1);
	/* Reaped: no child of ours is left. */
	cr_assert_eq(waitpid(-1, NULL, WNOHANG), -1);
	cr_assert_eq(errno, ECHILD);
}

/* pid's "Seccomp:" mode, once it is 2 or after 10 s (the first broker
 * process forks its workers before its filter, and they may answer first). */
static int seccomp_mode(pid_t pid)
{
	char path[64], line[256];
	int mode = -1;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	for (int i = 0; i < 1000 && mode != 2; i++) {
		FILE *f = fopen(path, "r");

		cr_assert_not_null(f, "%s: %s", path, strerror(errno));
		while (fgets(line, sizeof(line), f))
			sscanf(line, "Seccomp: %d", &mode);
		fclose(f);
		if (mode != 2)
			usleep(10000);
	}
	return mode;
}

/* The broker process under its own filter: /etc/hosts, a DNS lookup that
 * fails (a 1 s resolver timeout at most), a connect and the socket passed
 * back, all without a forbidden call (which would end it: no answer). */
Test(net_broker, the_process_resolves_and_connects_under_its_seccomp_filter, .init = setup,
     .fini = teardown)
{
	struct net_broker_rep rep;
	struct net_broker b;
	struct pollfd pfd;
	char path[80];
	int fd = -1, worker, workers = 0;
	FILE *f;

	add("localhost");
	add("127.0.0.1");
	add("nothing.invalid");
	start();
	setenv("RES_OPTIONS", "timeout:1 attempts:1", 1);
	seccomp_enable(true);
	cr_assert_eq(net_broker_start(&b, &policy, 65534, 65534), 0);
	seccomp_enable(false);
	unsetenv("RES_OPTIONS");

	cr_assert_eq(net_broker_ask(b.fd, 1, "localhost", port), 0);
	pfd = (struct pollfd){ .fd = b.fd, .events = POLLIN };
	cr_assert_eq(poll(&pfd, 1, 10000), 1);
	cr_assert_eq(net_broker_answer(b.fd, &rep, &fd), 0, "the broker died (a forbidden call?)");
	cr_assert_geq(fd, 0, "%s", rep.reason);
	cr_assert_str_eq(rep.rule, "localhost");
	close(fd);

	cr_assert_eq(net_broker_ask(b.fd, 2, "nothing.invalid", 80), 0);
	cr_assert_eq(poll(&pfd, 1, 20000), 1);
	cr_assert_eq(net_broker_answer(b.fd, &rep, &fd), 0, "the broker died in DNS (a forbidden call?)");
	cr_assert_eq(fd, -1);
	cr_assert_eq(rep.err, -EHOSTUNREACH, "%d %s", rep.err, rep.reason);

	cr_assert_eq(seccomp_mode(b.pid), 2, "the broker has no seccomp filter");
	/* Its workers too. */
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)b.pid, (int)b.pid);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	while (fscanf(f, "%d", &worker) == 1) {
		cr_assert_eq(seccomp_mode(worker), 2, "worker %d has no seccomp filter", worker);
		workers++;
	}
	fclose(f);
	cr_assert_eq(workers, NET_BROKER_WORKERS - 1);
	net_broker_stop(&b);
}

/* A connect that hangs: a listener whose accept queue is full drops the
 * SYNs, so a request to it is stuck until NET_CONNECT_TIMEOUT_MS. A second
 * request, sent after it, is answered first: the stuck one holds one
 * worker, not the broker. */
Test(net_broker, a_stuck_request_does_not_hold_up_the_next, .init = setup, .fini = teardown,
     .timeout = 60)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sin);
	struct net_broker_rep rep;
	struct net_broker b;
	struct pollfd pfd;
	int full, filler, fd = -1;

	full = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(full, 0);
	cr_assert_eq(bind(full, (struct sockaddr *)&sin, sizeof(sin)), 0);
	cr_assert_eq(listen(full, 0), 0);
	cr_assert_eq(getsockname(full, (struct sockaddr *)&sin, &sl), 0);
	filler = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_eq(connect(filler, (struct sockaddr *)&sin, sizeof(sin)), 0, "%s", strerror(errno));

	add("127.0.0.1");
	start();
	cr_assert_eq(net_broker_start(&b, &policy, 65534, 65534), 0);
	cr_assert_eq(net_broker_ask(b.fd, 1, "127.0.0.1", ntohs(sin.sin_port)), 0);
	usleep(100000);   /* let a worker take it first (the order is the point) */
	cr_assert_eq(net_broker_ask(b.fd, 2, "127.0.0.1", port), 0);
	pfd = (struct pollfd){ .fd = b.fd, .events = POLLIN };
	cr_assert_eq(poll(&pfd, 1, 20000), 1);
	cr_assert_eq(net_broker_answer(b.fd, &rep, &fd), 0);
	cr_assert_eq(rep.id, 2, "the second request waited for the stuck one (answer %u: %s)",
		     rep.id, rep.reason);
	cr_assert_geq(fd, 0, "%s", rep.reason);
	close(fd);
	/* The stuck one ends by its own timeout, answered. */
	cr_assert_eq(poll(&pfd, 1, 2 * NET_CONNECT_TIMEOUT_MS + 10000), 1);
	cr_assert_eq(net_broker_answer(b.fd, &rep, &fd), 0);
	cr_assert_eq(rep.id, 1);
	cr_assert_eq(rep.err, -ETIMEDOUT, "%d %s", rep.err, rep.reason);
	net_broker_stop(&b);
	close(filler);
	close(full);
}
