/* launch.h - the one launch sequence, in its security order, and its teardown: every front end that starts a VM calls it. */
#ifndef MAYFLY_LAUNCH_LAUNCH_H
#define MAYFLY_LAUNCH_LAUNCH_H

#include <stdbool.h>
#include <stdint.h>

#include "control/ctl_msg.h"
#include "control/ctl_server.h"
#include "agent_client/events.h"
#include "jail/jail.h"
#include "lib/phase.h"
#include "launch/vm_agent.h"
#include "net/net.h"
#include "policy/approve_spawner.h"
#include "policy/audit.h"
#include "policy/gate.h"
#include "vm/vm.h"

/*
 * The sequence (docs/architecture.md), each step before the next:
 *   1. the audit log opened (the VM process will not be able to name it)
 *   2. the caller's prepare: what to build (cold, or which snapshot), its own files
 *   3. the network broker forked (it keeps the host's network)
 *   4. the approver's spawner forked (it keeps the host's shell)
 *   5. the jail: a supervisor stays outside and waits; the VM process goes on
 *   6. the control socket bound beside the --vsock socket (pause, fork)
 *   7. the VM built, or restored from the snapshot
 *   8. the network proxy attached to the VM's vsock device
 *   9. the jail entered: pivot_root, ids and capabilities dropped
 *  10. the control socket served
 *  11. the run: vm_run, with the agent thread when use_agent
 * and the teardown in reverse, through one exit path.
 */

struct launch {
	/* What to launch: the caller's, set before launch_run (cfg and snap
	 * may be set by prepare instead). */
	const struct vm_config *cfg;
	const struct snapshot *snap;          /* restore from it (cfg: its config), or NULL: boot */
	const struct jail_config *jail_cfg;
	const struct net_policy *net_policy;  /* NULL or no rules: no network */
	const char *audit_path;               /* NULL: no audit log */
	struct gate *gate;                    /* NULL, or the tool calls' gate: given the audit
	                                       * log, and the spawner when it names an approver */
	bool use_agent;                       /* drive the VM through its guest agent (agent) */
	struct vm_agent agent;                /* the job and its hooks, when use_agent */
	int fail_code;                        /* exit code of a failed step (EXIT_INTERNAL) */
	/* NULL, or step 2: 0 to go on, or an exit code (after one line). */
	int (*prepare)(struct launch *l, void *opaque);
	void *prepare_opaque;

	/* What it made: read after launch_run. */
	struct vm vm;
	bool vm_process;                      /* this process was the VM's (jailed or not),
	                                       * not its jail's supervisor */
	bool built;                           /* vm_build succeeded: the VM ran (else it said why) */
	uint64_t start_ns, built_ns;          /* process start; vm_build returned */
	uint64_t jailed_ns, entered_ns;       /* the VM process began (step 5); the jail was
	                                       * entered (step 9); 0: not reached */
	struct jail jail;
	struct audit_log audit;
	bool audit_open;
	struct net_run net;
	struct approve_spawner spawner;
	struct ctl_server ctl;
	char control_socket[CONFIG_VSOCK_PATH_MAX + sizeof(CTL_SUFFIX)];
};

/* The launch's timings at end_ns: the VMM's set-up, its milestones up to
 * PHASE_AGENT_READY (the command's, -1 here, are the caller's), the VM's
 * exits by kind. After launch_run, in the VM process. */
void launch_timings(const struct launch *l, uint64_t end_ns, struct event_timings *t);

/* Ready l, which comes zeroed (calloc: it is large, mostly the agent
 * client's buffers, and a page never written costs a VM process nothing):
 * fail_code EXIT_INTERNAL, no descriptor open. */
void launch_init(struct launch *l);

/* Run the sequence above and tear it down. Single-threaded when called,
 * the process's seccomp set-up (seccomp_setup) done. Returns the exit
 * code: in the VM process, vm_build's on a failed build or vm_run's; in
 * a jail's supervisor, the VM process's (128+N when killed by signal N);
 * l->fail_code when a step failed (after one line). Whoever returns, the
 * VM is destroyed and every helper process reaped; the caller reads
 * l->vm_process, l->built, l->agent and vm_exit_reason(&l->vm). */
int launch_run(struct launch *l, uint64_t start_ns);

#endif
