/* test_bus.c - bus registration (overlap refused) and dispatch to the right device. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>

#include "vm/bus.h"
#include "observe.h"

struct probe {
	int calls;
	uint64_t offset;
	uint32_t len;
	bool is_write;
	uint8_t last;
};

static void probe_fn(void *opaque, uint64_t offset, uint8_t *data, uint32_t len, bool is_write)
{
	struct probe *p = opaque;

	p->calls++;
	p->offset = offset;
	p->len = len;
	p->is_write = is_write;
	if (is_write)
		p->last = data[0];
	else
		data[0] = 0x5a;
}

static struct bus bus;

static void setup(void)
{
	bus_init(&bus, "test");
}

static void teardown(void)
{
	bus_destroy(&bus);
}

TestSuite(bus, .init = setup, .fini = teardown);

Test(bus, refuses_overlap_and_bad_ranges)
{
	struct probe p = { 0 };

	cr_assert_eq(bus_register(&bus, 0x3f8, 8, probe_fn, &p, "a"), 0);
	cr_assert_eq(bus_register(&bus, 0x3f8, 8, probe_fn, &p, "dup"), -EEXIST);
	cr_assert_eq(bus_register(&bus, 0x3f0, 9, probe_fn, &p, "tail"), -EEXIST);
	cr_assert_eq(bus_register(&bus, 0x3ff, 1, probe_fn, &p, "last"), -EEXIST);
	cr_assert_eq(bus_register(&bus, 0x3f0, 0x20, probe_fn, &p, "cover"), -EEXIST);
	cr_assert_eq(bus_register(&bus, 0x3f0, 8, probe_fn, &p, "before"), 0);
	cr_assert_eq(bus_register(&bus, 0x400, 1, probe_fn, &p, "after"), 0);
	cr_assert_eq(bus_register(&bus, 0x500, 0, probe_fn, &p, "empty"), -EINVAL);
	cr_assert_eq(bus_register(&bus, UINT64_MAX, 2, probe_fn, &p, "wrap"), -EINVAL);
	cr_assert_eq(bus_register(&bus, UINT64_MAX, 1, probe_fn, &p, "top"), 0);
	cr_assert_eq(bus_register(&bus, 0x600, 1, NULL, &p, "nofn"), -EINVAL);
}

Test(bus, fills_up_with_enospc)
{
	struct probe p = { 0 };
	int i;

	for (i = 0; i < BUS_MAX_RANGES; i++)
		cr_assert_eq(bus_register(&bus, (uint64_t)i * 16, 16, probe_fn, &p, "r"), 0);
	cr_assert_eq(bus_register(&bus, 0x100000, 16, probe_fn, &p, "r"), -ENOSPC);
}

Test(bus, dispatches_to_the_owner_with_offset)
{
	struct probe a = { 0 }, b = { 0 };
	uint8_t data[8] = { 0x41 };

	/* Registered out of order: the table keeps itself sorted. */
	cr_assert_eq(bus_register(&bus, 0xd0001000, 0x1000, probe_fn, &b, "b"), 0);
	cr_assert_eq(bus_register(&bus, 0xd0000000, 0x1000, probe_fn, &a, "a"), 0);
	cr_assert(bus_dispatch(&bus, 0xd0000010, data, 1, true));
	cr_assert_eq(a.calls, 1);
	cr_assert_eq(a.offset, 0x10);
	cr_assert_eq(a.last, 0x41);
	cr_assert(bus_dispatch(&bus, 0xd0001ffc, data, 4, false));
	cr_assert_eq(b.calls, 1);
	cr_assert_eq(b.offset, 0xffc);
	cr_assert_eq(b.len, 4);
	cr_assert_eq(data[0], 0x5a);
}

Test(bus, unclaimed_reads_all_ones_and_access_past_end_is_refused)
{
	struct probe a = { 0 };
	uint8_t data[8] = { 0 };

	cr_assert_eq(bus_register(&bus, 0x60, 1, probe_fn, &a, "a"), 0);
	cr_assert_not(bus_dispatch(&bus, 0x61, data, 4, false));
	cr_assert_eq(data[0], 0xff);
	cr_assert_eq(data[3], 0xff);
	/* A 2-byte access starting in a 1-byte range runs past it. */
	cr_assert_not(bus_dispatch(&bus, 0x60, data, 2, true));
	cr_assert_eq(a.calls, 0);
}

Test(bus, unclaimed_log_set_is_bounded)
{
	uint8_t data[1];

	for (uint64_t port = 0; port < 10 * BUS_MAX_UNCLAIMED; port++)
		cr_assert_not(bus_dispatch(&bus, port, data, 1, true));
	cr_assert_eq(bus.nr_unclaimed, BUS_MAX_UNCLAIMED);
	/* Repeats of a remembered address do not add entries. */
	bus_dispatch(&bus, 0, data, 1, true);
	cr_assert_eq(bus.nr_unclaimed, BUS_MAX_UNCLAIMED);
}

Test(bus, a_guest_scanning_ports_logs_a_few_lines)
{
	struct capture cap;
	uint8_t data[1];
	char *text;

	log_init("t", LOG_INFO);
	capture_start(&cap);
	for (uint64_t port = 0; port < 0x10000; port++)
		bus_dispatch(&bus, port, data, 1, false);
	text = capture_stop_summed(&cap);
	/* Each of the remembered addresses once, nearly all as a count. */
	expect_limited(text, "unclaimed test read", BUS_MAX_UNCLAIMED);
	free(text);
}

Test(bus, counts_hits_per_device_for_exit_statistics)
{
	struct probe a = { 0 };
	uint8_t data[1] = { 0 };
	char line[128] = "";

	cr_assert_eq(bus_register(&bus, 0x3f8, 8, probe_fn, &a, "com1"), 0);
	cr_assert_eq(bus_register(&bus, 0x60, 1, probe_fn, &a, "i8042"), 0);
	for (int i = 0; i < 3; i++)
		bus_dispatch(&bus, 0x3f8 + i, data, 1, true);
	bus_dispatch(&bus, 0x80, data, 1, true);
	bus_format_hits(&bus, line, sizeof(line));
	cr_assert_str_eq(line, " com1=3 unclaimed-test=1");
}
