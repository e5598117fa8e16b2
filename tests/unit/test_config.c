/* test_config.c - `mayfly boot` flags: defaults, both value forms, and every kind of bad input. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

static enum config_result parse(struct vm_config *cfg, char *err, int argc, char **argv)
{
	return config_parse(cfg, argc, argv, err, 256);
}

#define PARSE(cfg, err, ...) \
	parse(cfg, err, (int)(sizeof((char *[]){ __VA_ARGS__ }) / sizeof(char *)), \
	      (char *[]){ __VA_ARGS__ })

Test(config, defaults)
{
	struct vm_config cfg;
	char err[256];

	cr_assert_eq(PARSE(&cfg, err, "--kernel", "k"), CONFIG_OK);
	cr_assert_str_eq(cfg.kernel_path, "k");
	cr_assert_eq(cfg.mem_mib, CONFIG_DEFAULT_MEM_MIB);
	cr_assert_eq(cfg.cpus, 1);
	cr_assert_not(cfg.console);
	cr_assert_null(cfg.cmdline);
	cr_assert_null(cfg.initrd_path);
	cr_assert_eq(cfg.log_level, LOG_WARN);
	cr_assert_str_eq(cfg.kvm_device, "/dev/kvm");
	cr_assert_eq(strlen(cfg.id), 8);
}

Test(config, all_flags_both_forms)
{
	struct vm_config cfg;
	char err[256];

	cr_assert_eq(PARSE(&cfg, err, "--kernel=vmlinux", "--initrd", "i.cpio", "--cmdline",
			   "console=ttyS0 quiet", "--mem=1024", "--cpus", "4", "--console",
			   "-v", "--verbose", "--id", "vm-7", "--kvm-device=/dev/null"),
		     CONFIG_OK, "%s", err);
	cr_assert_str_eq(cfg.kernel_path, "vmlinux");
	cr_assert_str_eq(cfg.initrd_path, "i.cpio");
	cr_assert_str_eq(cfg.cmdline, "console=ttyS0 quiet");
	cr_assert_eq(cfg.mem_mib, 1024);
	cr_assert_eq(cfg.cpus, 4);
	cr_assert(cfg.console);
	cr_assert_eq(cfg.log_level, LOG_DEBUG);
	cr_assert_str_eq(cfg.id, "vm-7");
	cr_assert_str_eq(cfg.kvm_device, "/dev/null");
}

Test(config, help)
{
	struct vm_config cfg;
	char err[256];

	cr_assert_eq(PARSE(&cfg, err, "--help"), CONFIG_HELP);
	cr_assert_eq(PARSE(&cfg, err, "--kernel", "k", "-h"), CONFIG_HELP);
}

static void expect_error(const char *needle, int argc, char **argv)
{
	struct vm_config cfg;
	char err[256] = "";

	cr_assert_eq(config_parse(&cfg, argc, argv, err, sizeof(err)), CONFIG_ERROR);
	cr_assert_not_null(strstr(err, needle), "error '%s' lacks '%s'", err, needle);
	cr_assert_null(strchr(err, '\n'), "error must be one line");
}

#define EXPECT_ERROR(needle, ...) \
	expect_error(needle, (int)(sizeof((char *[]){ __VA_ARGS__ }) / sizeof(char *)), \
		     (char *[]){ __VA_ARGS__ })

Test(config, bad_input_is_one_clear_line)
{
	EXPECT_ERROR("unknown option '--bogus'", "--kernel", "k", "--bogus");
	EXPECT_ERROR("unknown option 'stray'", "--kernel", "k", "stray");
	EXPECT_ERROR("--mem must be between", "--kernel", "k", "--mem", "0");
	EXPECT_ERROR("--mem must be between", "--kernel", "k", "--mem", "999999999");
	EXPECT_ERROR("bad number", "--kernel", "k", "--mem", "99999999999999999999999");
	EXPECT_ERROR("bad number '-5'", "--kernel", "k", "--mem", "-5");
	EXPECT_ERROR("bad number '12M'", "--kernel", "k", "--mem", "12M");
	EXPECT_ERROR("bad number ''", "--kernel", "k", "--mem=");
	EXPECT_ERROR("--cpus must be between", "--kernel", "k", "--cpus", "0");
	EXPECT_ERROR("--cpus must be between", "--kernel", "k", "--cpus", "255");
	EXPECT_ERROR("--cpus must be between", "--kernel", "k", "--cpus", "4294967297");
	EXPECT_ERROR("needs a value", "--kernel");
	EXPECT_ERROR("takes no value", "--kernel", "k", "--console=yes");
	EXPECT_ERROR("bad --id", "--kernel", "k", "--id", "a b");
	EXPECT_ERROR("bad --id", "--kernel", "k", "--id", "");
}

Test(config, cmdline_length_is_bounded)
{
	static char longline[5000];

	memset(longline, 'a', sizeof(longline) - 1);
	EXPECT_ERROR("command line is longer", "--kernel", "k", "--cmdline", longline);
	longline[1500] = '\0';
	EXPECT_ERROR("command line is longer", "--kernel", "k", "--cmdline", longline,
		     "--cmdline-append", longline);
	/* base64 grows the command by 4/3: 1500 bytes no longer fit, 1400 do. */
	EXPECT_ERROR("command line is longer", "--kernel", "k", "--init-cmd", longline);
	longline[1400] = '\0';
	{
		struct vm_config cfg;
		char err[256];

		cr_assert_eq(PARSE(&cfg, err, "--kernel", "k", "--init-cmd", longline), CONFIG_OK);
	}
}

Test(config, command_line_composition)
{
	struct vm_config cfg;
	char err[256];

	cr_assert_eq(PARSE(&cfg, err, "--kernel", "k"), CONFIG_OK);
	cr_assert_str_eq(cfg.full_cmdline, CONFIG_DEFAULT_CMDLINE);
	cr_assert_eq(PARSE(&cfg, err, "--kernel", "k", "--cmdline", "a=1", "--cmdline-append",
			   "b=2"), CONFIG_OK);
	cr_assert_str_eq(cfg.full_cmdline, "a=1 b=2");
	/* Spaces, quotes and '=' survive as one parameter; padding both ways. */
	cr_assert_eq(PARSE(&cfg, err, "--kernel", "k", "--cmdline", "x", "--init-cmd",
			   "echo \"hi\"; exit 3"), CONFIG_OK);
	cr_assert_str_eq(cfg.full_cmdline, "x mayfly.cmd=ZWNobyAiaGkiOyBleGl0IDM=");
	cr_assert_eq(PARSE(&cfg, err, "--kernel", "k", "--cmdline", "x", "--init-cmd", "ab"),
		     CONFIG_OK);
	cr_assert_str_eq(cfg.full_cmdline, "x mayfly.cmd=YWI=");
	cr_assert_eq(PARSE(&cfg, err, "--kernel", "k", "--cmdline", "x", "--init-cmd", "a"),
		     CONFIG_OK);
	cr_assert_str_eq(cfg.full_cmdline, "x mayfly.cmd=YQ==");
}

Test(config, default_guest_from_env)
{
	struct vm_config cfg;
	char err[256];
	char dir[] = "/tmp/mayfly-guest-XXXXXX";
	char path[300];
	FILE *f;

	cr_assert_not_null(mkdtemp(dir));
	setenv("MAYFLY_GUEST_DIR", dir, 1);
	cr_assert_eq(PARSE(&cfg, err, "--mem", "64"), CONFIG_OK);
	cr_assert_null(cfg.kernel_path);
	/* An empty guest dir is not silently accepted... */
	unsetenv("MAYFLY_GUEST_DIR");
	setenv("MAYFLY_GUEST_DIR", "/nonexistent-mayfly", 1);
	cr_assert_eq(config_resolve_defaults(&cfg, err, sizeof(err)), CONFIG_ERROR);
	cr_assert_not_null(strstr(err, "tools/build-guest"));
	/* ...and a dir with both files provides both defaults. */
	setenv("MAYFLY_GUEST_DIR", dir, 1);
	snprintf(path, sizeof(path), "%s/vmlinux", dir);
	f = fopen(path, "w");
	fclose(f);
	snprintf(path, sizeof(path), "%s/initramfs.cpio.gz", dir);
	f = fopen(path, "w");
	fclose(f);
	cr_assert_eq(config_resolve_defaults(&cfg, err, sizeof(err)), CONFIG_OK);
	cr_assert_eq(strncmp(cfg.kernel_path, dir, strlen(dir)), 0);
	cr_assert_str_eq(cfg.initrd_path, path);
	/* An explicit --kernel wins and gets no default initrd. */
	cr_assert_eq(PARSE(&cfg, err, "--kernel", "k"), CONFIG_OK);
	cr_assert_eq(config_resolve_defaults(&cfg, err, sizeof(err)), CONFIG_OK);
	cr_assert_str_eq(cfg.kernel_path, "k");
	cr_assert_null(cfg.initrd_path);
	unlink(path);
	snprintf(path, sizeof(path), "%s/vmlinux", dir);
	unlink(path);
	rmdir(dir);
	unsetenv("MAYFLY_GUEST_DIR");
}

Test(config, verbosity_steps)
{
	struct vm_config cfg;
	char err[256];

	cr_assert_eq(PARSE(&cfg, err, "-v"), CONFIG_OK);
	cr_assert_eq(cfg.log_level, LOG_INFO);
	cr_assert_eq(PARSE(&cfg, err, "-vv"), CONFIG_OK);
	cr_assert_eq(cfg.log_level, LOG_DEBUG);
	cr_assert_eq(PARSE(&cfg, err, "-vvvv"), CONFIG_OK);
	cr_assert_eq(cfg.log_level, LOG_DEBUG);
	EXPECT_ERROR("unknown option '-vx'", "-vx");
}


Test(config, rootfs_is_vda_and_disks_follow)
{
	struct vm_config cfg;
	char err[256];

	/* --rootfs after --disk still takes /dev/vda. */
	cr_assert_eq(PARSE(&cfg, err, "--kernel", "k", "--disk", "data.img", "--rootfs", "root.ext4",
			   "--disk", "ro.img,ro", "--disk=rw.img,rw"), CONFIG_OK, "%s", err);
	cr_assert_eq(cfg.nr_disks, 4);
	cr_assert_str_eq(cfg.disks[0].path, "root.ext4");
	cr_assert(cfg.disks[0].cow);
	cr_assert_str_eq(cfg.disks[1].path, "data.img");
	cr_assert_not(cfg.disks[1].read_only);
	cr_assert_not(cfg.disks[1].cow);
	cr_assert_str_eq(cfg.disks[2].path, "ro.img");
	cr_assert(cfg.disks[2].read_only);
	cr_assert_str_eq(cfg.disks[3].path, "rw.img");
	cr_assert_not(cfg.disks[3].read_only);
	cr_assert_not_null(strstr(cfg.full_cmdline,
		" virtio_mmio.device=4K@0xd0001000:5 virtio_mmio.device=4K@0xd0002000:6"
		" virtio_mmio.device=4K@0xd0003000:7 virtio_mmio.device=4K@0xd0004000:8"
		" root=/dev/vda rw"), "%s", cfg.full_cmdline);
}

Test(config, disks_without_rootfs_start_at_vda)
{
	struct vm_config cfg;
	char err[256];

	cr_assert_eq(PARSE(&cfg, err, "--kernel", "k", "--disk", "a.img", "--disk", "b.img,ro",
			   "--cmdline-append", "root=/dev/vdb"), CONFIG_OK, "%s", err);
	cr_assert_eq(cfg.nr_disks, 2);
	cr_assert_str_eq(cfg.disks[0].path, "a.img");
	cr_assert_str_eq(cfg.disks[1].path, "b.img");
	cr_assert(cfg.disks[1].read_only);
	cr_assert_null(strstr(cfg.full_cmdline, "root=/dev/vda"));
	/* The user's own parameters come after the devices, so theirs win. */
	cr_assert_not_null(strstr(cfg.full_cmdline, ":6 root=/dev/vdb"), "%s", cfg.full_cmdline);
}

Test(config, bad_disks)
{
	struct vm_config cfg;
	char err[256];

	cr_assert_eq(PARSE(&cfg, err, "--disk", ",ro"), CONFIG_ERROR);
	cr_assert_not_null(strstr(err, "--disk"), "%s", err);
	cr_assert_eq(PARSE(&cfg, err, "--disk", "a,b"), CONFIG_ERROR);
	cr_assert_eq(PARSE(&cfg, err, "--disk", "a.img,rx"), CONFIG_ERROR);
	cr_assert_eq(PARSE(&cfg, err, "--rootfs", ""), CONFIG_ERROR);
	cr_assert_eq(PARSE(&cfg, err, "--rootfs", "r", "--disk", "1", "--disk", "2", "--disk", "3",
			   "--disk", "4", "--disk", "5", "--disk", "6", "--disk", "7"), CONFIG_OK, "%s", err);
	cr_assert_eq(cfg.nr_disks, CONFIG_MAX_DISKS);
	cr_assert_eq(PARSE(&cfg, err, "--disk", "1", "--disk", "2", "--disk", "3", "--disk", "4",
			   "--disk", "5", "--disk", "6", "--disk", "7", "--disk", "8"), CONFIG_ERROR);
	cr_assert_not_null(strstr(err, "at most"), "%s", err);
}

Test(config, rootfs_skips_the_default_initramfs)
{
	char dir[] = "/tmp/mayfly-cfg-XXXXXX";
	char path[4096];
	struct vm_config cfg;
	char err[256];

	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/vmlinux", dir);
	fclose(fopen(path, "w"));
	snprintf(path, sizeof(path), "%s/initramfs.cpio.gz", dir);
	fclose(fopen(path, "w"));
	setenv("MAYFLY_GUEST_DIR", dir, 1);
	cr_assert_eq(PARSE(&cfg, err, "--rootfs", "root.ext4"), CONFIG_OK);
	cr_assert_eq(config_resolve_defaults(&cfg, err, sizeof(err)), CONFIG_OK, "%s", err);
	cr_assert_not_null(cfg.kernel_path);
	cr_assert_null(cfg.initrd_path);
	unsetenv("MAYFLY_GUEST_DIR");
	unlink(path);
	snprintf(path, sizeof(path), "%s/vmlinux", dir);
	unlink(path);
	rmdir(dir);
}

Test(config, vsock_takes_the_slot_after_the_disks_and_starts_the_agent)
{
	struct vm_config cfg;
	char err[256];

	cr_assert_eq(PARSE(&cfg, err, "--kernel", "k", "--rootfs", "r.ext4", "--vsock", "/tmp/v.sock"),
		     CONFIG_OK, "%s", err);
	cr_assert_str_eq(cfg.vsock_path, "/tmp/v.sock");
	cr_assert_not_null(strstr(cfg.full_cmdline,
		" virtio_mmio.device=4K@0xd0001000:5 virtio_mmio.device=4K@0xd0002000:6"
		" mayfly.agent=1 root=/dev/vda rw"), "%s", cfg.full_cmdline);
	cr_assert_eq(PARSE(&cfg, err, "--kernel", "k"), CONFIG_OK);
	cr_assert_null(strstr(cfg.full_cmdline, "mayfly.agent"));
	cr_assert_eq(PARSE(&cfg, err, "--vsock", ""), CONFIG_ERROR);
}
