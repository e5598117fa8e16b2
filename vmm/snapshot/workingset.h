/* workingset.h - the pages a restored guest is expected to write first: runs of page numbers, encoded as a snapshot section. */
#ifndef MAYFLY_SNAPSHOT_WORKINGSET_H
#define MAYFLY_SNAPSHOT_WORKINGSET_H

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
