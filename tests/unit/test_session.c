/* test_session.c - the host end of one command through the agent, against a fake agent that lies. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/session.h"

static struct agent_client *client;
static int agent_fd = -1;

static void setup(void)
{
	int sv[2];

	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	client = calloc(1, sizeof(*client));
	cr_assert_not_null(client);
	client->fd = sv[0];
	client->next_id = 1;
	agent_fd = sv[1];
}

static void teardown(void)
{
	agent_client_close(client);
	free(client);
	if (agent_fd >= 0)
		close(agent_fd);
}

TestSuite(session, .init = setup, .fini = teardown);

/* The fake agent's frames are queued before session_exec runs (the
 * socket buffers them); the command's id is 1. */
static void agent_sends(const void *bytes, size_t len)
{
	cr_assert_eq(write(agent_fd, bytes, len), (ssize_t)len);
}

static void agent_frame(uint8_t type, void (*fill)(struct proto_writer *))
{
	static uint8_t buf[4096];
	struct proto_writer w;
	int len;

	proto_begin(&w, buf, sizeof(buf), type, 1);
	if (fill)
		fill(&w);
	len = proto_end(&w);
	cr_assert_gt(len, 0);
	agent_sends(buf, (size_t)len);
}

static void run(struct exec_result *res)
{
	char *argv[] = { "true", NULL };
	struct exec_spec spec = { .argv = argv, .argc = 1, .stdin_fd = -1, .signal_fd = -1 };

	session_exec(client, &spec, res);
}

static void fill_pid(struct proto_writer *w) { proto_put_u32(w, 42); }
static void fill_out(struct proto_writer *w) { proto_put_bytes(w, "hi\n", 3); }
static void fill_exit3(struct proto_writer *w)
{
	proto_put_u32(w, PROTO_EXIT_CODE);
	proto_put_u32(w, 3);
	proto_put_u32(w, 0);
	proto_put_u64(w, 1000);
}
static void fill_exit_short(struct proto_writer *w) { proto_put_u32(w, PROTO_EXIT_CODE); }
static void fill_signal(struct proto_writer *w)
{
	proto_put_u32(w, PROTO_EXIT_SIGNAL);
	proto_put_u32(w, 0);
	proto_put_u32(w, 0x1234567);   /* a signal number no system has */
	proto_put_u64(w, 0);
}
static void fill_enoent(struct proto_writer *w)
{
	proto_put_u32(w, 2);
	proto_put_str(w, "no such program");
}

Test(session, an_honest_run_returns_the_command_code)
{
	struct exec_result res;

	agent_frame(PROTO_EXEC_STARTED, fill_pid);
	agent_frame(PROTO_STDOUT, fill_out);
	agent_frame(PROTO_EXIT, fill_exit3);
	run(&res);
	cr_assert_eq(res.exit_code, 3, "%s", res.error);
	cr_assert_neq(res.started_ns, 0);
	cr_assert_neq(res.ended_ns, 0);
}

Test(session, a_missing_program_is_127)
{
	struct exec_result res;

	agent_frame(PROTO_ERROR, fill_enoent);
	run(&res);
	cr_assert_eq(res.exit_code, RUN_EXIT_NOTFOUND);
	cr_assert_not_null(strstr(res.error, "no such program"), "%s", res.error);
}

Test(session, a_truncated_exit_is_an_agent_failure)
{
	struct exec_result res;

	agent_frame(PROTO_EXEC_STARTED, fill_pid);
	agent_frame(PROTO_EXIT, fill_exit_short);
	run(&res);
	cr_assert_eq(res.exit_code, RUN_EXIT_AGENT);
	cr_assert_not_null(strstr(res.error, "malformed"), "%s", res.error);
}

Test(session, an_absurd_signal_number_still_maps_into_128_to_255)
{
	struct exec_result res;

	agent_frame(PROTO_EXIT, fill_signal);
	run(&res);
	cr_assert_geq(res.exit_code, 128);
	cr_assert_leq(res.exit_code, 255);
}

Test(session, an_oversized_frame_length_is_an_agent_failure)
{
	uint8_t hdr[PROTO_HEADER_LEN] = { 0xff, 0xff, 0xff, 0x7f, PROTO_VERSION, PROTO_STDOUT };
	struct exec_result res;

	agent_sends(hdr, sizeof(hdr));
	run(&res);
	cr_assert_eq(res.exit_code, RUN_EXIT_AGENT);
}

Test(session, an_agent_that_hangs_up_is_an_agent_failure)
{
	struct exec_result res;

	agent_frame(PROTO_EXEC_STARTED, fill_pid);
	close(agent_fd);
	agent_fd = -1;
	run(&res);
	/* Whether the EXEC write or the read notices first, it is the agent's failure. */
	cr_assert_eq(res.exit_code, RUN_EXIT_AGENT);
	cr_assert_neq(res.error[0], '\0');
}

Test(session, frames_for_other_requests_are_ignored)
{
	struct exec_result res;
	uint8_t buf[64];
	struct proto_writer w;
	int len;

	/* Id 7 is not ours: its EXIT must not end our command. */
	proto_begin(&w, buf, sizeof(buf), PROTO_EXIT, 7);
	fill_exit3(&w);
	len = proto_end(&w);
	agent_sends(buf, (size_t)len);
	agent_frame(PROTO_EXIT, fill_signal);
	run(&res);
	cr_assert_geq(res.exit_code, 128);
}
