/* vcpu_state.h - one vCPU's whole KVM state: save, restore in the order KVM needs, encode and decode. */
#ifndef MAYFLY_X86_VCPU_STATE_H
#define MAYFLY_X86_VCPU_STATE_H

#include <linux/kvm.h>
#include <stddef.h>
#include <stdint.h>

#include "snapshot/codec.h"

/* Bounds a decoded state must respect (a corrupt or hostile file cannot
 * make the VMM allocate or copy more). */
#define VCPU_STATE_MSRS_MAX   256u
#define VCPU_STATE_XSAVE_MIN  4096u           /* sizeof(struct kvm_xsave) */
#define VCPU_STATE_XSAVE_MAX  (64u * 1024)    /* AMX needs ~11 KiB today */

/* Everything KVM keeps for one vCPU that a restored guest needs. The KVM
 * structs are the kernel's x86-64 UAPI, byte for byte. */
struct vcpu_state {
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	struct kvm_xcrs xcrs;
	struct kvm_debugregs debugregs;
	struct kvm_lapic_state lapic;
	struct kvm_vcpu_events events;
	struct kvm_mp_state mp_state;
	uint32_t tsc_khz;               /* guest TSC frequency; 0 when KVM did not say */
	uint32_t nr_msrs;
	struct kvm_msr_entry msrs[VCPU_STATE_MSRS_MAX];
	uint32_t xsave_size;            /* bytes at xsave */
	uint8_t *xsave;                 /* heap; FPU, SSE, AVX... (KVM_GET_XSAVE/2) */
};

/* The MSRs a save carries, the same for every vCPU of a host. */
struct vcpu_msr_list {
	uint32_t n;
	uint32_t index[VCPU_STATE_MSRS_MAX];
};

/* Build the MSR list from KVM_GET_MSR_INDEX_LIST (on /dev/kvm's fd),
 * keeping what a restored guest needs: TSC, TSC_ADJUST, TSC_DEADLINE,
 * kvmclock and KVM's other paravirtual MSRs, SYSENTER, STAR/LSTAR/CSTAR/
 * SFMASK, KERNEL_GS_BASE, TSC_AUX, PAT, MISC_ENABLE, SPEC_CTRL, XSS... and
 * the MTRRs (which KVM handles but does not list). EFER, FS/GS base and the
 * APIC base travel in sregs. 0 or -errno with *why. */
int vcpu_state_msr_list(int kvm_sys_fd, struct vcpu_msr_list *list, const char **why)
	__attribute__((warn_unused_result));

/* Save vCPU `vcpu_fd` of VM `vm_fd` into `s` (allocates s->xsave: free with
 * vcpu_state_free). The vCPU must be out of KVM_RUN and settled, and no
 * vCPU of the VM may be running (KVM_GET_VCPU_EVENTS is not safe against
 * running siblings). MSRs in `msrs` that this vCPU cannot read are left
 * out. 0 or -errno with *why naming the ioctl. */
int vcpu_state_save(int vm_fd, int vcpu_fd, const struct vcpu_msr_list *msrs,
		    struct vcpu_state *s, const char **why) __attribute__((warn_unused_result));

/* Restore `s` into a fresh vCPU (created, never run), in the order KVM
 * needs: CPUID (`cpuid`, this vCPU's table), TSC frequency, MP state,
 * regs, sregs (before the LAPIC: they carry the APIC base), XSAVE, XCRs,
 * debug registers, LAPIC (before the MSRs: TSC_DEADLINE needs it), MSRs
 * (TSC_DEADLINE last, after TSC), vcpu events (last: SET_REGS clears pending
 * exceptions), then KVM_KVMCLOCK_CTRL (the guest's watchdogs learn it was
 * paused; refused when the guest has no kvmclock, which is fine). Call after
 * vm_state_restore. 0 or -errno with *why naming the step. */
int vcpu_state_restore(int vm_fd, int vcpu_fd, const struct kvm_cpuid2 *cpuid,
		       const struct vcpu_state *s, const char **why)
	__attribute__((warn_unused_result));

/* Free s->xsave; `s` may then be reused. */
void vcpu_state_free(struct vcpu_state *s);

/* Append `s` to `out` as a section payload (SNAP_SEC_VCPU(i), layout in
 * docs/snapshot.md). Failures are left in out->err. */
void vcpu_state_encode(const struct vcpu_state *s, struct snap_out *out);

/* Decode an untrusted payload into `s` (allocates s->xsave). Refuses with
 * -EBADMSG and *why: a payload cut short or with bytes left over, more than
 * VCPU_STATE_MSRS_MAX MSRs, an XSAVE size outside [VCPU_STATE_XSAVE_MIN,
 * VCPU_STATE_XSAVE_MAX] or not a multiple of 4. -ENOMEM. On failure `s`
 * holds nothing to free. */
int vcpu_state_decode(struct vcpu_state *s, const void *data, size_t len, const char **why)
	__attribute__((warn_unused_result));

#endif
