/* test_snapshot_install.c - a snapshot is written into a directory made beside --out before the VM (and its jail), then put in --out's place whole: a new name, an older snapshot swapped, anything else refused untouched; a failure leaves nothing beside it. */
#include "vm_snapshot.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char base[64];
static struct vm_config cfg;

static void write_file(const char *dir, const char *name, const char *text)
{
	char path[CONFIG_PATH_MAX + 64];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	cr_assert_not_null(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

static char *read_text(const char *dir, const char *name)
{
	static char buf[64];
	char path[CONFIG_PATH_MAX + 64];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "r");
	if (!f)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* Nothing but the names given is in base. */
static void only(const char *a, const char *b)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "test \"$(ls -A '%s' | grep -v -e '^%s$' -e '^%s$')\" = ''", base,
		 a, b);
	cr_assert_eq(system(cmd), 0, "something else is left in %s", base);
}

static void setup(void)
{
	snprintf(base, sizeof(base), "/tmp/mayfly-install-XXXXXX");
	cr_assert_not_null(mkdtemp(base));
	config_init(&cfg);
	write_file(base, "kernel", "a kernel");
	write_file(base, "rootfs", "a root image");
	snprintf(cfg.kernel, sizeof(cfg.kernel), "%s/kernel", base);
	snprintf(cfg.rootfs, sizeof(cfg.rootfs), "%s/rootfs", base);
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	if (system(cmd) != 0)
		cr_log_warn("cannot remove %s", base);
}

TestSuite(snapshot_install, .init = setup, .fini = teardown);

/* A save's result: the files a VM would write into tmp. */
static void fake_save(const char *tmp, const char *tag)
{
	write_file(tmp, SNAPSHOT_STATE, tag);
	write_file(tmp, SNAPSHOT_MEMORY, "memory");
}

Test(snapshot_install, the_directory_is_made_beside_out_and_takes_its_place)
{
	char tmp[CONFIG_PATH_MAX + 32], out[CONFIG_PATH_MAX];
	struct snapshot_sources src;
	const char *why = "";
	struct stat st;

	snprintf(out, sizeof(out), "%s/snap", base);
	cr_assert_eq(vm_snapshot_tmpdir(out, &cfg, tmp, sizeof(tmp), &src, &why), 0, "%s", why);
	cr_assert_eq(tmp[0], '/', "not absolute: %s", tmp);
	cr_assert_eq(strncmp(tmp, out, strlen(out)), 0, "not beside --out: %s", tmp);
	cr_assert(strstr(tmp, ".tmp-"));
	cr_assert_eq(stat(tmp, &st), 0);
	cr_assert(S_ISDIR(st.st_mode));
	cr_assert_eq(st.st_mode & 0777, 0700);
	cr_assert(src.has_rootfs);
	cr_assert_eq(src.kernel.size, strlen("a kernel"));
	cr_assert_eq(src.rootfs.size, strlen("a root image"));
	fake_save(tmp, "first");
	cr_assert_eq(vm_snapshot_install(tmp, out, &why), 0, "%s", why);
	cr_assert_str_eq(read_text(out, SNAPSHOT_STATE), "first");
	only("snap", "kernel\\|rootfs");
}

Test(snapshot_install, an_older_snapshot_is_swapped_whole)
{
	char tmp[CONFIG_PATH_MAX + 32], out[CONFIG_PATH_MAX];
	struct snapshot_sources src;
	const char *why = "";

	snprintf(out, sizeof(out), "%s/snap", base);
	cr_assert_eq(mkdir(out, 0700), 0);
	fake_save(out, "old");
	write_file(out, "disk-vda", "old overlay");
	cr_assert_eq(vm_snapshot_tmpdir(out, &cfg, tmp, sizeof(tmp), &src, &why), 0, "%s", why);
	fake_save(tmp, "new");
	cr_assert_eq(vm_snapshot_install(tmp, out, &why), 0, "%s", why);
	cr_assert_str_eq(read_text(out, SNAPSHOT_STATE), "new");
	cr_assert_null(read_text(out, "disk-vda"), "the old snapshot's overlay is in the new one");
	only("snap", "kernel\\|rootfs");
}

Test(snapshot_install, anything_else_at_out_is_refused_untouched_and_nothing_is_left)
{
	char tmp[CONFIG_PATH_MAX + 32], out[CONFIG_PATH_MAX];
	struct snapshot_sources src;
	const char *why = "";

	snprintf(out, sizeof(out), "%s/mine", base);
	cr_assert_eq(mkdir(out, 0700), 0);
	write_file(out, "precious", "keep me");
	cr_assert_eq(vm_snapshot_tmpdir(out, &cfg, tmp, sizeof(tmp), &src, &why), 0, "%s", why);
	fake_save(tmp, "new");
	cr_assert_eq(vm_snapshot_install(tmp, out, &why), -EEXIST);
	cr_assert(strstr(why, "is not a snapshot directory"), "%s", why);
	cr_assert_str_eq(read_text(out, "precious"), "keep me");
	only("mine", "kernel\\|rootfs");
}

Test(snapshot_install, a_failed_save_is_discarded_whole)
{
	char tmp[CONFIG_PATH_MAX + 32], out[CONFIG_PATH_MAX];
	struct snapshot_sources src;
	const char *why = "";

	snprintf(out, sizeof(out), "%s/snap", base);
	cr_assert_eq(vm_snapshot_tmpdir(out, &cfg, tmp, sizeof(tmp), &src, &why), 0, "%s", why);
	fake_save(tmp, "half");
	vm_snapshot_discard(tmp);
	only("kernel", "rootfs");
}

Test(snapshot_install, a_missing_kernel_makes_no_directory)
{
	char tmp[CONFIG_PATH_MAX + 32], out[CONFIG_PATH_MAX];
	struct snapshot_sources src;
	const char *why = "";

	snprintf(out, sizeof(out), "%s/snap", base);
	snprintf(cfg.kernel, sizeof(cfg.kernel), "%s/no-such-kernel", base);
	cr_assert_neq(vm_snapshot_tmpdir(out, &cfg, tmp, sizeof(tmp), &src, &why), 0);
	only("kernel", "rootfs");
}
