/* fuzz_arm64.c - libFuzzer target: hostile arm64 Image headers placed in guest RAM, and an arm64 snapshot's vCPU and GICv3 payloads decoded. */
#include "fuzz_common.h"
#include "arm64/image.h"
#include "arm64/state_codec.h"

/*
 * Input layout (tests/fuzz/make-arm64-seeds writes the same):
 *
 *   byte 0      what to feed (& 3): 0 and 1 an Image, 2 a vCPU payload,
 *               3 the VM-wide payload
 *   byte 1      for an Image, where RAM is: rams[byte & 3]
 *   the rest    the file or payload, copied into a buffer of exactly its
 *               size, so AddressSanitizer catches a read one byte past it
 *
 * Checks besides the sanitizers:
 *  - a placed Image lies inside RAM: its base 2 MiB-aligned and in RAM,
 *    entry = base + text offset, end = entry + image size, no wrap, end
 *    at most RAM's end, an image size that covers the file; a refused one
 *    says why;
 *  - a refused payload says why and keeps nothing (LeakSanitizer sees the
 *    rest);
 *  - an accepted payload encodes back to exactly the bytes it came from.
 */
static const struct {
	uint64_t base, size;
} rams[4] = {
	{ 0x80000000ULL, 256ULL << 20 },               /* mayfly's arm64 layout */
	{ 0x80001000ULL, 64ULL << 20 },                /* an unaligned base */
	{ 0xffffffffffa00001ULL, 4ULL << 20 },         /* near the top of the address space */
	{ 0xffffffffffffe000ULL, 0x1000 },             /* rounding the base up would wrap */
};

static bool verbose;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	verbose = fuzz_log_init();
	return 0;
}

static void image(const uint8_t *data, size_t size, unsigned r)
{
	struct arm64_image img;
	const char *why = "";
	uint64_t base;

	if (arm64_image_place(data, size, rams[r].base, rams[r].size, &img, &why)) {
		if (!why[0])
			abort();   /* a refusal names its reason */
		return;
	}
	base = img.entry - img.text_offset;
	if (base % ARM64_IMAGE_ALIGN || base < rams[r].base || img.text_offset >= ARM64_IMAGE_ALIGN ||
	    img.end - img.entry != img.image_size || img.end < img.entry || img.image_size < size ||
	    img.end - rams[r].base > rams[r].size)
		abort();
}

/* An accepted payload, encoded again, is the input itself. */
static void same_bytes(const struct snap_out *o, const uint8_t *data, size_t size)
{
	if (o->err || o->len != size || memcmp(o->data, data, size))
		abort();
}

static void vcpu(const uint8_t *data, size_t size)
{
	struct arm64_vcpu_state s;
	struct snap_out o;
	const char *why = "";

	if (arm64_vcpu_state_decode(&s, data, size, &why)) {
		if (!why[0] || s.regs || s.nregs)
			abort();
		return;
	}
	snap_out_init(&o);
	arm64_vcpu_state_encode(&s, &o);
	same_bytes(&o, data, size);
	snap_out_free(&o);
	arm64_vcpu_state_free(&s);
}

static void vm(const uint8_t *data, size_t size)
{
	struct arm64_vm_state s;
	struct snap_out o;
	const char *why = "";

	if (arm64_vm_state_decode(&s, data, size, &why)) {
		if (!why[0] || s.gic || s.ngic)
			abort();
		return;
	}
	snap_out_init(&o);
	arm64_vm_state_encode(&s, &o);
	same_bytes(&o, data, size);
	snap_out_free(&o);
	arm64_vm_state_free(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cursor c = { data, size };
	unsigned what = take8(&c) & 3, r = take8(&c) & 3;
	uint8_t *copy = malloc(c.left ? c.left : 1);

	if (!copy)
		return 0;
	memcpy(copy, c.p, c.left);
	if (verbose)
		fprintf(stderr, "fuzz-arm64: %s of %zu bytes\n",
			what < 2 ? "an Image" : what == 2 ? "a vCPU payload" : "a VM payload", c.left);
	if (what < 2)
		image(copy, c.left, r);
	else if (what == 2)
		vcpu(copy, c.left);
	else
		vm(copy, c.left);
	free(copy);
	return 0;
}
