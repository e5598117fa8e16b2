/* test_cpuid_snapshot.c - the guest's CPUID in a snapshot: encode/decode, and the host feature check. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "x86/cpu.h"

#define IDX KVM_CPUID_FLAG_SIGNIFCANT_INDEX

/* A host as KVM_GET_SUPPORTED_CPUID shows it (values from a Zen 3 host,
 * trimmed): no hypervisor, HTT, TSC-deadline or OSXSAVE bits. */
static const struct kvm_cpuid_entry2 host_entries[] = {
	{ .function = 0, .eax = 0x10, .ebx = 0x68747541 },
	{ .function = 1, .eax = 0xa20f10, .ebx = 0x800, .ecx = 0x76f8320b, .edx = 0x078bfbff },
	{ .function = 6, .eax = 0x4 },
	{ .function = 7, .index = 0, .flags = IDX, .ebx = 0x219c97a9, .ecx = 0x0040068c, .edx = 0x10 },
	{ .function = 7, .index = 1, .flags = IDX },
	{ .function = 0xd, .index = 0, .flags = IDX, .eax = 0x207, .ebx = 0x340, .ecx = 0x988 },
	{ .function = 0xd, .index = 1, .flags = IDX, .eax = 0xf },
	{ .function = 0x40000001, .eax = 0x01007afb },
	{ .function = 0x80000001, .ecx = 0x75c237ff, .edx = 0x2fd3fbff },
	{ .function = 0x80000008, .eax = 0x3030, .ebx = 0x0300f205 },
};
#define NR_HOST (sizeof(host_entries) / sizeof(host_entries[0]))

static struct kvm_cpuid2 *table(const struct kvm_cpuid_entry2 *e, size_t n)
{
	struct kvm_cpuid2 *c = calloc(1, sizeof(*c) + n * sizeof(c->entries[0]));

	c->nent = (uint32_t)n;
	memcpy(c->entries, e, n * sizeof(*e));
	return c;
}

static struct kvm_cpuid2 *host(void)
{
	return table(host_entries, NR_HOST);
}

Test(cpuid_snapshot, encode_decode_round_trip)
{
	struct kvm_cpuid2 *h = host(), *d = NULL;
	struct snap_out out;
	const char *why = NULL;

	snap_out_init(&out);
	cpuid_encode(h, &out);
	cr_assert_eq(out.err, 0);
	cr_assert_eq(out.len, 4 + NR_HOST * 28);
	cr_assert_eq(cpuid_decode(out.data, out.len, &d, &why), 0, "%s", why);
	cr_assert_eq(d->nent, NR_HOST);
	for (size_t i = 0; i < NR_HOST; i++) {
		const struct kvm_cpuid_entry2 *a = &h->entries[i], *b = &d->entries[i];

		cr_assert(a->function == b->function && a->index == b->index &&
			  a->flags == b->flags && a->eax == b->eax && a->ebx == b->ebx &&
			  a->ecx == b->ecx && a->edx == b->edx, "entry %zu", i);
	}
	snap_out_free(&out);
	free(h);
	free(d);
}

Test(cpuid_snapshot, decode_refuses_bad_counts_and_lengths)
{
	struct kvm_cpuid2 *h = host(), *d = NULL;
	struct snap_out out;
	const char *why = NULL;
	uint32_t huge[2] = { CPUID_MAX_ENTRIES + 1, 0 }, zero = 0;

	snap_out_init(&out);
	cpuid_encode(h, &out);
	for (size_t cut = 0; cut < out.len; cut++)
		cr_assert_eq(cpuid_decode(out.data, cut, &d, &why), -EBADMSG, "cut at %zu", cut);
	snap_out_put(&out, "x", 1);
	cr_assert_eq(cpuid_decode(out.data, out.len, &d, &why), -EBADMSG, "a trailing byte");
	cr_assert_eq(cpuid_decode(&zero, sizeof(zero), &d, &why), -EBADMSG);
	cr_assert_eq(cpuid_decode(huge, sizeof(huge), &d, &why), -EBADMSG);
	cr_assert(strstr(why, "cpuid"), "%s", why);
	cr_assert_null(d);
	snap_out_free(&out);
	free(h);
}

/* What mayfly gives a guest on this host passes this host's check, however
 * many vCPUs, with the bits mayfly sets itself. */
Test(cpuid_snapshot, the_guest_mayfly_builds_passes_on_its_host)
{
	struct kvm_cpuid2 *h = host(), *g = host();
	const char *why = NULL;

	cpuid_enable_tsc_deadline(g);
	cpuid_patch(g, 3, 4);
	cr_assert(cpuid_find(g, 1, 0)->ecx & (1u << 31));
	cr_assert(cpuid_find(g, 1, 0)->edx & (1u << 28));
	cr_assert_eq(cpuid_check_host(g, h, true, &why), 0, "%s", why);
	/* The guest enabled XSAVE and PKU in CR4: KVM shows OSXSAVE, OSPKE. */
	cpuid_find(g, 1, 0)->ecx |= 1u << 27;
	cpuid_find(g, 7, 0)->ecx |= 1u << 4;
	cr_assert_eq(cpuid_check_host(g, h, true, &why), 0, "%s", why);
	/* A host with more than the guest saw is fine. */
	cpuid_find(h, 7, 0)->ebx |= 1u << 16;
	cr_assert_eq(cpuid_check_host(g, h, true, &why), 0, "%s", why);
	free(h);
	free(g);
}

Test(cpuid_snapshot, tsc_deadline_needs_the_kvm_capability)
{
	struct kvm_cpuid2 *h = host(), *g = host();
	const char *why = NULL;

	cpuid_enable_tsc_deadline(g);
	cr_assert_eq(cpuid_check_host(g, h, false, &why), -ENOTSUP);
	cr_assert(strstr(why, "CPUID.(EAX=0x1,ECX=0):ECX bit 24 (tsc-deadline)"), "%s", why);
	free(h);
	free(g);
}

Test(cpuid_snapshot, a_missing_feature_is_named)
{
	struct kvm_cpuid2 *h = host(), *g = host();
	const char *why = NULL;

	/* The snapshot's host had AVX2 and SHA; this one has neither. */
	cpuid_find(h, 7, 0)->ebx &= ~((1u << 5) | (1u << 29));
	cr_assert_eq(cpuid_check_host(g, h, true, &why), -ENOTSUP);
	cr_assert(strstr(why, "CPUID.(EAX=0x7,ECX=0):EBX bit 5 (avx2)"), "%s", why);
	free(h);
	free(g);
}

Test(cpuid_snapshot, a_bit_without_a_name_is_numbered)
{
	struct kvm_cpuid2 *h = host(), *g = host();
	const char *why = NULL;

	cpuid_find(g, 0x80000008, 0)->ebx |= 1u << 30;
	cr_assert_eq(cpuid_check_host(g, h, true, &why), -ENOTSUP);
	cr_assert(strstr(why, "CPUID.(EAX=0x80000008,ECX=0):EBX bit 30"), "%s", why);
	cr_assert_null(strstr(strstr(why, "bit 30"), "("), "no name: %s", why);
	free(h);
	free(g);
}

/* A feature leaf the host lacks altogether counts as all of its bits
 * missing; a subleaf is matched by its index. */
Test(cpuid_snapshot, a_missing_leaf_or_subleaf_refuses)
{
	struct kvm_cpuid2 *g = host(), *h;
	const char *why = NULL;

	/* The host without 0xD subleaf 1 (entries 0..5 and 7..). */
	struct kvm_cpuid_entry2 e[NR_HOST - 1];
	memcpy(e, host_entries, 6 * sizeof(e[0]));
	memcpy(e + 6, host_entries + 7, (NR_HOST - 7) * sizeof(e[0]));
	h = table(e, NR_HOST - 1);
	cr_assert_eq(cpuid_check_host(g, h, true, &why), -ENOTSUP);
	cr_assert(strstr(why, "CPUID.(EAX=0xd,ECX=1):EAX bit 0 (xsaveopt)"), "%s", why);
	free(h);
	/* The host without KVM's feature leaf. */
	h = table(host_entries, 7);
	cr_assert_eq(cpuid_check_host(g, h, true, &why), -ENOTSUP);
	cr_assert(strstr(why, "EAX=0x40000001"), "%s", why);
	free(h);
	free(g);
}
