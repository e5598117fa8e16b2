/* test_snapshot_install.c - a snapshot is written into a directory made beside --out before the VM (and its jail), then put in --out's place whole: a new name, an older snapshot swapped, anything else refused untouched; a failure leaves nothing beside it. */
#include "vm/snapshot.h"
#include "lib/image_id.h"
#include "mem/mem.h"
#include "x86/layout.h"
#include "dir_files.h"
#include "seccomp/seccomp.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char base[64];
static struct vm_config cfg;

/* Nothing but the names given is in base. */
static void only(const char *a, const char *b)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "test \"$(ls -A '%s' | grep -v -e '^%s$' -e '^%s$')\" = ''", base,
		 a, b);
	cr_assert_eq(system(cmd), 0, "something else is left in %s", base);
}

/* A config string: base/name. */
static void set_path(const char **field, const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/%s", base, name);
	cr_assert_eq(config_set(field, path, CONFIG_PATH_MAX), 0);
}

static void setup(void)
{
	snprintf(base, sizeof(base), "/tmp/mayfly-install-XXXXXX");
	cr_assert_not_null(mkdtemp(base));
	config_init(&cfg);
	put(base, "kernel", "a kernel");
	put(base, "rootfs", "a root image");
	set_path(&cfg.kernel, "kernel");
	set_path(&cfg.rootfs, "rootfs");
}

static void teardown(void)
{
	char cmd[128];

	config_free(&cfg);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	if (system(cmd) != 0)
		cr_log_warn("cannot remove %s", base);
}

TestSuite(snapshot_install, .init = setup, .fini = teardown);

/* out = base/name; its temporary directory made, as snapshot_make does. */
static void begin(const char *name, char *out, size_t outlen, char *tmp, size_t tmplen,
		  struct snapshot_sources *src)
{
	const char *why = "";

	snprintf(out, outlen, "%s/%s", base, name);
	cr_assert_eq(vm_snapshot_tmpdir(out, &cfg, tmp, tmplen, src, &why), 0, "%s", why);
}

/* A save's result: the files a VM would write into tmp. */
static void fake_save(const char *tmp, const char *tag)
{
	put(tmp, SNAPSHOT_STATE, tag);
	put(tmp, SNAPSHOT_MEMORY, "memory");
}

/* Install tmp at out in a child under role's filter, as that role's
 * thread does: the snapshot thread its own save (unjailed), the
 * supervisor the jailed VM's. It must succeed. */
static void install_filtered(enum seccomp_role role, const char *tmp, const char *out)
{
	int status;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		const char *why = "";

		if (seccomp_install(role))
			_exit(100);
		if (role == SECCOMP_ROLE_SNAPSHOT)
			_exit(vm_snapshot_install_own(tmp, out, &why) ? 1 : 0);
		_exit(vm_snapshot_install(tmp, out, &why) ? 1 : 0);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "the install under the %s filter ended with %s %d", seccomp_role_name(role),
		  WIFEXITED(status) ? "exit" : "signal",
		  WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

Test(snapshot_install, the_directory_is_made_beside_out_and_takes_its_place)
{
	char tmp[CONFIG_PATH_MAX + 32], out[CONFIG_PATH_MAX];
	struct snapshot_sources src;
	const char *why = "";
	struct stat st;

	begin("snap", out, sizeof(out), tmp, sizeof(tmp), &src);
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
	cr_assert_str_eq(get(out, SNAPSHOT_STATE), "first");
	only("snap", "kernel\\|rootfs");
}

/* Unjailed (--no-jail), the snapshot thread installs what it saved, under
 * its filter: a new name, then an older snapshot swapped. */
Test(snapshot_install, an_unjailed_save_installs_under_the_snapshot_filter)
{
	char tmp[CONFIG_PATH_MAX + 32], out[CONFIG_PATH_MAX];
	struct snapshot_sources src;

	for (int round = 0; round < 2; round++) {
		begin("snap", out, sizeof(out), tmp, sizeof(tmp), &src);
		fake_save(tmp, round ? "second" : "first");
		install_filtered(SECCOMP_ROLE_SNAPSHOT, tmp, out);
		cr_assert_str_eq(get(out, SNAPSHOT_STATE), round ? "second" : "first");
	}
	only("snap", "kernel\\|rootfs");
}

/* Jailed, the supervisor installs what the VM's uid wrote: under the
 * supervisor's own filter, the state file and directory become ours. */
Test(snapshot_install, a_jailed_save_is_taken_over_under_the_supervisor_filter)
{
	char tmp[CONFIG_PATH_MAX + 32], out[CONFIG_PATH_MAX], path[CONFIG_PATH_MAX + 64];
	struct snapshot_sources src;
	struct stat st;

	begin("snap", out, sizeof(out), tmp, sizeof(tmp), &src);
	fake_save(tmp, "jailed");
	snprintf(path, sizeof(path), "%s/" SNAPSHOT_STATE, tmp);
	/* As the jail leaves them: the VM's uid owns both (root can chown). */
	if (geteuid() == 0) {
		cr_assert_eq(chown(path, 4321, 4322), 0);
		cr_assert_eq(chown(tmp, 4321, 4322), 0);
	}
	install_filtered(SECCOMP_ROLE_SUPERVISOR, tmp, out);
	cr_assert_str_eq(get(out, SNAPSHOT_STATE), "jailed");
	snprintf(path, sizeof(path), "%s/" SNAPSHOT_STATE, out);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_uid, geteuid(), "the state file is not ours");
	cr_assert_eq(stat(out, &st), 0);
	cr_assert_eq(st.st_uid, geteuid(), "the directory is not ours");
	only("snap", "kernel\\|rootfs");
}

/* The jailed side swaps its state file for a link to someone else's
 * file: refused, that file untouched (owner and bytes), nothing left. */
Test(snapshot_install, a_state_file_swapped_for_a_link_is_refused_and_its_target_untouched)
{
	char tmp[CONFIG_PATH_MAX + 32], out[CONFIG_PATH_MAX], path[CONFIG_PATH_MAX + 64],
		victim[CONFIG_PATH_MAX];
	struct snapshot_sources src;
	const char *why = "";
	struct stat st;

	put(base, "victim", "not yours");
	snprintf(victim, sizeof(victim), "%s/victim", base);
	if (geteuid() == 0)
		cr_assert_eq(chown(victim, 4321, 4322), 0);
	begin("snap", out, sizeof(out), tmp, sizeof(tmp), &src);
	fake_save(tmp, "x");
	snprintf(path, sizeof(path), "%s/" SNAPSHOT_STATE, tmp);
	cr_assert_eq(unlink(path), 0);
	cr_assert_eq(symlink(victim, path), 0);
	cr_assert_eq(vm_snapshot_install(tmp, out, &why), -EINVAL);
	cr_assert(strstr(why, "is not a regular file of its own: refused"), "%s", why);
	cr_assert_eq(lstat(victim, &st), 0);
	cr_assert_eq(st.st_uid, geteuid() == 0 ? 4321u : geteuid(), "the link's target changed owner");
	cr_assert_str_eq(get(base, "victim"), "not yours");
	only("victim", "kernel\\|rootfs");
}

Test(snapshot_install, an_older_snapshot_is_swapped_whole)
{
	char tmp[CONFIG_PATH_MAX + 32], out[CONFIG_PATH_MAX];
	struct snapshot_sources src;
	const char *why = "";

	begin("snap", out, sizeof(out), tmp, sizeof(tmp), &src);
	cr_assert_eq(mkdir(out, 0700), 0);
	fake_save(out, "old");
	put(out, "disk-vda", "old overlay");
	fake_save(tmp, "new");
	cr_assert_eq(vm_snapshot_install(tmp, out, &why), 0, "%s", why);
	cr_assert_str_eq(get(out, SNAPSHOT_STATE), "new");
	cr_assert_null(get(out, "disk-vda"), "the old snapshot's overlay is in the new one");
	only("snap", "kernel\\|rootfs");
}

Test(snapshot_install, anything_else_at_out_is_refused_untouched_and_nothing_is_left)
{
	char tmp[CONFIG_PATH_MAX + 32], out[CONFIG_PATH_MAX];
	struct snapshot_sources src;
	const char *why = "";

	begin("mine", out, sizeof(out), tmp, sizeof(tmp), &src);
	cr_assert_eq(mkdir(out, 0700), 0);
	put(out, "precious", "keep me");
	fake_save(tmp, "new");
	cr_assert_eq(vm_snapshot_install(tmp, out, &why), -EEXIST);
	cr_assert(strstr(why, "is not a snapshot directory"), "%s", why);
	cr_assert_str_eq(get(out, "precious"), "keep me");
	only("mine", "kernel\\|rootfs");
}

Test(snapshot_install, a_failed_save_is_discarded_whole)
{
	char tmp[CONFIG_PATH_MAX + 32], out[CONFIG_PATH_MAX];
	struct snapshot_sources src;

	begin("snap", out, sizeof(out), tmp, sizeof(tmp), &src);
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
	set_path(&cfg.kernel, "no-such-kernel");
	cr_assert_neq(vm_snapshot_tmpdir(out, &cfg, tmp, sizeof(tmp), &src, &why), 0);
	only("kernel", "rootfs");
}

/* A snapshot whose files are FIFOs (someone's trap, or a mistake) is
 * refused at once with one reason, never waited on: the state file, the
 * memory file and a file an identity is checked against. */
Test(snapshot_install, fifos_in_a_snapshot_are_refused_not_waited_on, .timeout = 20)
{
	char path[128];
	struct snapshot s;
	struct guest_mem mem;
	struct image_id id = { 0 };
	const struct mem_layout x86_ram = LAYOUT_RAM_SLOTS;
	const char *why = "";

	snprintf(path, sizeof(path), "%s/" SNAPSHOT_STATE, base);
	cr_assert_eq(mkfifo(path, 0600), 0);
	cr_assert_eq(snapshot_load(&s, base, &why), -EBADMSG);
	cr_assert(strstr(why, "not a snapshot state file"), "%s", why);
	snprintf(path, sizeof(path), "%s/" SNAPSHOT_MEMORY, base);
	cr_assert_eq(mkfifo(path, 0600), 0);
	cr_assert_eq(mem_restore(&mem, 1 << 20, &x86_ram, path, &why), -EINVAL);
	cr_assert(strstr(why, "not a regular file"), "%s", why);
	cr_assert_eq(image_id_check_sparse(path, &id, &why), -EINVAL);
	cr_assert(strstr(why, "not a regular file"), "%s", why);
}
