/* cpu.h - an arm64 guest's CPUs and interrupt controller through KVM: vCPU init with PSCI, registers by ONE_REG, the in-kernel GICv3. */
#ifndef MAYFLY_ARM64_CPU_H
#define MAYFLY_ARM64_CPU_H

#include <stdbool.h>
#include <stdint.h>

#include "arm64/fdt.h"

/* The guest-physical map of an arm64 VM (the device tree says the same;
 * below RAM, as on QEMU's virt machine, so RAM may grow upwards). */
#define ARM64_GIC_DIST        0x08000000ULL   /* 64 KiB */
#define ARM64_GIC_DIST_SIZE   0x10000ULL
#define ARM64_GIC_REDIST      0x080a0000ULL   /* 128 KiB a vCPU, up to the UART */
#define ARM64_UART            0x09000000ULL   /* a 16550, 4 KiB window */
#define ARM64_RAM_BASE        0x80000000ULL
#define ARM64_MAX_VCPUS       ((ARM64_UART - ARM64_GIC_REDIST) / ARM64_GIC_REDIST_SIZE)   /* 123 */

/* PSCI 0.2 function ids a guest calls with hvc (SMCCC, 32-bit forms). */
#define PSCI_CPU_OFF          0x84000002u
#define PSCI_CPU_ON_64        0xc4000003u
#define PSCI_SYSTEM_OFF       0x84000008u
#define PSCI_SYSTEM_RESET     0x84000009u

/* vCPU index of a VM: the host's preferred CPU target, PSCI 0.2 handled
 * by KVM (CPU_ON, CPU_OFF, SYSTEM_OFF and SYSTEM_RESET exits), the boot
 * CPU (index 0) running and the others powered off until a CPU_ON.
 * 0 or -errno with *why the ioctl. */
int arm64_vcpu_init(int vm_fd, int vcpu_fd, unsigned index, const char **why)
	__attribute__((warn_unused_result));

/* The boot CPU at the kernel's entry (arm64 boot protocol: x0 the device
 * tree's address, x1-x3 zero; KVM's reset gave EL1h with DAIF masked and
 * the MMU off). 0 or -errno. */
int arm64_vcpu_set_entry(int vcpu_fd, uint64_t pc, uint64_t x0) __attribute__((warn_unused_result));

/* A core register (struct kvm_regs' offset, as KVM_REG_ARM_CORE) read or
 * written as 64 bits. 0 or -errno. */
int arm64_core_reg_get(int vcpu_fd, uint64_t offset, uint64_t *value)
	__attribute__((warn_unused_result));
int arm64_core_reg_set(int vcpu_fd, uint64_t offset, uint64_t value)
	__attribute__((warn_unused_result));
/* MPIDR_EL1 as KVM gave it (the affinity the device tree must list). */
int arm64_vcpu_mpidr(int vcpu_fd, uint64_t *mpidr) __attribute__((warn_unused_result));

/* The in-kernel GICv3 at ARM64_GIC_DIST and ARM64_GIC_REDIST for nr_vcpus:
 * created (after the vCPUs or before them; KVM takes either) and its fd
 * returned; then arm64_gic_init once every vCPU exists, before the first
 * KVM_RUN. fd, or -errno with *why. */
int arm64_gic_create(int vm_fd, unsigned nr_vcpus, const char **why)
	__attribute__((warn_unused_result));
int arm64_gic_init(int gic_fd, const char **why) __attribute__((warn_unused_result));

#endif
