/* test_snapshot.c - mayfly-agent before a snapshot (QUIESCE) and after each restore (FRESHEN). */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "client.h"

static struct client c;

static void start_unix(void)
{
	client_start_unix(&c);
}

static void teardown(void)
{
	client_stop(&c);
}

TestSuite(snapshot, .init = start_unix, .fini = teardown, .timeout = 30);

#define ARGV(...) ((char *const[]){ __VA_ARGS__, NULL })

static void quiesce(void)
{
	client_send(&c, client_begin(PROTO_QUIESCE, 3));
	client_expect(&c, PROTO_OK, 3);
	cr_assert(client_sees_eof(&c, 5000), "QUIESCE must close every connection");
	close(c.fd);
	client_connect(&c, true);
}

static void freshen(uint32_t id, uint32_t seed_len)
{
	static const uint8_t seed[128] = { 1, 2, 3 };
	struct proto_writer *w = client_begin(PROTO_FRESHEN, id);

	proto_put_u64(w, 1764716400ULL * 1000000000ULL);
	proto_put_bytes(w, seed, seed_len);
	client_send(&c, w);
}

Test(snapshot, quiesce_closes_every_connection_and_processes_die)
{
	int first = c.fd, second;

	/* A second connection with a process: gone after QUIESCE on the first. */
	second = client_connect(&c, true);
	client_exec(&c, 4, 0, 0, 0, 0, NULL, ARGV("sleep", "60"), NULL);
	client_expect(&c, PROTO_EXEC_STARTED, 4);
	c.fd = first;
	c.off = c.len = 0;
	client_send(&c, client_begin(PROTO_QUIESCE, 3));
	client_expect(&c, PROTO_OK, 3);
	cr_assert(client_sees_eof(&c, 5000), "QUIESCE must close the asking connection");
	close(first);
	c.fd = second;
	c.off = c.len = 0;
	/* The process's EXIT (killed), then the close. */
	cr_assert(client_sees_eof(&c, 5000), "QUIESCE must close every connection");
	close(second);
	client_connect(&c, true);
}

Test(snapshot, after_quiesce_only_freshen_lets_work_start)
{
	struct run r = { .id = 7 };

	quiesce();
	client_exec(&c, 5, 0, 0, 0, 0, NULL, ARGV("true"), NULL);
	client_expect_error(&c, 5, EAGAIN);
	client_send(&c, client_begin(PROTO_PING, 6));
	client_expect(&c, PROTO_PONG, 6);
	freshen(8, 32);
	client_expect(&c, PROTO_OK, 8);
	client_run(&c, &r, 0, 0, NULL, ARGV("sh", "-c", "echo fresh"), NULL);
	cr_assert_str_eq(r.out, "fresh\n");
	run_free(&r);
}

Test(snapshot, a_freshen_with_a_bad_seed_closes_the_connection)
{
	quiesce();
	freshen(8, 4);
	client_expect_error(&c, 8, EPROTO);
	cr_assert(client_sees_eof(&c, 5000));
	close(c.fd);
	client_connect(&c, true);
	freshen(9, 65);
	client_expect_error(&c, 9, EPROTO);
}

Test(snapshot, freshen_without_a_snapshot_is_harmless)
{
	struct run r = { .id = 7 };

	freshen(8, 32);
	client_expect(&c, PROTO_OK, 8);
	client_run(&c, &r, 0, 0, NULL, ARGV("true"), NULL);
	cr_assert_eq(r.code, 0);
	run_free(&r);
}
