/* state_codec.c - an arm64 snapshot's vCPU and GICv3 payloads: encoded, and decoded with every field checked. */
#include "arm64/state_codec.h"
#include "lib/errmsg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void arm64_vcpu_state_encode(const struct arm64_vcpu_state *s, struct snap_out *o)
{
	snap_out_u32(o, s->mp_state);
	snap_out_u32(o, s->has_events);
	snap_out_put(o, s->events, sizeof(s->events));
	snap_out_u32(o, s->nregs);
	for (uint32_t i = 0; i < s->nregs; i++) {
		snap_out_u64(o, s->regs[i].id);
		snap_out_put(o, s->regs[i].value, arm64_reg_size(s->regs[i].id));
	}
}

static int vcpu_bad(struct arm64_vcpu_state *s, const char **why, const char *what)
{
	arm64_vcpu_state_free(s);
	return errmsg_why(why, -EBADMSG, "corrupt arm64 vcpu section: %s", what);
}

int arm64_vcpu_state_decode(struct arm64_vcpu_state *s, const void *data, size_t len,
			    const char **why)
{
	struct snap_in in;

	memset(s, 0, sizeof(*s));
	snap_in_init(&in, data, len);
	s->mp_state = snap_in_u32(&in);
	s->has_events = snap_in_u32(&in);
	snap_in_get(&in, s->events, sizeof(s->events));
	s->nregs = snap_in_u32(&in);
	if (in.bad)
		return vcpu_bad(s, why, "cut short");
	if (s->mp_state > ARM64_MP_STATE_MAX || s->has_events > 1)
		return vcpu_bad(s, why, "an unknown power state or events flag");
	if (s->nregs == 0 || s->nregs > ARM64_REGS_MAX)
		return vcpu_bad(s, why, "no registers, or more than KVM lists");
	/* Each register takes at least its id and one byte: no allocation
	 * larger than the payload could describe. */
	if (s->nregs > in.left / (sizeof(uint64_t) + 1))
		return vcpu_bad(s, why, "more registers than bytes");
	s->regs = calloc(s->nregs, sizeof(*s->regs));
	if (!s->regs)
		return errmsg_why(why, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < s->nregs; i++) {
		struct arm64_reg *r = &s->regs[i];

		r->id = snap_in_u64(&in);
		if ((r->id & ARM64_REG_ARCH_MASK) != ARM64_REG_ARCH)
			return vcpu_bad(s, why, "a register of another architecture");
		if (arm64_reg_size(r->id) > ARM64_REG_BYTES_MAX)
			return vcpu_bad(s, why, "a register larger than 16 bytes");
		if (!snap_in_get(&in, r->value, arm64_reg_size(r->id)))
			return vcpu_bad(s, why, "cut short");
	}
	if (!snap_in_end(&in))
		return vcpu_bad(s, why, "bytes after the last register");
	return 0;
}

void arm64_vcpu_state_free(struct arm64_vcpu_state *s)
{
	free(s->regs);
	s->regs = NULL;
	s->nregs = 0;
}

void arm64_vm_state_encode(const struct arm64_vm_state *s, struct snap_out *o)
{
	snap_out_u32(o, s->target);
	snap_out_u32(o, s->nr_irqs);
	snap_out_u32(o, s->ngic);
	for (uint32_t i = 0; i < s->ngic; i++) {
		snap_out_u32(o, s->gic[i].group);
		snap_out_u64(o, s->gic[i].attr);
		snap_out_u64(o, s->gic[i].value);
	}
}

static int vm_bad(struct arm64_vm_state *s, const char **why, const char *what)
{
	arm64_vm_state_free(s);
	return errmsg_why(why, -EBADMSG, "corrupt arm64 VM section: %s", what);
}

#define GIC_REG_BYTES (sizeof(uint32_t) + 2 * sizeof(uint64_t))

int arm64_vm_state_decode(struct arm64_vm_state *s, const void *data, size_t len,
			  const char **why)
{
	struct snap_in in;

	memset(s, 0, sizeof(*s));
	snap_in_init(&in, data, len);
	s->target = snap_in_u32(&in);
	s->nr_irqs = snap_in_u32(&in);
	s->ngic = snap_in_u32(&in);
	if (in.bad)
		return vm_bad(s, why, "cut short");
	if (s->nr_irqs < 64 || s->nr_irqs > 1024 || s->nr_irqs % 32)
		return vm_bad(s, why, "an interrupt count outside 64..1024 in steps of 32");
	if (s->ngic == 0 || s->ngic > ARM64_GIC_REGS_MAX || s->ngic != in.left / GIC_REG_BYTES ||
	    in.left % GIC_REG_BYTES)
		return vm_bad(s, why, "a GIC register count that does not match its bytes");
	s->gic = calloc(s->ngic, sizeof(*s->gic));
	if (!s->gic)
		return errmsg_why(why, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < s->ngic; i++) {
		struct arm64_gic_reg *r = &s->gic[i];

		r->group = snap_in_u32(&in);
		r->attr = snap_in_u64(&in);
		r->value = snap_in_u64(&in);
		switch (r->group) {
		case ARM64_GICREG_DIST:
		case ARM64_GICREG_REDIST:
		case ARM64_GICREG_LEVEL:
			if (r->value > UINT32_MAX)
				return vm_bad(s, why, "a 32-bit GIC register wider");
			break;
		case ARM64_GICREG_CPU:
			break;
		default:
			return vm_bad(s, why, "a GIC register group mayfly does not save");
		}
	}
	if (!snap_in_end(&in))
		return vm_bad(s, why, "cut short");
	return 0;
}

void arm64_vm_state_free(struct arm64_vm_state *s)
{
	free(s->gic);
	s->gic = NULL;
	s->ngic = 0;
}
