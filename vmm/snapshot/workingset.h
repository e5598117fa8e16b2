/* workingset.h - the pages a restored guest is expected to write first: runs of page numbers, encoded as a snapshot section. */
#ifndef MAYFLY_SNAPSHOT_WORKINGSET_H
#define MAYFLY_SNAPSHOT_WORKINGSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snapshot/codec.h"

#define WORKINGSET_VERSION   1u
#define WORKINGSET_PAGE_SIZE 4096u

/* A run of `count` pages from page `first` (of the memory file, which
 * holds guest RAM's regions one after the other). */
struct ws_range {
	uint64_t first;
	uint64_t count;
};

/* How a restore warms the working set. */
enum ws_warm {
	WS_WARM_NONE,        /* no working set saved */
	WS_WARM_PRE_FAULT,   /* populated writable and mapped into KVM's page tables
			      * (KVM_PRE_FAULT_MEMORY) before the first KVM_RUN: the
			      * guest takes no exit on those pages */
	WS_WARM_ALONGSIDE,   /* populated writable while the guest already runs (a
			      * kernel without KVM_PRE_FAULT_MEMORY): the first KVM_RUN
			      * does not wait for it; the guest still exits once per
			      * page for KVM to map it */
};

/* The way for `nr_runs` runs on a VM that has KVM_PRE_FAULT_MEMORY or not:
 * before the run only when KVM can also map the pages, since populating
 * alone before the run only moves the copying in front of the guest. */
enum ws_warm workingset_warm_mode(size_t nr_runs, bool can_pre_fault);

/* Encode the set bits of bitmap (one bit per page, `pages` pages, bit i of
 * byte i / 8 for page i) as the section's payload: version, page size,
 * the number of runs, then each run. The number of pages encoded goes to
 * *nr_pages (may be NULL). o->err reports an allocation failure. */
void workingset_encode(const uint8_t *bitmap, uint64_t pages, struct snap_out *o,
		       uint64_t *nr_pages);

/* Decode a payload (untrusted) for a memory file of `pages` pages: the
 * version and page size must be this reader's, the runs non-empty, in
 * ascending order, apart (not touching: a writer joins those) and inside
 * the file, and the payload exactly as long as its count says. *out (free
 * it) and *nr get the runs. 0, or -EBADMSG / -ENOTSUP (another version)
 * / -ENOMEM with *why. */
int workingset_decode(const void *data, size_t len, uint64_t pages, struct ws_range **out,
		      size_t *nr, const char **why) __attribute__((warn_unused_result));

#endif
