/* state.h - an arm64 VM's KVM state saved and put back: each vCPU's registers (KVM_GET_REG_LIST, ONE_REG) and power state, the GICv3's registers. */
#ifndef MAYFLY_ARM64_STATE_H
#define MAYFLY_ARM64_STATE_H

#include "arm64/state_codec.h"

/* vCPU vcpu_fd, parked: every register KVM lists for it, its MP state and
 * events. 0 or -errno with *why. */
int arm64_vcpu_state_save(int vcpu_fd, struct arm64_vcpu_state *s, const char **why)
	__attribute__((warn_unused_result));
/* Into a vCPU made and initialised as the saved one was (same target and
 * features), before it runs: the registers in KVM's list order (the
 * timer's counter with them, so the guest's virtual time goes on from the
 * save), then the MP state and events. 0 or -errno with *why. */
int arm64_vcpu_state_restore(int vcpu_fd, const struct arm64_vcpu_state *s, const char **why)
	__attribute__((warn_unused_result));

/* The VM's: KVM's preferred target, the GICv3's interrupt count and its
 * distributor, each vCPU's redistributor and CPU interface (vcpu_fds in
 * index order, parked). 0 or -errno with *why. */
int arm64_vm_state_save(int vm_fd, int gic_fd, const int *vcpu_fds, unsigned n,
			struct arm64_vm_state *s, const char **why)
	__attribute__((warn_unused_result));
/* KVM's preferred CPU target on this host (what a snapshot must match). */
int arm64_preferred_target(int vm_fd, uint32_t *target) __attribute__((warn_unused_result));
/* Into a GICv3 made and initialised for the same vCPUs, after their
 * registers. 0 or -errno with *why naming the register KVM refused. */
int arm64_vm_state_restore(int gic_fd, const struct arm64_vm_state *s, const char **why)
	__attribute__((warn_unused_result));

#endif
