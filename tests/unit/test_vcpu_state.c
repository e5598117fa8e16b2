/* test_vcpu_state.c - vCPU and VM state payloads: round trip, and every cut or bad count refused. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "x86/vcpu_state.h"
#include "x86/vm_state.h"

static void fill(void *p, size_t n, unsigned seed)
{
	uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(i * 31 + seed);
}

static void make_vcpu(struct vcpu_state *s, uint32_t nr_msrs, uint32_t xsave_size)
{
	memset(s, 0, sizeof(*s));
	fill(&s->regs, sizeof(s->regs), 1);
	fill(&s->sregs, sizeof(s->sregs), 2);
	fill(&s->xcrs, sizeof(s->xcrs), 3);
	fill(&s->debugregs, sizeof(s->debugregs), 4);
	fill(&s->lapic, sizeof(s->lapic), 5);
	fill(&s->events, sizeof(s->events), 6);
	s->mp_state.mp_state = KVM_MP_STATE_HALTED;
	s->tsc_khz = 2999999;
	s->nr_msrs = nr_msrs;
	for (uint32_t i = 0; i < nr_msrs; i++)
		s->msrs[i] = (struct kvm_msr_entry){ .index = 0x4b564d00 + i, .data = ~0ull - i };
	s->xsave_size = xsave_size;
	s->xsave = malloc(xsave_size);
	fill(s->xsave, xsave_size, 7);
}

static void encode(const struct vcpu_state *s, struct snap_out *out)
{
	snap_out_init(out);
	vcpu_state_encode(s, out);
	cr_assert_eq(out->err, 0);
}

Test(vcpu_state, round_trip)
{
	const uint32_t sizes[] = { VCPU_STATE_XSAVE_MIN, 11008 };

	for (size_t k = 0; k < 2; k++) {
		struct vcpu_state *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
		struct snap_out out;
		const char *why = NULL;

		make_vcpu(a, 40, sizes[k]);
		encode(a, &out);
		cr_assert_eq(vcpu_state_decode(b, out.data, out.len, &why), 0, "%s", why);
		cr_assert_eq(memcmp(&a->regs, &b->regs, sizeof(a->regs)), 0);
		cr_assert_eq(memcmp(&a->sregs, &b->sregs, sizeof(a->sregs)), 0);
		cr_assert_eq(memcmp(&a->xcrs, &b->xcrs, sizeof(a->xcrs)), 0);
		cr_assert_eq(memcmp(&a->debugregs, &b->debugregs, sizeof(a->debugregs)), 0);
		cr_assert_eq(memcmp(&a->lapic, &b->lapic, sizeof(a->lapic)), 0);
		cr_assert_eq(memcmp(&a->events, &b->events, sizeof(a->events)), 0);
		cr_assert_eq(b->mp_state.mp_state, KVM_MP_STATE_HALTED);
		cr_assert_eq(b->tsc_khz, 2999999);
		cr_assert_eq(b->nr_msrs, 40);
		cr_assert_eq(memcmp(a->msrs, b->msrs, 40 * sizeof(a->msrs[0])), 0);
		cr_assert_eq(b->xsave_size, sizes[k]);
		cr_assert_eq(memcmp(a->xsave, b->xsave, sizes[k]), 0);
		vcpu_state_free(a);
		vcpu_state_free(b);
		snap_out_free(&out);
		free(a);
		free(b);
	}
}

Test(vcpu_state, every_cut_and_extra_byte_refused)
{
	struct vcpu_state *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
	struct snap_out out;
	const char *why = NULL;

	make_vcpu(a, 5, VCPU_STATE_XSAVE_MIN);
	encode(a, &out);
	for (size_t cut = 0; cut < out.len; cut++) {
		uint8_t *copy = malloc(cut ? cut : 1);   /* exact size: ASan sees overreads */

		memcpy(copy, out.data, cut);
		cr_assert_eq(vcpu_state_decode(b, copy, cut, &why), -EBADMSG, "cut at %zu", cut);
		cr_assert_null(b->xsave, "nothing to free after a refusal");
		free(copy);
	}
	snap_out_put(&out, "", 1);
	cr_assert_eq(vcpu_state_decode(b, out.data, out.len, &why), -EBADMSG);
	vcpu_state_free(a);
	snap_out_free(&out);
	free(a);
	free(b);
}

/* Offsets in the payload (docs/snapshot.md): the MSR count follows two
 * u32s and the six register structs; the XSAVE size follows the MSRs. */
#define OFF_NR_MSRS (8 + 144 + 312 + 392 + 128 + 1024 + 64)

static void put32(struct snap_out *o, size_t off, uint32_t v)
{
	memcpy(o->data + off, &v, 4);
}

Test(vcpu_state, counts_and_sizes_beyond_the_limits_refused)
{
	struct vcpu_state *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
	struct snap_out out;
	const char *why = NULL;
	size_t off_xsave;

	make_vcpu(a, 3, VCPU_STATE_XSAVE_MIN);
	encode(a, &out);
	off_xsave = OFF_NR_MSRS + 4 + 3 * 16;
	cr_assert_eq(vcpu_state_decode(b, out.data, out.len, &why), 0, "%s", why);
	vcpu_state_free(b);

	put32(&out, OFF_NR_MSRS, VCPU_STATE_MSRS_MAX + 1);
	cr_assert_eq(vcpu_state_decode(b, out.data, out.len, &why), -EBADMSG);
	cr_assert(strstr(why, "MSRs"), "%s", why);
	put32(&out, OFF_NR_MSRS, UINT32_MAX);
	cr_assert_eq(vcpu_state_decode(b, out.data, out.len, &why), -EBADMSG);
	put32(&out, OFF_NR_MSRS, 3);

	const uint32_t bad_sizes[] = { 0, 4092, 4098, VCPU_STATE_XSAVE_MAX + 4, UINT32_MAX };
	for (size_t i = 0; i < sizeof(bad_sizes) / sizeof(bad_sizes[0]); i++) {
		put32(&out, off_xsave, bad_sizes[i]);
		cr_assert_eq(vcpu_state_decode(b, out.data, out.len, &why), -EBADMSG,
			     "xsave size %u", bad_sizes[i]);
		cr_assert_null(b->xsave);
	}
	/* Valid, but more than the payload holds. */
	put32(&out, off_xsave, 8192);
	cr_assert_eq(vcpu_state_decode(b, out.data, out.len, &why), -EBADMSG);
	cr_assert(strstr(why, "XSAVE"), "%s", why);
	vcpu_state_free(a);
	snap_out_free(&out);
	free(a);
	free(b);
}

static void make_vm(struct vm_state *s)
{
	fill(s, sizeof(*s), 9);
	s->pic_master.chip_id = KVM_IRQCHIP_PIC_MASTER;
	s->pic_slave.chip_id = KVM_IRQCHIP_PIC_SLAVE;
	s->ioapic.chip_id = KVM_IRQCHIP_IOAPIC;
}

Test(vm_state, round_trip_cuts_and_chip_ids)
{
	struct vm_state a, b;
	struct snap_out out;
	const char *why = NULL;

	make_vm(&a);
	snap_out_init(&out);
	vm_state_encode(&a, &out);
	cr_assert_eq(out.err, 0);
	cr_assert_eq(out.len, 3 * 520 + 112 + 48);
	cr_assert_eq(vm_state_decode(&b, out.data, out.len, &why), 0, "%s", why);
	cr_assert_eq(memcmp(&a, &b, sizeof(a)), 0);
	for (size_t cut = 0; cut < out.len; cut++)
		cr_assert_eq(vm_state_decode(&b, out.data, cut, &why), -EBADMSG, "cut at %zu", cut);
	/* The slave's chip id where the master's belongs. */
	put32(&out, 0, KVM_IRQCHIP_PIC_SLAVE);
	cr_assert_eq(vm_state_decode(&b, out.data, out.len, &why), -EBADMSG);
	cr_assert(strstr(why, "irqchip"), "%s", why);
	put32(&out, 0, KVM_IRQCHIP_PIC_MASTER);
	snap_out_put(&out, "", 1);
	cr_assert_eq(vm_state_decode(&b, out.data, out.len, &why), -EBADMSG);
	snap_out_free(&out);
}
