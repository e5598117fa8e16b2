/* state.c - an arm64 VM's KVM state: each vCPU's listed registers and power state, the GICv3's registers by KVM_{GET,SET}_DEVICE_ATTR. */
#include "arm64/state.h"
#include "arm64/cpu.h"
#include "lib/errmsg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <linux/kvm.h>
#include <sys/ioctl.h>

_Static_assert(sizeof(struct kvm_vcpu_events) == ARM64_EVENTS_SIZE, "kvm_vcpu_events on arm64");
_Static_assert(ARM64_GICREG_DIST == KVM_DEV_ARM_VGIC_GRP_DIST_REGS &&
	       ARM64_GICREG_REDIST == KVM_DEV_ARM_VGIC_GRP_REDIST_REGS &&
	       ARM64_GICREG_CPU == KVM_DEV_ARM_VGIC_GRP_CPU_SYSREGS &&
	       ARM64_GICREG_LEVEL == KVM_DEV_ARM_VGIC_GRP_LEVEL_INFO, "the codec's GIC groups are KVM's");
_Static_assert(KVM_REG_ARM64 == ARM64_REG_ARCH, "KVM_REG_ARM64");

/* ---- vCPUs ---- */

int arm64_vcpu_state_save(int vcpu_fd, struct arm64_vcpu_state *s, const char **why)
{
	struct kvm_reg_list probe = { .n = 0 }, *list;
	struct kvm_mp_state mp;
	int rc = 0;

	memset(s, 0, sizeof(*s));
	/* With room for none, KVM answers E2BIG and says how many there are. */
	if (ioctl(vcpu_fd, KVM_GET_REG_LIST, &probe) == 0 || errno != E2BIG ||
	    probe.n == 0 || probe.n > ARM64_REGS_MAX)
		return errmsg_why(why, -EIO, "KVM_GET_REG_LIST: cannot size the list");
	list = calloc(1, sizeof(*list) + probe.n * sizeof(list->reg[0]));
	s->regs = calloc(probe.n, sizeof(*s->regs));
	if (!list || !s->regs) {
		free(list);
		arm64_vcpu_state_free(s);
		return errmsg_why(why, -ENOMEM, "out of memory");
	}
	list->n = probe.n;
	if (ioctl(vcpu_fd, KVM_GET_REG_LIST, list) < 0)
		rc = errmsg_why(why, -errno, "KVM_GET_REG_LIST: %s", strerror(errno));
	for (uint64_t i = 0; !rc && i < list->n; i++) {
		struct arm64_reg *r = &s->regs[i];
		struct kvm_one_reg one = { .id = list->reg[i], .addr = (uint64_t)(uintptr_t)r->value };

		r->id = list->reg[i];
		if (arm64_reg_size(r->id) > ARM64_REG_BYTES_MAX)
			rc = errmsg_why(why, -ENOTSUP, "register %#llx is %zu bytes (SVE is not saved)",
					(unsigned long long)r->id, arm64_reg_size(r->id));
		else if (ioctl(vcpu_fd, KVM_GET_ONE_REG, &one) < 0)
			rc = errmsg_why(why, -errno, "KVM_GET_ONE_REG %#llx: %s",
					(unsigned long long)r->id, strerror(errno));
		else
			s->nregs++;
	}
	free(list);
	if (!rc && ioctl(vcpu_fd, KVM_GET_MP_STATE, &mp) < 0)
		rc = errmsg_why(why, -errno, "KVM_GET_MP_STATE: %s", strerror(errno));
	if (rc) {
		arm64_vcpu_state_free(s);
		return rc;
	}
	s->mp_state = mp.mp_state;
	/* Older hosts have no vCPU events on arm64: nothing pending to keep. */
	s->has_events = ioctl(vcpu_fd, KVM_GET_VCPU_EVENTS, s->events) == 0;
	return 0;
}

int arm64_vcpu_state_restore(int vcpu_fd, const struct arm64_vcpu_state *s, const char **why)
{
	struct kvm_mp_state mp = { .mp_state = s->mp_state };

	for (uint32_t i = 0; i < s->nregs; i++) {
		struct kvm_one_reg one = { .id = s->regs[i].id,
					   .addr = (uint64_t)(uintptr_t)s->regs[i].value };

		if (ioctl(vcpu_fd, KVM_SET_ONE_REG, &one) < 0)
			return errmsg_why(why, -errno, "KVM_SET_ONE_REG %#llx: %s",
					  (unsigned long long)one.id, strerror(errno));
	}
	if (ioctl(vcpu_fd, KVM_SET_MP_STATE, &mp) < 0)
		return errmsg_why(why, -errno, "KVM_SET_MP_STATE: %s", strerror(errno));
	if (s->has_events && ioctl(vcpu_fd, KVM_SET_VCPU_EVENTS, (void *)s->events) < 0)
		return errmsg_why(why, -errno, "KVM_SET_VCPU_EVENTS: %s", strerror(errno));
	return 0;
}

/* ---- the GICv3 ---- */

/* Distributor and redistributor offsets (GICv3 architecture). */
#define GICD_CTLR        0x0000
#define GICD_IIDR        0x0008
#define GICD_IGROUPR     0x0080
#define GICD_ISENABLER   0x0100
#define GICD_ISPENDR     0x0200
#define GICD_ISACTIVER   0x0300
#define GICD_IPRIORITYR  0x0400
#define GICD_ICFGR       0x0c00
#define GICD_IGRPMODR    0x0d00
#define GICD_IROUTER     0x6000
#define GICR_CTLR        0x0000
#define GICR_SGI         0x10000   /* the SGI and PPI frame */

/* A CPU interface register's attr (KVM_DEV_ARM_VGIC_GRP_CPU_SYSREGS):
 * its A64 encoding, Op0 Op1 CRn CRm Op2, in bits 15-0. */
#define ICC(op0, op1, crn, crm, op2) \
	((uint16_t)((op0) << 14 | (op1) << 11 | (crn) << 7 | (crm) << 3 | (op2)))

/* The CPU interface's registers, in the order a restore writes them
 * (SRE and CTLR first: they say how the others read). */
static const uint16_t icc_regs[] = {
	ICC(3, 0, 12, 12, 5),   /* ICC_SRE_EL1 */
	ICC(3, 0, 12, 12, 4),   /* ICC_CTLR_EL1 */
	ICC(3, 0, 12, 12, 6),   /* ICC_IGRPEN0_EL1 */
	ICC(3, 0, 12, 12, 7),   /* ICC_IGRPEN1_EL1 */
	ICC(3, 0, 4, 6, 0),     /* ICC_PMR_EL1 */
	ICC(3, 0, 12, 8, 3),    /* ICC_BPR0_EL1 */
	ICC(3, 0, 12, 12, 3),   /* ICC_BPR1_EL1 */
	ICC(3, 0, 12, 8, 4),    /* ICC_AP0R0_EL1 .. AP0R3 */
	ICC(3, 0, 12, 8, 5),
	ICC(3, 0, 12, 8, 6),
	ICC(3, 0, 12, 8, 7),
	ICC(3, 0, 12, 9, 0),    /* ICC_AP1R0_EL1 .. AP1R3 */
	ICC(3, 0, 12, 9, 1),
	ICC(3, 0, 12, 9, 2),
	ICC(3, 0, 12, 9, 3),
};

/* The registers of a range of interrupts, bits_per_irq each, from first. */
struct irq_regs {
	uint32_t base;
	unsigned bits_per_irq;
};

/* Configuration first, then the state it qualifies: pending (the lines'
 * levels, then the latches), active, and enabled last. */
static const struct irq_regs dist_config[] = {
	{ GICD_IGROUPR, 1 }, { GICD_IGRPMODR, 1 }, { GICD_ICFGR, 2 }, { GICD_IPRIORITYR, 8 },
};
static const struct irq_regs dist_state[] = {
	{ GICD_ISPENDR, 1 }, { GICD_ISACTIVER, 1 }, { GICD_ISENABLER, 1 },
};

/* A saved list being built. */
struct gic_walk {
	int gic_fd;
	struct arm64_vm_state *s;
	uint32_t cap;
	const char **why;
	int rc;
};

/* Read one register into the list. One this KVM does not have (ENXIO:
 * an older kernel, or an AP register beyond the priority bits) is left
 * out: a restore then leaves it at its reset value, as it was. */
static void save_reg(struct gic_walk *w, uint32_t group, uint64_t attr)
{
	uint64_t v64 = 0;
	uint32_t v32 = 0;
	bool wide = group == ARM64_GICREG_CPU;
	struct kvm_device_attr a = { .group = group, .attr = attr,
				     .addr = (uint64_t)(uintptr_t)(wide ? (void *)&v64 : (void *)&v32) };

	if (w->rc)
		return;
	if (ioctl(w->gic_fd, KVM_GET_DEVICE_ATTR, &a) < 0) {
		if (errno != ENXIO && errno != EINVAL)
			w->rc = errmsg_why(w->why, -errno, "KVM_GET_DEVICE_ATTR (GIC group %u, %#llx): %s",
					   group, (unsigned long long)attr, strerror(errno));
		return;
	}
	if (w->s->ngic == w->cap) {
		struct arm64_gic_reg *more;

		if (w->cap >= ARM64_GIC_REGS_MAX) {
			w->rc = errmsg_why(w->why, -E2BIG, "more than %u GIC registers", ARM64_GIC_REGS_MAX);
			return;
		}
		more = realloc(w->s->gic, (w->cap ? w->cap * 2 : 256) * sizeof(*more));
		if (!more) {
			w->rc = errmsg_why(w->why, -ENOMEM, "out of memory");
			return;
		}
		w->s->gic = more;
		w->cap = w->cap ? w->cap * 2 : 256;
	}
	w->s->gic[w->s->ngic++] = (struct arm64_gic_reg){ group, attr, wide ? v64 : v32 };
}

/* The registers of interrupts first..last-1, 32 bits at a time. */
static void save_irq_regs(struct gic_walk *w, uint32_t group, uint64_t cpu, const struct irq_regs *r,
			  unsigned first, unsigned last)
{
	for (unsigned irq = first; irq < last; irq += 32 / r->bits_per_irq)
		save_reg(w, group, cpu | (r->base + irq * r->bits_per_irq / 8));
}

/* KVM's attr for a vCPU: MPIDR_EL1's affinity levels as Aff3.Aff2.Aff1.Aff0 in bits 63-32. */
static uint64_t cpu_attr(uint64_t mpidr)
{
	uint64_t aff = (mpidr & 0xffffffULL) | (mpidr >> 32 & 0xff) << 24;

	return aff << 32;
}

int arm64_preferred_target(int vm_fd, uint32_t *target)
{
	struct kvm_vcpu_init init = { 0 };

	if (ioctl(vm_fd, KVM_ARM_PREFERRED_TARGET, &init) < 0)
		return -errno;
	*target = init.target;
	return 0;
}

int arm64_vm_state_save(int vm_fd, int gic_fd, const int *vcpu_fds, unsigned n,
			struct arm64_vm_state *s, const char **why)
{
	struct gic_walk w = { gic_fd, s, 0, why, 0 };
	struct kvm_device_attr nr = { .group = KVM_DEV_ARM_VGIC_GRP_NR_IRQS,
				      .addr = (uint64_t)(uintptr_t)&s->nr_irqs };
	int rc;

	memset(s, 0, sizeof(*s));
	rc = arm64_preferred_target(vm_fd, &s->target);
	if (rc)
		return errmsg_why(why, rc, "KVM_ARM_PREFERRED_TARGET: %s", strerror(-rc));
	if (ioctl(gic_fd, KVM_GET_DEVICE_ATTR, &nr) < 0)
		return errmsg_why(why, -errno, "the GIC's interrupt count: %s", strerror(errno));
	if (s->nr_irqs < 64 || s->nr_irqs > 1024 || s->nr_irqs % 32)
		return errmsg_why(why, -EIO, "the GIC has %u interrupts", s->nr_irqs);

	/* The distributor: IIDR before anything (KVM's revision), then CTLR. */
	save_reg(&w, ARM64_GICREG_DIST, GICD_IIDR);
	save_reg(&w, ARM64_GICREG_DIST, GICD_CTLR);
	for (size_t i = 0; i < sizeof(dist_config) / sizeof(dist_config[0]); i++)
		save_irq_regs(&w, ARM64_GICREG_DIST, 0, &dist_config[i], 32, s->nr_irqs);
	for (unsigned irq = 32; irq < s->nr_irqs; irq++) {
		save_reg(&w, ARM64_GICREG_DIST, GICD_IROUTER + 8 * irq);
		save_reg(&w, ARM64_GICREG_DIST, GICD_IROUTER + 8 * irq + 4);
	}
	for (unsigned irq = 32; irq < s->nr_irqs; irq += 32)
		save_reg(&w, ARM64_GICREG_LEVEL,
			 (uint64_t)VGIC_LEVEL_INFO_LINE_LEVEL << KVM_DEV_ARM_VGIC_LINE_LEVEL_INFO_SHIFT | irq);
	for (size_t i = 0; i < sizeof(dist_state) / sizeof(dist_state[0]); i++)
		save_irq_regs(&w, ARM64_GICREG_DIST, 0, &dist_state[i], 32, s->nr_irqs);

	/* Each redistributor (SGIs and PPIs), then each CPU interface. */
	for (unsigned c = 0; !w.rc && c < n; c++) {
		uint64_t mpidr, cpu;

		rc = arm64_vcpu_mpidr(vcpu_fds[c], &mpidr);
		if (rc) {
			w.rc = errmsg_why(why, rc, "vcpu %u's MPIDR_EL1: %s", c, strerror(-rc));
			break;
		}
		cpu = cpu_attr(mpidr);
		save_reg(&w, ARM64_GICREG_REDIST, cpu | GICR_CTLR);
		for (size_t i = 0; i < sizeof(dist_config) / sizeof(dist_config[0]); i++)
			save_irq_regs(&w, ARM64_GICREG_REDIST, cpu | GICR_SGI, &dist_config[i], 0, 32);
		save_reg(&w, ARM64_GICREG_LEVEL,
			 cpu | (uint64_t)VGIC_LEVEL_INFO_LINE_LEVEL << KVM_DEV_ARM_VGIC_LINE_LEVEL_INFO_SHIFT);
		for (size_t i = 0; i < sizeof(dist_state) / sizeof(dist_state[0]); i++)
			save_irq_regs(&w, ARM64_GICREG_REDIST, cpu | GICR_SGI, &dist_state[i], 0, 32);
		for (size_t i = 0; i < sizeof(icc_regs) / sizeof(icc_regs[0]); i++)
			save_reg(&w, ARM64_GICREG_CPU, cpu | icc_regs[i]);
	}
	if (!w.rc && s->ngic == 0)
		w.rc = errmsg_why(why, -EIO, "KVM gave none of the GIC's registers");
	if (w.rc)
		arm64_vm_state_free(s);
	return w.rc;
}

int arm64_vm_state_restore(int gic_fd, const struct arm64_vm_state *s, const char **why)
{
	uint32_t nr_irqs = 0;
	struct kvm_device_attr nr = { .group = KVM_DEV_ARM_VGIC_GRP_NR_IRQS,
				      .addr = (uint64_t)(uintptr_t)&nr_irqs };

	if (ioctl(gic_fd, KVM_GET_DEVICE_ATTR, &nr) < 0)
		return errmsg_why(why, -errno, "the GIC's interrupt count: %s", strerror(errno));
	if (nr_irqs != s->nr_irqs)
		return errmsg_why(why, -ENOTSUP, "the snapshot's GIC has %u interrupts, this one %u",
				  s->nr_irqs, nr_irqs);
	for (uint32_t i = 0; i < s->ngic; i++) {
		const struct arm64_gic_reg *r = &s->gic[i];
		uint32_t v32 = (uint32_t)r->value;
		bool wide = r->group == ARM64_GICREG_CPU;
		struct kvm_device_attr a = { .group = r->group, .attr = r->attr,
					     .addr = (uint64_t)(uintptr_t)(wide ? (const void *)&r->value
									  : (const void *)&v32) };

		if (ioctl(gic_fd, KVM_SET_DEVICE_ATTR, &a) < 0)
			return errmsg_why(why, -errno, "KVM_SET_DEVICE_ATTR (GIC group %u, %#llx): %s",
					  r->group, (unsigned long long)r->attr, strerror(errno));
	}
	return 0;
}
