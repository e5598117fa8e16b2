/* fdt.c - the arm64 guest's device tree: the layout checked whole first (a refused layout writes nothing), then written with libfdt's sequential writer, every node's properties before its children. */
#include "arm64/fdt.h"
#include "lib/errmsg.h"

#include <errno.h>
#include <libfdt.h>
#include <stdio.h>
#include <string.h>

#define PHANDLE_GIC 1
#define PHANDLE_CLK 2
/* The GIC binding's cells: type, number, flags. */
#define GIC_SPI 0
#define GIC_PPI 1
#define IRQ_EDGE_RISING 1
#define IRQ_LEVEL_HIGH  4
/* The architected timer's PPIs: secure, non-secure, virtual, hypervisor. */
static const uint32_t timer_ppis[] = { 13, 14, 11, 10 };
#define MPIDR_AFFINITY 0xff00ffffffull   /* Aff3, Aff2, Aff1, Aff0 */
#define UART_CLOCK_HZ  1843200
#define APB_CLOCK_HZ   24000000
#define ALIGN_2M       (2ull << 20)

struct region {
	const char *what;
	uint64_t base, size;
};

static int check_region(const struct region *r, char *why, size_t whylen)
{
	if (!r->size)
		return errmsg_invalid(why, whylen, "%s is empty", r->what);
	if (r->base + r->size < r->base)
		return errmsg_invalid(why, whylen, "%s wraps past the top of the address space",
				      r->what);
	return 0;
}

static int check_irq(const char *what, uint32_t irq, const uint32_t *taken, unsigned ntaken,
		     char *why, size_t whylen)
{
	if (irq < ARM64_SPI_FIRST || irq > ARM64_SPI_LAST)
		return errmsg_invalid(why, whylen, "%s's interrupt %u is no SPI (%u..%u)", what, irq,
				      ARM64_SPI_FIRST, ARM64_SPI_LAST);
	for (unsigned i = 0; i < ntaken; i++)
		if (taken[i] == irq)
			return errmsg_invalid(why, whylen, "%s's interrupt %u is taken twice", what,
					      irq);
	return 0;
}

/* Every rule the header names, before a byte is written. */
static int check(const struct arm64_fdt_layout *l, char *why, size_t whylen)
{
	struct region r[5 + ARM64_FDT_MAX_DEVICES];
	uint32_t irqs[2 + ARM64_FDT_MAX_DEVICES];
	char names[ARM64_FDT_MAX_DEVICES][24];
	unsigned n = 0, nirq = 0;
	int rc;

	if (l->ncpus < 1 || l->ncpus > ARM64_FDT_MAX_CPUS)
		return errmsg_invalid(why, whylen, "%u vCPUs: 1 to %d", l->ncpus, ARM64_FDT_MAX_CPUS);
	for (unsigned i = 0; i < l->ncpus; i++)
		for (unsigned j = 0; j < i; j++)
			if (!((l->mpidr[i] ^ l->mpidr[j]) & MPIDR_AFFINITY))
				return errmsg_invalid(why, whylen, "vCPUs %u and %u have one affinity",
						      j, i);
	if (l->ndev > ARM64_FDT_MAX_DEVICES)
		return errmsg_invalid(why, whylen, "%u devices: at most %d", l->ndev,
				      ARM64_FDT_MAX_DEVICES);
	if ((l->mem_base | l->mem_size) & (ALIGN_2M - 1))
		return errmsg_invalid(why, whylen, "guest RAM not 2 MiB aligned");
	if (l->gic_redist_size < (uint64_t)l->ncpus * ARM64_GIC_REDIST_SIZE)
		return errmsg_invalid(why, whylen, "the redistributor region holds fewer than %u "
				      "vCPUs", l->ncpus);
	r[n++] = (struct region){ "guest RAM", l->mem_base, l->mem_size };
	r[n++] = (struct region){ "the GIC distributor", l->gic_dist_base, l->gic_dist_size };
	r[n++] = (struct region){ "the GIC redistributors", l->gic_redist_base, l->gic_redist_size };
	r[n++] = (struct region){ "the console", l->uart.base, l->uart.size };
	if (l->rtc.size)
		r[n++] = (struct region){ "the RTC", l->rtc.base, l->rtc.size };
	for (unsigned i = 0; i < l->ndev; i++) {
		snprintf(names[i], sizeof(names[i]), "device %u", i);
		r[n++] = (struct region){ names[i], l->dev[i].base, l->dev[i].size };
	}
	for (unsigned i = 0; i < n; i++) {
		rc = check_region(&r[i], why, whylen);
		if (rc)
			return rc;
		for (unsigned j = 0; j < i; j++)
			if (r[i].base < r[j].base + r[j].size && r[j].base < r[i].base + r[i].size)
				return errmsg_invalid(why, whylen, "%s overlaps %s", r[i].what,
						      r[j].what);
	}
	rc = check_irq("the console", l->uart.irq, irqs, nirq, why, whylen);
	irqs[nirq++] = l->uart.irq;
	if (!rc && l->rtc.size) {
		rc = check_irq("the RTC", l->rtc.irq, irqs, nirq, why, whylen);
		irqs[nirq++] = l->rtc.irq;
	}
	for (unsigned i = 0; !rc && i < l->ndev; i++) {
		rc = check_irq(names[i], l->dev[i].irq, irqs, nirq, why, whylen);
		irqs[nirq++] = l->dev[i].irq;
	}
	if (rc)
		return rc;
	if (l->cmdline && strnlen(l->cmdline, ARM64_FDT_MAX_CMDLINE) == ARM64_FDT_MAX_CMDLINE)
		return errmsg_invalid(why, whylen, "a command line of %d bytes or more",
				      ARM64_FDT_MAX_CMDLINE);
	if (l->initrd_size && (l->initrd_start < l->mem_base ||
			       l->initrd_start - l->mem_base > l->mem_size ||
			       l->initrd_size > l->mem_size - (l->initrd_start - l->mem_base)))
		return errmsg_invalid(why, whylen, "the initrd is not inside guest RAM");
	if (l->seed_len > ARM64_FDT_MAX_SEED || (l->seed_len && !l->seed))
		return errmsg_invalid(why, whylen, "an rng-seed of %zu bytes: at most %d",
				      l->seed_len, ARM64_FDT_MAX_SEED);
	return 0;
}

/* Properties in the binding's big-endian cells. */
static int prop_u32(void *fdt, const char *name, uint32_t v)
{
	return fdt_property_u32(fdt, name, v);
}

static int prop_cells(void *fdt, const char *name, const uint32_t *v, int n)
{
	fdt32_t be[12];

	for (int i = 0; i < n; i++)
		be[i] = cpu_to_fdt32(v[i]);
	return fdt_property(fdt, name, be, n * (int)sizeof(fdt32_t));
}

/* reg = <base size> in two cells each. */
static int prop_reg(void *fdt, uint64_t base, uint64_t size)
{
	fdt64_t be[2] = { cpu_to_fdt64(base), cpu_to_fdt64(size) };

	return fdt_property(fdt, "reg", be, sizeof(be));
}

static int spi(void *fdt, uint32_t irq, uint32_t flags)
{
	const uint32_t cells[] = { GIC_SPI, irq - ARM64_SPI_FIRST, flags };

	return prop_cells(fdt, "interrupts", cells, 3);
}

/* A node name@base holding compatible, reg and an SPI; closed by the caller. */
static int mmio_node(void *fdt, const char *name, const char *compatible, size_t compat_len,
		     const struct arm64_mmio *m, uint32_t flags)
{
	char node[48];
	int rc;

	snprintf(node, sizeof(node), "%s@%llx", name, (unsigned long long)m->base);
	rc = fdt_begin_node(fdt, node);
	if (!rc)
		rc = fdt_property(fdt, "compatible", compatible, (int)compat_len);
	if (!rc)
		rc = prop_reg(fdt, m->base, m->size);
	return rc ? rc : spi(fdt, m->irq, flags);
}

void arm64_fdt_uart_path(const struct arm64_fdt_layout *l, char *out, size_t len)
{
	snprintf(out, len, "/uart@%llx", (unsigned long long)l->uart.base);
}

static int write_cpus(void *fdt, const struct arm64_fdt_layout *l)
{
	int rc = fdt_begin_node(fdt, "cpus");

	if (!rc)
		rc = prop_u32(fdt, "#address-cells", 2);
	if (!rc)
		rc = prop_u32(fdt, "#size-cells", 0);
	for (unsigned i = 0; !rc && i < l->ncpus; i++) {
		uint64_t aff = l->mpidr[i] & MPIDR_AFFINITY;
		fdt64_t reg = cpu_to_fdt64(aff);
		char node[32];

		snprintf(node, sizeof(node), "cpu@%llx", (unsigned long long)aff);
		rc = fdt_begin_node(fdt, node);
		if (!rc)
			rc = fdt_property_string(fdt, "device_type", "cpu");
		if (!rc)
			rc = fdt_property_string(fdt, "compatible", "arm,arm-v8");
		if (!rc)
			rc = fdt_property_string(fdt, "enable-method", "psci");
		if (!rc)
			rc = fdt_property(fdt, "reg", &reg, sizeof(reg));
		if (!rc)
			rc = fdt_end_node(fdt);
	}
	return rc ? rc : fdt_end_node(fdt);
}

static int write_gic_and_timer(void *fdt, const struct arm64_fdt_layout *l)
{
	fdt64_t reg[4] = { cpu_to_fdt64(l->gic_dist_base), cpu_to_fdt64(l->gic_dist_size),
			   cpu_to_fdt64(l->gic_redist_base), cpu_to_fdt64(l->gic_redist_size) };
	uint32_t ppis[3 * 4];
	char node[48];
	int rc;

	snprintf(node, sizeof(node), "intc@%llx", (unsigned long long)l->gic_dist_base);
	rc = fdt_begin_node(fdt, node);
	if (!rc)
		rc = fdt_property_string(fdt, "compatible", "arm,gic-v3");
	if (!rc)
		rc = prop_u32(fdt, "#interrupt-cells", 3);
	if (!rc)
		rc = fdt_property(fdt, "interrupt-controller", NULL, 0);
	if (!rc)
		rc = fdt_property(fdt, "reg", reg, sizeof(reg));
	if (!rc)
		rc = prop_u32(fdt, "phandle", PHANDLE_GIC);
	if (!rc)
		rc = fdt_end_node(fdt);
	for (int i = 0; i < 4; i++) {
		ppis[3 * i] = GIC_PPI;
		ppis[3 * i + 1] = timer_ppis[i];
		ppis[3 * i + 2] = IRQ_LEVEL_HIGH;
	}
	if (!rc)
		rc = fdt_begin_node(fdt, "timer");
	if (!rc)
		rc = fdt_property_string(fdt, "compatible", "arm,armv8-timer");
	if (!rc)
		rc = fdt_property(fdt, "always-on", NULL, 0);
	if (!rc)
		rc = prop_cells(fdt, "interrupts", ppis, 12);
	return rc ? rc : fdt_end_node(fdt);
}

static int write_devices(void *fdt, const struct arm64_fdt_layout *l)
{
	static const char pl031[] = "arm,pl031\0arm,primecell";
	static const char ns16550[] = "ns16550a";
	static const char virtio[] = "virtio,mmio";
	int rc = mmio_node(fdt, "uart", ns16550, sizeof(ns16550), &l->uart, IRQ_LEVEL_HIGH);

	if (!rc)
		rc = prop_u32(fdt, "clock-frequency", UART_CLOCK_HZ);
	if (!rc)
		rc = fdt_end_node(fdt);
	if (!rc && l->rtc.size) {
		/* A PrimeCell wants its bus clock. */
		rc = fdt_begin_node(fdt, "apb-pclk");
		if (!rc)
			rc = fdt_property_string(fdt, "compatible", "fixed-clock");
		if (!rc)
			rc = prop_u32(fdt, "#clock-cells", 0);
		if (!rc)
			rc = prop_u32(fdt, "clock-frequency", APB_CLOCK_HZ);
		if (!rc)
			rc = fdt_property_string(fdt, "clock-output-names", "clk24mhz");
		if (!rc)
			rc = prop_u32(fdt, "phandle", PHANDLE_CLK);
		if (!rc)
			rc = fdt_end_node(fdt);
		if (!rc)
			rc = mmio_node(fdt, "rtc", pl031, sizeof(pl031), &l->rtc, IRQ_LEVEL_HIGH);
		if (!rc)
			rc = prop_u32(fdt, "clocks", PHANDLE_CLK);
		if (!rc)
			rc = fdt_property_string(fdt, "clock-names", "apb_pclk");
		if (!rc)
			rc = fdt_end_node(fdt);
	}
	for (unsigned i = 0; !rc && i < l->ndev; i++) {
		rc = mmio_node(fdt, "virtio_mmio", virtio, sizeof(virtio), &l->dev[i], IRQ_EDGE_RISING);
		if (!rc)
			rc = fdt_property(fdt, "dma-coherent", NULL, 0);
		if (!rc)
			rc = fdt_end_node(fdt);
	}
	return rc;
}

static int write_chosen(void *fdt, const struct arm64_fdt_layout *l)
{
	char uart[48];
	int rc = fdt_begin_node(fdt, "chosen");

	arm64_fdt_uart_path(l, uart, sizeof(uart));
	if (!rc && l->cmdline)
		rc = fdt_property_string(fdt, "bootargs", l->cmdline);
	if (!rc)
		rc = fdt_property_string(fdt, "stdout-path", uart);
	if (!rc && l->initrd_size)
		rc = fdt_property_u64(fdt, "linux,initrd-start", l->initrd_start);
	if (!rc && l->initrd_size)
		rc = fdt_property_u64(fdt, "linux,initrd-end", l->initrd_start + l->initrd_size);
	if (!rc && l->seed_len)
		rc = fdt_property(fdt, "rng-seed", l->seed, (int)l->seed_len);
	return rc ? rc : fdt_end_node(fdt);
}

static int write_tree(void *fdt, int cap, const struct arm64_fdt_layout *l)
{
	static const char psci[] = "arm,psci-0.2\0arm,psci";
	char node[48];
	int rc = fdt_create(fdt, cap);

	if (!rc)
		rc = fdt_finish_reservemap(fdt);
	if (!rc)
		rc = fdt_begin_node(fdt, "");
	if (!rc)
		rc = fdt_property_string(fdt, "compatible", "linux,dummy-virt");
	if (!rc)
		rc = prop_u32(fdt, "#address-cells", 2);
	if (!rc)
		rc = prop_u32(fdt, "#size-cells", 2);
	if (!rc)
		rc = prop_u32(fdt, "interrupt-parent", PHANDLE_GIC);
	snprintf(node, sizeof(node), "memory@%llx", (unsigned long long)l->mem_base);
	if (!rc)
		rc = fdt_begin_node(fdt, node);
	if (!rc)
		rc = fdt_property_string(fdt, "device_type", "memory");
	if (!rc)
		rc = prop_reg(fdt, l->mem_base, l->mem_size);
	if (!rc)
		rc = fdt_end_node(fdt);
	if (!rc)
		rc = write_cpus(fdt, l);
	if (!rc)
		rc = fdt_begin_node(fdt, "psci");
	if (!rc)
		rc = fdt_property(fdt, "compatible", psci, sizeof(psci));
	if (!rc)
		rc = fdt_property_string(fdt, "method", "hvc");
	if (!rc)
		rc = fdt_end_node(fdt);
	if (!rc)
		rc = write_gic_and_timer(fdt, l);
	if (!rc)
		rc = write_devices(fdt, l);
	if (!rc)
		rc = write_chosen(fdt, l);
	if (!rc)
		rc = fdt_end_node(fdt);
	return rc ? rc : fdt_finish(fdt);
}

int arm64_fdt_build(const struct arm64_fdt_layout *l, void *blob, size_t cap, char *why,
		    size_t whylen)
{
	int cap_i = (int)(cap < ARM64_FDT_MAX_SIZE ? cap : ARM64_FDT_MAX_SIZE);
	int rc = check(l, why, whylen);

	if (rc)
		return rc;
	rc = write_tree(blob, cap_i, l);
	if (rc) {
		/* No half-written tree is left for a guest to read. */
		if (cap >= sizeof(uint32_t))
			memset(blob, 0, sizeof(uint32_t));
		if (rc == -FDT_ERR_NOSPACE) {
			snprintf(why, whylen, "the device tree does not fit %d bytes", cap_i);
			return -ENOSPC;
		}
		snprintf(why, whylen, "libfdt: %s", fdt_strerror(rc));
		return -EIO;
	}
	return (int)fdt_totalsize(blob);
}
