/* test_arm64_fdt.c - the arm64 device tree read back with libfdt, node by node, and the layouts that cannot be refused with nothing written. */
#include <criterion/criterion.h>
#include <errno.h>
#include <libfdt.h>
#include <stdio.h>
#include <string.h>

#include "arm64/fdt.h"

static uint8_t blob[ARM64_FDT_MAX_SIZE];
static const uint8_t seed[32] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };

/* A layout as the VM builder would give it: 4 vCPUs, 512 MiB at 2 GiB,
 * the console, an RTC and three virtio-mmio devices. */
static struct arm64_fdt_layout layout(void)
{
	struct arm64_fdt_layout l = {
		.mem_base = 0x80000000, .mem_size = 512ull << 20, .ncpus = 4,
		.gic_dist_base = 0x3fff0000, .gic_dist_size = 0x10000,
		.gic_redist_base = 0x3ff70000, .gic_redist_size = 4 * ARM64_GIC_REDIST_SIZE,
		.uart = { 0x40002000, 0x1000, 33 }, .rtc = { 0x40001000, 0x1000, 34 },
		.ndev = 3, .cmdline = "console=ttyS0 root=/dev/vda ro",
		.initrd_start = 0x88000000, .initrd_size = 1 << 20, .seed = seed,
		.seed_len = sizeof(seed),
	};

	for (unsigned i = 0; i < l.ncpus; i++)
		l.mpidr[i] = 0x80000000ull | i;   /* bit 31 is RES1: not affinity */
	for (unsigned i = 0; i < l.ndev; i++)
		l.dev[i] = (struct arm64_mmio){ 0x40003000 + 0x1000ull * i, 0x200, 35 + i };
	return l;
}

static int node(const char *path)
{
	int off = fdt_path_offset(blob, path);

	cr_assert_geq(off, 0, "%s: %s", path, fdt_strerror(off));
	return off;
}

static const void *prop(const char *path, const char *name, int want_len)
{
	int len = 0;
	const void *p = fdt_getprop(blob, node(path), name, &len);

	cr_assert_not_null(p, "%s %s: %s", path, name, fdt_strerror(len));
	if (want_len >= 0)
		cr_assert_eq(len, want_len, "%s %s: %d bytes", path, name, len);
	return p;
}

/* Property values are 4-byte aligned only: read through memcpy. */
static uint32_t cell(const void *p, int i)
{
	fdt32_t v;

	memcpy(&v, (const uint8_t *)p + 4 * i, sizeof(v));
	return fdt32_to_cpu(v);
}

static uint64_t cell64(const void *p, int i)
{
	fdt64_t v;

	memcpy(&v, (const uint8_t *)p + 8 * i, sizeof(v));
	return fdt64_to_cpu(v);
}

static void build_ok(const struct arm64_fdt_layout *l)
{
	char why[200] = "";
	int n = arm64_fdt_build(l, blob, sizeof(blob), why, sizeof(why));

	cr_assert_gt(n, 0, "%s", why);
	cr_assert_eq(fdt_check_full(blob, (size_t)n), 0, "libfdt's full check");
}

Test(arm64_fdt, every_node_reads_back_as_the_layout_says)
{
	struct arm64_fdt_layout l = layout();
	const void *p;
	int cpus = 0, off;

	build_ok(&l);
	cr_assert_str_eq(prop("/", "compatible", -1), "linux,dummy-virt");
	cr_assert_eq(cell(prop("/", "#address-cells", 4), 0), 2);
	cr_assert_eq(cell(prop("/", "interrupt-parent", 4), 0),
		     fdt_get_phandle(blob, node("/intc@3fff0000")));
	p = prop("/memory@80000000", "reg", 16);
	cr_assert(cell64(p, 0) == l.mem_base && cell64(p, 1) == l.mem_size);
	cr_assert_str_eq(prop("/memory@80000000", "device_type", -1), "memory");
	/* Each vCPU by its affinity, started through PSCI. */
	fdt_for_each_subnode(off, blob, node("/cpus")) {
		int len;
		const void *reg = fdt_getprop(blob, off, "reg", &len);

		cr_assert(reg && len == 8);
		cr_assert_eq(cell64(reg, 0), (uint64_t)cpus, "cpu %d's MPIDR affinity", cpus);
		cr_assert_str_eq(fdt_getprop(blob, off, "enable-method", NULL), "psci");
		cpus++;
	}
	cr_assert_eq(cpus, 4);
	cr_assert_str_eq(prop("/psci", "method", -1), "hvc");
	cr_assert_str_eq(prop("/psci", "compatible", -1), "arm,psci-0.2");
	/* The GICv3: distributor, then redistributors. */
	p = prop("/intc@3fff0000", "reg", 32);
	cr_assert(cell64(p, 0) == l.gic_dist_base && cell64(p, 2) == l.gic_redist_base &&
		  cell64(p, 3) == l.gic_redist_size);
	cr_assert_str_eq(prop("/intc@3fff0000", "compatible", -1), "arm,gic-v3");
	prop("/intc@3fff0000", "interrupt-controller", 0);
	/* The timer's four PPIs. */
	p = prop("/timer", "interrupts", 48);
	cr_assert(cell(p, 0) == 1 && cell(p, 1) == 13 && cell(p, 4) == 14 && cell(p, 7) == 11 &&
		  cell(p, 10) == 10);
	/* The console: SPI 1 is interrupt 33. */
	p = prop("/uart@40002000", "interrupts", 12);
	cr_assert(cell(p, 0) == 0 && cell(p, 1) == 1);
	cr_assert_str_eq(prop("/uart@40002000", "compatible", -1), "ns16550a");
	cr_assert_eq(cell(prop("/rtc@40001000", "clocks", 4), 0),
		     fdt_get_phandle(blob, node("/apb-pclk")));
	for (unsigned i = 0; i < l.ndev; i++) {
		char path[48];

		snprintf(path, sizeof(path), "/virtio_mmio@%llx", (unsigned long long)l.dev[i].base);
		p = prop(path, "reg", 16);
		cr_assert(cell64(p, 0) == l.dev[i].base && cell64(p, 1) == 0x200);
		p = prop(path, "interrupts", 12);
		cr_assert_eq(cell(p, 1), l.dev[i].irq - 32, "%s's SPI", path);
		prop(path, "dma-coherent", 0);
	}
	/* /chosen: the command line, a console path that resolves, the initrd,
	 * the seed. */
	cr_assert_str_eq(prop("/chosen", "bootargs", -1), l.cmdline);
	cr_assert_eq(node(prop("/chosen", "stdout-path", -1)), node("/uart@40002000"));
	cr_assert_eq(cell64(prop("/chosen", "linux,initrd-start", 8), 0), l.initrd_start);
	cr_assert_eq(cell64(prop("/chosen", "linux,initrd-end", 8), 0),
		     l.initrd_start + l.initrd_size);
	cr_assert_eq(memcmp(prop("/chosen", "rng-seed", sizeof(seed)), seed, sizeof(seed)), 0);
}

Test(arm64_fdt, what_a_layout_leaves_out_is_not_in_the_tree)
{
	struct arm64_fdt_layout l = layout();

	l.rtc.size = 0;
	l.initrd_size = 0;
	l.seed_len = 0;
	l.cmdline = NULL;
	l.ndev = 0;
	build_ok(&l);
	cr_assert_lt(fdt_path_offset(blob, "/rtc@40001000"), 0);
	cr_assert_lt(fdt_path_offset(blob, "/apb-pclk"), 0);
	cr_assert_null(fdt_getprop(blob, node("/chosen"), "linux,initrd-start", NULL));
	cr_assert_null(fdt_getprop(blob, node("/chosen"), "rng-seed", NULL));
	cr_assert_null(fdt_getprop(blob, node("/chosen"), "bootargs", NULL));
	cr_assert_lt(fdt_node_offset_by_compatible(blob, -1, "virtio,mmio"), 0);
}

/* The layout after change is refused, the reason naming want, the blob
 * left without a header. */
static void assert_refused(struct arm64_fdt_layout *l, const char *want)
{
	char why[200] = "";

	memset(blob, 0xd0, 4);   /* a valid magic's first byte, were a tree left */
	cr_assert_eq(arm64_fdt_build(l, blob, sizeof(blob), why, sizeof(why)), -EINVAL, "%s", want);
	cr_assert(strstr(why, want), "want '%s', got '%s'", want, why);
	cr_assert_neq(fdt_check_header(blob), 0, "no tree left behind");
}

Test(arm64_fdt, layouts_that_cannot_be_are_refused_with_a_reason)
{
	struct arm64_fdt_layout l;
	char longline[ARM64_FDT_MAX_CMDLINE + 1];

	l = layout(); l.ncpus = 0; assert_refused(&l, "vCPUs");
	l = layout(); l.ncpus = ARM64_FDT_MAX_CPUS + 1; assert_refused(&l, "vCPUs");
	l = layout(); l.mpidr[3] = l.mpidr[1]; assert_refused(&l, "one affinity");
	l = layout(); l.ndev = ARM64_FDT_MAX_DEVICES + 1; assert_refused(&l, "devices");
	l = layout(); l.mem_size += 4096; assert_refused(&l, "2 MiB");
	l = layout(); l.gic_redist_size = ARM64_GIC_REDIST_SIZE; assert_refused(&l, "redistributor");
	l = layout(); l.dev[1].base = l.dev[0].base + 0x100; assert_refused(&l, "overlaps");
	l = layout(); l.uart.base = l.mem_base + 4096; assert_refused(&l, "overlaps guest RAM");
	l = layout(); l.dev[2].size = 0; assert_refused(&l, "empty");
	l = layout(); l.dev[2].base = ~0ull - 0x100; assert_refused(&l, "wraps");
	l = layout(); l.dev[0].irq = 31; assert_refused(&l, "no SPI");
	l = layout(); l.dev[0].irq = 1020; assert_refused(&l, "no SPI");
	l = layout(); l.dev[2].irq = l.uart.irq; assert_refused(&l, "taken twice");
	l = layout(); l.initrd_start = l.mem_base + l.mem_size - 4096; assert_refused(&l, "initrd");
	l = layout(); l.initrd_start = 0x1000; assert_refused(&l, "initrd");
	l = layout(); l.seed_len = ARM64_FDT_MAX_SEED + 1; assert_refused(&l, "rng-seed");
	memset(longline, 'a', sizeof(longline) - 1);
	longline[sizeof(longline) - 1] = '\0';
	l = layout(); l.cmdline = longline; assert_refused(&l, "command line");
}

Test(arm64_fdt, a_tree_that_does_not_fit_is_enospc_and_nothing_is_left)
{
	struct arm64_fdt_layout l = layout();
	char why[200] = "";
	int full;

	build_ok(&l);
	full = (int)fdt_totalsize(blob);
	memset(blob, 0, sizeof(blob));
	cr_assert_eq(arm64_fdt_build(&l, blob, (size_t)full - 1, why, sizeof(why)), -ENOSPC);
	cr_assert(strstr(why, "does not fit"), "%s", why);
	cr_assert_neq(fdt_check_header(blob), 0);
	for (size_t i = (size_t)full - 1; i < sizeof(blob); i++)
		cr_assert_eq(blob[i], 0, "a byte written past cap at %zu", i);
	cr_assert_eq(arm64_fdt_build(&l, blob, (size_t)full, why, sizeof(why)), full, "%s", why);
}
