/* test_ports.c - mayfly-agent's PORT: a connection handed over to 127.0.0.1:port (a published port), raw bytes both ways; a closed port, a busy connection and a malformed request refused. */
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client.h"

#define ARGV(...) ((char *const[]){ __VA_ARGS__, NULL })

static struct client c;

static void setup(void)
{
	client_start_unix(&c);
}

static void teardown(void)
{
	client_stop(&c);
}

TestSuite(ports, .init = setup, .fini = teardown, .timeout = 30);

/* A listener on 127.0.0.1, its port into *port. */
static int listen_local(unsigned *port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert_eq(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	cr_assert_eq(listen(fd, 4), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&sin, &sl), 0);
	*port = ntohs(sin.sin_port);
	return fd;
}

static void send_port(int fd, uint32_t id, uint32_t port)
{
	struct proto_writer *w = client_begin(PROTO_PORT, id);
	int n;

	proto_put_u32(w, port);
	n = proto_end(w);
	cr_assert_gt(n, 0);
	cr_assert_eq(send(fd, w->buf, (size_t)n, MSG_NOSIGNAL), n);
}

static ssize_t read_wait(int fd, char *buf, size_t cap)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	cr_assert_eq(poll(&p, 1, 5000), 1, "nothing came in 5 s");
	return read(fd, buf, cap);
}

Test(ports, a_port_connection_carries_raw_bytes_both_ways_and_passes_each_end_on)
{
	unsigned port;
	int lfd = listen_local(&port), sfd, hfd = client_connect(&c, true);
	char buf[64];
	ssize_t n;

	send_port(hfd, 7, port);
	/* The bytes right behind the OK's request are the relay's already. */
	cr_assert_eq(send(hfd, "ping", 4, MSG_NOSIGNAL), 4);
	sfd = accept(lfd, NULL, NULL);
	cr_assert_geq(sfd, 0);
	c.fd = hfd;
	c.off = c.len = 0;
	client_expect(&c, PROTO_OK, 7);
	cr_assert_eq(c.len - c.off, 0, "no stray bytes after the OK");
	n = read_wait(sfd, buf, sizeof(buf));
	cr_assert_eq(n, 4);
	cr_assert(!memcmp(buf, "ping", 4));
	cr_assert_eq(write(sfd, "pong!", 5), 5);
	n = read_wait(hfd, buf, sizeof(buf));
	cr_assert_eq(n, 5);
	cr_assert(!memcmp(buf, "pong!", 5));
	/* The server's close reaches the host as the end. */
	close(sfd);
	cr_assert_eq(read_wait(hfd, buf, sizeof(buf)), 0);
	close(hfd);
	c.fd = -1;
	close(lfd);
}

Test(ports, a_closed_port_is_econnrefused_and_the_connection_ends)
{
	unsigned port;
	int lfd = listen_local(&port), hfd;

	close(lfd);
	hfd = client_connect(&c, true);
	c.fd = hfd;
	c.off = c.len = 0;
	send_port(hfd, 3, port);
	client_expect_error(&c, 3, ECONNREFUSED);
	cr_assert(client_sees_eof(&c, 5000));
	close(hfd);
	c.fd = -1;
}

Test(ports, port_is_refused_on_a_busy_connection_and_out_of_range)
{
	struct proto_writer *w;
	unsigned port;
	int lfd = listen_local(&port);

	client_exec(&c, 1, PROTO_EXEC_STDIN, 0, 0, 0, NULL, ARGV("cat"), NULL);
	client_expect(&c, PROTO_EXEC_STARTED, 1);
	send_port(c.fd, 2, port);
	client_expect_error(&c, 2, EBUSY);
	send_port(c.fd, 3, 0);
	client_expect_error(&c, 3, EINVAL);
	send_port(c.fd, 4, 70000);
	client_expect_error(&c, 4, EINVAL);
	/* A payload cut short is malformed: the connection ends. */
	w = client_begin(PROTO_PORT, 5);
	client_send(&c, w);
	client_expect_error(&c, 5, EPROTO);
	cr_assert(client_sees_eof(&c, 5000));
	close(lfd);
}
