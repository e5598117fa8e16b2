/* test_shim_runtime.c - the flags containerd gives a shim (Go's flag syntax), the socket address each group gets, and the state a `delete` reads back. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim/runtime.h"

static int parse(struct runtime_args *a, char **argv)
{
	char err[200];
	int argc = 0;

	while (argv[argc])
		argc++;
	return runtime_parse(a, argc, argv, err, sizeof(err));
}

Test(shim_runtime, containerds_flags)
{
	char *start[] = { "shim", "-namespace", "k8s.io", "-address", "/run/c.sock",
			  "-publish-binary", "/usr/bin/containerd", "-id", "c1", "-debug", "start", NULL };
	char *del[] = { "shim", "--namespace=default", "-id=c2", "-bundle", "/b", "delete", NULL };
	char *serve[] = { "shim", "-namespace", "default", "-id", "c3", "-address", "/a", NULL };
	char *version[] = { "shim", "-v", NULL };
	struct runtime_args a;

	cr_assert_eq(parse(&a, start), 0);
	cr_assert_eq(a.action, RUNTIME_START);
	cr_assert_str_eq(a.namespace, "k8s.io");
	cr_assert_str_eq(a.publish_binary, "/usr/bin/containerd");
	cr_assert(a.debug);
	cr_assert_eq(parse(&a, del), 0);
	cr_assert_eq(a.action, RUNTIME_DELETE);
	cr_assert_str_eq(a.id, "c2");
	cr_assert_str_eq(a.bundle, "/b");
	cr_assert_not(a.debug);
	cr_assert_eq(parse(&a, serve), 0);
	cr_assert_eq(a.action, RUNTIME_SERVE);
	cr_assert_eq(parse(&a, version), 0);
	cr_assert_eq(a.action, RUNTIME_VERSION);
}

Test(shim_runtime, bad_command_lines)
{
	char *no_ns[] = { "shim", "-id", "c", "start", NULL };
	char *no_id[] = { "shim", "-namespace", "n", "start", NULL };
	char *unknown[] = { "shim", "-namespace", "n", "-id", "c", "-frobnicate", NULL };
	char *no_value[] = { "shim", "-namespace", NULL };
	char *extra[] = { "shim", "-namespace", "n", "-id", "c", "start", "more", NULL };
	char *verb[] = { "shim", "-namespace", "n", "-id", "c", "stop", NULL };
	struct runtime_args a;

	cr_assert_eq(parse(&a, no_ns), -EINVAL);
	cr_assert_eq(parse(&a, no_id), -EINVAL);
	cr_assert_eq(parse(&a, unknown), -EINVAL);
	cr_assert_eq(parse(&a, no_value), -EINVAL);
	cr_assert_eq(parse(&a, extra), -EINVAL);
	cr_assert_eq(parse(&a, verb), -EINVAL);
}

/* One socket per (containerd, namespace, group): a pod's containers share
 * their shim, other containers do not; the path fits sun_path. */
Test(shim_runtime, socket_addresses)
{
	char a1[160], a2[160], a3[160], a4[160];

	cr_assert_eq(runtime_socket_address("/run/c.sock", "ns", "pod1", a1, sizeof(a1)), 0);
	cr_assert_eq(runtime_socket_address("/run/c.sock", "ns", "pod1", a2, sizeof(a2)), 0);
	cr_assert_eq(runtime_socket_address("/run/c.sock", "ns", "pod2", a3, sizeof(a3)), 0);
	cr_assert_eq(runtime_socket_address("/run/c.sock", "ns2", "pod1", a4, sizeof(a4)), 0);
	cr_assert_str_eq(a1, a2);
	cr_assert_str_neq(a1, a3);
	cr_assert_str_neq(a1, a4);
	cr_assert_eq(strncmp(a1, "unix://" RUNTIME_SOCKET_DIR "/", strlen("unix://" RUNTIME_SOCKET_DIR "/")), 0);
	cr_assert_leq(strlen(a1) - strlen("unix://"), 107);
	cr_assert_eq(runtime_socket_address("/run/c.sock", "ns", "pod1", a1, 20), -ENAMETOOLONG);
}

Test(shim_runtime, state_round_trip)
{
	char dir[] = "/tmp/mayfly-shim-state-XXXXXX";
	struct runtime_state in = { .vm_pid = 4242, .vm_start_time = 123456789, .rootfs_mounted = true },
			     out;
	char path[128];

	cr_assert_not_null(mkdtemp(dir));
	snprintf(in.vm_dir, sizeof(in.vm_dir), "/run/mayfly-shim/abc");
	cr_assert_eq(runtime_state_save(dir, &in), 0);
	cr_assert_eq(runtime_state_load(dir, &out), 0);
	cr_assert_eq(out.vm_pid, 4242);
	cr_assert_eq(out.vm_start_time, 123456789);
	cr_assert(out.rootfs_mounted);
	cr_assert_str_eq(out.vm_dir, "/run/mayfly-shim/abc");
	snprintf(path, sizeof(path), "%s/" RUNTIME_STATE_FILE, dir);
	unlink(path);
	cr_assert_eq(runtime_state_load(dir, &out), -ENOENT);
	rmdir(dir);
	/* Our own start time is there and stable; a gone pid has none. */
	cr_assert_neq(runtime_start_time(getpid()), 0);
	cr_assert_eq(runtime_start_time(getpid()), runtime_start_time(getpid()));
	cr_assert_eq(runtime_start_time(999999999), 0);
}
