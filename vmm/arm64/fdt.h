/* fdt.h - the arm64 guest's device tree, built with libfdt from a layout: memory, CPUs, PSCI, the GICv3, the timer, a 16550 console, the RTC, every virtio-mmio device and /chosen. */
#ifndef MAYFLY_ARM64_FDT_H
#define MAYFLY_ARM64_FDT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ARM64_FDT_MAX_CPUS     256       /* a GICv3 redistributor region's worth */
#define ARM64_FDT_MAX_DEVICES  32        /* virtio-mmio devices */
#define ARM64_FDT_MAX_CMDLINE  4096      /* bootargs, NUL included */
#define ARM64_FDT_MAX_SEED     64        /* rng-seed, bytes */
#define ARM64_FDT_MAX_SIZE     (64u << 10)   /* the blob at most; the guest gets it whole */
#define ARM64_GIC_REDIST_SIZE  0x20000   /* one CPU's redistributor frames (RD and SGI) */

/* The SPI numbers the GIC delivers: interrupt IDs 32..1019. */
#define ARM64_SPI_FIRST 32
#define ARM64_SPI_LAST  1019

/* An MMIO region with its interrupt (an interrupt ID, an SPI). */
struct arm64_mmio {
	uint64_t base, size;
	uint32_t irq;
};

struct arm64_fdt_layout {
	uint64_t mem_base, mem_size;      /* guest RAM: 2 MiB aligned, not empty */
	unsigned ncpus;                   /* 1..ARM64_FDT_MAX_CPUS */
	uint64_t mpidr[ARM64_FDT_MAX_CPUS];   /* each vCPU's MPIDR_EL1 (its affinity is its reg) */
	uint64_t gic_dist_base, gic_dist_size;
	uint64_t gic_redist_base, gic_redist_size;   /* ncpus * ARM64_GIC_REDIST_SIZE at least */
	struct arm64_mmio uart;           /* a 16550 on MMIO, the console */
	struct arm64_mmio rtc;            /* a PL031; size 0: none */
	struct arm64_mmio dev[ARM64_FDT_MAX_DEVICES];   /* virtio-mmio */
	unsigned ndev;
	const char *cmdline;              /* bootargs (NULL: none) */
	uint64_t initrd_start, initrd_size;   /* size 0: none; inside RAM */
	const uint8_t *seed;              /* /chosen/rng-seed, fresh per VM and per restore */
	size_t seed_len;                  /* 0..ARM64_FDT_MAX_SEED */
};

/* The blob for l into blob[0..cap): its size, or -EINVAL with one line in
 * why for a layout that cannot be (a count or size out of its range, a
 * region empty, unaligned, wrapping, or overlapping another, an
 * interrupt that is no SPI or is taken twice, an initrd outside RAM, a
 * seed too long), -ENOSPC when it does not fit cap (or
 * ARM64_FDT_MAX_SIZE). Nothing is written past cap; on failure blob holds
 * no device tree. */
int arm64_fdt_build(const struct arm64_fdt_layout *l, void *blob, size_t cap, char *why,
		    size_t whylen);

/* The node name of the console, for stdout-path ("/uart@9000000"). */
void arm64_fdt_uart_path(const struct arm64_fdt_layout *l, char *out, size_t len);

#endif
