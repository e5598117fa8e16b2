/* runtime.h - containerd's runtime v2 contract for a shim binary: its flags, `start` (a daemon per container group, its socket's address printed), `delete` (the cleanup after a shim that died), and the state a delete finds in the bundle. */
#ifndef MAYFLY_SHIM_RUNTIME_H
#define MAYFLY_SHIM_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define RUNTIME_SOCKET_DIR  "/run/containerd/s"   /* where containerd's own shims' sockets go */
#define RUNTIME_STATE_FILE  "mayfly-shim.state"   /* in the bundle: what delete needs */
#define RUNTIME_RUN_DIR     "/run/mayfly-shim"    /* the VMs' socket directories */

enum runtime_action { RUNTIME_SERVE, RUNTIME_START, RUNTIME_DELETE, RUNTIME_VERSION };

/* The command line containerd gives (Go's flag syntax: -name value,
 * -name=value, --name too). */
struct runtime_args {
	enum runtime_action action;
	const char *namespace, *address, *publish_binary, *id, *bundle;
	bool debug;
};

/* Parse argv (argv[0] the binary). 0, or -EINVAL with one line in err. */
int runtime_parse(struct runtime_args *a, int argc, char **argv, char *err, size_t errlen);

/* The shim's socket for (address, namespace, group): unix:// and a path
 * in RUNTIME_SOCKET_DIR named by their sha256. */
int runtime_socket_address(const char *address, const char *ns, const char *group, char *out,
			   size_t len);

/* `start`: in the bundle (the cwd), the group (the pod's sandbox id from
 * config.json's annotations, else the container's id); a new daemon with
 * its listening socket as fd 3, or the address of the group's running
 * one; the address written to the bundle's "address" file and printed.
 * The exit code. */
int runtime_start(const struct runtime_args *a, const char *self);

/* What a VM left for `delete`, saved in the bundle. */
struct runtime_state {
	pid_t vm_pid;
	uint64_t vm_start_time;    /* /proc/PID/stat's, to know the pid was not reused */
	char vm_dir[256];
	bool rootfs_mounted;
};
int runtime_state_save(const char *bundle, const struct runtime_state *st);
int runtime_state_load(const char *bundle, struct runtime_state *st);

/* `delete`: the VM of this bundle ended (killed if still there), its
 * directory and the rootfs mount gone, containerd's DeleteResponse (pid,
 * 137, now) printed as protobuf. The exit code. */
int runtime_delete(const struct runtime_args *a);

/* A process's start time (/proc/PID/stat field 22), 0 if gone. */
uint64_t runtime_start_time(pid_t pid);

#endif
