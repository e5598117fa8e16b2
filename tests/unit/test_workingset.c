/* test_workingset.c - the working set section: runs of pages round-trip, every malformed payload is refused before anything is populated, and a restore warms it the way its KVM allows. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot/workingset.h"

#define PAGES 1000u

static void set(uint8_t *bm, uint64_t first, uint64_t count)
{
	for (uint64_t i = first; i < first + count; i++)
		bm[i / 8] |= (uint8_t)(1u << (i % 8));
}

/* A payload by hand: header, then n (first, count) pairs. */
static void payload(struct snap_out *o, uint32_t version, uint32_t page_size, uint64_t runs,
		    const uint64_t *pairs, size_t n)
{
	snap_out_init(o);
	snap_out_u32(o, version);
	snap_out_u32(o, page_size);
	snap_out_u64(o, runs);
	for (size_t i = 0; i < 2 * n; i++)
		snap_out_u64(o, pairs[i]);
	cr_assert_eq(o->err, 0);
}

static int decode(const struct snap_out *o, uint64_t pages)
{
	struct ws_range *r = NULL;
	const char *why = "";
	size_t n = 0;
	int rc = workingset_decode(o->data, o->len, pages, &r, &n, &why);

	if (rc) {
		cr_assert_null(r, "a refused payload hands out no runs");
		cr_assert_eq(n, 0);
		cr_assert_str_neq(why, "", "a refusal says why");
	}
	free(r);
	return rc;
}

Test(workingset, runs_round_trip)
{
	static const uint64_t want[][2] = { { 0, 3 }, { 8, 1 }, { 10, 100 }, { 511, 2 },
					    { PAGES - 1, 1 } };
	uint8_t bm[PAGES / 8] = { 0 };
	struct ws_range *r = NULL;
	struct snap_out o;
	const char *why = "";
	uint64_t total = 0, pages = 0;
	size_t n = 0;

	for (size_t i = 0; i < 5; i++) {
		set(bm, want[i][0], want[i][1]);
		total += want[i][1];
	}
	snap_out_init(&o);
	workingset_encode(bm, PAGES, &o, &pages);
	cr_assert_eq(o.err, 0);
	cr_assert_eq(pages, total);
	cr_assert_eq(o.len, 16 + 5 * 16);
	cr_assert_eq(workingset_decode(o.data, o.len, PAGES, &r, &n, &why), 0, "%s", why);
	cr_assert_eq(n, 5);
	for (size_t i = 0; i < n; i++) {
		cr_assert_eq(r[i].first, want[i][0], "run %zu", i);
		cr_assert_eq(r[i].count, want[i][1], "run %zu", i);
	}
	free(r);
	snap_out_free(&o);
}

Test(workingset, empty_set_is_valid_and_has_no_runs)
{
	uint8_t bm[PAGES / 8] = { 0 };
	struct ws_range *r = (struct ws_range *)&r;
	struct snap_out o;
	const char *why = "";
	uint64_t pages = 7;
	size_t n = 9;

	snap_out_init(&o);
	workingset_encode(bm, PAGES, &o, &pages);
	cr_assert_eq(pages, 0);
	cr_assert_eq(workingset_decode(o.data, o.len, PAGES, &r, &n, &why), 0, "%s", why);
	cr_assert_eq(n, 0);
	cr_assert_null(r);
	snap_out_free(&o);
}

Test(workingset, every_truncation_is_refused)
{
	uint8_t bm[PAGES / 8] = { 0 };
	struct snap_out o;

	set(bm, 5, 5);
	set(bm, 100, 1);
	snap_out_init(&o);
	workingset_encode(bm, PAGES, &o, NULL);
	for (size_t len = 0; len < o.len; len++) {
		struct snap_out cut = { .data = o.data, .len = len };

		cr_assert_eq(decode(&cut, PAGES), -EBADMSG, "cut at %zu of %zu", len, o.len);
	}
	cr_assert_eq(decode(&o, PAGES), 0);
	snap_out_free(&o);
}

Test(workingset, another_version_or_page_size_is_refused)
{
	static const uint64_t one[] = { 1, 1 };
	struct snap_out o;

	payload(&o, WORKINGSET_VERSION + 1, WORKINGSET_PAGE_SIZE, 1, one, 1);
	cr_assert_eq(decode(&o, PAGES), -ENOTSUP);
	snap_out_free(&o);
	payload(&o, WORKINGSET_VERSION, 2u << 20, 1, one, 1);
	cr_assert_eq(decode(&o, PAGES), -EBADMSG);
	snap_out_free(&o);
}

Test(workingset, a_count_that_lies_about_the_length_is_refused)
{
	static const uint64_t two[] = { 1, 1, 5, 1 };
	struct snap_out o;

	payload(&o, WORKINGSET_VERSION, WORKINGSET_PAGE_SIZE, 3, two, 2);
	cr_assert_eq(decode(&o, PAGES), -EBADMSG, "more runs counted than stored");
	snap_out_free(&o);
	payload(&o, WORKINGSET_VERSION, WORKINGSET_PAGE_SIZE, 1, two, 2);
	cr_assert_eq(decode(&o, PAGES), -EBADMSG, "bytes after the last run");
	snap_out_free(&o);
	payload(&o, WORKINGSET_VERSION, WORKINGSET_PAGE_SIZE, UINT64_MAX / 8, two, 2);
	cr_assert_eq(decode(&o, PAGES), -EBADMSG, "a huge count allocates nothing");
	snap_out_free(&o);
}

Test(workingset, bad_runs_are_refused)
{
	static const uint64_t cases[][4] = {
		{ 1, 0, 5, 1 },                 /* an empty run */
		{ 5, 1, 1, 1 },                 /* out of order */
		{ 1, 5, 3, 1 },                 /* overlapping */
		{ 1, 2, 3, 1 },                 /* touching: one run written as two */
		{ 1, 1, PAGES, 1 },             /* starts past the end */
		{ 1, 1, PAGES - 1, 2 },         /* runs past the end */
		{ 1, 1, 2, UINT64_MAX },        /* first + count wraps */
	};
	struct snap_out o;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		payload(&o, WORKINGSET_VERSION, WORKINGSET_PAGE_SIZE, 2, cases[i], 2);
		cr_assert_eq(decode(&o, PAGES), -EBADMSG, "case %zu", i);
		snap_out_free(&o);
	}
}

/* With KVM_PRE_FAULT_MEMORY the working set is mapped before the first
 * KVM_RUN; without it (Linux before 6.10, or shadow paging) it is only
 * populated, and alongside the guest, never in front of it. */
Test(workingset, warm_mode_falls_back_without_pre_fault)
{
	cr_assert_eq(workingset_warm_mode(3, true), WS_WARM_PRE_FAULT);
	cr_assert_eq(workingset_warm_mode(3, false), WS_WARM_ALONGSIDE);
	cr_assert_eq(workingset_warm_mode(0, true), WS_WARM_NONE, "nothing saved: nothing to do");
	cr_assert_eq(workingset_warm_mode(0, false), WS_WARM_NONE);
}
