/* fuzz_boot.c - libFuzzer target: hostile kernel files (ELF, PVH notes, bzImage) through the boot loaders into fake guest RAM, then the initrd and the boot structures. */
#include "fuzz_common.h"
#include "mem/mem.h"
#include "x86/boot.h"
#include "x86/layout.h"

#include <errno.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

/*
 * Input layout (tests/fuzz/make-boot-seeds writes the same):
 *
 *   byte 0        guest RAM size: ram_sizes[byte & 3]
 *   byte 1        initrd size: 0 none, else n * 4093 bytes (not page-sized,
 *                 so its placement rounds)
 *   bytes 2-3     command line length L, little-endian (cut to what is there
 *                 and to LAYOUT_CMDLINE_MAX - 1)
 *   L bytes       the command line (a NUL in it ends it early)
 *   the rest      the kernel file, copied into a buffer of exactly its size,
 *                 so AddressSanitizer catches a read one byte past it
 *
 * Guest RAM is a mapping of its own with an inaccessible page either side,
 * so any access outside it faults, and it is emptied after each input
 * (MADV_DONTNEED), so each input starts from zeroed RAM and the host's
 * memory stays bounded. Checks besides the sanitizers:
 *  - the loaders write nothing below 1 MiB (that page range is read-only
 *    while they run: the boot structures, the page tables and the MP
 *    table live there and are written only by the code that owns them);
 *  - a refused kernel says why and has written nothing at all (no page of
 *    guest RAM became resident: everything is checked before the first
 *    write);
 *  - an accepted kernel lies in guest RAM from 1 MiB up, in low RAM, and
 *    its entry point inside it;
 *  - the initrd, if it fits, lies page-aligned above the kernel, in low
 *    RAM, below the kernel's initrd_addr_max, and holds its bytes;
 *  - the boot structures are written for any command line that fits
 *    (a bzImage may refuse one longer than its cmdline_size: -E2BIG).
 */
static const uint64_t ram_sizes[4] = { 2ull << 20, 8ull << 20, 64ull << 20, 512ull << 20 };

#define INITRD_UNIT 4093u

static struct {
	uint8_t *base;          /* the guard page before RAM */
	uint64_t size;          /* RAM bytes */
} rams[4];
static bool verbose;
static uint8_t initrd[255 * INITRD_UNIT];
static unsigned char residency[(512u << 20) / 4096];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	verbose = fuzz_log_init();
	for (int i = 0; i < 4; i++) {
		size_t len = ram_sizes[i] + 2 * 4096;
		uint8_t *p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
				  -1, 0);

		if (p == MAP_FAILED || mprotect(p + 4096, ram_sizes[i], PROT_READ | PROT_WRITE))
			fuzz_die("cannot map guest RAM");
		rams[i].base = p;
		rams[i].size = ram_sizes[i];
	}
	for (size_t i = 0; i < sizeof(initrd); i++)
		initrd[i] = (uint8_t)(i * 7 + 1);
	return 0;
}

/* Whether no page of RAM is resident: nothing was written since the last
 * MADV_DONTNEED. */
static bool ram_untouched(uint8_t *ram, uint64_t size)
{
	if (mincore(ram, size, residency))
		fuzz_die("mincore");
	for (uint64_t i = 0; i < size / 4096; i++)
		if (residency[i] & 1)
			return false;
	return true;
}

static void check_kernel(const struct kernel_image *k, uint64_t size)
{
	if (k->load_start < LAYOUT_HIMEM_START || k->load_start >= k->load_end ||
	    k->load_end > size || k->load_end > LAYOUT_MMIO_HOLE_START)
		fuzz_broken("an accepted kernel lies outside low guest RAM from 1 MiB", NULL);
	if (k->entry < k->load_start || k->entry >= k->load_end)
		fuzz_broken("an accepted kernel's entry point lies outside it", NULL);
	if (k->format != KERNEL_BZIMAGE && k->setup_header_len)
		fuzz_broken("an ELF kernel came with a setup header", NULL);
	if (k->setup_header_len > sizeof(k->setup_header))
		fuzz_broken("the setup header is longer than its buffer", NULL);
}

static void check_initrd(const struct guest_mem *mem, const struct kernel_image *k,
			 uint64_t gpa, size_t len)
{
	const uint8_t *p;

	if (gpa % LAYOUT_PAGE_SIZE || gpa < k->load_end || gpa + len > mem_low_end(mem) ||
	    gpa + len - 1 > k->initrd_addr_max)
		fuzz_broken("the initrd was placed outside the room the kernel allows", NULL);
	p = mem_gpa_to_hva(mem, gpa, len);
	if (!p || memcmp(p, initrd, len))
		fuzz_broken("the initrd's bytes are not where it was placed", NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cursor c = { data, size };
	uint8_t ram_sel = take8(&c) & 3;
	size_t initrd_len = (size_t)take8(&c) * INITRD_UNIT;
	size_t cmd_len = take16(&c), got;
	const uint8_t *cmd_src = take_bytes(&c, cmd_len, &got);
	uint8_t *ram = rams[ram_sel].base + 4096;
	uint64_t ram_size = rams[ram_sel].size, initrd_gpa = 0;
	char cmdline[LAYOUT_CMDLINE_MAX];
	struct kernel_image k;
	struct guest_mem mem;
	const char *why = NULL;
	uint8_t *image;
	int rc;

	if (got > LAYOUT_CMDLINE_MAX - 1)
		got = LAYOUT_CMDLINE_MAX - 1;
	memcpy(cmdline, cmd_src, got);
	cmdline[got] = 0;
	image = malloc(c.left ? c.left : 1);
	if (!image)
		return 0;
	memcpy(image, c.p, c.left);
	mem_init_fake(&mem, ram, ram_size);

	if (mprotect(ram, LAYOUT_HIMEM_START, PROT_READ))
		fuzz_die("mprotect");
	rc = boot_load_kernel(&mem, image, c.left, &k, &why);
	if (mprotect(ram, LAYOUT_HIMEM_START, PROT_READ | PROT_WRITE))
		fuzz_die("mprotect");
	if (verbose)
		fprintf(stderr, "fuzz_boot: %zu-byte kernel in %llu MiB: %d %s\n", c.left,
			(unsigned long long)(ram_size >> 20), rc, rc ? why : "");
	if (rc) {
		if (rc != -EINVAL && rc != -ENOEXEC)
			fuzz_broken("a refused kernel got another code than EINVAL or ENOEXEC", why);
		if (!why || !*why)
			fuzz_broken("a refused kernel came without a reason", NULL);
		if (!ram_untouched(ram, ram_size))
			fuzz_broken("a refused kernel wrote guest RAM", why);
		goto out;
	}
	check_kernel(&k, ram_size);
	if (initrd_len) {
		rc = boot_load_initrd(&mem, &k, initrd, initrd_len, &initrd_gpa, &why);
		if (rc == 0)
			check_initrd(&mem, &k, initrd_gpa, initrd_len);
		else if (rc != -ENOMEM && rc != -EINVAL)
			fuzz_broken("boot_load_initrd failed with another code than ENOMEM or EINVAL", why);
		else
			initrd_len = 0;
	}
	rc = boot_write_params(&mem, &k, cmdline, initrd_gpa, initrd_len, &why);
	/* A bzImage names the longest command line it takes (cmdline_size). */
	if (rc && !(rc == -E2BIG && k.format == KERNEL_BZIMAGE))
		fuzz_broken("the boot structures could not be written for a loaded kernel", why);
out:
	free(image);
	if (madvise(ram, ram_size, MADV_DONTNEED))
		fuzz_die("madvise");
	return 0;
}
