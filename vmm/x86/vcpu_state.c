/* vcpu_state.c - one vCPU's whole KVM state: save, restore in the order KVM needs, encode and decode. */
#include "vcpu_state.h"
#include "lib/errmsg.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#define MSR_IA32_TSC          0x10
#define MSR_IA32_TSC_DEADLINE 0x6e0
#define APIC_LVTT             0x320        /* LAPIC timer LVT, in kvm_lapic_state.regs */
#define APIC_LVT_MASKED       (1u << 16)
#define APIC_TIMER_TSC_DEADLINE (2u << 17)
#define APIC_TIMER_MODE_MASK  (3u << 17)
#define TSC_KHZ_TOLERANCE_PPM 250          /* calibration noise between boots of one host */

/* The UAPI layouts the section payload copies byte for byte. */
_Static_assert(sizeof(struct kvm_regs) == 144, "kvm_regs layout");
_Static_assert(sizeof(struct kvm_sregs) == 312, "kvm_sregs layout");
_Static_assert(sizeof(struct kvm_xcrs) == 392, "kvm_xcrs layout");
_Static_assert(sizeof(struct kvm_debugregs) == 128, "kvm_debugregs layout");
_Static_assert(sizeof(struct kvm_lapic_state) == 1024, "kvm_lapic_state layout");
_Static_assert(sizeof(struct kvm_vcpu_events) == 64, "kvm_vcpu_events layout");
_Static_assert(sizeof(struct kvm_xsave) == VCPU_STATE_XSAVE_MIN, "kvm_xsave layout");

/* MSRs a restore needs, when KVM lists them. Not here: EFER, FS/GS base and
 * the APIC base (in sregs), x2APIC registers (in the LAPIC state), PMU
 * counters (mayfly gives the guest no PMU), machine check, nested VMX/SVM
 * and Hyper-V MSRs (not offered to the guest). */
static const struct { uint32_t first, last; } msr_ranges[] = {
	{ 0x10, 0x10 },                 /* TSC */
	{ 0x11, 0x12 },                 /* kvmclock, first numbers: wall clock, system time */
	{ 0x3b, 0x3b },                 /* TSC_ADJUST */
	{ 0x48, 0x48 },                 /* SPEC_CTRL */
	{ 0x122, 0x122 },               /* TSX_CTRL */
	{ 0x140, 0x140 },               /* MISC_FEATURES_ENABLES */
	{ 0x174, 0x176 },               /* SYSENTER CS, ESP, EIP */
	{ 0x1a0, 0x1a0 },               /* MISC_ENABLE */
	{ 0x277, 0x277 },               /* PAT */
	{ 0x6e0, 0x6e0 },               /* TSC_DEADLINE */
	{ 0xda0, 0xda0 },               /* XSS */
	{ 0x4b564d00, 0x4b564dff },     /* KVM: kvmclock, async PF, steal time, PV EOI... */
	{ 0xc0000081, 0xc0000084 },     /* STAR, LSTAR, CSTAR, SFMASK */
	{ 0xc0000102, 0xc0000103 },     /* KERNEL_GS_BASE, TSC_AUX */
	{ 0xc001011f, 0xc001011f },     /* AMD VIRT_SPEC_CTRL */
};

/* The MTRRs KVM emulates (8 variable pairs, the fixed ranges, the default
 * type) but leaves out of KVM_GET_MSR_INDEX_LIST. */
static const uint32_t mtrr_msrs[] = {
	0x200, 0x201, 0x202, 0x203, 0x204, 0x205, 0x206, 0x207,
	0x208, 0x209, 0x20a, 0x20b, 0x20c, 0x20d, 0x20e, 0x20f,
	0x250, 0x258, 0x259, 0x268, 0x269, 0x26a, 0x26b, 0x26c, 0x26d, 0x26e, 0x26f,
	0x2ff,
};

static bool msr_wanted(uint32_t index)
{
	for (size_t i = 0; i < sizeof(msr_ranges) / sizeof(msr_ranges[0]); i++)
		if (index >= msr_ranges[i].first && index <= msr_ranges[i].last)
			return true;
	return false;
}

int vcpu_state_msr_list(int kvm_sys_fd, struct vcpu_msr_list *list, const char **why)
{
	struct kvm_msr_list probe = { .nmsrs = 0 }, *all;
	int rc = 0;

	list->n = 0;
	/* With room for none, KVM answers E2BIG and says how many there are. */
	if (ioctl(kvm_sys_fd, KVM_GET_MSR_INDEX_LIST, &probe) == 0 || errno != E2BIG ||
	    probe.nmsrs > 65536)
		return errmsg_why(why, -EIO, "KVM_GET_MSR_INDEX_LIST: cannot size the list");
	all = calloc(1, sizeof(*all) + probe.nmsrs * sizeof(all->indices[0]));
	if (!all)
		return -ENOMEM;
	all->nmsrs = probe.nmsrs;
	if (ioctl(kvm_sys_fd, KVM_GET_MSR_INDEX_LIST, all) < 0) {
		rc = -errno;
		errmsg_why(why, rc, "KVM_GET_MSR_INDEX_LIST: %s", strerror(-rc));
		goto out;
	}
	for (uint32_t i = 0; i < all->nmsrs && i < probe.nmsrs; i++)
		if (msr_wanted(all->indices[i]) && list->n < VCPU_STATE_MSRS_MAX)
			list->index[list->n++] = all->indices[i];
	for (size_t i = 0; i < sizeof(mtrr_msrs) / sizeof(mtrr_msrs[0]); i++)
		if (list->n < VCPU_STATE_MSRS_MAX)
			list->index[list->n++] = mtrr_msrs[i];
out:
	free(all);
	return rc;
}

/* Read the listed MSRs. KVM_GET_MSRS stops at the first MSR it cannot read
 * and returns how many it read: drop that one and go on with the rest. */
static int save_msrs(int vcpu_fd, const struct vcpu_msr_list *list, struct vcpu_state *s,
		     const char **why)
{
	struct kvm_msrs *m = calloc(1, sizeof(*m) + VCPU_STATE_MSRS_MAX * sizeof(m->entries[0]));
	uint32_t next = 0;

	if (!m)
		return -ENOMEM;
	s->nr_msrs = 0;
	while (next < list->n && next < VCPU_STATE_MSRS_MAX) {
		int got;

		m->nmsrs = list->n - next;
		for (uint32_t i = 0; i < m->nmsrs; i++)
			m->entries[i] = (struct kvm_msr_entry){ .index = list->index[next + i] };
		got = ioctl(vcpu_fd, KVM_GET_MSRS, m);
		if (got < 0 || (uint32_t)got > m->nmsrs) {
			int rc = got < 0 ? -errno : -EIO;

			free(m);
			return errmsg_why(why, rc, "KVM_GET_MSRS: %s", strerror(-rc));
		}
		memcpy(&s->msrs[s->nr_msrs], m->entries, (size_t)got * sizeof(m->entries[0]));
		s->nr_msrs += (uint32_t)got;
		next += (uint32_t)got + 1;   /* skip the one it could not read */
	}
	free(m);
	return 0;
}

/* A TSC-deadline timer that fired just before the pause has a deadline of 0
 * and its interrupt still pending inside KVM, which no ioctl saves: the
 * restored guest would wait for it forever. Re-arm it at the saved TSC, so
 * it fires at once after the restore (Firecracker saw this and does the
 * same). Only when the timer is in TSC-deadline mode and unmasked. */
static void rearm_fired_deadline(struct vcpu_state *s)
{
	uint64_t tsc = 0;
	uint32_t lvtt;
	bool have_tsc = false;

	memcpy(&lvtt, &s->lapic.regs[APIC_LVTT], sizeof(lvtt));
	if ((lvtt & APIC_LVT_MASKED) || (lvtt & APIC_TIMER_MODE_MASK) != APIC_TIMER_TSC_DEADLINE)
		return;
	for (uint32_t i = 0; i < s->nr_msrs; i++)
		if (s->msrs[i].index == MSR_IA32_TSC) {
			tsc = s->msrs[i].data;
			have_tsc = true;
		}
	for (uint32_t i = 0; i < s->nr_msrs && have_tsc; i++)
		if (s->msrs[i].index == MSR_IA32_TSC_DEADLINE && s->msrs[i].data == 0)
			s->msrs[i].data = tsc;
}

/* The XSAVE buffer size this VM's vCPUs use: KVM_CAP_XSAVE2 when it says
 * more than the 4 KiB of struct kvm_xsave (AMX). */
static uint32_t xsave_size(int vm_fd)
{
	int size = ioctl(vm_fd, KVM_CHECK_EXTENSION, KVM_CAP_XSAVE2);

	return size > (int)VCPU_STATE_XSAVE_MIN ? (uint32_t)size : VCPU_STATE_XSAVE_MIN;
}

int vcpu_state_save(int vm_fd, int vcpu_fd, const struct vcpu_msr_list *msrs,
		    struct vcpu_state *s, const char **why)
{
	int rc, khz;

	memset(s, 0, sizeof(*s));
	s->xsave_size = xsave_size(vm_fd);
	if (s->xsave_size > VCPU_STATE_XSAVE_MAX)
		return errmsg_why(why, -E2BIG, "KVM_CAP_XSAVE2: %u bytes of XSAVE state", s->xsave_size);
	s->xsave = calloc(1, s->xsave_size);
	if (!s->xsave)
		return -ENOMEM;
	/* MP state first: reading it makes KVM take pending INIT/SIPI into
	 * the LAPIC and vCPU state that the later reads then see. Events
	 * last: the other reads can still change what is pending. */
	rc = snap_ioctl(vcpu_fd, KVM_GET_MP_STATE, &s->mp_state, "KVM_GET_MP_STATE", why);
	if (!rc)
		rc = snap_ioctl(vcpu_fd, KVM_GET_REGS, &s->regs, "KVM_GET_REGS", why);
	if (!rc)
		rc = snap_ioctl(vcpu_fd, KVM_GET_SREGS, &s->sregs, "KVM_GET_SREGS", why);
	if (!rc && s->xsave_size > VCPU_STATE_XSAVE_MIN)
		rc = snap_ioctl(vcpu_fd, KVM_GET_XSAVE2, s->xsave, "KVM_GET_XSAVE2", why);
	else if (!rc)
		rc = snap_ioctl(vcpu_fd, KVM_GET_XSAVE, s->xsave, "KVM_GET_XSAVE", why);
	if (!rc)
		rc = snap_ioctl(vcpu_fd, KVM_GET_XCRS, &s->xcrs, "KVM_GET_XCRS", why);
	if (!rc)
		rc = snap_ioctl(vcpu_fd, KVM_GET_DEBUGREGS, &s->debugregs, "KVM_GET_DEBUGREGS", why);
	if (!rc)
		rc = snap_ioctl(vcpu_fd, KVM_GET_LAPIC, &s->lapic, "KVM_GET_LAPIC", why);
	if (!rc)
		rc = save_msrs(vcpu_fd, msrs, s, why);
	if (!rc)
		rc = snap_ioctl(vcpu_fd, KVM_GET_VCPU_EVENTS, &s->events, "KVM_GET_VCPU_EVENTS", why);
	if (rc) {
		vcpu_state_free(s);
		return rc;
	}
	khz = ioctl(vcpu_fd, KVM_GET_TSC_KHZ, 0);
	s->tsc_khz = khz > 0 ? (uint32_t)khz : 0;
	rearm_fired_deadline(s);
	return 0;
}

/* Scale the guest TSC to the saved frequency when this host's differs by
 * more than calibration noise. */
static int restore_tsc_khz(int vcpu_fd, uint32_t saved, const char **why)
{
	int here = ioctl(vcpu_fd, KVM_GET_TSC_KHZ, 0);
	uint64_t diff;

	if (saved == 0 || here <= 0)
		return 0;
	diff = (uint64_t)(here > (int)saved ? (uint32_t)here - saved : saved - (uint32_t)here);
	if (diff * 1000000 <= (uint64_t)saved * TSC_KHZ_TOLERANCE_PPM)
		return 0;
	if (ioctl(vcpu_fd, KVM_SET_TSC_KHZ, (unsigned long)saved) < 0) {
		int rc = -errno;

		return errmsg_why(why, rc, "the snapshot's TSC runs at %u kHz, this host's at %d kHz, and KVM cannot scale it: %s",
				saved, here, strerror(-rc));
	}
	return 0;
}

/* Set n MSRs from `e`: KVM_SET_MSRS sets them in order and returns how many. */
static int restore_msrs(int vcpu_fd, const struct kvm_msr_entry *e, uint32_t n, const char **why)
{
	struct kvm_msrs *m;
	int got;

	if (n == 0)
		return 0;
	m = calloc(1, sizeof(*m) + n * sizeof(m->entries[0]));
	if (!m)
		return -ENOMEM;
	m->nmsrs = n;
	memcpy(m->entries, e, n * sizeof(*e));
	got = ioctl(vcpu_fd, KVM_SET_MSRS, m);
	free(m);
	if (got < 0) {
		int rc = -errno;

		return errmsg_why(why, rc, "KVM_SET_MSRS: %s", strerror(-rc));
	}
	if ((uint32_t)got < n)
		return errmsg_why(why, -EINVAL, "KVM_SET_MSRS: KVM refused MSR %#x", e[got].index);
	return 0;
}

static int restore_all_msrs(int vcpu_fd, const struct vcpu_state *s, const char **why)
{
	struct kvm_msr_entry early[VCPU_STATE_MSRS_MAX], late[VCPU_STATE_MSRS_MAX];
	uint32_t ne = 0, nl = 0;
	int rc;

	/* TSC_DEADLINE after TSC: KVM arms the timer against the TSC it has
	 * when the deadline is written. */
	for (uint32_t i = 0; i < s->nr_msrs && i < VCPU_STATE_MSRS_MAX; i++) {
		if (s->msrs[i].index == MSR_IA32_TSC_DEADLINE)
			late[nl++] = s->msrs[i];
		else
			early[ne++] = s->msrs[i];
	}
	rc = restore_msrs(vcpu_fd, early, ne, why);
	return rc ? rc : restore_msrs(vcpu_fd, late, nl, why);
}

int vcpu_state_restore(int vm_fd, int vcpu_fd, const struct kvm_cpuid2 *cpuid,
		       const struct vcpu_state *s, const char **why)
{
	struct kvm_vcpu_events events = s->events;
	uint32_t size = xsave_size(vm_fd);
	uint8_t *xsave;
	int rc;

	if (!s->xsave || s->xsave_size < VCPU_STATE_XSAVE_MIN)
		return errmsg_why(why, -EINVAL, "vCPU state without XSAVE state");
	/* KVM_SET_XSAVE reads as many bytes as this host's KVM_CAP_XSAVE2
	 * says, which may be more than the snapshot holds: zero the rest. */
	if (s->xsave_size > size)
		size = s->xsave_size;
	if (size > VCPU_STATE_XSAVE_MAX)
		return errmsg_why(why, -E2BIG, "KVM_CAP_XSAVE2: %u bytes of XSAVE state", size);
	xsave = calloc(1, size);
	if (!xsave)
		return -ENOMEM;
	memcpy(xsave, s->xsave, s->xsave_size);
	/* The pending NMI and the SIPI vector are only taken when flagged. */
	events.flags &= KVM_VCPUEVENT_VALID_SHADOW | KVM_VCPUEVENT_VALID_SMM;
	events.flags |= KVM_VCPUEVENT_VALID_NMI_PENDING | KVM_VCPUEVENT_VALID_SIPI_VECTOR;

	rc = snap_ioctl(vcpu_fd, KVM_SET_CPUID2, (void *)cpuid, "KVM_SET_CPUID2", why);
	if (!rc)
		rc = restore_tsc_khz(vcpu_fd, s->tsc_khz, why);
	if (!rc)
		rc = snap_ioctl(vcpu_fd, KVM_SET_MP_STATE, (void *)&s->mp_state, "KVM_SET_MP_STATE", why);
	if (!rc)
		rc = snap_ioctl(vcpu_fd, KVM_SET_REGS, (void *)&s->regs, "KVM_SET_REGS", why);
	if (!rc)
		rc = snap_ioctl(vcpu_fd, KVM_SET_SREGS, (void *)&s->sregs, "KVM_SET_SREGS", why);
	if (!rc)
		rc = snap_ioctl(vcpu_fd, KVM_SET_XSAVE, xsave, "KVM_SET_XSAVE", why);
	if (!rc)
		rc = snap_ioctl(vcpu_fd, KVM_SET_XCRS, (void *)&s->xcrs, "KVM_SET_XCRS", why);
	if (!rc)
		rc = snap_ioctl(vcpu_fd, KVM_SET_DEBUGREGS, (void *)&s->debugregs, "KVM_SET_DEBUGREGS", why);
	if (!rc)
		rc = snap_ioctl(vcpu_fd, KVM_SET_LAPIC, (void *)&s->lapic, "KVM_SET_LAPIC", why);
	if (!rc)
		rc = restore_all_msrs(vcpu_fd, s, why);
	if (!rc)
		rc = snap_ioctl(vcpu_fd, KVM_SET_VCPU_EVENTS, &events, "KVM_SET_VCPU_EVENTS", why);
	free(xsave);
	if (rc)
		return rc;
	/* Best effort: EINVAL when the guest never enabled kvmclock. */
	ioctl(vcpu_fd, KVM_KVMCLOCK_CTRL, 0);
	return 0;
}

void vcpu_state_free(struct vcpu_state *s)
{
	free(s->xsave);
	s->xsave = NULL;
	s->xsave_size = 0;
}

void vcpu_state_encode(const struct vcpu_state *s, struct snap_out *out)
{
	snap_out_u32(out, s->tsc_khz);
	snap_out_u32(out, s->mp_state.mp_state);
	snap_out_put(out, &s->regs, sizeof(s->regs));
	snap_out_put(out, &s->sregs, sizeof(s->sregs));
	snap_out_put(out, &s->xcrs, sizeof(s->xcrs));
	snap_out_put(out, &s->debugregs, sizeof(s->debugregs));
	snap_out_put(out, &s->lapic, sizeof(s->lapic));
	snap_out_put(out, &s->events, sizeof(s->events));
	snap_out_u32(out, s->nr_msrs);
	for (uint32_t i = 0; i < s->nr_msrs && i < VCPU_STATE_MSRS_MAX; i++) {
		snap_out_u32(out, s->msrs[i].index);
		snap_out_u32(out, 0);
		snap_out_u64(out, s->msrs[i].data);
	}
	snap_out_u32(out, s->xsave_size);
	snap_out_put(out, s->xsave, s->xsave_size);
}

int vcpu_state_decode(struct vcpu_state *s, const void *data, size_t len, const char **why)
{
	struct snap_in in;

	memset(s, 0, sizeof(*s));
	snap_in_init(&in, data, len);
	s->tsc_khz = snap_in_u32(&in);
	s->mp_state.mp_state = snap_in_u32(&in);
	snap_in_get(&in, &s->regs, sizeof(s->regs));
	snap_in_get(&in, &s->sregs, sizeof(s->sregs));
	snap_in_get(&in, &s->xcrs, sizeof(s->xcrs));
	snap_in_get(&in, &s->debugregs, sizeof(s->debugregs));
	snap_in_get(&in, &s->lapic, sizeof(s->lapic));
	snap_in_get(&in, &s->events, sizeof(s->events));
	s->nr_msrs = snap_in_u32(&in);
	if (s->nr_msrs > VCPU_STATE_MSRS_MAX)
		return errmsg_why(why, -EBADMSG, "corrupt vcpu section: %u MSRs (at most %u)",
				s->nr_msrs, VCPU_STATE_MSRS_MAX);
	for (uint32_t i = 0; i < s->nr_msrs; i++) {
		s->msrs[i].index = snap_in_u32(&in);
		if (snap_in_u32(&in) != 0)   /* reserved */
			return errmsg_why(why, -EBADMSG, "corrupt vcpu section: MSR %u has reserved bits", i);
		s->msrs[i].data = snap_in_u64(&in);
	}
	s->xsave_size = snap_in_u32(&in);
	if (in.bad)
		return errmsg_why(why, -EBADMSG, "corrupt vcpu section: cut short (%zu bytes)", len);
	if (s->xsave_size < VCPU_STATE_XSAVE_MIN || s->xsave_size > VCPU_STATE_XSAVE_MAX ||
	    s->xsave_size % 4)
		return errmsg_why(why, -EBADMSG, "corrupt vcpu section: XSAVE state of %u bytes",
				s->xsave_size);
	if (s->xsave_size != in.left)
		return errmsg_why(why, -EBADMSG, "corrupt vcpu section: %zu bytes after the registers, XSAVE state says %u",
				in.left, s->xsave_size);
	s->xsave = malloc(s->xsave_size);
	if (!s->xsave)
		return -ENOMEM;
	snap_in_get(&in, s->xsave, s->xsave_size);
	return 0;
}
