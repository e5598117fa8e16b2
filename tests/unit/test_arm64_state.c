/* test_arm64_state.c - an arm64 snapshot's vCPU and GICv3 payloads: round trips, and every cut, lie and foreign register refused; another architecture's snapshot refused with one line. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "arm64/state_codec.h"
#include "snapshot/format.h"
#include "vm/arch.h"

/* KVM's ids: arm64, a size (U32 2, U64 3, U128 4), a register number. */
#define REG(size, n) (ARM64_REG_ARCH | (uint64_t)(size) << 52 | (uint64_t)(n))

static struct snap_out encode_vcpu(void)
{
	static struct arm64_reg regs[3];
	struct arm64_vcpu_state s = { .mp_state = 1, .has_events = 1, .nregs = 3, .regs = regs };
	struct snap_out o;

	regs[0].id = REG(3, 0x10);      /* a core register, 8 bytes */
	memset(regs[0].value, 0x11, 8);
	regs[1].id = REG(2, 0x20);      /* 4 bytes */
	memset(regs[1].value, 0x22, 4);
	regs[2].id = REG(4, 0x30);      /* a V register, 16 bytes */
	memset(regs[2].value, 0x33, 16);
	memset(s.events, 0x44, sizeof(s.events));
	snap_out_init(&o);
	arm64_vcpu_state_encode(&s, &o);
	cr_assert_eq(o.err, 0);
	return o;
}

Test(arm64_state, a_vcpu_round_trips)
{
	struct snap_out o = encode_vcpu();
	struct arm64_vcpu_state s;
	const char *why = "";

	cr_assert_eq(o.len, 4 + 4 + 64 + 4 + (8 + 8) + (8 + 4) + (8 + 16), "each register only its own size");
	cr_assert_eq(arm64_vcpu_state_decode(&s, o.data, o.len, &why), 0, "%s", why);
	cr_assert_eq(s.mp_state, 1);
	cr_assert_eq(s.has_events, 1);
	cr_assert_eq(s.events[63], 0x44);
	cr_assert_eq(s.nregs, 3);
	cr_assert_eq(s.regs[0].id, REG(3, 0x10));
	cr_assert_eq(s.regs[0].value[7], 0x11);
	cr_assert_eq(s.regs[0].value[8], 0, "nothing past the register's size");
	cr_assert_eq(s.regs[1].value[3], 0x22);
	cr_assert_eq(s.regs[2].value[15], 0x33);
	arm64_vcpu_state_free(&s);
	snap_out_free(&o);
}

Test(arm64_state, a_vcpu_cut_anywhere_or_with_a_byte_more_is_refused)
{
	struct snap_out o = encode_vcpu();
	struct arm64_vcpu_state s;
	const char *why;
	uint8_t *longer;

	for (size_t cut = 0; cut < o.len; cut++) {
		why = "";
		cr_assert_eq(arm64_vcpu_state_decode(&s, o.data, cut, &why), -EBADMSG, "cut at %zu", cut);
		cr_assert_not_null(strstr(why, "corrupt arm64 vcpu section"), "%s", why);
		cr_assert_null(s.regs, "nothing kept from a refused section");
	}
	longer = calloc(1, o.len + 1);
	memcpy(longer, o.data, o.len);
	cr_assert_eq(arm64_vcpu_state_decode(&s, longer, o.len + 1, &why), -EBADMSG);
	cr_assert_not_null(strstr(why, "after the last register"), "%s", why);
	free(longer);
	snap_out_free(&o);
}

/* Patch the encoded vCPU at offset off with v (n bytes) and decode it. */
static int patched(size_t off, const void *v, size_t n, const char **why)
{
	struct snap_out o = encode_vcpu();
	struct arm64_vcpu_state s;
	int rc;

	memcpy(o.data + off, v, n);
	rc = arm64_vcpu_state_decode(&s, o.data, o.len, why);
	if (!rc)
		arm64_vcpu_state_free(&s);
	snap_out_free(&o);
	return rc;
}

Test(arm64_state, a_vcpu_that_lies_is_refused)
{
	const size_t nregs_at = 4 + 4 + 64, first_id = nregs_at + 4;
	uint64_t foreign = 0x4000000000000000ULL | 3ULL << 52 | 0x10;   /* x86's KVM_REG_X86 */
	uint64_t wide = REG(5, 0x10);                                    /* 32 bytes: SVE's size */
	uint32_t many = ARM64_REGS_MAX + 1, plenty = 1000, none = 0, state = ARM64_MP_STATE_MAX + 1;
	uint32_t flag = 2;
	const char *why = "";

	cr_assert_eq(patched(first_id, &foreign, 8, &why), -EBADMSG);
	cr_assert_not_null(strstr(why, "another architecture"), "%s", why);
	cr_assert_eq(patched(first_id, &wide, 8, &why), -EBADMSG);
	cr_assert_not_null(strstr(why, "larger than 16 bytes"), "%s", why);
	cr_assert_eq(patched(nregs_at, &many, 4, &why), -EBADMSG);
	cr_assert_eq(patched(nregs_at, &plenty, 4, &why), -EBADMSG, "more registers than bytes: no big allocation");
	cr_assert_not_null(strstr(why, "more registers than bytes"), "%s", why);
	cr_assert_eq(patched(nregs_at, &none, 4, &why), -EBADMSG);
	cr_assert_eq(patched(0, &state, 4, &why), -EBADMSG);
	cr_assert_eq(patched(4, &flag, 4, &why), -EBADMSG);
}

static struct snap_out encode_vm(uint32_t group, uint64_t value)
{
	struct arm64_gic_reg regs[3] = {
		{ ARM64_GICREG_DIST, 0x8, 0x43b },
		{ ARM64_GICREG_CPU, 1ULL << 32 | 0xc665, 0x7 },
		{ group, 0x10100, value },
	};
	struct arm64_vm_state s = { .target = 5, .nr_irqs = 256, .ngic = 3, .gic = regs };
	struct snap_out o;

	snap_out_init(&o);
	arm64_vm_state_encode(&s, &o);
	cr_assert_eq(o.err, 0);
	return o;
}

Test(arm64_state, the_gic_round_trips_and_every_cut_is_refused)
{
	struct snap_out o = encode_vm(ARM64_GICREG_REDIST, 0xffffffff);
	struct arm64_vm_state s;
	const char *why = "";

	cr_assert_eq(arm64_vm_state_decode(&s, o.data, o.len, &why), 0, "%s", why);
	cr_assert_eq(s.target, 5);
	cr_assert_eq(s.nr_irqs, 256);
	cr_assert_eq(s.ngic, 3);
	cr_assert_eq(s.gic[1].attr, 1ULL << 32 | 0xc665);
	cr_assert_eq(s.gic[2].value, 0xffffffff);
	arm64_vm_state_free(&s);
	for (size_t cut = 0; cut < o.len; cut++) {
		cr_assert_eq(arm64_vm_state_decode(&s, o.data, cut, &why), -EBADMSG, "cut at %zu", cut);
		cr_assert_null(s.gic);
	}
	snap_out_free(&o);
}

Test(arm64_state, a_gic_that_lies_is_refused)
{
	struct snap_out o = encode_vm(ARM64_GICREG_LEVEL, 1ULL << 32);
	struct arm64_vm_state s;
	const char *why = "";
	uint32_t irqs[] = { 32, 48, 1056 };

	cr_assert_eq(arm64_vm_state_decode(&s, o.data, o.len, &why), -EBADMSG);
	cr_assert_not_null(strstr(why, "32-bit GIC register wider"), "%s", why);
	snap_out_free(&o);

	o = encode_vm(2 /* KVM_DEV_ARM_VGIC_GRP_CPU_REGS: GICv2's, never saved */, 0);
	cr_assert_eq(arm64_vm_state_decode(&s, o.data, o.len, &why), -EBADMSG);
	cr_assert_not_null(strstr(why, "group mayfly does not save"), "%s", why);
	snap_out_free(&o);

	for (size_t i = 0; i < sizeof(irqs) / sizeof(irqs[0]); i++) {
		o = encode_vm(ARM64_GICREG_DIST, 0);
		memcpy(o.data + 4, &irqs[i], 4);
		cr_assert_eq(arm64_vm_state_decode(&s, o.data, o.len, &why), -EBADMSG, "%u", irqs[i]);
		snap_out_free(&o);
	}
	o = encode_vm(ARM64_GICREG_DIST, 0);
	o.data[8] = 4;   /* four registers said, three there */
	cr_assert_eq(arm64_vm_state_decode(&s, o.data, o.len, &why), -EBADMSG);
	snap_out_free(&o);
}

/* This host's architecture (x86 here) refuses an arm64 VM's snapshot by name. */
Test(arm64_state, an_arm64_snapshot_is_refused_on_x86_with_one_line)
{
	static struct snap_file f;
	struct snap_out o = encode_vm(ARM64_GICREG_DIST, 0);
	struct arch_snapshot *s = NULL;
	const char *why = "";

#if !defined(__x86_64__)
	cr_skip_test("this host is not x86-64");
#endif
	f.nr = 1;
	f.sec[0] = (struct snap_section){ SNAP_SEC_ARM64, o.data, o.len };
	cr_assert_eq(arch_snapshot_load(&f, 1, &s, &why), -ENOTSUP);
	cr_assert_null(s);
	cr_assert_str_eq(why, "this is a snapshot of an arm64 VM; this mayfly runs x86-64 VMs");
	snap_out_free(&o);
}
