/* test_exec.c - mayfly-agent's EXEC over a socketpair: output, exit kinds, exec errors, stdin, PTY, timeout, concurrency, volume. */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"

static struct client c;

static void setup(void)
{
	client_start(&c);
}

static void teardown(void)
{
	client_stop(&c);
}

TestSuite(exec, .init = setup, .fini = teardown, .timeout = 30);

#define ARGV(...) ((char *const[]){ __VA_ARGS__, NULL })

static void send_u32(uint8_t type, uint32_t id, uint32_t v)
{
	struct proto_writer *w = client_begin(type, id);

	proto_put_u32(w, v);
	client_send(&c, w);
}

Test(exec, echo_gives_stdout_then_exit_0)
{
	struct run r = { .id = 1 };

	client_run(&c, &r, 0, 0, NULL, ARGV("echo", "hello"), NULL);
	cr_assert(r.started && r.pid > 0);
	cr_assert_str_eq(r.out, "hello\n");
	cr_assert_eq(r.err_len, 0);
	cr_assert_eq(r.kind, PROTO_EXIT_CODE);
	cr_assert_eq(r.code, 0);
	cr_assert_eq(r.signo, 0);
	cr_assert_gt(r.duration_us, 0);
	run_free(&r);
}

Test(exec, stderr_is_separate_from_stdout)
{
	struct run r = { .id = 2 };

	client_run(&c, &r, 0, 0, NULL, ARGV("sh", "-c", "echo out; echo err >&2; echo out2"), NULL);
	cr_assert_str_eq(r.out, "out\nout2\n");
	cr_assert_str_eq(r.err, "err\n");
	run_free(&r);
}

Test(exec, exit_code_7)
{
	struct run r = { .id = 3 };

	client_run(&c, &r, 0, 0, NULL, ARGV("sh", "-c", "exit 7"), NULL);
	cr_assert_eq(r.kind, PROTO_EXIT_CODE);
	cr_assert_eq(r.code, 7);
}

Test(exec, sigterm_from_a_signal_frame_is_exit_kind_signal)
{
	struct run r = { .id = 4 };

	client_exec(&c, 4, 0, 0, 0, 0, NULL, ARGV("sleep", "30"), NULL);
	client_expect(&c, PROTO_EXEC_STARTED, 4);
	r.started = true;
	send_u32(PROTO_SIGNAL, 4, SIGTERM);
	client_expect(&c, PROTO_OK, 4);
	client_collect(&c, &r, 1, 5000);
	cr_assert_eq(r.kind, PROTO_EXIT_SIGNAL);
	cr_assert_eq(r.signo, SIGTERM);
	cr_assert_eq(r.code, 128 + SIGTERM);
	cr_assert_lt(r.duration_us, 5000000);
	/* Gone now: another SIGNAL finds no process; a bad signal number is refused. */
	send_u32(PROTO_SIGNAL, 4, SIGTERM);
	client_expect_error(&c, 4, ESRCH);
	client_exec(&c, 5, 0, 0, 0, 0, NULL, ARGV("sleep", "30"), NULL);
	client_expect(&c, PROTO_EXEC_STARTED, 5);
	send_u32(PROTO_SIGNAL, 5, 0);
	client_expect_error(&c, 5, EINVAL);
	send_u32(PROTO_SIGNAL, 5, 1000);
	client_expect_error(&c, 5, EINVAL);
}

Test(exec, missing_binary_is_error_enoent_not_exit)
{
	struct run r = { .id = 6 };

	client_run(&c, &r, 0, 0, NULL, ARGV("/nonexistent/program"), NULL);
	cr_assert_eq(r.error, ENOENT);
	cr_assert_not(r.started);
	cr_assert_not(r.exited);
	client_run(&c, &r, 0, 0, NULL, ARGV("no-such-program-in-path"), NULL);
	cr_assert_eq(r.error, ENOENT);
	/* No EXIT follows the ERROR: the next frame is the PONG. */
	client_send(&c, client_begin(PROTO_PING, 7));
	client_expect(&c, PROTO_PONG, 7);
}

Test(exec, exec_errors_are_errnos)
{
	struct run r = { .id = 8 };
	char path[160];

	/* Not executable: EACCES, like execvp. */
	snprintf(path, sizeof(path), "%s/script", c.dir);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs("#!/bin/sh\necho no\n", f);
	fclose(f);
	client_run(&c, &r, 0, 0, NULL, ARGV(path), NULL);
	cr_assert_eq(r.error, EACCES);
	/* A cwd that does not exist. */
	client_run(&c, &r, 0, 0, "/nonexistent-dir", ARGV("true"), NULL);
	cr_assert_eq(r.error, ENOENT);
	/* An id already running. */
	client_exec(&c, 9, 0, 0, 0, 0, NULL, ARGV("sleep", "30"), NULL);
	client_expect(&c, PROTO_EXEC_STARTED, 9);
	client_exec(&c, 9, 0, 0, 0, 0, NULL, ARGV("true"), NULL);
	client_expect_error(&c, 9, EEXIST);
}

Test(exec, cwd_and_exact_env_are_applied)
{
	struct run r = { .id = 10 };
	char want[512];

	client_run(&c, &r, 0, 0, "/tmp",
		   ARGV("sh", "-c", "pwd; echo \"$FOO|${HOME-unset}|$PATH\""),
		   ARGV("FOO=bar baz"));
	cr_assert_str_eq(r.out, "/tmp\nbar baz|unset|/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n");
	run_free(&r);
	/* A PATH given is kept; no cwd means the agent's home (--home). */
	client_run(&c, &r, 0, 0, NULL, ARGV("/bin/sh", "-c", "pwd; echo $PATH"), ARGV("PATH=/bin"));
	snprintf(want, sizeof(want), "%s\n/bin\n", c.dir);
	cr_assert_str_eq(r.out, want);
	run_free(&r);
}

Test(exec, stdin_is_streamed_then_eof)
{
	struct run r = { .id = 11 };

	client_exec(&c, 11, PROTO_EXEC_STDIN, 0, 0, 0, NULL, ARGV("cat"), NULL);
	client_stdin(&c, 11, "abc", 3);
	client_stdin(&c, 11, "def\n", 4);
	client_stdin(&c, 11, "", 0);
	client_stdin(&c, 11, "ignored after EOF", 17);
	client_collect(&c, &r, 1, 5000);
	cr_assert_str_eq(r.out, "abcdef\n");
	cr_assert_eq(r.code, 0);
	run_free(&r);
	/* Without PROTO_EXEC_STDIN, stdin is /dev/null: cat ends at once. */
	r.id = 12;
	client_run(&c, &r, 0, 0, NULL, ARGV("cat"), NULL);
	cr_assert_eq(r.out_len, 0);
	cr_assert_eq(r.code, 0);
}

Test(exec, pty_is_a_terminal_of_the_given_size)
{
	struct run r = { .id = 13 };

	client_exec(&c, 13, PROTO_EXEC_PTY, 0, 33, 101, NULL,
		    ARGV("sh", "-c", "test -t 0 && test -t 1 && test -t 2 && echo tty; stty size"),
		    NULL);
	client_collect(&c, &r, 1, 5000);
	cr_assert_eq(r.code, 0, "output: %s", r.out ? r.out : "");
	cr_assert_str_eq(r.out, "tty\r\n33 101\r\n");
	cr_assert_eq(r.err_len, 0, "stderr goes to the terminal too");
	run_free(&r);
}

Test(exec, pty_resize_and_input)
{
	struct run r = { .id = 14 };
	struct proto_writer *w;

	client_exec(&c, 14, PROTO_EXEC_PTY, 0, 24, 80, NULL,
		    ARGV("sh", "-c", "stty -echo; echo ready; read x; stty size; echo \"<$x>\""), NULL);
	client_expect(&c, PROTO_EXEC_STARTED, 14);
	r.started = true;
	client_expect(&c, PROTO_STDOUT, 14);    /* "ready": stty -echo is in place */
	w = client_begin(PROTO_RESIZE, 14);
	proto_put_u16(w, 40);
	proto_put_u16(w, 120);
	client_send(&c, w);
	client_expect(&c, PROTO_OK, 14);
	client_stdin(&c, 14, "typed\n", 6);
	client_collect(&c, &r, 1, 5000);
	cr_assert_str_eq(r.out, "40 120\r\n<typed>\r\n");
	run_free(&r);
	/* RESIZE of a process without a terminal. */
	client_exec(&c, 15, 0, 0, 0, 0, NULL, ARGV("sleep", "30"), NULL);
	client_expect(&c, PROTO_EXEC_STARTED, 15);
	w = client_begin(PROTO_RESIZE, 15);
	proto_put_u16(w, 1);
	proto_put_u16(w, 1);
	client_send(&c, w);
	client_expect_error(&c, 15, ENOTTY);
}

Test(exec, timeout_kills_the_group_and_says_timeout)
{
	struct run r = { .id = 16 };

	/* The shell's child holds stdout too: the group kill must reach it. */
	client_run(&c, &r, 0, 200, NULL, ARGV("sh", "-c", "sleep 30 & sleep 30; wait"), NULL);
	cr_assert_eq(r.kind, PROTO_EXIT_TIMEOUT);
	cr_assert_eq(r.signo, SIGKILL);
	cr_assert_geq(r.duration_us, 200000);
	cr_assert_lt(r.duration_us, 2000000);
	/* A process that ends in time is not a timeout. */
	r.id = 17;
	client_run(&c, &r, 0, 5000, NULL, ARGV("true"), NULL);
	cr_assert_eq(r.kind, PROTO_EXIT_CODE);
}

Test(exec, timeout_covers_output_held_by_a_background_job)
{
	struct run r = { .id = 18 };

	/* The shell is gone at once; its background job keeps stdout open. */
	client_run(&c, &r, 0, 300, NULL, ARGV("sh", "-c", "sleep 30 & echo started"), NULL);
	cr_assert_str_eq(r.out, "started\n");
	cr_assert_eq(r.kind, PROTO_EXIT_TIMEOUT);
	cr_assert_geq(r.duration_us, 300000);
	cr_assert_lt(r.duration_us, 2000000);
	run_free(&r);
	/* A job that leaves the process group: the timeout stops waiting for it. */
	r.id = 19;
	client_run(&c, &r, 0, 300, NULL, ARGV("sh", "-c", "setsid sleep 3 & echo x"), NULL);
	cr_assert_eq(r.kind, PROTO_EXIT_TIMEOUT);
	run_free(&r);
}

Test(exec, signal_reaches_the_group_after_its_leader_exited)
{
	struct run r = { .id = 25 };

	client_exec(&c, 25, 0, 0, 0, 0, NULL, ARGV("sh", "-c", "sleep 30 & exit 3"), NULL);
	client_expect(&c, PROTO_EXEC_STARTED, 25);
	r.started = true;
	usleep(100 * 1000);
	{
		struct proto_writer *w = client_begin(PROTO_SIGNAL, 25);

		proto_put_u32(w, SIGTERM);
		client_send(&c, w);
	}
	client_expect(&c, PROTO_OK, 25);
	client_collect(&c, &r, 1, 5000);
	cr_assert_eq(r.kind, PROTO_EXIT_CODE, "the leader's own end is reported");
	cr_assert_eq(r.code, 3);
}

Test(exec, two_processes_at_once_interleave)
{
	struct run r[2] = { { .id = 20 }, { .id = 21 } };
	char *script = "for i in 1 2 3 4 5; do echo $0$i; sleep 0.05; done";

	client_exec(&c, 20, 0, 0, 0, 0, NULL, ARGV("sh", "-c", script, "a"), NULL);
	client_exec(&c, 21, 0, 0, 0, 0, NULL, ARGV("sh", "-c", script, "b"), NULL);
	client_collect(&c, r, 2, 10000);
	cr_assert_str_eq(r[0].out, "a1\na2\na3\na4\na5\n");
	cr_assert_str_eq(r[1].out, "b1\nb2\nb3\nb4\nb5\n");
	cr_assert(r[0].exited && r[1].exited);
	cr_assert_eq(r[0].frames_after_exit + r[1].frames_after_exit, 0);
	/* They ran side by side: each one's output began before the other's EXIT. */
	cr_assert_lt(r[0].first_output_seq, r[1].exit_seq);
	cr_assert_lt(r[1].first_output_seq, r[0].exit_seq);
	run_free(&r[0]);
	run_free(&r[1]);
}

Test(exec, ten_mib_of_output_arrives_complete_and_in_order)
{
	struct run r = { .id = 22 };
	size_t want_len = 0, n = 1500000;
	char *want = malloc(n * 8 + 1), num[16];

	cr_assert_not_null(want);
	for (size_t i = 1; i <= n; i++)
		want_len += (size_t)sprintf(want + want_len, "%zu\n", i);
	cr_assert_gt(want_len, 10u << 20);
	snprintf(num, sizeof(num), "%zu", n);
	client_run(&c, &r, 0, 0, NULL, ARGV("seq", "1", num), NULL);
	cr_assert_eq(r.out_len, want_len);
	cr_assert(memcmp(r.out, want, want_len) == 0, "the output differs");
	cr_assert_leq(r.max_chunk, PROTO_CHUNK);
	run_free(&r);
	free(want);
}

/* The agent's resident memory in KiB (VmRSS). */
static long agent_rss_kib(void)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)c.agent);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

Test(exec, a_host_that_does_not_read_stops_the_child_not_the_agent_memory)
{
	struct run r = { .id = 23 };
	long before = agent_rss_kib(), stalled;

	/* 32 MiB offered while the host reads nothing for 300 ms. */
	client_exec(&c, 23, 0, 0, 0, 0, NULL, ARGV("head", "-c", "33554432", "/dev/zero"), NULL);
	usleep(300 * 1000);
	stalled = agent_rss_kib();
	cr_log_info("agent RSS %ld KiB, %ld KiB while stalled", before, stalled);
	cr_assert_lt(stalled - before, 8 * 1024, "the agent grew by %ld KiB", stalled - before);
	client_collect(&c, &r, 1, 20000);
	cr_assert_eq(r.out_len, 32u << 20);
	cr_assert_eq(r.code, 0);
	/* One check over the whole output: an assert per byte costs seconds under ASan. */
	{
		const char *bad = r.out;

		while (bad < r.out + r.out_len && *bad == 0)
			bad++;
		cr_assert_eq(bad, r.out + r.out_len, "a non-zero byte at offset %td", bad - r.out);
	}
	run_free(&r);
}

Test(exec, megabytes_of_stdin_arrive_whole)
{
	struct run r = { .id = 24 };
	static uint8_t block[PROTO_CHUNK];
	long before = agent_rss_kib();

	memset(block, 'x', sizeof(block));
	client_exec(&c, 24, PROTO_EXEC_STDIN, 0, 0, 0, NULL, ARGV("wc", "-c"), NULL);
	/* 8 MiB: far more than the agent holds; it pauses reading until wc catches up. */
	for (int i = 0; i < 128; i++)
		client_stdin(&c, 24, block, sizeof(block));
	client_stdin(&c, 24, "", 0);
	cr_assert_lt(agent_rss_kib() - before, 8 * 1024);
	client_collect(&c, &r, 1, 10000);
	cr_assert_str_eq(r.out, "8388608\n");
	run_free(&r);
}
