/* test_conn.c - mayfly-agent's connections: HELLO and versions, unknown and malformed frames, closes, SHUTDOWN. */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"

static struct client c;

static void teardown(void)
{
	client_stop(&c);
}

static void start_unix(void)
{
	client_start_unix(&c);
}

static void start_fd(void)
{
	client_start(&c);
}

TestSuite(conn, .init = start_unix, .fini = teardown, .timeout = 30);
TestSuite(conn_fd, .init = start_fd, .fini = teardown, .timeout = 30);

#define ARGV(...) ((char *const[]){ __VA_ARGS__, NULL })

static void ping(uint32_t id)
{
	client_send(&c, client_begin(PROTO_PING, id));
	client_expect(&c, PROTO_PONG, id);
}

/* The agent is alive and takes a new connection with HELLO. */
static void serves_a_new_connection(void)
{
	close(c.fd);
	client_connect(&c, true);
	ping(99);
}

Test(conn_fd, hello_ok_names_the_agent_and_ping_answers)
{
	struct proto_writer *w = client_begin(PROTO_HELLO, 5);
	struct proto_reader r;
	uint32_t v;
	char name[64];
	uint64_t up;

	proto_put_u32(w, PROTO_VERSION);
	client_send(&c, w);            /* a second HELLO is answered again */
	client_expect(&c, PROTO_HELLO_OK, 5);
	proto_reader_init(&r, &c.f);
	cr_assert(proto_get_u32(&r, &v) && v == PROTO_VERSION);
	cr_assert(proto_get_str(&r, name, sizeof(name)) && proto_done(&r));
	cr_assert(strncmp(name, "mayfly-agent", 12) == 0, "%s", name);
	client_send(&c, client_begin(PROTO_PING, 6));
	client_expect(&c, PROTO_PONG, 6);
	proto_reader_init(&r, &c.f);
	cr_assert(proto_get_u64(&r, &up) && proto_done(&r));
	cr_assert_lt(up, 60000);
}

Test(conn_fd, unknown_type_gets_enosys_and_the_connection_stays)
{
	client_send(&c, client_begin(63, 7));
	client_expect_error(&c, 7, ENOSYS);
	client_send(&c, client_begin(PROTO_PONG, 8));    /* a reply type sent as a request */
	client_expect_error(&c, 8, ENOSYS);
	client_send(&c, client_begin(0, 9));
	client_expect_error(&c, 9, ENOSYS);
	ping(10);
}

Test(conn, malformed_payload_closes_that_connection_only)
{
	struct proto_writer *w = client_begin(PROTO_STAT, 3);

	proto_put_str(w, "/");
	proto_put_u32(w, 1);          /* a trailing field */
	client_send(&c, w);
	client_expect_error(&c, 3, EPROTO);
	cr_assert(client_sees_eof(&c, 2000));
	serves_a_new_connection();
}

Test(conn, malformed_exec_closes_the_connection)
{
	struct proto_exec e = { .argc = 0 };
	struct proto_writer *w = client_begin(PROTO_EXEC, 4);

	cr_assert_gt(proto_exec_encode(w, 4, &e), 0);     /* argc 0 */
	client_send_raw(&c, w->buf, w->len);
	client_expect_error(&c, 4, EPROTO);
	cr_assert(client_sees_eof(&c, 2000));
	serves_a_new_connection();
}

Test(conn, oversized_length_closes_the_connection)
{
	uint8_t hdr[PROTO_HEADER_LEN] = { 0xff, 0xff, 0xff, 0x7f, PROTO_VERSION, PROTO_PING };

	client_send_raw(&c, hdr, sizeof(hdr));
	cr_assert(client_sees_eof(&c, 2000));
	serves_a_new_connection();
	/* One byte over the limit, announced and never sent. */
	hdr[0] = (PROTO_HEADER_LEN - 4 + PROTO_MAX_PAYLOAD + 1) & 0xff;
	hdr[1] = ((PROTO_HEADER_LEN - 4 + PROTO_MAX_PAYLOAD + 1) >> 8) & 0xff;
	hdr[2] = ((PROTO_HEADER_LEN - 4 + PROTO_MAX_PAYLOAD + 1) >> 16) & 0xff;
	hdr[3] = 0;
	client_send_raw(&c, hdr, sizeof(hdr));
	cr_assert(client_sees_eof(&c, 2000));
	serves_a_new_connection();
	/* Length below the header. */
	hdr[0] = 3;
	hdr[1] = hdr[2] = 0;
	client_send_raw(&c, hdr, 4);
	cr_assert(client_sees_eof(&c, 2000));
	serves_a_new_connection();
}

Test(conn, garbage_closes_the_connection)
{
	static const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";

	client_send_raw(&c, junk, sizeof(junk) - 1);
	cr_assert(client_sees_eof(&c, 2000));
	serves_a_new_connection();
}

Test(conn, wrong_versions_get_error_then_close)
{
	struct proto_writer *w;

	/* HELLO asking for another version. */
	close(c.fd);
	client_connect(&c, false);
	w = client_begin(PROTO_HELLO, 1);
	proto_put_u32(w, PROTO_VERSION + 1);
	client_send(&c, w);
	client_expect_error(&c, 1, EPROTONOSUPPORT);
	cr_assert(client_sees_eof(&c, 2000));

	/* A frame header of another version. */
	close(c.fd);
	client_connect(&c, false);
	w = client_begin(PROTO_HELLO, 2);
	proto_put_u32(w, PROTO_VERSION);
	proto_end(w);
	w->buf[4] = PROTO_VERSION + 1;
	client_send_raw(&c, w->buf, w->len);
	client_expect_error(&c, 2, EPROTONOSUPPORT);
	cr_assert(client_sees_eof(&c, 2000));

	/* Anything before HELLO. */
	close(c.fd);
	client_connect(&c, false);
	client_send(&c, client_begin(PROTO_PING, 3));
	client_expect_error(&c, 3, EPROTO);
	cr_assert(client_sees_eof(&c, 2000));
	serves_a_new_connection();
}

Test(conn, closing_a_connection_kills_its_processes)
{
	uint32_t pid;
	struct proto_reader r;
	int i;

	client_exec(&c, 1, 0, 0, 0, 0, NULL, ARGV("sleep", "60"), NULL);
	client_expect(&c, PROTO_EXEC_STARTED, 1);
	proto_reader_init(&r, &c.f);
	cr_assert(proto_get_u32(&r, &pid));
	cr_assert_eq(kill((pid_t)pid, 0), 0);
	close(c.fd);
	/* Killed and reaped by the agent: the pid disappears. */
	for (i = 0; i < 400 && kill((pid_t)pid, 0) == 0; i++)
		usleep(5000);
	cr_assert_lt(i, 400, "process %u still alive after its connection closed", pid);
	client_connect(&c, true);
	ping(2);
}

Test(conn, several_connections_at_once)
{
	int first = c.fd, second;

	client_exec(&c, 1, PROTO_EXEC_STDIN, 0, 0, 0, NULL, ARGV("cat"), NULL);
	client_expect(&c, PROTO_EXEC_STARTED, 1);
	second = client_connect(&c, true);
	ping(2);                         /* on the second */
	c.fd = first;
	client_stdin(&c, 1, "x", 1);
	client_expect(&c, PROTO_STDOUT, 1);
	close(second);
	ping(3);                         /* the first still works */
}

Test(conn, shutdown_without_power_rights_replies_ok_and_exits)
{
	int st;

	client_send(&c, client_begin(PROTO_SHUTDOWN, 9));
	client_expect(&c, PROTO_OK, 9);
	cr_assert(client_sees_eof(&c, 2000));
	cr_assert_eq(waitpid(c.agent, &st, 0), c.agent);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
	c.agent = 0;
}

Test(conn_fd, agent_exits_when_its_fd_closes)
{
	int st, i;

	close(c.fd);
	c.fd = -1;
	for (i = 0; i < 400 && waitpid(c.agent, &st, WNOHANG) == 0; i++)
		usleep(5000);
	cr_assert_lt(i, 400);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	c.agent = 0;
}
