/* mem.h - guest RAM and the one checked guest-physical to host translation. */
#ifndef MAYFLY_MEM_H
#define MAYFLY_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MEM_MAX_REGIONS 2

/* A contiguous slice of guest-physical space backed by host memory. */
struct mem_region {
	uint64_t gpa;
	uint64_t size;
	uint8_t *hva;
};

/* Guest RAM: one anonymous MAP_NORESERVE mapping, split around the 32-bit
 * MMIO hole into at most two regions (below 3 GiB, and from 4 GiB up). */
struct guest_mem {
	uint8_t *base;           /* the whole host mapping */
	uint64_t total;          /* bytes of guest RAM */
	int nr_regions;
	struct mem_region regions[MEM_MAX_REGIONS];
};

/* Map `bytes` of guest RAM (a multiple of 4 KiB, > 0) and lay it out below
 * and above the MMIO hole. Returns 0 or -errno. */
int mem_init(struct guest_mem *mem, uint64_t bytes) __attribute__((warn_unused_result));

/* Wrap caller-owned host memory as guest RAM at gpa 0 (unit tests use this
 * for fake guest memory). Does not take ownership. */
void mem_init_fake(struct guest_mem *mem, void *host, uint64_t bytes);

void mem_free(struct guest_mem *mem);

/* Host address of guest-physical [gpa, gpa+len), or NULL when any byte of
 * it lies outside guest RAM, crosses a region boundary, or gpa+len
 * overflows. len 0 is checked as a single byte at gpa. Every access to guest
 * memory goes through here. */
void *mem_gpa_to_hva(const struct guest_mem *mem, uint64_t gpa, uint64_t len);

/* Copy helpers built on mem_gpa_to_hva: 0 or -EFAULT. */
int mem_write(const struct guest_mem *mem, uint64_t gpa, const void *src, uint64_t len);
int mem_read(const struct guest_mem *mem, uint64_t gpa, void *dst, uint64_t len);

/* Highest guest-physical address + 1 of RAM below the MMIO hole. */
uint64_t mem_low_end(const struct guest_mem *mem);

#endif
