/* workingset.c - the pages a restored guest is expected to write first: runs of page numbers, encoded as a snapshot section. */
#include "snapshot/workingset.h"
#include "lib/errmsg.h"

#include <errno.h>
#include <stdlib.h>

static bool page_set(const uint8_t *bitmap, uint64_t i)
{
	return bitmap[i / 8] & (1u << (i % 8));
}

enum ws_warm workingset_warm_mode(size_t nr_runs, bool can_pre_fault)
{
	if (nr_runs == 0)
		return WS_WARM_NONE;
	return can_pre_fault ? WS_WARM_PRE_FAULT : WS_WARM_ALONGSIDE;
}

void workingset_encode(const uint8_t *bitmap, uint64_t pages, struct snap_out *o,
		       uint64_t *nr_pages)
{
	uint64_t runs = 0, total = 0;
	size_t count_at;

	snap_out_u32(o, WORKINGSET_VERSION);
	snap_out_u32(o, WORKINGSET_PAGE_SIZE);
	count_at = o->len;
	snap_out_u64(o, 0);   /* the number of runs, filled in below */
	for (uint64_t i = 0; i < pages; ) {
		uint64_t first;

		if (!page_set(bitmap, i)) {
			i++;
			continue;
		}
		for (first = i; i < pages && page_set(bitmap, i); i++)
			;
		snap_out_u64(o, first);
		snap_out_u64(o, i - first);
		runs++;
		total += i - first;
	}
	if (!o->err)
		for (int b = 0; b < 8; b++)
			o->data[count_at + (size_t)b] = (uint8_t)(runs >> (8 * b));
	if (nr_pages)
		*nr_pages = total;
}

int workingset_decode(const void *data, size_t len, uint64_t pages, struct ws_range **out,
		      size_t *nr, const char **why)
{
	struct ws_range *r;
	struct snap_in in;
	uint64_t runs, next = 0;
	uint32_t version, page_size;

	*out = NULL;
	*nr = 0;
	snap_in_init(&in, data, len);
	version = snap_in_u32(&in);
	page_size = snap_in_u32(&in);
	runs = snap_in_u64(&in);
	if (in.bad)
		return errmsg_why(why, -EBADMSG, "working set section cut short");
	if (version != WORKINGSET_VERSION)
		return errmsg_why(why, -ENOTSUP, "working set version %u, this mayfly reads version %u",
				version, WORKINGSET_VERSION);
	if (page_size != WORKINGSET_PAGE_SIZE)
		return errmsg_why(why, -EBADMSG, "working set page size %u, not %u", page_size,
				WORKINGSET_PAGE_SIZE);
	/* Exact length before any allocation: the count cannot ask for more
	 * than the payload holds. */
	if (runs != in.left / 16 || in.left % 16)
		return errmsg_why(why, -EBADMSG, "working set of %llu runs in %zu bytes",
				(unsigned long long)runs, len);
	if (runs == 0)
		return 0;
	r = calloc((size_t)runs, sizeof(*r));
	if (!r)
		return errmsg_why(why, -ENOMEM, "out of memory");
	for (uint64_t i = 0; i < runs; i++) {
		r[i].first = snap_in_u64(&in);
		r[i].count = snap_in_u64(&in);
		if (r[i].count == 0 || r[i].first < next || r[i].first > pages ||
		    r[i].count > pages - r[i].first) {
			int rc = errmsg_why(why, -EBADMSG, "working set run %llu (pages %llu+%llu) is "
					  "empty, out of order or past the %llu pages of guest RAM",
					  (unsigned long long)i, (unsigned long long)r[i].first,
					  (unsigned long long)r[i].count, (unsigned long long)pages);

			free(r);
			return rc;
		}
		next = r[i].first + r[i].count + 1;   /* touching runs would be one */
	}
	*out = r;
	*nr = (size_t)runs;
	return 0;
}
