/* vm_state.h - the VM-wide KVM state: PIC, IOAPIC, PIT and KVM clock; save, restore, encode and decode. */
#ifndef MAYFLY_X86_VM_STATE_H
#define MAYFLY_X86_VM_STATE_H

#include <linux/kvm.h>
#include <stddef.h>

#include "snapshot/codec.h"

/* The in-kernel devices' state (KVM's x86-64 UAPI structs, byte for byte). */
struct vm_state {
	struct kvm_irqchip pic_master;  /* chip_id KVM_IRQCHIP_PIC_MASTER */
	struct kvm_irqchip pic_slave;   /* chip_id KVM_IRQCHIP_PIC_SLAVE */
	struct kvm_irqchip ioapic;      /* chip_id KVM_IRQCHIP_IOAPIC */
	struct kvm_pit_state2 pit;
	struct kvm_clock_data clock;
};

/* Read the irqchip (both PICs, the IOAPIC), the PIT and the KVM clock of a
 * VM made with KVM_CREATE_IRQCHIP and KVM_CREATE_PIT2. Take it with every
 * vCPU paused, before saving them. 0 or -errno with *why naming the ioctl. */
int vm_state_save(int vm_fd, struct vm_state *s, const char **why)
	__attribute__((warn_unused_result));

/* Restore `s` into a fresh VM that has its irqchip and PIT and already has
 * its vCPUs created (and not yet run): PIT, KVM clock, then the irqchip.
 * Call before vcpu_state_restore. The KVM clock is set to the saved value
 * (no KVM_CLOCK_REALTIME): the guest's clocks go on from where they were,
 * as if no time passed while the snapshot sat on disk; giving the guest
 * the wall-clock time is the agent's job. 0 or -errno with *why. */
int vm_state_restore(int vm_fd, const struct vm_state *s, const char **why)
	__attribute__((warn_unused_result));

/* Append `s` to `out` as a section payload (SNAP_SEC_VM). Failures are
 * left in out->err. */
void vm_state_encode(const struct vm_state *s, struct snap_out *out);

/* Decode an untrusted payload into `s`: -EBADMSG with *why when it is not
 * exactly one encoded vm_state or a chip id is not the one its place
 * needs. Pure. */
int vm_state_decode(struct vm_state *s, const void *data, size_t len, const char **why)
	__attribute__((warn_unused_result));

#endif
