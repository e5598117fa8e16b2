/* test_cli.c - the one front end: every command's flags, both value forms, the shared limits and every kind of mistake. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/cli.h"
#include "launch/guest_files.h"

static struct cli c;

/* argv[0] is the command's name, as main passes it. Arrays outlive the
 * assertions: c.run points into them. */
#define PARSE(cmd, err, ...) \
	cli_parse(&c, cmd, (int)(sizeof((char *[]){ "x", __VA_ARGS__ }) / sizeof(char *)), \
		  (char *[]){ "x", __VA_ARGS__ }, err, sizeof(err))

static void expect_error(enum cli_cmd cmd, const char *needle, int argc, char **argv)
{
	char err[256] = "";

	cr_assert_eq(cli_parse(&c, cmd, argc, argv, err, sizeof(err)), CLI_ERROR, "no error for '%s'",
		     needle);
	cr_assert_not_null(strstr(err, needle), "error '%s' lacks '%s'", err, needle);
	cr_assert_null(strchr(err, '\n'), "error must be one line");
}

#define EXPECT_ERROR(cmd, needle, ...) \
	expect_error(cmd, needle, (int)(sizeof((char *[]){ "x", __VA_ARGS__ }) / sizeof(char *)), \
		     (char *[]){ "x", __VA_ARGS__ })

Test(cli, boot_defaults)
{
	char err[256];

	cr_assert_eq(PARSE(CLI_BOOT, err, "--kernel", "k"), CLI_OK, "%s", err);
	cr_assert_str_eq(c.vm.kernel, "k");
	cr_assert_eq(c.vm.mem_mib, CONFIG_DEFAULT_MEM_MIB);
	cr_assert_eq(c.vm.cpus, 1);
	cr_assert_not(c.vm.console);
	cr_assert_str_eq(c.vm.cmdline, "");
	cr_assert_str_eq(c.vm.initrd, "");
	cr_assert_eq(c.vm.log_level, LOG_WARN);
	cr_assert_str_eq(c.vm.kvm_device, "/dev/kvm");
	cr_assert_eq(strlen(c.vm.id), 8);
	cr_assert_not(c.vm.vsock);
}

Test(cli, boot_takes_every_flag_in_both_forms)
{
	char err[256];

	cr_assert_eq(PARSE(CLI_BOOT, err, "--kernel=vmlinux", "--initrd", "i.cpio", "--cmdline",
			   "console=ttyS0 quiet", "--mem=1024", "--cpus", "4", "--console", "-v",
			   "--verbose", "--id", "vm-7", "--kvm-device=/dev/null", "--init-cmd", "ls",
			   "--cmdline-append", "a=b", "--vsock", "/tmp/v.sock"),
		     CLI_OK, "%s", err);
	cr_assert_str_eq(c.vm.kernel, "vmlinux");
	cr_assert_str_eq(c.vm.initrd, "i.cpio");
	cr_assert_str_eq(c.vm.cmdline, "console=ttyS0 quiet");
	cr_assert_eq(c.vm.mem_mib, 1024);
	cr_assert_eq(c.vm.cpus, 4);
	cr_assert(c.vm.console);
	cr_assert_eq(c.vm.log_level, LOG_DEBUG);
	cr_assert_str_eq(c.vm.id, "vm-7");
	cr_assert_str_eq(c.vm.kvm_device, "/dev/null");
	cr_assert_str_eq(c.vm.init_cmd, "ls");
	cr_assert_str_eq(c.vm.cmdline_append, "a=b");
	cr_assert(c.vm.vsock);
	cr_assert_str_eq(c.vm.vsock_path, "/tmp/v.sock");
}

Test(cli, help_anywhere)
{
	char err[256];

	cr_assert_eq(PARSE(CLI_BOOT, err, "--help"), CLI_HELP);
	cr_assert_eq(PARSE(CLI_BOOT, err, "--kernel", "k", "-h"), CLI_HELP);
	cr_assert_eq(PARSE(CLI_RUN, err, "--help"), CLI_HELP);
	cr_assert_eq(PARSE(CLI_CP, err, "-h"), CLI_HELP);
}

Test(cli, mistakes_are_one_clear_line)
{
	EXPECT_ERROR(CLI_BOOT, "unknown option '--bogus'", "--kernel", "k", "--bogus");
	EXPECT_ERROR(CLI_BOOT, "unknown option '--bogus'", "--bogus=3");
	EXPECT_ERROR(CLI_BOOT, "unexpected argument 'stray'", "--kernel", "k", "stray");
	EXPECT_ERROR(CLI_BOOT, "bad --mem '0': must be from 1 to 524288", "--mem", "0");
	EXPECT_ERROR(CLI_BOOT, "must be from 1 to 524288", "--mem", "999999999");
	EXPECT_ERROR(CLI_BOOT, "must be from", "--mem", "99999999999999999999999");
	EXPECT_ERROR(CLI_BOOT, "bad --mem '-5': not a whole number", "--mem", "-5");
	EXPECT_ERROR(CLI_BOOT, "bad --mem '12M': not a whole number", "--mem", "12M");
	EXPECT_ERROR(CLI_BOOT, "bad --mem '': not a whole number", "--mem=");
	EXPECT_ERROR(CLI_BOOT, "bad --mem ' 5'", "--mem", " 5");
	EXPECT_ERROR(CLI_BOOT, "bad --cpus '0'", "--cpus", "0");
	EXPECT_ERROR(CLI_BOOT, "must be from 1 to " CONFIG_CPUS_LIMIT, "--cpus", "255");
	EXPECT_ERROR(CLI_BOOT, "must be from 1 to " CONFIG_CPUS_LIMIT, "--cpus", "4294967297");
	EXPECT_ERROR(CLI_BOOT, "option --kernel needs a value", "--kernel");
	EXPECT_ERROR(CLI_BOOT, "option --console takes no value", "--console=yes");
	EXPECT_ERROR(CLI_BOOT, "bad --id", "--id", "a b");
	EXPECT_ERROR(CLI_BOOT, "bad --id", "--id", "");
	EXPECT_ERROR(CLI_BOOT, "unknown option '-x'", "-vx");
	EXPECT_ERROR(CLI_BOOT, "--vsock needs a socket path", "--vsock", "");
}

Test(cli, run_and_boot_share_one_number_parser_and_its_limits)
{
	char err[256];

	/* The same flag, the same limit, the same words: whichever command. */
	EXPECT_ERROR(CLI_RUN, "bad --mem '0': must be from 1 to 524288", "--mem", "0", "true");
	EXPECT_ERROR(CLI_RUN, "must be from 1 to " CONFIG_CPUS_LIMIT, "--cpus", "255", "true");
	cr_assert_eq(PARSE(CLI_RUN, err, "--mem", "524288", "true"), CLI_OK, "%s", err);
	cr_assert_eq(PARSE(CLI_BOOT, err, "--mem", "524288"), CLI_OK, "%s", err);
	cr_assert_eq(c.vm.mem_mib, CONFIG_MAX_MEM_MIB);
}

Test(cli, lengths_are_refused_not_truncated)
{
	static char longline[5000];

	memset(longline, 'a', sizeof(longline) - 1);
	EXPECT_ERROR(CLI_BOOT, "--cmdline is longer than 2047 bytes", "--cmdline", longline);
	EXPECT_ERROR(CLI_BOOT, "--kernel is longer than 4095 bytes", "--kernel", longline);
	EXPECT_ERROR(CLI_BOOT, "--vsock needs a socket path of 1-107 bytes", "--vsock", longline);
}

Test(cli, verbosity_steps)
{
	char err[256];

	cr_assert_eq(PARSE(CLI_BOOT, err, "-v"), CLI_OK);
	cr_assert_eq(c.vm.log_level, LOG_INFO);
	cr_assert_eq(PARSE(CLI_BOOT, err, "-vv"), CLI_OK);
	cr_assert_eq(c.vm.log_level, LOG_DEBUG);
	cr_assert_eq(PARSE(CLI_BOOT, err, "-vvvv"), CLI_OK);
	cr_assert_eq(c.vm.log_level, LOG_DEBUG);
	cr_assert_eq(c.verbose, 4);
}

Test(cli, rootfs_and_disks)
{
	char err[256];

	cr_assert_eq(PARSE(CLI_BOOT, err, "--kernel", "k", "--disk", "data.img", "--rootfs",
			   "root.ext4", "--disk", "ro.img,ro", "--disk=rw.img,rw"), CLI_OK, "%s", err);
	cr_assert_str_eq(c.vm.rootfs, "root.ext4");
	cr_assert_eq(c.vm.nr_disks, 3);
	cr_assert_str_eq(c.vm.disks[0].path, "data.img");
	cr_assert_not(c.vm.disks[0].read_only);
	cr_assert_str_eq(c.vm.disks[1].path, "ro.img");
	cr_assert(c.vm.disks[1].read_only);
	cr_assert_str_eq(c.vm.disks[2].path, "rw.img");
	cr_assert_not(c.vm.disks[2].read_only);
}

Test(cli, bad_disks)
{
	char err[256];

	EXPECT_ERROR(CLI_BOOT, "bad --disk", "--disk", ",ro");
	EXPECT_ERROR(CLI_BOOT, "bad --disk", "--disk", "a,b");
	EXPECT_ERROR(CLI_BOOT, "bad --disk", "--disk", "a.img,rx");
	EXPECT_ERROR(CLI_BOOT, "--rootfs needs an image path", "--rootfs", "");
	cr_assert_eq(PARSE(CLI_BOOT, err, "--rootfs", "r", "--disk", "1", "--disk", "2", "--disk", "3",
			   "--disk", "4", "--disk", "5", "--disk", "6", "--disk", "7"), CLI_OK, "%s", err);
	EXPECT_ERROR(CLI_BOOT, "at most 8 disks", "--rootfs", "r", "--disk", "1", "--disk", "2",
		     "--disk", "3", "--disk", "4", "--disk", "5", "--disk", "6", "--disk", "7",
		     "--disk", "8");
	EXPECT_ERROR(CLI_BOOT, "at most 8 disks", "--disk", "1", "--disk", "2", "--disk", "3",
		     "--disk", "4", "--disk", "5", "--disk", "6", "--disk", "7", "--disk", "8",
		     "--disk", "9");
}

Test(cli, run_takes_every_flag_and_the_command)
{
	char err[256];
	char put[] = "local.txt:/root/in.txt", get[] = "/root/out.txt:res:ult.txt";
	char *argv[] = { "run", "--rootfs", "r.ext4", "--mem=512", "--cpus", "2", "--timeout", "30",
			 "--env", "A=1", "--env=B=x=y", "--cwd", "/tmp", "--stdin", "-", "--put", put,
			 "--get", get, "--json", "-v", "--max-output", "64K", "--max-get-bytes=2M",
			 "--call-timeout", "9", "--", "ls" };

	cr_assert_eq(cli_parse(&c, CLI_RUN, 28, argv, err, sizeof(err)), CLI_OK, "%s", err);
	cr_assert_str_eq(c.vm.rootfs, "r.ext4");
	cr_assert_eq(c.vm.mem_mib, 512);
	cr_assert_eq(c.vm.cpus, 2);
	cr_assert_eq(c.run.timeout_s, 30);
	cr_assert_eq(c.run.nenv, 2);
	cr_assert_str_eq(c.run.env[1], "B=x=y");
	cr_assert_str_eq(c.run.cwd, "/tmp");
	cr_assert_str_eq(c.run.stdin_path, "-");
	cr_assert_str_eq(c.run.puts[0].local, "local.txt");
	cr_assert_str_eq(c.run.puts[0].guest, "/root/in.txt");
	/* GUEST:LOCAL splits at the first colon: the local name may hold more. */
	cr_assert_str_eq(c.run.gets[0].guest, "/root/out.txt");
	cr_assert_str_eq(c.run.gets[0].local, "res:ult.txt");
	cr_assert(c.run.json);
	cr_assert_eq(c.verbose, 1);
	cr_assert_eq(c.run.max_output, 64 << 10);
	cr_assert_eq(c.run.max_get_bytes, 2 << 20);
	cr_assert_eq(c.run.call_timeout_s, 9);
	cr_assert_eq(c.run.argc, 1);
	cr_assert_str_eq(c.run.argv[0], "ls");
}

Test(cli, run_defaults_bound_the_agent)
{
	char err[256];

	cr_assert_eq(PARSE(CLI_RUN, err, "true"), CLI_OK, "%s", err);
	cr_assert_eq(c.run.call_timeout_s, RUN_DEFAULT_CALL_TIMEOUT_S);
	cr_assert_eq(c.run.max_get_bytes, RUN_DEFAULT_MAX_GET_BYTES);
	cr_assert_eq(c.run.max_output, RUN_DEFAULT_MAX_OUTPUT);
	EXPECT_ERROR(CLI_RUN, "bad --max-output '0'", "--max-output", "0", "true");
	EXPECT_ERROR(CLI_RUN, "bad --max-output '1X'", "--max-output", "1X", "true");
	EXPECT_ERROR(CLI_RUN, "bad --max-get-bytes", "--max-get-bytes", "99999999999T", "true");
	EXPECT_ERROR(CLI_RUN, "bad --call-timeout '0'", "--call-timeout", "0", "true");
}

Test(cli, the_command_starts_at_the_first_non_flag)
{
	char err[256];
	char *a1[] = { "run", "--json", "sh", "-c", "echo --json" }, *a2[] = { "run", "--", "--json" };

	cr_assert_eq(cli_parse(&c, CLI_RUN, 5, a1, err, sizeof(err)), CLI_OK, "%s", err);
	cr_assert_eq(c.run.argc, 3);
	cr_assert_str_eq(c.run.argv[1], "-c");
	/* After --, even a flag-looking word is the command's. */
	cr_assert_eq(cli_parse(&c, CLI_RUN, 3, a2, err, sizeof(err)), CLI_OK, "%s", err);
	cr_assert_str_eq(c.run.argv[0], "--json");
	cr_assert_not(c.run.json);
}

Test(cli, run_mistakes)
{
	EXPECT_ERROR(CLI_RUN, "no command", "--json");
	EXPECT_ERROR(CLI_RUN, "unknown option '--bogus'", "--bogus", "ls");
	EXPECT_ERROR(CLI_RUN, "bad --timeout '0'", "--timeout", "0", "ls");
	EXPECT_ERROR(CLI_RUN, "bad --timeout '5s'", "--timeout", "5s", "ls");
	EXPECT_ERROR(CLI_RUN, "bad --env", "--env", "NOEQUALS", "ls");
	EXPECT_ERROR(CLI_RUN, "bad --env", "--env", "=v", "ls");
	EXPECT_ERROR(CLI_RUN, "takes no value", "--json=yes", "ls");
	EXPECT_ERROR(CLI_RUN, "needs a value", "--cwd");
	{
		char rel[] = "a.txt:relative/path", nocolon[] = "a.txt", empty[] = ":/x";

		EXPECT_ERROR(CLI_RUN, "absolute guest path", "--put", rel, "ls");
		EXPECT_ERROR(CLI_RUN, "bad --put", "--put", nocolon, "ls");
		EXPECT_ERROR(CLI_RUN, "bad --get", "--get", empty, "ls");
	}
}

Test(cli, jail_and_quota_flags)
{
	char err[256];

	cr_assert_eq(PARSE(CLI_RUN, err, "true"), CLI_OK, "%s", err);
	cr_assert_not(c.jail.disabled, "the jail is on by default");
	cr_assert_eq(c.jail.uid, JAIL_DEFAULT_UID);
	cr_assert_eq(c.jail.gid, JAIL_DEFAULT_GID);
	cr_assert_eq(c.jail.cpu_pct, JAIL_DEFAULT_CPU_PCT);
	cr_assert_eq(c.vm.disk_quota, CONFIG_DEFAULT_DISK_QUOTA);
	cr_assert_eq(PARSE(CLI_RUN, err, "--no-jail", "--uid", "1000", "--gid=1001", "--cpu-quota",
			   "250", "--disk-quota", "64M", "true"), CLI_OK, "%s", err);
	cr_assert(c.jail.disabled);
	cr_assert_eq(c.jail.uid, 1000);
	cr_assert_eq(c.jail.gid, 1001);
	cr_assert_eq(c.jail.cpu_pct, 250);
	cr_assert_eq(c.vm.disk_quota, 64ULL << 20);
	cr_assert_eq(PARSE(CLI_BOOT, err, "--kernel", "k", "--uid", "4321", "--disk-quota=1G"), CLI_OK,
		     "%s", err);
	cr_assert_eq(c.jail.uid, 4321);
	cr_assert_eq(PARSE(CLI_SNAPSHOT, err, "--disk-quota", "8M", "--out", "d"), CLI_OK, "%s", err);
	cr_assert_eq(c.vm.disk_quota, 8ULL << 20);
	EXPECT_ERROR(CLI_RUN, "bad --uid '0'", "--uid", "0", "true");
	EXPECT_ERROR(CLI_RUN, "bad --gid '0'", "--gid", "0", "true");
	EXPECT_ERROR(CLI_RUN, "bad --uid '4294967295'", "--uid", "4294967295", "true");
	EXPECT_ERROR(CLI_BOOT, "bad --cpu-quota '0'", "--cpu-quota", "0");
	EXPECT_ERROR(CLI_BOOT, "bad --cpu-quota '1001'", "--cpu-quota", "1001");
	EXPECT_ERROR(CLI_RUN, "bad --disk-quota '1'", "--disk-quota", "1", "true");
	EXPECT_ERROR(CLI_RUN, "bad --disk-quota 'lots'", "--disk-quota", "lots", "true");
	/* snapshot create and mcp run their VM jailed too. */
	cr_assert_eq(PARSE(CLI_SNAPSHOT, err, "--no-jail", "--uid", "77", "--out", "d"), CLI_OK, "%s", err);
	cr_assert(c.jail.disabled);
	cr_assert_eq(c.jail.uid, 77);
	cr_assert_eq(PARSE(CLI_MCP, err, "--gid", "78", "--cpu-quota", "20", "--disk-quota", "9M"), CLI_OK,
		     "%s", err);
	cr_assert_eq(c.jail.gid, 78);
	cr_assert_eq(c.jail.cpu_pct, 20);
	cr_assert_eq(c.vm.disk_quota, 9ULL << 20);
	EXPECT_ERROR(CLI_EXEC, "unknown option '--uid'", "--uid", "5", "--vsock", "s", "true");
}

Test(cli, each_command_takes_only_its_flags)
{
	char err[256];

	EXPECT_ERROR(CLI_EXEC, "unknown option '--rootfs'", "--vsock", "s", "--rootfs", "r", "ls");
	EXPECT_ERROR(CLI_EXEC, "--vsock PATH is required", "ls");
	cr_assert_eq(PARSE(CLI_EXEC, err, "--vsock", "s", "--timeout", "3", "ls"), CLI_OK, "%s", err);
	cr_assert_str_eq(c.run.vsock, "s");
	cr_assert_not(c.vm.vsock);
	EXPECT_ERROR(CLI_RUN, "unknown option '--vsock'", "--vsock", "s", "ls");
	EXPECT_ERROR(CLI_RUN, "unknown option '--console'", "--console", "ls");
	cr_assert_eq(PARSE(CLI_CP, err, "--vsock", "s", "a", ":/b"), CLI_OK, "%s", err);
	cr_assert_eq(c.run.argc, 2);
	EXPECT_ERROR(CLI_CP, "takes SRC and DST", "--vsock", "s", "a");
	EXPECT_ERROR(CLI_CP, "unknown option '--json'", "--vsock", "s", "--json", "a", ":/b");
	EXPECT_ERROR(CLI_CP, "unknown option '--tty'", "--vsock", "s", "--tty", "a", ":/b");
	EXPECT_ERROR(CLI_BOOT, "unknown option '--timeout'", "--timeout", "3");
	cr_assert_eq(PARSE(CLI_EXEC, err, "--vsock", "s", "--tty", "sh"), CLI_OK, "%s", err);
	cr_assert(c.run.tty);
}

/* bench passes the VM options run takes on to each run, in order, in
 * either form; its own options stay its own. */
Test(cli, bench_forwards_the_vm_options_and_keeps_its_own)
{
	char err[256];
	char *argv[] = { "restore", "--runs", "20", "--kernel", "k", "--no-jail", "--mode=burst:8",
			 "--mem=512", "--json", "r.json", "--", "echo", "hi" };

	cr_assert_eq(cli_parse(&c, CLI_BENCH, 13, argv, err, sizeof(err)), CLI_OK, "%s", err);
	cr_assert_eq(c.bench.runs, 20);
	cr_assert_eq(c.bench.warmup, 1, "one warm-up run by default");
	cr_assert_eq(c.bench.mode, BENCH_BURST);
	cr_assert_eq(c.bench.mode_arg, 8);
	cr_assert_str_eq(c.bench.json, "r.json");
	cr_assert_eq(c.bench.nforward, 3);
	cr_assert_str_eq(c.bench.forward[0][0], "kernel");
	cr_assert_str_eq(c.bench.forward[0][1], "k");
	cr_assert_str_eq(c.bench.forward[1][0], "no-jail");
	cr_assert_null(c.bench.forward[1][1], "a flag has no value");
	cr_assert_str_eq(c.bench.forward[2][0], "mem");
	cr_assert_str_eq(c.bench.forward[2][1], "512");
	cr_assert_eq(c.run.argc, 2);
	cr_assert_str_eq(c.run.argv[0], "echo");

	cr_assert_eq(PARSE(CLI_BENCH, err, "--mode", "staggered:250", "--warmup", "0"), CLI_OK, "%s",
		     err);
	cr_assert_eq(c.bench.mode, BENCH_STAGGERED);
	cr_assert_eq(c.bench.mode_arg, 250);
	cr_assert_eq(c.bench.warmup, 0);
	cr_assert_eq(c.run.argc, 0, "CMD is optional");
	cr_assert_eq(c.bench.nforward, 0);
	cr_assert_eq(PARSE(CLI_BENCH, err, "--mode", "sequential"), CLI_OK, "%s", err);
	cr_assert_eq(c.bench.mode, BENCH_SEQUENTIAL);

	EXPECT_ERROR(CLI_BENCH, "bad --runs '0'", "--runs", "0");
	EXPECT_ERROR(CLI_BENCH, "bad --runs '100001'", "--runs", "100001");
	EXPECT_ERROR(CLI_BENCH, "bad --mode 'burst'", "--mode", "burst");
	EXPECT_ERROR(CLI_BENCH, "bad --mode staggered:MS 'x'", "--mode", "staggered:x");
	EXPECT_ERROR(CLI_BENCH, "bad --mode burst:N '257'", "--mode", "burst:257");
	EXPECT_ERROR(CLI_BENCH, "unknown option '--put'", "--put", "a:/b");
	EXPECT_ERROR(CLI_BENCH, "unknown option '--vsock'", "--vsock", "s");
	EXPECT_ERROR(CLI_COMPARE, "takes two files", "a.json");
	EXPECT_ERROR(CLI_COMPARE, "unknown option '--runs'", "--runs", "3", "a", "b");
	cr_assert_eq(PARSE(CLI_COMPARE, err, "--svg", "ab.svg", "a.json", "b.json"), CLI_OK, "%s", err);
	cr_assert_eq(c.run.argc, 2);
}

/* exec --root DIR --user UID[:GID]: a container's root in the guest. */
Test(cli, exec_root_and_user)
{
	char err[256];

	cr_assert_eq(PARSE(CLI_EXEC, err, "--vsock", "s", "ls"), CLI_OK, "%s", err);
	cr_assert_null(c.run.root);
	cr_assert_not(c.run.has_user);
	cr_assert_eq(PARSE(CLI_EXEC, err, "--vsock", "s", "--root", "/run/mayfly/rootfs", "ls"),
		     CLI_OK, "%s", err);
	cr_assert_str_eq(c.run.root, "/run/mayfly/rootfs");
	cr_assert_not(c.run.has_user);
	cr_assert_eq(PARSE(CLI_EXEC, err, "--vsock", "s", "--root=/", "--user", "1000", "ls"),
		     CLI_OK, "%s", err);
	cr_assert(c.run.has_user && c.run.uid == 1000 && c.run.gid == 0);
	cr_assert_eq(PARSE(CLI_EXEC, err, "--vsock", "s", "--user=0:4294967294", "--root", "/r",
			   "ls"), CLI_OK, "%s", err);
	cr_assert(c.run.uid == 0 && c.run.gid == 4294967294u);
	EXPECT_ERROR(CLI_EXEC, "--user goes with --root", "--vsock", "s", "--user", "5", "ls");
	EXPECT_ERROR(CLI_EXEC, "bad --root 'rel'", "--vsock", "s", "--root", "rel", "ls");
	EXPECT_ERROR(CLI_EXEC, "bad --root '/a/../b'", "--vsock", "s", "--root", "/a/../b", "ls");
	EXPECT_ERROR(CLI_EXEC, "bad --root '/a/'", "--vsock", "s", "--root", "/a/", "ls");
	EXPECT_ERROR(CLI_EXEC, "bad --user '4294967295'", "--vsock", "s", "--root", "/",
		     "--user", "4294967295", "ls");
	EXPECT_ERROR(CLI_EXEC, "bad --user 'x'", "--vsock", "s", "--root", "/", "--user", "1:x", "ls");
	EXPECT_ERROR(CLI_EXEC, "bad --user ''", "--vsock", "s", "--root", "/", "--user", ":1", "ls");
	EXPECT_ERROR(CLI_EXEC, "want UID or UID:GID", "--vsock", "s", "--root", "/", "--user",
		     "12345678901234567890", "ls");
	/* Only exec: run's VM has no container root (and its --root abbreviates --rootfs). */
	EXPECT_ERROR(CLI_RUN, "unknown option '--user'", "--user", "1", "ls");
}

/* cmd's --help text, in buf. */
static const char *usage_text(enum cli_cmd cmd, char *buf, size_t len)
{
	FILE *f = fmemopen(buf, len, "w");

	cr_assert_not_null(f);
	cli_usage(cmd, f);
	fclose(f);
	return buf;
}

Test(cli, usage_lists_each_commands_own_options)
{
	char buf[8192];

	usage_text(CLI_RUN, buf, sizeof(buf));
	cr_assert_not_null(strstr(buf, "--max-output BYTES"));
	cr_assert_not_null(strstr(buf, "--put LOCAL:GUEST"));
	cr_assert_null(strstr(buf, "--console"));
	usage_text(CLI_BOOT, buf, sizeof(buf));
	cr_assert_not_null(strstr(buf, "--console"));
	cr_assert_null(strstr(buf, "--put"));
}

/* mcp caps the output and file limits at one message's worth: its help must
 * not promise run's 256M default without saying so. */
Test(cli, mcp_usage_says_its_output_cap)
{
	char buf[8192];

	cr_assert_not_null(strstr(usage_text(CLI_MCP, buf, sizeof(buf)), "capped at 16M"));
}

static void touch(const char *dir, const char *name)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fclose(fopen(path, "w"));
}

static void rm(const char *dir, const char *name)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	unlink(path);
}

Test(guest_files, default_guest_from_env)
{
	char dir[] = "/tmp/mayfly-guest-XXXXXX", err[256], path[4096];

	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(PARSE(CLI_BOOT, err, "--mem", "64"), CLI_OK);
	cr_assert_str_eq(c.vm.kernel, "");
	/* An empty guest dir is not silently accepted... */
	setenv("MAYFLY_GUEST_DIR", "/nonexistent-mayfly", 1);
	cr_assert_eq(guest_files_resolve(&c.vm, err, sizeof(err)), -ENOENT);
	cr_assert_not_null(strstr(err, "tools/build-guest"));
	/* ...and a dir with both files provides both defaults. */
	setenv("MAYFLY_GUEST_DIR", dir, 1);
	touch(dir, CONFIG_DEFAULT_KERNEL);
	touch(dir, "initramfs.cpio.gz");
	cr_assert_eq(guest_files_resolve(&c.vm, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(strncmp(c.vm.kernel, dir, strlen(dir)), 0);
	snprintf(path, sizeof(path), "%s/initramfs.cpio.gz", dir);
	cr_assert_str_eq(c.vm.initrd, path);
	/* An explicit --kernel wins and gets no default initrd... */
	cr_assert_eq(PARSE(CLI_BOOT, err, "--kernel", "k"), CLI_OK);
	cr_assert_eq(guest_files_resolve(&c.vm, err, sizeof(err)), 0);
	cr_assert_str_eq(c.vm.kernel, "k");
	cr_assert_str_eq(c.vm.initrd, "");
	/* ...and a rootfs is the root: no initramfs either. */
	cr_assert_eq(PARSE(CLI_BOOT, err, "--rootfs", "root.ext4"), CLI_OK);
	cr_assert_eq(guest_files_resolve(&c.vm, err, sizeof(err)), 0);
	cr_assert_neq(c.vm.kernel[0], '\0');
	cr_assert_str_eq(c.vm.initrd, "");
	rm(dir, CONFIG_DEFAULT_KERNEL);
	rm(dir, "initramfs.cpio.gz");
	rmdir(dir);
	unsetenv("MAYFLY_GUEST_DIR");
}

/* --rootfs agent|minimal|PATH: the names find the default guest's images, the
 * default is the agent image once built, a path is kept as given. */
Test(guest_files, rootfs_names_and_default)
{
	char dir[] = "/tmp/mayfly-guest-XXXXXX", err[256], path[4096];

	cr_assert_not_null(mkdtemp(dir));
	setenv("MAYFLY_GUEST_DIR", dir, 1);
	touch(dir, "rootfs.ext4");
	/* No agent image yet: naming it fails with how to build it... */
	cr_assert_eq(PARSE(CLI_RUN, err, "--rootfs", "agent", "true"), CLI_OK);
	cr_assert_eq(guest_files_rootfs(&c.vm, true, err, sizeof(err)), -ENOENT);
	cr_assert_not_null(strstr(err, "tools/build-guest --agent"), "%s", err);
	/* ...and the default is the minimal one. */
	cr_assert_eq(PARSE(CLI_RUN, err, "true"), CLI_OK);
	cr_assert_eq(guest_files_rootfs(&c.vm, true, err, sizeof(err)), 0, "%s", err);
	snprintf(path, sizeof(path), "%s/rootfs.ext4", dir);
	cr_assert_str_eq(c.vm.rootfs, path);
	/* Once built, the agent image is the default; minimal still names the other. */
	touch(dir, "agent.ext4");
	cr_assert_eq(PARSE(CLI_RUN, err, "true"), CLI_OK);
	cr_assert_eq(guest_files_rootfs(&c.vm, true, err, sizeof(err)), 0, "%s", err);
	snprintf(path, sizeof(path), "%s/agent.ext4", dir);
	cr_assert_str_eq(c.vm.rootfs, path);
	cr_assert_eq(PARSE(CLI_RUN, err, "--rootfs", "minimal", "true"), CLI_OK);
	cr_assert_eq(guest_files_rootfs(&c.vm, true, err, sizeof(err)), 0, "%s", err);
	snprintf(path, sizeof(path), "%s/rootfs.ext4", dir);
	cr_assert_str_eq(c.vm.rootfs, path);
	/* A path is a path; boot resolves names but picks no default root. */
	cr_assert_eq(PARSE(CLI_RUN, err, "--rootfs", "./agent", "true"), CLI_OK);
	cr_assert_eq(guest_files_rootfs(&c.vm, true, err, sizeof(err)), 0);
	cr_assert_str_eq(c.vm.rootfs, "./agent");
	cr_assert_eq(PARSE(CLI_BOOT, err, "--kernel", "k"), CLI_OK);
	cr_assert_eq(guest_files_resolve(&c.vm, err, sizeof(err)), 0);
	cr_assert_str_eq(c.vm.rootfs, "");
	cr_assert_eq(PARSE(CLI_BOOT, err, "--kernel", "k", "--rootfs", "agent"), CLI_OK);
	cr_assert_eq(guest_files_resolve(&c.vm, err, sizeof(err)), 0, "%s", err);
	snprintf(path, sizeof(path), "%s/agent.ext4", dir);
	cr_assert_str_eq(c.vm.rootfs, path);
	rm(dir, "agent.ext4");
	rm(dir, "rootfs.ext4");
	rmdir(dir);
	unsetenv("MAYFLY_GUEST_DIR");
}

Test(cli, allow_net_and_resolve_fill_the_policy)
{
	char err[256] = "";

	cr_assert_eq(PARSE(CLI_RUN, err, "--allow-net", "pypi.org", "--allow-net=*.test:443",
			   "--resolve", "a.test:127.0.0.1", "--", "true"), CLI_OK, "%s", err);
	cr_assert_eq(c.net.nr_rules, 2);
	cr_assert_str_eq(c.net.rules[1].host, "test");
	cr_assert_eq(c.net.rules[1].port, 443);
	cr_assert_eq(c.net.nr_resolves, 1);
	cr_assert_eq(PARSE(CLI_RUN, err, "--", "true"), CLI_OK);
	cr_assert_eq(c.net.nr_rules, 0, "no rule: no network");
	cr_assert_eq(PARSE(CLI_BOOT, err, "--vsock", "s", "--allow-net", "10.0.0.0/8"), CLI_OK,
		     "%s", err);
	EXPECT_ERROR(CLI_BOOT, "--allow-net needs --vsock", "--allow-net", "a.test");
	EXPECT_ERROR(CLI_RUN, "bad --allow-net", "--allow-net", "a.test:99999", "--", "true");
	EXPECT_ERROR(CLI_EXEC, "unknown option '--allow-net'", "--vsock", "s", "--allow-net",
		     "a.test", "--", "true");
}

/* boot --audit: the VM's connection attempts (serve passes its own log on to
 * each sandbox's boot). */
Test(cli, boot_takes_an_audit_log_for_its_connection_attempts)
{
	char err[256] = "";

	cr_assert_eq(PARSE(CLI_BOOT, err, "--vsock", "s", "--allow-net", "a.test", "--audit",
			   "/tmp/a.jsonl"), CLI_OK, "%s", err);
	cr_assert_str_eq(c.run.audit_path, "/tmp/a.jsonl");
	EXPECT_ERROR(CLI_BOOT, "--audit", "--vsock", "s", "--audit", "");
}

/* snapshot create (for its --setup commands) and mcp (its one sandbox) take
 * the same rules, through the same parser and limits. */
Test(cli, snapshot_and_mcp_take_the_network_rules)
{
	char err[256] = "";

	cr_assert_eq(PARSE(CLI_SNAPSHOT, err, "--allow-net", "pypi.org:443", "--resolve",
			   "pypi.org:127.0.0.1", "--out", "d"), CLI_OK, "%s", err);
	cr_assert_eq(c.net.nr_rules, 1);
	cr_assert_eq(c.net.rules[0].port, 443);
	cr_assert_eq(c.net.nr_resolves, 1);
	cr_assert_eq(PARSE(CLI_MCP, err, "--allow-net", "*.example.com"), CLI_OK, "%s", err);
	cr_assert_eq(c.net.nr_rules, 1);
	cr_assert_eq(c.net.rules[0].kind, NET_RULE_SUFFIX);
	EXPECT_ERROR(CLI_SNAPSHOT, "bad --allow-net", "--allow-net", "a..test", "--out", "d");
	EXPECT_ERROR(CLI_MCP, "--resolve goes with --allow-net", "--resolve", "a.test:10.0.0.1");
	EXPECT_ERROR(CLI_PAUSE, "unknown option '--allow-net'", "--vsock", "s", "--out", "d",
		     "--allow-net", "a.test");
}
