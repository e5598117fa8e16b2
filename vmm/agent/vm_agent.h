/* vm_agent.h - a VM in this process, driven through its guest agent by a job on a second thread: mayfly run, snapshot create, a restored VM's freshening. */
#ifndef MAYFLY_AGENT_VM_AGENT_H
#define MAYFLY_AGENT_VM_AGENT_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/client.h"
#include "jail/jail.h"
#include "vm.h"
#include "net/net.h"

#define VM_AGENT_BOOT_TIMEOUT_S 60   /* exec -> agent ready; nested emulation needs ~5 s */

struct vm_agent;
struct ctl_server;

/* Runs on the agent thread once the agent answered (and, restored, took
 * FRESHEN). When it returns the VM is stopped, unless keep_running. */
typedef void (*vm_agent_job)(struct vm_agent *va, void *opaque);

struct vm_agent {
	struct vm vm;
	uint64_t start_ns;            /* process start (CLOCK_MONOTONIC) */
	uint64_t built_ns;            /* vm_build returned */
	bool built;                   /* and succeeded: vm_run ran (else it logged why) */
	uint64_t ready_ns;            /* the agent answered; 0 if never */
	int cancel_fd;                /* eventfd: the VM ended; every agent wait gives up */
	struct agent_client client;
	vm_agent_job job;             /* NULL: only connect (and freshen), then let go */
	void *opaque;
	bool keep_running;            /* the job's end does not end the VM */
	bool saves_snapshot;          /* the job saves the VM: the snapshot seccomp role */
	bool (*signal_hook)(void *opaque, int signo);   /* see vm_set_signal_hook */
	bool job_done;                /* the job ran to its end (read after vm_agent_run) */
	struct jail *jail;            /* entered between vm_build and the first thread; or NULL */
	struct net_run *net;          /* --allow-net: attached after the build, the agent told
	                               * to serve the proxy; or NULL */
	/* NULL, or called on the main thread once the jail is entered, before
	 * any VM thread starts: the job's own threads, each of which enters
	 * its seccomp role first. 0, or the run fails with EXIT_INTERNAL. */
	int (*start_threads)(struct vm_agent *va, void *opaque);
	/* NULL, or called last on the agent thread (under its filter), however
	 * it ends: whether or not the job ran. */
	void (*job_end)(struct vm_agent *va, void *opaque);
	struct ctl_server *ctl;       /* boot --vsock: started after the jail (the caller stops it) */
};

/* Build the VM (cold, or from snap when not NULL), run it on this thread
 * and the job on the agent thread, wait for both. Returns vm_build's code
 * when the build failed (nothing left running), else vm_run's. The
 * client stays open until vm_agent_destroy. va->job, opaque, keep_running
 * and signal_hook are set by the caller before. */
/* Set va->cancel_fd to -1 before the first call. */
int vm_agent_run(struct vm_agent *va, const struct vm_config *cfg, const struct snapshot *snap,
		 uint64_t start_ns);

/* Close the client and free the VM. */
void vm_agent_destroy(struct vm_agent *va);

/* agent_client_connect to a restored guest's agent, which takes the host's
 * wall clock and 32 fresh random bytes (FRESHEN) before anything else: two
 * VMs from one snapshot must not share a clock offset or a random
 * sequence. FRESHEN goes in the connect's own write (agent_first), so it
 * costs no round trip of its own; deadline_ns bounds both. 0 (connected
 * and freshened) or -errno with *why. */
int vm_agent_connect_fresh(struct agent_client *c, agent_dial_fn dial, void *dial_opaque,
			   uint64_t deadline_ns, int cancel_fd, const char **why);

#endif
