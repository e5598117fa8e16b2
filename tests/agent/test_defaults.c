/* test_defaults.c - mayfly-agent --defaults: an imported image's ENV, WORKDIR and USER applied to every EXEC. */
#include <criterion/criterion.h>
#include <string.h>
#include <unistd.h>

#include "client.h"

static struct client c;

static void teardown(void)
{
	client_stop(&c);
}

TestSuite(defaults, .fini = teardown, .timeout = 30);

#define ARGV(...) ((char *const[]){ __VA_ARGS__, NULL })

Test(defaults, env_is_the_base_and_the_request_wins)
{
	struct run r = { .id = 1 };

	client_start_defaults(&c, "ENV GREETING=from the image\nENV KEEP=kept\n");
	client_run(&c, &r, 0, 0, NULL, ARGV("sh", "-c", "echo \"$GREETING|$KEEP|${PATH:+path}\""),
		   (char *const[]){ "GREETING=from the call", NULL });
	cr_assert_str_eq(r.out, "from the call|kept|path\n");
	run_free(&r);
}

Test(defaults, workdir_is_the_default_cwd_and_cwd_wins)
{
	struct run r = { .id = 1 }, r2 = { .id = 2 };

	client_start_defaults(&c, "WORKDIR /usr\n");
	client_run(&c, &r, 0, 0, NULL, ARGV("pwd"), NULL);
	cr_assert_str_eq(r.out, "/usr\n");
	client_run(&c, &r2, 0, 0, "/", ARGV("pwd"), NULL);
	cr_assert_str_eq(r2.out, "/\n");
	run_free(&r);
	run_free(&r2);
}

Test(defaults, user_runs_the_process_as_that_uid_and_gid)
{
	struct run r = { .id = 1 };

	if (geteuid() != 0)
		cr_skip_test("needs root to change uid");
	client_start_defaults(&c, "USER 65534:65533\n");
	client_run(&c, &r, 0, 0, "/", ARGV("sh", "-c", "echo $(id -u):$(id -g):$(id -G)"), NULL);
	cr_assert_str_eq(r.out, "65534:65533:65533\n");
	run_free(&r);
}

Test(defaults, bad_lines_are_dropped_and_the_agent_serves)
{
	struct run r = { .id = 1 };

	client_start_defaults(&c, "FROB x\nENV =nokey\nUSER no-such-user-here\nENV OK=1\n");
	client_run(&c, &r, 0, 0, NULL, ARGV("sh", "-c", "echo \"$OK\"; id -u"), NULL);
	cr_assert_str_eq(r.out, geteuid() == 0 ? "1\n0\n" : r.out);
	cr_assert_eq(strncmp(r.out, "1\n", 2), 0);
	run_free(&r);
}
