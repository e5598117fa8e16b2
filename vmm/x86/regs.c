/* regs.c - boot-time vCPU registers: GDT, page tables, segment and control registers, MSRs, LAPIC. */
#include "cpu.h"
#include "layout.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#define CR0_PE   (1ULL << 0)
#define CR0_ET   (1ULL << 4)
#define CR0_PG   (1ULL << 31)
#define CR4_PAE  (1ULL << 5)
#define EFER_LME (1ULL << 8)
#define EFER_LMA (1ULL << 10)

#define PTE_PRESENT  (1ULL << 0)
#define PTE_RW       (1ULL << 1)
#define PTE_PS       (1ULL << 7)

#define MSR_IA32_SYSENTER_CS   0x174
#define MSR_IA32_SYSENTER_ESP  0x175
#define MSR_IA32_SYSENTER_EIP  0x176
#define MSR_STAR               0xc0000081
#define MSR_LSTAR              0xc0000082
#define MSR_CSTAR              0xc0000083
#define MSR_SYSCALL_MASK       0xc0000084
#define MSR_KERNEL_GS_BASE     0xc0000102
#define MSR_IA32_TSC           0x10
#define MSR_IA32_MISC_ENABLE   0x1a0
#define MSR_MTRR_DEF_TYPE      0x2ff

#define APIC_LVT_LINT0  0x350
#define APIC_LVT_LINT1  0x360
#define APIC_MODE_NMI    4
#define APIC_MODE_EXTINT 7

/* Descriptor flags (access byte low, G/D/L nibble high). */
#define GDT_CODE32 0xc09b   /* present, ring 0, code r/x, accessed; 4K gran, 32-bit */
#define GDT_CODE64 0xa09b   /* as above but L=1 (64-bit) */
#define GDT_DATA   0xc093   /* present, ring 0, data r/w, accessed; 4K gran, 32-bit */
#define GDT_TSS    0x008b   /* present, busy 32-bit TSS */

/* A GDT descriptor as the CPU reads it, as a constant expression. */
#define GDT_ENTRY(flags, base, limit) \
	((((uint64_t)(base) & 0xff000000u) << 32) | \
	 (((uint64_t)(flags) & 0xf0ffu) << 40) | \
	 (((uint64_t)(limit) & 0x000f0000u) << 32) | \
	 (((uint64_t)(base) & 0x00ffffffu) << 16) | \
	 ((uint64_t)(limit) & 0x0000ffffu))

static const uint64_t boot_gdt[LAYOUT_GDT_ENTRIES] = {
	[LAYOUT_GDT_CODE32 / 8] = GDT_ENTRY(GDT_CODE32, 0, 0xfffff),
	[LAYOUT_GDT_CODE64 / 8] = GDT_ENTRY(GDT_CODE64, 0, 0xfffff),
	[LAYOUT_GDT_DATA / 8] = GDT_ENTRY(GDT_DATA, 0, 0xfffff),
	[LAYOUT_GDT_TSS / 8] = GDT_ENTRY(GDT_TSS, 0, 0x67),
};

uint64_t regs_gdt_entry(uint16_t flags, uint32_t base, uint32_t limit)
{
	return GDT_ENTRY(flags, base, limit);
}

int regs_write_boot_tables(const struct guest_mem *mem, bool page_tables)
{
	uint64_t pml4 = LAYOUT_PDPT | PTE_PRESENT | PTE_RW;
	uint64_t zero_idt = 0;

	if (mem_write(mem, LAYOUT_GDT, boot_gdt, LAYOUT_GDT_ENTRIES * 8) ||
	    mem_write(mem, LAYOUT_IDT, &zero_idt, sizeof(zero_idt)))
		return -EFAULT;
	if (!page_tables)
		return 0;
	if (mem_write(mem, LAYOUT_PML4, &pml4, sizeof(pml4)))
		return -EFAULT;
	for (uint64_t i = 0; i < LAYOUT_PD_COUNT; i++) {
		uint64_t pdpte = (LAYOUT_PD + i * LAYOUT_PAGE_SIZE) | PTE_PRESENT | PTE_RW;
		uint64_t *pd = mem_gpa_to_hva(mem, LAYOUT_PD + i * LAYOUT_PAGE_SIZE,
					      LAYOUT_PAGE_SIZE);

		if (!pd || mem_write(mem, LAYOUT_PDPT + i * 8, &pdpte, sizeof(pdpte)))
			return -EFAULT;
		/* 2 MiB identity pages: enough for any kernel to find itself. */
		for (uint64_t j = 0; j < 512; j++)
			pd[j] = ((i * 512 + j) << 21) | PTE_PRESENT | PTE_RW | PTE_PS;
	}
	return 0;
}

static struct kvm_segment segment_from_gdt(uint16_t selector)
{
	uint64_t d = boot_gdt[selector / 8];
	struct kvm_segment s = {
		.base = (uint32_t)(((d >> 16) & 0xffffff) | ((d >> 32) & 0xff000000)),
		.limit = (uint32_t)((d & 0xffff) | ((d >> 32) & 0xf0000)),
		.selector = selector,
		.type = (d >> 40) & 0xf,
		.present = (d >> 47) & 1,
		.dpl = (d >> 45) & 3,
		.db = (d >> 54) & 1,
		.s = (d >> 44) & 1,
		.l = (d >> 53) & 1,
		.g = (d >> 55) & 1,
	};

	/* With 4K granularity the CPU sees the limit scaled up. */
	if (s.g)
		s.limit = (s.limit << 12) | 0xfff;
	return s;
}

int regs_setup_boot_cpu(int vcpu_fd, enum kernel_format format, uint64_t entry)
{
	bool pvh = format == KERNEL_PVH;
	struct kvm_sregs sregs;
	struct kvm_regs regs;
	struct kvm_fpu fpu;
	struct kvm_segment data = segment_from_gdt(LAYOUT_GDT_DATA);

	if (ioctl(vcpu_fd, KVM_GET_SREGS, &sregs) < 0)
		return -errno;
	sregs.gdt.base = LAYOUT_GDT;
	sregs.gdt.limit = LAYOUT_GDT_ENTRIES * 8 - 1;
	sregs.idt.base = LAYOUT_IDT;
	sregs.idt.limit = 0;
	sregs.cs = segment_from_gdt(pvh ? LAYOUT_GDT_CODE32 : LAYOUT_GDT_CODE64);
	sregs.ds = sregs.es = sregs.fs = sregs.gs = sregs.ss = data;
	sregs.tr = segment_from_gdt(LAYOUT_GDT_TSS);
	if (pvh) {
		/* PVH: protected mode, paging off, CR4 clear. */
		sregs.cr0 = CR0_PE | CR0_ET;
		sregs.cr4 = 0;
		sregs.efer = 0;
	} else {
		sregs.cr3 = LAYOUT_PML4;
		sregs.cr4 = CR4_PAE;
		sregs.cr0 = CR0_PE | CR0_ET | CR0_PG;
		sregs.efer = EFER_LME | EFER_LMA;
	}
	if (ioctl(vcpu_fd, KVM_SET_SREGS, &sregs) < 0)
		return -errno;

	memset(&regs, 0, sizeof(regs));
	regs.rflags = 2;   /* bit 1 is always set; IF clear */
	regs.rip = entry;
	if (pvh) {
		regs.rbx = LAYOUT_PVH_START_INFO;
	} else {
		regs.rsp = regs.rbp = LAYOUT_BOOT_STACK;
		regs.rsi = LAYOUT_ZERO_PAGE;
	}
	if (ioctl(vcpu_fd, KVM_SET_REGS, &regs) < 0)
		return -errno;

	memset(&fpu, 0, sizeof(fpu));
	fpu.fcw = 0x37f;     /* x87 default control word */
	fpu.mxcsr = 0x1f80;  /* SSE: all exceptions masked */
	if (ioctl(vcpu_fd, KVM_SET_FPU, &fpu) < 0)
		return -errno;
	return 0;
}

int regs_setup_msrs(int vcpu_fd)
{
	static const struct { uint32_t index; uint64_t data; } boot_msrs[] = {
		{ MSR_IA32_SYSENTER_CS, 0 }, { MSR_IA32_SYSENTER_ESP, 0 },
		{ MSR_IA32_SYSENTER_EIP, 0 }, { MSR_STAR, 0 }, { MSR_CSTAR, 0 },
		{ MSR_KERNEL_GS_BASE, 0 }, { MSR_SYSCALL_MASK, 0 }, { MSR_LSTAR, 0 },
		{ MSR_IA32_TSC, 0 },
		{ MSR_IA32_MISC_ENABLE, 1 },                 /* fast string operations */
		{ MSR_MTRR_DEF_TYPE, (1u << 11) | 6 },       /* MTRRs on, default write-back */
	};
	enum { N = sizeof(boot_msrs) / sizeof(boot_msrs[0]) };
	struct kvm_msrs *msrs = calloc(1, sizeof(*msrs) + N * sizeof(msrs->entries[0]));
	int rc;

	if (!msrs)
		return -ENOMEM;
	msrs->nmsrs = N;
	for (int i = 0; i < N; i++) {
		msrs->entries[i].index = boot_msrs[i].index;
		msrs->entries[i].data = boot_msrs[i].data;
	}
	/* KVM_SET_MSRS returns how many it set: all or an error. */
	rc = ioctl(vcpu_fd, KVM_SET_MSRS, msrs);
	free(msrs);
	if (rc < 0)
		return -errno;
	return rc == N ? 0 : -EINVAL;
}

static void lapic_set_lvt_mode(struct kvm_lapic_state *lapic, int reg, uint32_t mode)
{
	uint32_t v;

	memcpy(&v, &lapic->regs[reg], sizeof(v));
	v = (v & ~0x700u) | (mode << 8);
	memcpy(&lapic->regs[reg], &v, sizeof(v));
}

int regs_setup_lapic(int vcpu_fd)
{
	struct kvm_lapic_state lapic;

	if (ioctl(vcpu_fd, KVM_GET_LAPIC, &lapic) < 0)
		return -errno;
	lapic_set_lvt_mode(&lapic, APIC_LVT_LINT0, APIC_MODE_EXTINT);
	lapic_set_lvt_mode(&lapic, APIC_LVT_LINT1, APIC_MODE_NMI);
	if (ioctl(vcpu_fd, KVM_SET_LAPIC, &lapic) < 0)
		return -errno;
	return 0;
}
