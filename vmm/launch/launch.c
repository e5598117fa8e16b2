/* launch.c - the one launch sequence, in its security order, and its teardown: every front end that starts a VM calls it. */
#include "launch/launch.h"
#include "policy/audit_writer.h"
#include "lib/clock.h"
#include "lib/exitcode.h"
#include "lib/log.h"

#include <errno.h>
#include <string.h>

void launch_init(struct launch *l)
{
	l->fail_code = EXIT_INTERNAL;
	vm_agent_init(&l->agent);
	l->spawner.fd = -1;
}

static void launch_phases(const struct launch *l, uint64_t at[PHASE_NR])
{
	const struct vm *vm = &l->vm;
	uint64_t init_us = l->snap ? 0 : vm_guest_init_us(vm);

	for (int p = 0; p < PHASE_NR; p++)
		at[p] = 0;
	at[PHASE_CGROUP_MADE] = l->jail.cgroup_ns;
	at[PHASE_VM_FORKED] = l->jail.forked_ns;
	at[PHASE_JAIL_STARTED] = l->jailed_ns;
	at[PHASE_MEMORY_MAPPED] = vm->mapped_ns;
	at[PHASE_GUEST_LOADED] = vm->loaded_ns;
	at[PHASE_VM_CREATED] = vm->created_ns;
	at[PHASE_DEVICES_READY] = l->built ? l->built_ns : 0;
	at[PHASE_JAIL_ENTERED] = l->entered_ns;
	at[PHASE_FIRST_RUN] = vm_first_run_ns(vm);
	/* The boot timer counts from process start, in microseconds. */
	at[PHASE_GUEST_INIT] = init_us ? l->start_ns + init_us * 1000 : 0;
	at[PHASE_AGENT_READY] = l->use_agent ? l->agent.ready_ns : 0;
}

_Static_assert(VCPU_EXIT_REASONS <= EVENT_EXIT_KINDS, "every exit reason has a slot");

void launch_timings(const struct launch *l, uint64_t end_ns, struct event_timings *t)
{
	uint64_t at[PHASE_NR];

	*t = (struct event_timings){
		.vmm_setup = phase_ms(l->start_ns, l->built_ns),
		.guest_init = l->snap ? -1 : (double)vm_guest_init_us(&l->vm) / 1000,
		.command_start = -1, .command_end = -1, .teardown = -1,
		.total = phase_ms(l->start_ns, end_ns),
		.restored = l->snap != NULL,
		.start_ns = l->start_ns,
		.nexits = VCPU_EXIT_REASONS,
	};
	launch_phases(l, at);
	for (int p = 0; p < PHASE_NR; p++)
		t->phases[p] = phase_ms(l->start_ns, at[p]);
	/* The event's older fields, the same milestones. */
	t->first_run = t->phases[PHASE_FIRST_RUN];
	t->agent_ready = t->phases[PHASE_AGENT_READY];
	for (int r = 0; r < VCPU_EXIT_REASONS; r++) {
		t->exit_kinds[r] = vcpu_exit_name(r);
		t->exit_counts[r] = l->vm.exits[r];
	}
}

/* Step 4: the approver runs outside the jail and the filters, from a
 * process forked now; the gate asks it. */
static int start_spawner(struct launch *l)
{
	int rc;

	if (!l->gate || !l->gate->approver.cmd)
		return 0;
	rc = approve_spawner_start(&l->spawner, &l->gate->approver);
	if (rc) {
		log_say("cannot start the approver's spawner: %s", strerror(-rc));
		return rc;
	}
	l->gate->spawner = &l->spawner;
	return 0;
}

/* Steps 7 to 11, in the VM process. */
static int build_and_run(struct launch *l)
{
	const struct vm_config *cfg = l->cfg;
	int code = vm_build(&l->vm, cfg, l->snap, l->start_ns);

	l->built_ns = clock_now_ns();
	if (!code && net_run_attach(&l->net, &l->vm))
		code = EXIT_INTERNAL;
	if (!code) {
		code = jail_enter(&l->jail, cfg);
		l->entered_ns = code ? 0 : clock_now_ns();
	}
	if (!code && ctl_server_start(&l->ctl, &l->vm))
		code = EXIT_INTERNAL;
	if (code)
		return code;
	l->built = true;
	if (!l->use_agent)
		return vm_run(&l->vm);
	return vm_agent_run(&l->agent, &l->vm, &l->net, &l->ctl, l->start_ns, l->built_ns);
}

int launch_run(struct launch *l, uint64_t start_ns)
{
	struct jail_config jc = *l->jail_cfg;
	char err[300];
	int code = l->fail_code;

	l->start_ns = start_ns;
	/* 1. */
	if (l->audit_path) {
		if (audit_open(&l->audit, l->audit_path, err, sizeof(err))) {
			log_say("%s", err);
			return l->fail_code;
		}
		l->audit_open = true;
		/* The VM process (jailed, from a fork of ours) never holds the
		 * log: a writer of its own does, and takes its records. */
		if (audit_writer_start(&l->audit, err, sizeof(err))) {
			log_say("%s", err);
			code = l->fail_code;
			goto out_audit;
		}
		if (l->gate)
			l->gate->audit = &l->audit;
	}
	/* 2. */
	if (l->prepare) {
		code = l->prepare(l, l->prepare_opaque);
		if (code)
			goto out_audit;
		code = l->fail_code;
	}
	/* 3. The broker's records go to the same log as the calls'. */
	if (net_run_start(&l->net, l->net_policy, jc.uid, jc.gid))
		goto out_audit;
	l->net.audit_log = l->audit_open ? &l->audit : NULL;
	/* 4. */
	if (start_spawner(l))
		goto out_helpers;
	/* 5. The supervisor built nothing: only the VM process destroys a VM. */
	if (l->cfg->vsock_path[0] &&
	    !ctl_socket_path(l->cfg->vsock_path, l->control_socket, sizeof(l->control_socket)))
		jc.control_socket = l->control_socket;
	if (jail_start(&l->jail, &jc, l->cfg, l->fail_code, &code) == JAIL_SUPERVISOR_DONE)
		goto out_helpers;
	l->vm_process = true;
	l->jailed_ns = clock_now_ns();
	/* 6. Bound while files still have their host names. */
	if (ctl_server_open(&l->ctl, l->cfg, l->snap))
		code = l->fail_code;
	else
		code = build_and_run(l);   /* 7 to 11 */
	/* The teardown, in reverse. vm_build set up what vm_destroy undoes
	 * when it ran at all. */
	ctl_server_stop(&l->ctl);
	vm_agent_close(&l->agent);
	if (l->built_ns)
		vm_destroy(&l->vm);
out_helpers:
	approve_spawner_stop(&l->spawner);
	net_run_stop(&l->net);
out_audit:
	if (l->audit_open)
		audit_close(&l->audit);
	l->audit_open = false;
	if (l->gate) {
		l->gate->audit = NULL;
		l->gate->spawner = NULL;
	}
	return code;
}
