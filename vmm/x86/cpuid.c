/* cpuid.c - the guest's CPUID: what KVM supports, with the hypervisor bit and a topology to match --cpus. */
#include "cpu.h"
#include "lib/errmsg.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/ioctl.h>

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

struct kvm_cpuid_entry2 *cpuid_find(const struct kvm_cpuid2 *cpuid, uint32_t function, uint32_t index)
{
	for (uint32_t i = 0; i < cpuid->nent; i++) {
		struct kvm_cpuid_entry2 *e = (struct kvm_cpuid_entry2 *)&cpuid->entries[i];
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

void cpuid_encode(const struct kvm_cpuid2 *cpuid, struct snap_out *out)
{
	snap_out_u32(out, cpuid->nent);
	for (uint32_t i = 0; i < cpuid->nent; i++) {
		const struct kvm_cpuid_entry2 *e = &cpuid->entries[i];

		snap_out_u32(out, e->function);
		snap_out_u32(out, e->index);
		snap_out_u32(out, e->flags);
		snap_out_u32(out, e->eax);
		snap_out_u32(out, e->ebx);
		snap_out_u32(out, e->ecx);
		snap_out_u32(out, e->edx);
	}
}

#define CPUID_ENTRY_BYTES 28u

int cpuid_decode(const void *data, size_t len, struct kvm_cpuid2 **out, const char **why)
{
	struct kvm_cpuid2 *c;
	struct snap_in in;
	uint32_t n;

	snap_in_init(&in, data, len);
	n = snap_in_u32(&in);
	if (in.bad || n == 0 || n > CPUID_MAX_ENTRIES || in.left != (size_t)n * CPUID_ENTRY_BYTES)
		return errmsg_why(why, -EBADMSG, "corrupt cpuid section: %u entries in %zu bytes", n, len);
	c = calloc(1, sizeof(*c) + n * sizeof(c->entries[0]));
	if (!c)
		return -ENOMEM;
	c->nent = n;
	for (uint32_t i = 0; i < n; i++) {
		struct kvm_cpuid_entry2 *e = &c->entries[i];

		e->function = snap_in_u32(&in);
		e->index = snap_in_u32(&in);
		e->flags = snap_in_u32(&in);
		e->eax = snap_in_u32(&in);
		e->ebx = snap_in_u32(&in);
		e->ecx = snap_in_u32(&in);
		e->edx = snap_in_u32(&in);
	}
	*out = c;
	return 0;
}

enum cpuid_reg { EAX, EBX, ECX, EDX };

/* The registers that hold feature bits, and the bits in them that a host
 * need not have (see cpuid_check_host). */
static const struct feature_reg {
	uint32_t leaf, sub;
	enum cpuid_reg reg;
	uint32_t unchecked;
} feature_regs[] = {
	{ 1, 0, ECX, (1u << 27) | (1u << 31) },   /* OSXSAVE follows CR4; hypervisor: ours */
	{ 1, 0, EDX, (1u << 9) | (1u << 28) },    /* APIC follows the APIC base; HTT: ours */
	{ 6, 0, EAX, 0 },
	{ 7, 0, EBX, 0 },
	{ 7, 0, ECX, 1u << 4 },                   /* OSPKE follows CR4 */
	{ 7, 0, EDX, 0 },
	{ 7, 1, EAX, 0 },
	{ 0xd, 0, EAX, 0 },                       /* XCR0 components */
	{ 0xd, 0, EDX, 0 },
	{ 0xd, 1, EAX, 0 },                       /* XSAVEOPT, XSAVEC, XSAVES... */
	{ 0xd, 1, ECX, 0 },                       /* IA32_XSS components */
	{ 0xd, 1, EDX, 0 },
	{ 0x40000001, 0, EAX, 0 },                /* KVM paravirtual features */
	{ 0x80000001, 0, ECX, 0 },
	{ 0x80000001, 0, EDX, 0 },
	{ 0x80000007, 0, EDX, 0 },
	{ 0x80000008, 0, EBX, 0 },
};

/* Names for the bits a Linux guest is most likely to depend on. */
static const struct feature_name {
	uint32_t leaf, sub;
	enum cpuid_reg reg;
	uint8_t bit;
	const char *name;
} feature_names[] = {
	{ 1, 0, ECX, 0, "sse3" }, { 1, 0, ECX, 1, "pclmulqdq" }, { 1, 0, ECX, 9, "ssse3" },
	{ 1, 0, ECX, 12, "fma" }, { 1, 0, ECX, 13, "cx16" }, { 1, 0, ECX, 19, "sse4.1" },
	{ 1, 0, ECX, 20, "sse4.2" }, { 1, 0, ECX, 21, "x2apic" }, { 1, 0, ECX, 22, "movbe" },
	{ 1, 0, ECX, 23, "popcnt" }, { 1, 0, ECX, 24, "tsc-deadline" }, { 1, 0, ECX, 25, "aes" },
	{ 1, 0, ECX, 26, "xsave" }, { 1, 0, ECX, 28, "avx" }, { 1, 0, ECX, 29, "f16c" },
	{ 1, 0, ECX, 30, "rdrand" }, { 1, 0, EDX, 0, "fpu" }, { 1, 0, EDX, 4, "tsc" },
	{ 1, 0, EDX, 25, "sse" }, { 1, 0, EDX, 26, "sse2" },
	{ 7, 0, EBX, 0, "fsgsbase" }, { 7, 0, EBX, 3, "bmi1" }, { 7, 0, EBX, 5, "avx2" },
	{ 7, 0, EBX, 7, "smep" }, { 7, 0, EBX, 8, "bmi2" }, { 7, 0, EBX, 9, "erms" },
	{ 7, 0, EBX, 10, "invpcid" }, { 7, 0, EBX, 16, "avx512f" }, { 7, 0, EBX, 18, "rdseed" },
	{ 7, 0, EBX, 19, "adx" }, { 7, 0, EBX, 20, "smap" }, { 7, 0, EBX, 23, "clflushopt" },
	{ 7, 0, EBX, 24, "clwb" }, { 7, 0, EBX, 29, "sha" }, { 7, 0, ECX, 2, "umip" },
	{ 7, 0, ECX, 3, "pku" }, { 7, 0, ECX, 22, "rdpid" }, { 7, 0, EDX, 4, "fsrm" },
	{ 7, 0, EDX, 26, "ibrs/ibpb" }, { 7, 0, EDX, 27, "stibp" }, { 7, 0, EDX, 31, "ssbd" },
	{ 0xd, 1, EAX, 0, "xsaveopt" }, { 0xd, 1, EAX, 1, "xsavec" }, { 0xd, 1, EAX, 3, "xsaves" },
	{ 0x40000001, 0, EAX, 3, "kvmclock2" }, { 0x40000001, 0, EAX, 5, "steal-time" },
	{ 0x40000001, 0, EAX, 24, "kvmclock-stable" },
	{ 0x80000001, 0, ECX, 0, "lahf_lm" }, { 0x80000001, 0, ECX, 5, "lzcnt" },
	{ 0x80000001, 0, EDX, 11, "syscall" }, { 0x80000001, 0, EDX, 20, "nx" },
	{ 0x80000001, 0, EDX, 26, "pdpe1gb" }, { 0x80000001, 0, EDX, 27, "rdtscp" },
	{ 0x80000001, 0, EDX, 29, "lm" }, { 0x80000007, 0, EDX, 8, "invariant-tsc" },
};

static uint32_t reg_of(const struct kvm_cpuid_entry2 *e, enum cpuid_reg r)
{
	return r == EAX ? e->eax : r == EBX ? e->ebx : r == ECX ? e->ecx : e->edx;
}

int cpuid_check_host(const struct kvm_cpuid2 *saved, const struct kvm_cpuid2 *host,
		     bool host_tsc_deadline, const char **why)
{
	static const char reg_names[4][4] = { "EAX", "EBX", "ECX", "EDX" };

	for (size_t i = 0; i < sizeof(feature_regs) / sizeof(feature_regs[0]); i++) {
		const struct feature_reg *f = &feature_regs[i];
		const struct kvm_cpuid_entry2 *s = cpuid_find(saved, f->leaf, f->sub);
		const struct kvm_cpuid_entry2 *h = cpuid_find(host, f->leaf, f->sub);
		uint32_t unchecked = f->unchecked, missing;
		const char *name = "";
		int bit;

		if (!s)
			continue;
		if (f->leaf == 1 && f->reg == ECX && host_tsc_deadline)
			unchecked |= 1u << 24;
		missing = reg_of(s, f->reg) & ~(h ? reg_of(h, f->reg) : 0) & ~unchecked;
		if (!missing)
			continue;
		bit = __builtin_ctz(missing);
		for (size_t j = 0; j < sizeof(feature_names) / sizeof(feature_names[0]); j++) {
			const struct feature_name *n = &feature_names[j];

			if (n->leaf == f->leaf && n->sub == f->sub && n->reg == f->reg && n->bit == bit)
				name = n->name;
		}
		return errmsg_why(why, -ENOTSUP,
				"this host's CPU (as KVM offers it) lacks a feature the snapshot's guest uses: CPUID.(EAX=%#x,ECX=%u):%s bit %d%s%s%s",
				f->leaf, f->sub, reg_names[f->reg], bit,
				*name ? " (" : "", name, *name ? ")" : "");
	}
	return 0;
}
