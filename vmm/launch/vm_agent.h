/* vm_agent.h - the run step of a VM driven through its guest agent: a job on a thread of its own talks to the agent while vm_run runs the VM. */
#ifndef MAYFLY_LAUNCH_VM_AGENT_H
#define MAYFLY_LAUNCH_VM_AGENT_H

#include <stdbool.h>
#include <stdint.h>

#include "agent_client/client.h"

struct vm;
struct vm_agent;
struct net_run;
struct ctl_server;

/* Runs on the agent thread once the agent answered (and, restored, took
 * FRESHEN). When it returns the VM is stopped, unless keep_running. */
typedef void (*vm_agent_job)(struct vm_agent *va, void *opaque);

/* What the caller sets (before launch_run), then what the run left. */
struct vm_agent {
	vm_agent_job job;             /* NULL: only connect (and freshen), then let go */
	void *opaque;                 /* the job's, and each hook's below */
	bool keep_running;            /* the job's end does not end the VM */
	bool saves_snapshot;          /* the job saves the VM: the snapshot seccomp role */
	bool (*signal_hook)(void *opaque, int signo);   /* see vm_set_signal_hook */
	/* NULL, or called on the main thread once the jail is entered, before
	 * any VM thread starts: the job's own threads, each of which enters
	 * its seccomp role first. 0, or the run fails with EXIT_INTERNAL. */
	int (*start_threads)(struct vm_agent *va, void *opaque);
	/* NULL, or called on the main thread after the VM ended, whether or
	 * not start_threads ran: stop and join those threads. */
	void (*stop_threads)(struct vm_agent *va, void *opaque);
	/* NULL, or called last on the agent thread (under its filter), however
	 * it ends: whether or not the job ran. */
	void (*job_end)(struct vm_agent *va, void *opaque);

	/* Set by the run. */
	struct vm *vm;
	struct agent_client client;   /* open from the agent's answer to vm_agent_close */
	int cancel_fd;                /* eventfd: the VM ended; every agent wait gives up */
	uint64_t start_ns, built_ns;  /* process start; vm_build returned (CLOCK_MONOTONIC) */
	uint64_t ready_ns;            /* the agent answered; 0 if never */
	bool job_done;                /* the job ran to its end */
	struct net_run *net;          /* --allow-net: the agent is told to serve the proxy */
	struct ctl_server *ctl;       /* or NULL: told when the agent is ready */
};

/* Ready va, which comes zeroed (launch_init's), for a launch: no
 * descriptor open. */
void vm_agent_init(struct vm_agent *va);

/* The run step, on the main thread, with vm built and the jail entered:
 * the job's threads and the agent thread started, vm_run until the VM
 * ends, the agent thread joined. vm_run's exit code, or EXIT_INTERNAL
 * when a thread cannot start (after one line). launch_run calls it. */
int vm_agent_run(struct vm_agent *va, struct vm *vm, struct net_run *net, struct ctl_server *ctl,
		 uint64_t start_ns, uint64_t built_ns);

/* After the run: stop the job's threads, close the client and cancel_fd. */
void vm_agent_close(struct vm_agent *va);

#endif
