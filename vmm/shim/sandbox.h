/* sandbox.h - a container's microVM: a child process of the shim that runs the one launch path (`containerd-shim-mayfly-v2 vm`, i.e. mayfly boot), reached over its vsock socket (the guest agent) and its control socket (suspend, resume). */
#ifndef MAYFLY_SHIM_SANDBOX_H
#define MAYFLY_SHIM_SANDBOX_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent_client/client.h"

/* Where the container's root is inside the VM (the guest's init mounts
 * the image there: mayfly.container=/dev/vda, docs/rootfs.md). */
#define SANDBOX_ROOT_IN_GUEST "/run/mayfly/rootfs"
#define SANDBOX_SOCKET_MAX    107
#define SANDBOX_STOP_GRACE_MS 5000   /* SIGTERM, then SIGKILL */

struct sandbox_config {
	const char *self;          /* this shim binary: it runs the VM as `self vm ...` */
	const char *id;            /* the VM's id ([A-Za-z0-9._-], 1-32) */
	const char *dir;           /* the VM's sockets go here (short: sun_path) */
	const char *kernel, *initrd;
	const char *image;         /* the container's root image: the VM's copy-on-write /dev/vda */
	uint64_t mem_mib;
	unsigned cpus;
	unsigned cpu_pct;          /* 0: the jail's default */
	const char *hostname;      /* NULL: none */
	char *const *allow_net;    /* --allow-net rules, nallow_net of them */
	int nallow_net;
	bool verbose;              /* the VM logs at info level (the shim's -debug) */
	const char *snapshot;      /* NULL: boot cold; else restore this (sandbox_snapshot's) */
	unsigned spare_disks;      /* empty disk slots for a pod's other containers (--spare-disks) */
};

struct sandbox {
	pid_t pid;                 /* the VM process (its jail's supervisor); 0: none */
	int pidfd;                 /* readable once it ended; -1 */
	char vsock[SANDBOX_SOCKET_MAX + 1];
	pthread_t reaper;
	bool reaper_started;
	pthread_mutex_t lock;
	pthread_cond_t ended_cond;
	bool ended;                /* the VM process is gone (lock) */
	int exit_status;           /* its wait status, once ended */
};

/* The thread that forks every VM (see sandbox.c): started once, before
 * any sandbox_start. 0 or -errno. */
int sandbox_spawner_start(void);

/* How long a container's VM has to answer, while its process lives: many
 * restored at once on a loaded host (a pod's worth, or a node's burst) can
 * take well past mayfly run's AGENT_BOOT_TIMEOUT_S, and containerd waits
 * for Create (kubelet's own runtime request timeout is 2 min by default);
 * this only bounds a VM that hangs. A VM that dies ends the wait at once. */
#define SANDBOX_START_TIMEOUT_S 180

/* Start the VM process and wait (at most SANDBOX_START_TIMEOUT_S) until
 * its guest agent answers. Its stderr is ours (the shim's log). 0, or
 * -errno with one line in err; nothing is left running on failure. */
int sandbox_start(struct sandbox *s, const struct sandbox_config *c, char *err, size_t errlen);

/* The snapshot of c's VM booted and agent-ready, into dir: made once per
 * kernel, initramfs, image, memory and vCPUs by `self vm-snapshot` (the
 * cache of `mayfly run`'s default snapshot), found after. c->hostname is
 * not in it: sandbox_start sets it after the restore. 0, or -errno with
 * one line in err (the caller may boot cold instead). */
int sandbox_snapshot(const struct sandbox_config *c, char *dir, size_t len, char *err,
		     size_t errlen);

/* A new connection to the guest agent (one per process the shim runs).
 * 0 or -errno with one line in err. */
int sandbox_connect(struct sandbox *s, struct agent_client *client, char *err, size_t errlen);

/* Run argv (argc words) in the VM's own root (the initramfs: mayfly's
 * init and busybox, not a container's), as root, up to CTL_WAIT_S. 0 when
 * it exits 0; else -EIO (or -errno) with one line in err naming `what`. */
int sandbox_guest_run(struct sandbox *s, char *const *argv, int argc, const char *what, char *err,
		      size_t errlen);

/* Insert the ext4 image at `image` (opened read-only here: the jailed VM
 * cannot open it) into the VM's empty spare disk slot `slot`, with serial
 * `id`: the guest sees a copy-on-write disk, its writes in the VM's memory.
 * 0 or -errno with one line in err. */
int sandbox_insert_disk(struct sandbox *s, unsigned slot, const char *image, const char *id,
			char *err, size_t errlen);

/* Stop (suspend) or let go on (resume) the VM's vCPUs and devices. 0 or
 * -errno with one line in err. */
int sandbox_suspend(struct sandbox *s, bool suspend, char *err, size_t errlen);

/* End the VM: SIGTERM to its process, SIGKILL after SANDBOX_STOP_GRACE_MS,
 * and wait for it. Safe on a sandbox never started or already ended. */
void sandbox_stop(struct sandbox *s);

/* Whether the VM process has ended. */
bool sandbox_ended(struct sandbox *s);

/* The VM's cgroup v2 directory (its jail's), for Stats: 0 with path, or
 * -errno (no VM, not in a cgroup of its own). */
int sandbox_cgroup(struct sandbox *s, char *path, size_t len);

#endif
