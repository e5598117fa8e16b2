/* test_run_opts.c - flags of mayfly run / exec / cp: what each mode takes, and every kind of mistake. */
#include <criterion/criterion.h>
#include <string.h>

#include "agent/run_opts.h"

#define ARGS(...) (char *[]){ __VA_ARGS__ }
#define N(...) ((int)(sizeof((char *[]){ __VA_ARGS__ }) / sizeof(char *)))
#define PARSE(o, mode, err, ...) \
	run_opts_parse(o, mode, N(__VA_ARGS__), ARGS(__VA_ARGS__), err, sizeof(err))

Test(run_opts, run_takes_every_flag_and_the_command)
{
	struct run_opts o;
	char err[256];
	char put[] = "local.txt:/root/in.txt", get[] = "/root/out.txt:res:ult.txt";

	/* o points into argv: it must outlive the assertions (no compound literal). */
	char *argv[] = { "--rootfs", "r.ext4", "--mem=512", "--cpus", "2", "--timeout", "30",
			 "--env", "A=1", "--env=B=x=y", "--cwd", "/tmp", "--stdin", "-", "--put", put,
			 "--get", get, "--json", "-v", "--", "ls" };
	int rc = run_opts_parse(&o, RUN_MODE_RUN, 22, argv, err, sizeof(err));

	cr_assert_eq(rc, 0, "%s", err);
	cr_assert_str_eq(o.rootfs, "r.ext4");
	cr_assert_eq(o.mem_mib, 512);
	cr_assert_eq(o.cpus, 2);
	cr_assert_eq(o.timeout_s, 30);
	cr_assert_eq(o.nenv, 2);
	cr_assert_str_eq(o.env[1], "B=x=y");
	cr_assert_str_eq(o.cwd, "/tmp");
	cr_assert_str_eq(o.stdin_path, "-");
	cr_assert_str_eq(o.puts[0].local, "local.txt");
	cr_assert_str_eq(o.puts[0].guest, "/root/in.txt");
	/* GUEST:LOCAL splits at the first colon: the local name may hold more. */
	cr_assert_str_eq(o.gets[0].guest, "/root/out.txt");
	cr_assert_str_eq(o.gets[0].local, "res:ult.txt");
	cr_assert(o.json);
	cr_assert_eq(o.verbose, 1);
	cr_assert_eq(o.argc, 1);
	cr_assert_str_eq(o.argv[0], "ls");
}

Test(run_opts, the_command_starts_at_the_first_non_flag)
{
	struct run_opts o;
	char err[256];

	char *a1[] = { "--json", "sh", "-c", "echo --json" }, *a2[] = { "--", "--json" };
	int rc = run_opts_parse(&o, RUN_MODE_RUN, 4, a1, err, sizeof(err));

	cr_assert_eq(rc, 0, "%s", err);
	cr_assert_eq(o.argc, 3);
	cr_assert_str_eq(o.argv[1], "-c");
	/* After --, even a flag-looking word is the command's. */
	rc = run_opts_parse(&o, RUN_MODE_RUN, 2, a2, err, sizeof(err));
	cr_assert_eq(rc, 0, "%s", err);
	cr_assert_str_eq(o.argv[0], "--json");
	cr_assert_not(o.json);
}

Test(run_opts, mistakes_are_one_clear_line)
{
	struct run_opts o;
	char err[256];

	cr_assert_eq(PARSE(&o, RUN_MODE_RUN, err, "--json"), -1);
	cr_assert_not_null(strstr(err, "no command"), "%s", err);
	cr_assert_eq(PARSE(&o, RUN_MODE_RUN, err, "--bogus", "ls"), -1);
	cr_assert_not_null(strstr(err, "unknown option '--bogus'"), "%s", err);
	cr_assert_eq(PARSE(&o, RUN_MODE_RUN, err, "--timeout", "0", "ls"), -1);
	cr_assert_eq(PARSE(&o, RUN_MODE_RUN, err, "--timeout", "5s", "ls"), -1);
	cr_assert_eq(PARSE(&o, RUN_MODE_RUN, err, "--cpus", "9999", "ls"), -1);
	cr_assert_eq(PARSE(&o, RUN_MODE_RUN, err, "--mem", "-1", "ls"), -1);
	cr_assert_eq(PARSE(&o, RUN_MODE_RUN, err, "--env", "NOEQUALS", "ls"), -1);
	cr_assert_eq(PARSE(&o, RUN_MODE_RUN, err, "--env", "=v", "ls"), -1);
	cr_assert_eq(PARSE(&o, RUN_MODE_RUN, err, "--json=yes", "ls"), -1);
	cr_assert_eq(PARSE(&o, RUN_MODE_RUN, err, "--cwd"), -1);
	cr_assert_not_null(strstr(err, "needs a value"), "%s", err);
	{
		char rel[] = "a.txt:relative/path", nocolon[] = "a.txt", empty[] = ":/x";

		cr_assert_eq(PARSE(&o, RUN_MODE_RUN, err, "--put", rel, "ls"), -1);
		cr_assert_not_null(strstr(err, "absolute guest path"), "%s", err);
		cr_assert_eq(PARSE(&o, RUN_MODE_RUN, err, "--put", nocolon, "ls"), -1);
		cr_assert_eq(PARSE(&o, RUN_MODE_RUN, err, "--get", empty, "ls"), -1);
	}
}

Test(run_opts, each_mode_takes_only_its_flags)
{
	struct run_opts o;
	char err[256];

	cr_assert_eq(PARSE(&o, RUN_MODE_EXEC, err, "--vsock", "s", "--rootfs", "r", "ls"), -1);
	cr_assert_not_null(strstr(err, "--rootfs"), "%s", err);
	cr_assert_eq(PARSE(&o, RUN_MODE_EXEC, err, "ls"), -1);
	cr_assert_not_null(strstr(err, "--vsock"), "%s", err);
	cr_assert_eq(PARSE(&o, RUN_MODE_EXEC, err, "--vsock", "s", "--timeout", "3", "ls"), 0, "%s", err);
	cr_assert_eq(PARSE(&o, RUN_MODE_RUN, err, "--vsock", "s", "ls"), -1);
	{
		char *cp[] = { "--vsock", "s", "a", ":/b" };
		int rc = run_opts_parse(&o, RUN_MODE_CP, 4, cp, err, sizeof(err));

		cr_assert_eq(rc, 0, "%s", err);
		cr_assert_eq(o.argc, 2);
	}
	cr_assert_eq(PARSE(&o, RUN_MODE_CP, err, "--vsock", "s", "a"), -1);
	cr_assert_eq(PARSE(&o, RUN_MODE_CP, err, "--vsock", "s", "--json", "a", ":/b"), -1);
	cr_assert_eq(PARSE(&o, RUN_MODE_CP, err, "--vsock", "s", "--tty", "a", ":/b"), -1);
	{
		char *ex[] = { "--vsock", "s", "--tty", "sh" };
		int rc = run_opts_parse(&o, RUN_MODE_EXEC, 4, ex, err, sizeof(err));

		cr_assert_eq(rc, 0, "%s", err);
		cr_assert(o.tty);
	}
	cr_assert_eq(PARSE(&o, RUN_MODE_RUN, err, "--help"), 1);
	cr_assert_eq(PARSE(&o, RUN_MODE_CP, err, "-h"), 1);
}
