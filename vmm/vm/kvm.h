/* kvm.h - /dev/kvm: open it, check the API and every capability mayfly uses, create the VM. */
#ifndef MAYFLY_VM_KVM_H
#define MAYFLY_VM_KVM_H

#include <stdbool.h>
#include <stdint.h>

#include "mem/mem.h"

struct kvm {
	int sys_fd;        /* /dev/kvm */
	int vm_fd;
	int run_size;      /* bytes of each vCPU's struct kvm_run mapping */
	int max_vcpus;
};

/* Open the KVM device and verify API version 12 and the capabilities.
 * Returns 0; -ENOENT/-EACCES/-EPERM (device missing or not permitted) or
 * -ENOTSUP (wrong API or a capability missing) with *why naming what. */
int kvm_open(struct kvm *kvm, const char *device, const char **why)
	__attribute__((warn_unused_result));

/* Create the VM: the architecture's in-kernel interrupt controller and
 * timers (arch_vm_create), and guest RAM as memory slots. */
int kvm_create_vm(struct kvm *kvm, const struct guest_mem *mem, const char **why)
	__attribute__((warn_unused_result));

/* Drive an interrupt line of the in-kernel interrupt controller (x86: an
 * ISA line, 0-23). */
int kvm_irq_line(struct kvm *kvm, unsigned irq, int level);

/* Have KVM signal `fd` when the guest writes `datamatch` as a `len`-byte
 * value to MMIO address `addr`, without an exit to user space. */
int kvm_add_ioeventfd(struct kvm *kvm, uint64_t addr, uint32_t len, uint64_t datamatch, int fd)
	__attribute__((warn_unused_result));

/* Have KVM raise interrupt line `gsi` (as an edge) each time `fd` is written. */
int kvm_add_irqfd(struct kvm *kvm, unsigned gsi, int fd) __attribute__((warn_unused_result));

/* Have KVM log the guest's writes to RAM (KVM_MEM_LOG_DIRTY_PAGES on
 * every slot of mem, as kvm_create_vm made them). 0 or -errno. */
int kvm_dirty_log_start(struct kvm *kvm, const struct guest_mem *mem)
	__attribute__((warn_unused_result));

/* The pages the guest wrote since kvm_dirty_log_start: bit i of
 * bitmap[i / 8] for page i of mem's mapping (its regions one after the
 * other), mem->total / 4096 bits; the caller zeroes it. 0 or -errno. */
int kvm_dirty_log_get(struct kvm *kvm, const struct guest_mem *mem, uint8_t *bitmap)
	__attribute__((warn_unused_result));

/* Whether this VM has KVM_PRE_FAULT_MEMORY (Linux 6.10; x86 with two-
 * dimensional paging): KVM_CHECK_EXTENSION on the VM. */
bool kvm_can_pre_fault(const struct kvm *kvm);

/* Map guest-physical [gpa, gpa + size) (page-aligned, inside a memory slot)
 * into the VM's own page tables through vCPU fd vcpu_fd, as if the guest
 * had read it: each page's host page comes in now (writable where the host
 * page already is), and the guest takes no exit for it later. The vCPU's
 * registers must be set and it must not be running (the ioctl takes its
 * lock). 0, or -errno (-ENOTTY/-EOPNOTSUPP without it). */
int kvm_pre_fault(int vcpu_fd, uint64_t gpa, uint64_t size);

void kvm_close(struct kvm *kvm);

#endif
