/* cpuid.c - the guest's CPUID: what KVM supports, with the hypervisor bit and a topology to match --cpus. */
#include "cpu.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/ioctl.h>

#define CPUID_MAX_ENTRIES 1024

int cpuid_get_supported(int kvm_sys_fd, struct kvm_cpuid2 **out)
{
	/* KVM answers E2BIG until the table is large enough; 256 entries
	 * cover today's CPUs in one call. */
	for (uint32_t n = 256; n <= CPUID_MAX_ENTRIES; n *= 2) {
		struct kvm_cpuid2 *c = calloc(1, sizeof(*c) + n * sizeof(c->entries[0]));

		if (!c)
			return -ENOMEM;
		c->nent = n;
		if (ioctl(kvm_sys_fd, KVM_GET_SUPPORTED_CPUID, c) == 0) {
			*out = c;
			return 0;
		}
		free(c);
		if (errno != E2BIG)
			return -errno;
	}
	return -E2BIG;
}

struct kvm_cpuid_entry2 *cpuid_find(struct kvm_cpuid2 *cpuid, uint32_t function, uint32_t index)
{
	for (uint32_t i = 0; i < cpuid->nent; i++) {
		struct kvm_cpuid_entry2 *e = &cpuid->entries[i];
		bool indexed = e->flags & KVM_CPUID_FLAG_SIGNIFCANT_INDEX;

		if (e->function == function && (!indexed || e->index == index))
			return e;
	}
	return NULL;
}

/* Bits needed to number n things (ceil(log2(n))). */
static uint32_t order(uint32_t n)
{
	uint32_t bits = 0;

	while ((1u << bits) < n)
		bits++;
	return bits;
}

/* Leaves 0xB and 0x1F: one thread per core, nr_cpus cores in one package. */
static void patch_ext_topology(struct kvm_cpuid_entry2 *e, unsigned apic_id, unsigned nr_cpus)
{
	e->edx = apic_id;
	switch (e->index) {
	case 0:   /* SMT level */
		e->eax = 0;
		e->ebx = 1;
		e->ecx = (1u << 8) | 0;
		break;
	case 1:   /* core level */
		e->eax = order(nr_cpus);
		e->ebx = nr_cpus;
		e->ecx = (2u << 8) | 1;
		break;
	default:  /* no further levels */
		e->eax = 0;
		e->ebx = 0;
		e->ecx = e->index;
		break;
	}
}

void cpuid_patch(struct kvm_cpuid2 *cpuid, unsigned cpu_index, unsigned nr_cpus)
{
	for (uint32_t i = 0; i < cpuid->nent; i++) {
		struct kvm_cpuid_entry2 *e = &cpuid->entries[i];

		switch (e->function) {
		case 1:
			e->ebx &= 0x0000ffffu;          /* keep brand index, CLFLUSH size */
			e->ebx |= (uint32_t)cpu_index << 24;  /* initial APIC id */
			e->ebx |= (uint32_t)nr_cpus << 16;    /* logical processors */
			if (nr_cpus > 1)
				e->edx |= 1u << 28;     /* HTT: the count above is valid */
			else
				e->edx &= ~(1u << 28);
			e->ecx |= 1u << 31;             /* hypervisor present */
			break;
		case 4:
			/* Deterministic cache parameters: cores per package, and
			 * each cache private to a core except the last level. */
			if ((e->eax & 0x1f) == 0)
				break;
			e->eax &= 0x3fffu;
			e->eax |= (uint32_t)(nr_cpus - 1) << 26;
			if (((e->eax >> 5) & 7) >= 3)
				e->eax |= (uint32_t)(nr_cpus - 1) << 14;
			break;
		case 6:
			e->ecx &= ~(1u << 3);           /* no energy-performance bias MSR */
			break;
		case 0xa:
			/* No PMU: a guest that probes none touches no PMU MSRs. */
			e->eax = e->ebx = e->ecx = e->edx = 0;
			break;
		case 0xb:
		case 0x1f:
			patch_ext_topology(e, cpu_index, nr_cpus);
			break;
		case 0x80000008:
			e->ecx &= ~0xf0ffu;             /* AMD: NC and ApicIdSize */
			e->ecx |= nr_cpus - 1;
			e->ecx |= order(nr_cpus) << 12;
			break;
		default:
			break;
		}
	}
}

void cpuid_enable_tsc_deadline(struct kvm_cpuid2 *cpuid)
{
	struct kvm_cpuid_entry2 *e = cpuid_find(cpuid, 1, 0);

	if (e)
		e->ecx |= 1u << 24;
}
