/* fuzz_snapshot.c - libFuzzer target: a hostile or corrupt snapshot state file through the reader and every section decoder. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot/format.h"
#include "snapshot/workingset.h"
#include "x86/cpu.h"
#include "x86/vcpu_state.h"
#include "x86/vm_state.h"

/*
 * Input layout (tests/fuzz/make-snapshot-seeds writes the same):
 *
 *   byte 0     what the rest is, modulo 8 (4-7: as 4):
 *              0  a whole state file: snap_parse, then each cpuid, vm and
 *                 vcpu section through its decoder
 *              1  a cpuid section payload (cpuid_decode)
 *              2  a vm section payload (vm_state_decode)
 *              3  a vcpu section payload (vcpu_state_decode)
 *              4  a working set section payload (workingset_decode, for
 *                 a memory file of WS_PAGES pages)
 *   the rest   the bytes
 *
 * The payload modes exist because a random mutation of a whole file almost
 * never keeps its crc32s right, so the decoders behind the reader would
 * rarely see a mutated payload. The rest is copied into a buffer of exactly
 * its size, so that AddressSanitizer catches a read one byte past it.
 * MAYFLY_FUZZ_LOG=debug prints why each input was refused.
 */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int verbose = -1;

static void report(const char *what, int rc, const char *why)
{
	if (verbose < 0) {
		const char *lvl = getenv("MAYFLY_FUZZ_LOG");

		verbose = lvl && !strcmp(lvl, "debug");
	}
	if (verbose)
		fprintf(stderr, "%s: %d %s\n", what, rc, rc && why ? why : "");
}

static void decode_cpuid(const uint8_t *p, size_t len)
{
	struct kvm_cpuid2 *c = NULL;
	const char *why = NULL;
	int rc = cpuid_decode(p, len, &c, &why);

	report("cpuid", rc, why);
	if (rc == 0) {
		/* A decoded table must be usable: check it against itself. */
		if (cpuid_check_host(c, c, false, &why) != 0)
			abort();
		free(c);
	}
}

static void decode_vm(const uint8_t *p, size_t len)
{
	struct vm_state s;
	const char *why = NULL;

	report("vm", vm_state_decode(&s, p, len, &why), why);
}

static void decode_vcpu(const uint8_t *p, size_t len)
{
	static struct vcpu_state s;
	const char *why = NULL;
	int rc = vcpu_state_decode(&s, p, len, &why);

	report("vcpu", rc, why);
	if (rc == 0) {
		/* Encoding it again gives the very same bytes. */
		struct snap_out out;

		snap_out_init(&out);
		vcpu_state_encode(&s, &out);
		if (out.err == 0 && (out.len != len || memcmp(out.data, p, len)))
			abort();
		snap_out_free(&out);
		vcpu_state_free(&s);
	}
}

/* A 256 MiB guest's memory file: runs past it must be refused. */
#define WS_PAGES 65536u

static void decode_workingset(const uint8_t *p, size_t len)
{
	struct ws_range *r = NULL;
	const char *why = NULL;
	size_t n = 0;
	int rc = workingset_decode(p, len, WS_PAGES, &r, &n, &why);

	report("workingset", rc, why);
	if (rc)
		return;
	/* What a restore populates: non-empty runs, ascending, apart, inside. */
	for (size_t i = 0; i < n; i++) {
		if (!r[i].count || r[i].first >= WS_PAGES || r[i].count > WS_PAGES - r[i].first)
			abort();
		if (i && r[i].first <= r[i - 1].first + r[i - 1].count)
			abort();
	}
	free(r);
}

static void parse_file(const uint8_t *p, size_t len)
{
	static struct snap_file f;
	const char *why = NULL;
	int rc = snap_parse(&f, p, len, NULL, 0, &why);

	report("file", rc, why);
	if (rc)
		return;
	for (unsigned i = 0; i < f.nr; i++) {
		const struct snap_section *s = &f.sec[i];

		/* Every view lies inside the buffer. */
		if (s->data < p || s->len > len || (size_t)(s->data - p) > len - s->len)
			abort();
		if (s->type == SNAP_SEC_CPUID)
			decode_cpuid(s->data, s->len);
		else if (s->type == SNAP_SEC_VM)
			decode_vm(s->data, s->len);
		else if (s->type >= SNAP_SEC_VCPU_BASE && s->type < SNAP_SEC_VCPU(SNAP_SEC_VCPU_MAX))
			decode_vcpu(s->data, s->len);
		else if (s->type == SNAP_SEC_WORKINGSET)
			decode_workingset(s->data, s->len);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy;
	size_t len;

	if (size == 0)
		return 0;
	len = size - 1;
	copy = malloc(len ? len : 1);
	if (!copy)
		return 0;
	memcpy(copy, data + 1, len);
	switch (data[0] & 7) {
	case 0:
		parse_file(copy, len);
		break;
	case 1:
		decode_cpuid(copy, len);
		break;
	case 2:
		decode_vm(copy, len);
		break;
	case 3:
		decode_vcpu(copy, len);
		break;
	default:
		decode_workingset(copy, len);
		break;
	}
	free(copy);
	return 0;
}
