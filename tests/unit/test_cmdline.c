/* test_cmdline.c - the guest's command line: built a parameter at a time, refused rather than cut; and config_check's limits. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "vm/cmdline.h"
#include "vm/config.h"

Test(cmdline, starts_from_the_default_or_the_given_base)
{
	struct cmdline cl;

	cmdline_init(&cl, "");
	cr_assert_str_eq(cl.buf, CONFIG_DEFAULT_CMDLINE);
	cmdline_init(&cl, "a=1");
	cmdline_add(&cl, "b=%d", 2);
	cmdline_add(&cl, "virtio_mmio.device=4K@0x%x:%u", 0xd0001000, 5);
	cr_assert_str_eq(cl.buf, "a=1 b=2 virtio_mmio.device=4K@0xd0001000:5");
	cr_assert_not(cl.too_long);
}

Test(cmdline, base64_keeps_a_shell_command_one_parameter)
{
	struct cmdline cl;

	cmdline_init(&cl, "x");
	cmdline_add_base64(&cl, "mayfly.cmd", "echo \"hi\"; exit 3");
	cr_assert_str_eq(cl.buf, "x mayfly.cmd=ZWNobyAiaGkiOyBleGl0IDM=");
	cmdline_init(&cl, "x");
	cmdline_add_base64(&cl, "mayfly.cmd", "ab");
	cr_assert_str_eq(cl.buf, "x mayfly.cmd=YWI=");
	cmdline_init(&cl, "x");
	cmdline_add_base64(&cl, "mayfly.cmd", "a");
	cr_assert_str_eq(cl.buf, "x mayfly.cmd=YQ==");
}

Test(cmdline, a_line_that_does_not_fit_is_refused_whole)
{
	static char big[3000];
	struct cmdline cl;

	memset(big, 'a', sizeof(big) - 1);
	big[CONFIG_CMDLINE_MAX] = '\0';
	cmdline_init(&cl, big);          /* 2048 bytes + NUL: one too many */
	cr_assert(cl.too_long);
	big[CONFIG_CMDLINE_MAX - 1] = '\0';
	cmdline_init(&cl, big);          /* exactly the limit */
	cr_assert_not(cl.too_long);
	cmdline_add(&cl, "b");
	cr_assert(cl.too_long);
	cr_assert_eq(strlen(cl.buf), CONFIG_CMDLINE_MAX - 1, "nothing half-added");
	/* base64 grows a command by 4/3, a group of 3 bytes to 4 characters:
	 * after the default line, " mayfly.cmd=" and the NUL, room for
	 * room / 4 groups, and one more group no longer fits. */
	size_t room = CONFIG_CMDLINE_MAX - strlen(CONFIG_DEFAULT_CMDLINE) - 12 - 1;
	size_t fits = room / 4 * 3;

	big[fits + 3] = '\0';
	cmdline_init(&cl, "");
	cmdline_add_base64(&cl, "mayfly.cmd", big);
	cr_assert(cl.too_long);
	big[fits] = '\0';
	cmdline_init(&cl, "");
	cmdline_add_base64(&cl, "mayfly.cmd", big);
	cr_assert_not(cl.too_long);
	cr_assert_eq(strlen(cl.buf), strlen(CONFIG_DEFAULT_CMDLINE) + 12 + room / 4 * 4);
}

Test(config, check_holds_a_saved_config_to_the_same_limits)
{
	struct vm_config cfg;
	char err[128];

	config_init(&cfg);
	cr_assert_eq(config_check(&cfg, err, sizeof(err)), -EINVAL);
	cr_assert_not_null(strstr(err, "no kernel"));
	cr_assert_eq(CONFIG_SET_PATH(cfg.kernel, "k"), 0);
	cr_assert_eq(config_check(&cfg, err, sizeof(err)), 0);
	cfg.mem_mib = CONFIG_MAX_MEM_MIB + 1;
	cr_assert_eq(config_check(&cfg, err, sizeof(err)), -EINVAL);
	cfg.mem_mib = 64;
	cfg.cpus = CONFIG_MAX_CPUS + 1;
	cr_assert_eq(config_check(&cfg, err, sizeof(err)), -EINVAL);
	cfg.cpus = 2;
	cfg.nr_disks = CONFIG_MAX_DISKS;
	cr_assert_eq(CONFIG_SET_PATH(cfg.rootfs, "r"), 0);
	cr_assert_eq(config_check(&cfg, err, sizeof(err)), -EINVAL);
	cfg.nr_disks = 0;
	snprintf(cfg.id, sizeof(cfg.id), "bad id");
	cr_assert_eq(config_check(&cfg, err, sizeof(err)), -EINVAL);
	config_free(&cfg);
}

/* Each string is the config's own: set, replaced, copied deep, freed. */
Test(config, strings_are_owned_and_bounded)
{
	struct vm_config a, b;
	char long_path[CONFIG_PATH_MAX + 1];

	config_init(&a);
	cr_assert_str_eq(a.rootfs, "");
	cr_assert_str_eq(a.kvm_device, "/dev/kvm");
	cr_assert_eq(CONFIG_SET_PATH(a.rootfs, "one"), 0);
	cr_assert_eq(CONFIG_SET_PATH(a.rootfs, "two"), 0);   /* "one" given back */
	cr_assert_eq(CONFIG_SET_PATH(a.disks[0].path, "/d"), 0);
	a.nr_disks = 1;
	memset(long_path, 'x', sizeof(long_path) - 1);
	long_path[CONFIG_PATH_MAX] = '\0';
	cr_assert_eq(CONFIG_SET_PATH(a.kernel, long_path), -ENAMETOOLONG);
	long_path[CONFIG_PATH_MAX - 1] = '\0';
	cr_assert_eq(CONFIG_SET_PATH(a.kernel, long_path), 0);   /* 4095 bytes fit */
	cr_assert_eq(CONFIG_SET_CMDLINE(a.cmdline, long_path), -ENAMETOOLONG);
	cr_assert_eq(config_copy(&b, &a), 0);
	cr_assert_neq(b.rootfs, a.rootfs);
	cr_assert_str_eq(b.rootfs, "two");
	cr_assert_str_eq(b.disks[0].path, "/d");
	cr_assert_str_eq(b.kvm_device, "/dev/kvm");
	config_free(&a);
	cr_assert_str_eq(a.rootfs, "");
	cr_assert_str_eq(b.rootfs, "two");   /* b's own, untouched */
	cr_assert_eq(CONFIG_SET_PATH(b.rootfs, ""), 0);
	cr_assert_str_eq(b.rootfs, "");
	config_free(&b);
	config_free(&b);   /* twice is harmless */
}
