/* phase.h - the milestones of one VM's run, in the order they happen: the names every timings record uses (run --json, mayfly bench). */
#ifndef MAYFLY_LIB_PHASE_H
#define MAYFLY_LIB_PHASE_H

#include <stdint.h>

/* In time order. A jailed cold boot has them all; a restore has no
 * guest_loaded or guest_init; a command that writes nothing has no
 * first_output; --no-jail has no cgroup_made or vm_forked. */
enum phase {
	PHASE_CGROUP_MADE,     /* jailed: the jail's directory and cgroup made */
	PHASE_VM_FORKED,       /* jailed: the VM process forked, PID 1 of its namespace */
	PHASE_JAIL_STARTED,    /* the VM process in its namespaces, ready to build */
	PHASE_MEMORY_MAPPED,   /* guest RAM mapped (restored: the memory file) */
	PHASE_GUEST_LOADED,    /* cold: the kernel and initrd loaded */
	PHASE_VM_CREATED,      /* KVM_CREATE_VM */
	PHASE_DEVICES_READY,   /* vCPUs and devices built, or their state restored */
	PHASE_JAIL_ENTERED,    /* pivot_root, ids and capabilities dropped */
	PHASE_FIRST_RUN,       /* vCPU 0's first KVM_RUN */
	PHASE_GUEST_INIT,      /* cold: the guest's init wrote the boot timer */
	PHASE_AGENT_READY,     /* the guest agent answered its handshake */
	PHASE_COMMAND_STARTED, /* the agent said the command started */
	PHASE_FIRST_OUTPUT,    /* the command's first byte of output arrived */
	PHASE_COMMAND_ENDED,   /* the agent said the command exited */
	PHASE_NR
};

/* "jail_started", ...: the phase's name in JSON. */
const char *phase_name(enum phase p);

/* Milliseconds from `from` to `to` (CLOCK_MONOTONIC ns); -1 when either is
 * 0 (never reached). */
double phase_ms(uint64_t from, uint64_t to);

#endif
