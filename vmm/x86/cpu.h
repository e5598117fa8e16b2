/* cpu.h - x86 vCPU state for boot: CPUID, MSRs, segment/control registers, page tables, MP table. */
#ifndef MAYFLY_X86_CPU_H
#define MAYFLY_X86_CPU_H

#include <linux/kvm.h>
#include <stdbool.h>
#include <stdint.h>

#include "mem/mem.h"
#include "snapshot/codec.h"
#include "boot.h"

/* --- cpuid.c --- */

/* Most entries a CPUID table may have, from KVM or from a snapshot. */
#define CPUID_MAX_ENTRIES 1024

/* Fetch KVM_GET_SUPPORTED_CPUID into a heap table the caller frees. 0 or -errno. */
int cpuid_get_supported(int kvm_sys_fd, struct kvm_cpuid2 **out)
	__attribute__((warn_unused_result));

/* Make `cpuid` describe vCPU `cpu_index` of `nr_cpus`: APIC id, logical
 * count and HTT, the hypervisor bit (so the guest finds KVM's leaves at
 * 0x40000000 and uses kvm-clock), a coherent topology (leaves 4, 0xB, 0x1F,
 * 0x80000008), and no PMU (leaf 0xA zero). Pure: touches only the table. */
void cpuid_patch(struct kvm_cpuid2 *cpuid, unsigned cpu_index, unsigned nr_cpus);

/* Advertise the TSC-deadline LAPIC timer (leaf 1 ECX bit 24). KVM emulates
 * it when KVM_CAP_TSC_DEADLINE_TIMER says so, but KVM_GET_SUPPORTED_CPUID
 * leaves the bit clear. Without it Linux calibrates the LAPIC timer against
 * the PIT and, under nested virtualisation, may reject it and fall back to
 * the PIT for its ticks. */
void cpuid_enable_tsc_deadline(struct kvm_cpuid2 *cpuid);

/* Entry for (function, index) or NULL. (Like strchr, a const table gives
 * back a pointer the caller must treat as const.) */
struct kvm_cpuid_entry2 *cpuid_find(const struct kvm_cpuid2 *cpuid, uint32_t function, uint32_t index);

/* Append `cpuid` to `out` as a snapshot section payload (SNAP_SEC_CPUID):
 * nent u32, then per entry function, index, flags, eax, ebx, ecx, edx (u32
 * each). Failures are left in out->err. */
void cpuid_encode(const struct kvm_cpuid2 *cpuid, struct snap_out *out);

/* Decode a cpuid_encode() payload (untrusted) into a heap table the caller
 * frees. 0, -ENOMEM, or -EBADMSG with *why: nent 0 or above
 * CPUID_MAX_ENTRIES, or a payload not exactly that long. */
int cpuid_decode(const void *data, size_t len, struct kvm_cpuid2 **out, const char **why)
	__attribute__((warn_unused_result));

/* Can this host run a guest that was given `saved`? Every feature bit set
 * in `saved` in the feature registers (leaf 1 ECX/EDX, 6 EAX, 7.0
 * EBX/ECX/EDX, 7.1 EAX, 0xD.0 EAX/EDX, 0xD.1 EAX/ECX/EDX, 0x80000001
 * ECX/EDX, 0x80000007 EDX, 0x80000008 EBX, KVM's 0x40000001 EAX) must be set
 * in `host` (KVM_GET_SUPPORTED_CPUID here). Not checked: the bits mayfly
 * sets itself (hypervisor, HTT: cpuid_patch) and those that follow guest
 * state (OSXSAVE, OSPKE, APIC); TSC-deadline (cpuid_enable_tsc_deadline) is
 * accepted when `host_tsc_deadline` says KVM_CAP_TSC_DEADLINE_TIMER is there.
 * Pure. 0, or -ENOTSUP with *why naming the first missing leaf, register
 * and bit (and the feature, when known). */
int cpuid_check_host(const struct kvm_cpuid2 *saved, const struct kvm_cpuid2 *host,
		     bool host_tsc_deadline, const char **why) __attribute__((warn_unused_result));

/* --- regs.c --- */

/* Write the boot GDT, an empty IDT and, with page_tables, identity page
 * tables for the first 4 GiB at layout.h's addresses. 0 or -EFAULT when RAM
 * is too small. */
int regs_write_boot_tables(const struct guest_mem *mem, bool page_tables)
	__attribute__((warn_unused_result));

/* The 64-bit GDT descriptor for (flags, base, limit) as the CPU reads it. */
uint64_t regs_gdt_entry(uint16_t flags, uint32_t base, uint32_t limit);

/* Registers for the boot vCPU: 64-bit long mode at `entry` with RSI = zero
 * page for KERNEL_ELF64/BZIMAGE; 32-bit protected mode, paging off, EBX =
 * start info for KERNEL_PVH. Plus FPU state. 0 or -errno. */
int regs_setup_boot_cpu(int vcpu_fd, enum kernel_format format, uint64_t entry)
	__attribute__((warn_unused_result));

/* MSRs every vCPU starts with (SYSENTER/SYSCALL zeroed, fast strings on,
 * MTRRs enabled write-back). 0 or -errno. */
int regs_setup_msrs(int vcpu_fd) __attribute__((warn_unused_result));

/* LAPIC LINT0 as ExtINT and LINT1 as NMI, as a PC's BIOS leaves them. */
int regs_setup_lapic(int vcpu_fd) __attribute__((warn_unused_result));

/* --- mptable.c --- */

/* Write an Intel MP table at LAYOUT_MPTABLE announcing nr_cpus processors
 * (APIC ids 0..n-1, 0 is the BSP), the ISA bus, the IOAPIC and its 24
 * interrupt pins, so a Linux guest brings every CPU online without ACPI.
 * Returns 0, -E2BIG when it would not fit, -EFAULT outside RAM. */
int mptable_write(const struct guest_mem *mem, unsigned nr_cpus)
	__attribute__((warn_unused_result));

#endif
