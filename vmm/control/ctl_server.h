/* ctl_server.h - a booted VM's control socket (PATH.ctl beside --vsock PATH): pause or fork the running VM into files the client opened. */
#ifndef MAYFLY_CONTROL_CTL_SERVER_H
#define MAYFLY_CONTROL_CTL_SERVER_H

#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>

#include "vm/config.h"
#include "vm/snapshot.h"

struct vm;
struct agent_client;

struct ctl_server {
	int listen_fd;              /* -1: none */
	int stop_fd;                /* eventfd: the thread leaves */
	int ready_fd;               /* eventfd, readable once the guest agent is freshened */
	int kernel_fd, rootfs_fd;   /* a cold VM: hashed at the first save (the jail names no file) */
	bool ids_known;             /* files.kernel and .rootfs are set */
	struct snapshot_files ids;
	char path[CONFIG_VSOCK_PATH_MAX + 8];
	dev_t sock_dev;
	ino_t sock_ino;
	pthread_t thread;
	bool started;
	bool suspended;             /* SUSPEND'ed (this thread only) */
	struct vm *vm;
	struct agent_client *client;
	int kept_fd;                /* a committed pause's client: open until the process ends */
};

/* Before the jail (still able to name files): bind and listen on
 * vsock_path.ctl (SOCK_SEQPACKET, mode 0600; a stale socket there is
 * replaced, anything else refused), and either take the snapshot's kernel
 * and rootfs identities (snap: a restored VM) or open cfg's kernel and
 * rootfs to hash them when first saved. 0 or -errno after one log line;
 * s is then inert (ctl_server_stop is still safe). */
int ctl_server_open(struct ctl_server *s, const struct vm_config *cfg,
		    const struct snapshot *snap) __attribute__((warn_unused_result));

/* After vm_build and jail_enter, before vm_run: serve the socket on a
 * thread of the snapshot seccomp role. 0 or -errno. */
int ctl_server_start(struct ctl_server *s, struct vm *vm) __attribute__((warn_unused_result));

/* The guest agent answered (a restored one was freshened): READY requests
 * are answered OK from now on. Any thread; s may be inert. */
void ctl_server_ready(struct ctl_server *s);

/* After vm_run returned, before vm_destroy: end and join the thread,
 * close the socket and remove its file when this process may (a jailed
 * VM cannot: its supervisor does). */
void ctl_server_stop(struct ctl_server *s);

#endif
