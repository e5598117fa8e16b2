/* mem.h - guest RAM and the one checked guest-physical to host translation. */
#ifndef MAYFLY_MEM_MEM_H
#define MAYFLY_MEM_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MEM_MAX_REGIONS 2
#define MEM_PAGE_SIZE   0x1000ULL

/* Where an architecture puts guest RAM in guest-physical space: slots in
 * address order, filled in turn, each with at most `max` bytes (0: all
 * that is left; the last slot's must be 0). */
struct mem_layout {
	int nr_slots;
	struct { uint64_t gpa, max; } slots[MEM_MAX_REGIONS];
};

/* A contiguous slice of guest-physical space backed by host memory. */
struct mem_region {
	uint64_t gpa;
	uint64_t size;
	uint8_t *hva;
};

/* Guest RAM: one anonymous MAP_NORESERVE mapping, split into the regions
 * its layout's slots give (on x86: below the 32-bit MMIO hole, and from
 * 4 GiB up). */
struct guest_mem {
	uint8_t *base;           /* the whole host mapping */
	uint64_t total;          /* bytes of guest RAM */
	bool file_backed;        /* mapped privately from a memory file (mem_restore) */
	int nr_regions;
	struct mem_region regions[MEM_MAX_REGIONS];
};

/* Map `bytes` of guest RAM (a multiple of 4 KiB, > 0) and lay it out in
 * layout's slots. Returns 0 or -errno (-EINVAL: a bad size or layout). */
int mem_init(struct guest_mem *mem, uint64_t bytes, const struct mem_layout *layout)
	__attribute__((warn_unused_result));

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

/* Highest guest-physical address + 1 of the first region (on x86: RAM
 * below the MMIO hole). */
uint64_t mem_low_end(const struct guest_mem *mem);

/* What mem_save wrote. */
struct mem_save_stats {
	uint64_t data_bytes;     /* bytes written: pages that hold data */
	uint64_t zero_bytes;     /* resident pages that were all zero: holes */
	uint64_t absent_bytes;   /* pages the guest never touched: holes */
};

/* Write guest RAM to `path` as a snapshot's `memory` file: the regions one
 * after the other (guest-physical order), mem->total bytes long, sparse.
 * Pages never touched (mincore() says not resident and, when
 * /proc/self/pagemap can tell, not swapped out either) and all-zero pages
 * are holes, so the file takes about as much disk as the guest used. RAM
 * mapped from a memory file is read in full (its untouched pages live in
 * that file), holes still skipped. Written atomically (temp file in the same
 * directory, fsync, rename; mode 0600): on failure nothing is left behind.
 * The vCPUs must be paused. `stats` may be NULL. 0 or -errno with *why. */
int mem_save(const struct guest_mem *mem, const char *path, struct mem_save_stats *stats,
	     const char **why) __attribute__((warn_unused_result));
/* The same into `fd`, an empty file open for writing (a jailed VM gets it
 * from the process that names the file): sized, then filled, not synced.
 * 0 or -errno with *why. */
int mem_save_fd(const struct guest_mem *mem, int fd, struct mem_save_stats *stats,
		const char **why) __attribute__((warn_unused_result));

/* Guest RAM of `bytes` (as mem_init), mapped from the memory file at `path`
 * with MAP_PRIVATE: pages come from the shared page cache on first touch,
 * guest writes go to private copies, and the file is never written. So any
 * number of VMs can map one file, and none reads it up front. The file must
 * be a regular file of exactly `bytes` (else -EINVAL with *why giving both
 * sizes) and must not change while mapped (snapshot files are immutable:
 * they are replaced by rename, never rewritten). 0 or -errno with *why. */
int mem_restore(struct guest_mem *mem, uint64_t bytes, const struct mem_layout *layout,
		const char *path, const char **why)
	__attribute__((warn_unused_result));

/* Populate `pages` pages of the mapping from page `first_page` writable
 * (MADV_POPULATE_WRITE: a private copy of each, now rather than at the
 * guest's first write). 0; -EINVAL for a range outside guest RAM; the
 * kernel's -errno (-EINVAL before Linux 5.14). */
int mem_populate_write(struct guest_mem *mem, uint64_t first_page, uint64_t pages)
	__attribute__((warn_unused_result));

#endif
