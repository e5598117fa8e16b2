/* phase.c - the names of a VM's milestones. */
#include "lib/phase.h"

static const char *const names[PHASE_NR] = {
	[PHASE_CGROUP_MADE] = "cgroup_made",
	[PHASE_VM_FORKED] = "vm_forked",
	[PHASE_JAIL_STARTED] = "jail_started",
	[PHASE_MEMORY_MAPPED] = "memory_mapped",
	[PHASE_GUEST_LOADED] = "guest_loaded",
	[PHASE_VM_CREATED] = "vm_created",
	[PHASE_DEVICES_READY] = "devices_ready",
	[PHASE_JAIL_ENTERED] = "jail_entered",
	[PHASE_FIRST_RUN] = "first_kvm_run",
	[PHASE_GUEST_INIT] = "guest_init",
	[PHASE_AGENT_READY] = "agent_ready",
	[PHASE_COMMAND_STARTED] = "command_started",
	[PHASE_FIRST_OUTPUT] = "first_output",
	[PHASE_COMMAND_ENDED] = "command_ended",
};

const char *phase_name(enum phase p)
{
	return p < PHASE_NR ? names[p] : "unknown";
}

double phase_ms(uint64_t from, uint64_t to)
{
	return from && to ? (double)(to - from) / 1e6 : -1;
}
