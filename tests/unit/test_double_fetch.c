/* test_double_fetch.c - a guest rewriting descriptors while the device walks them, deterministically: every field is read once, and what the device then does rests on that one read. */
#include "observe.h"
#include "tripwire.h"
#include "virtio_driver.h"

/*
 * A racing vCPU, without threads: tripwire.c runs a hook before every load
 * or store the code under test makes to the descriptor table and the avail
 * ring (DESC_GPA and AVAIL_GPA, one page each). The hook counts reads per
 * field, and plays the guest at its worst:
 *  - as soon as the device has read all four fields of a descriptor, the
 *    guest rewrites that descriptor to something hostile (a buffer
 *    running past guest RAM, every flag, next out of range);
 *  - a field the device reads a second time reads as hostile too, and is
 *    counted: a double fetch (checked, then fetched again to be used).
 * A device that uses only what it read once completes the request as the
 * guest first wrote it; one that fetches again fails it, or worse, and the
 * count says so. The ring entries (heads) are watched the same way.
 */
#define FIELDS 4

static struct vdrv d;

static struct {
	unsigned reads[QSIZE][FIELDS];   /* by descriptor, field: addr, len, flags, next */
	bool whole[QSIZE];               /* all four fields read */
	bool hostile[QSIZE];             /* rewritten after the device read it */
	unsigned head_reads[QSIZE];      /* avail ring entries */
	unsigned refetches, writes, hooks;
} w;

static void setup(void) { vd_setup(&d, VD_RAW); }
static void teardown(void) { tripwire_disarm(); vd_teardown(&d); }

TestSuite(double_fetch, .init = setup, .fini = teardown);

static int field_of(size_t off)
{
	return off < 8 ? 0 : off < 12 ? 1 : off < 14 ? 2 : 3;
}

/* What a guest racing the device writes: a buffer that runs past the end
 * of RAM, INDIRECT | WRITE | NEXT, and a next index out of range. */
static void make_hostile(uint16_t i)
{
	uint8_t *p = d.ram + DESC_GPA + 16u * i;
	uint64_t addr = RAM_SIZE - 8;
	uint32_t len = 0xffffffffu;
	uint16_t flags = 0x7, next = 0xfff0;

	memcpy(p, &addr, 8);
	memcpy(p + 8, &len, 4);
	memcpy(p + 12, &flags, 2);
	memcpy(p + 14, &next, 2);
	w.hostile[i] = true;
}

static void on_access(void *opaque, size_t off, bool write)
{
	(void)opaque;
	w.hooks++;
	/* Descriptors read whole by the accesses before this one become
	 * hostile now (the hook runs before its access: this one may be the
	 * last field's own read). From here on only the device's copy is
	 * right. */
	for (unsigned i = 0; i < QSIZE; i++)
		if (w.whole[i] && !w.hostile[i])
			make_hostile((uint16_t)i);
	if (write) {
		w.writes++;   /* the device never writes the driver's areas */
		return;
	}
	if (off < 16u * QSIZE) {
		uint16_t i = (uint16_t)(off / 16);
		int f = field_of(off % 16);

		if (w.reads[i][f]++ && !w.hostile[i]) {
			w.refetches++;
			make_hostile(i);
		} else if (w.reads[i][f] > 1) {
			w.refetches++;
		}
	} else if (off >= AVAIL_GPA - DESC_GPA + 4 && off < AVAIL_GPA - DESC_GPA + 4 + 2u * QSIZE) {
		size_t slot = (off - (AVAIL_GPA - DESC_GPA + 4)) / 2;

		if (w.head_reads[slot]++) {
			w.refetches++;
			memset(d.ram + AVAIL_GPA + 4 + 2 * slot, 0xff, 2);
		}
	}
	for (unsigned i = 0; i < QSIZE; i++)
		w.whole[i] = w.reads[i][0] && w.reads[i][1] && w.reads[i][2] && w.reads[i][3];
}

/* Kick queue 0 with the driver's areas watched. */
static void kick_watched(void)
{
	memset(&w, 0, sizeof(w));
	tripwire_arm(d.ram + DESC_GPA, USED_GPA - DESC_GPA, on_access, NULL);
	vd_kick(&d);
	tripwire_disarm();
}

static uint64_t filled(uint32_t len, uint8_t seed)
{
	uint64_t gpa = vd_alloc(&d, len);

	for (uint32_t i = 0; i < len; i++)
		d.ram[gpa + i] = (uint8_t)(seed + i * 7);
	return gpa;
}

/* The tool itself: a field read twice is seen, and the second read gets
 * the hostile value. */
Test(double_fetch, the_tripwire_sees_a_second_read)
{
	volatile uint32_t *len = (volatile uint32_t *)(d.ram + DESC_GPA + 16 * 3 + 8);
	uint32_t first, second;

	*len = 512;
	memset(&w, 0, sizeof(w));
	tripwire_arm(d.ram + DESC_GPA, USED_GPA - DESC_GPA, on_access, NULL);
	first = *len;
	second = *len;
	tripwire_disarm();
	cr_assert_eq(first, 512);
	cr_assert_eq(second, 0xffffffffu, "the second read did not see the guest's rewrite");
	cr_assert_eq(w.refetches, 1);
}

/* A read of 4 KiB in eight segments: each descriptor and each field read
 * once, the data as the guest first described it. */
Test(double_fetch, read_request_uses_each_descriptor_field_once)
{
	struct vseg s[8];
	uint64_t st;
	struct vres r = { 0 };
	uint32_t id;
	uint16_t head;

	vd_init(&d, FEAT_BASIC);
	for (int k = 0; k < 8; k++)
		s[k] = (struct vseg){ vd_alloc(&d, 512), 512, true };
	head = vd_blk_build(&d, BLK_T_IN, 3, s, 8, &st);
	vd_post(&d, head);
	kick_watched();
	cr_assert_gt(w.hooks, 0, "the tripwire saw nothing");
	cr_assert_eq(w.refetches, 0, "%u fields or heads read twice", w.refetches);
	cr_assert_eq(w.writes, 0, "the device wrote the descriptor table or avail ring");
	for (uint16_t i = head; i < head + 10; i++)
		for (int f = 0; f < FIELDS; f++)
			cr_assert_eq(w.reads[i][f], 1, "descriptor %u field %d read %u times", i, f,
				     w.reads[i][f]);
	r.done = vd_get_used(&d, &id, &r.len);
	cr_assert(r.done);
	cr_assert_eq(id, head);
	cr_assert_eq(d.ram[st], BLK_S_OK, "status %u", d.ram[st]);
	cr_assert_eq(r.len, 8 * 512 + 1);
	for (int k = 0; k < 8; k++)
		for (uint32_t i = 0; i < 512; i++)
			cr_assert_eq(d.ram[s[k].gpa + i], image_pat(3 * 512 + k * 512ull + i));
	cr_assert_eq(vd_status(&d), S_ALL_OK);
	vd_check_guards();
}

/* Writes, a flush and a batch, with EVENT_IDX: the same, and the disk
 * gets exactly what the guest first described. */
Test(double_fetch, write_batch_with_event_idx_uses_each_field_once)
{
	uint64_t src = filled(1024, 9), st[3];
	struct vseg one = { src, 1024, false }, two[2] = { { src, 512, false }, { src + 512, 512, false } };
	uint16_t heads[3];
	uint8_t back[1024];
	uint32_t id, len;

	vd_init(&d, FEAT_BASIC | FEAT_EVENT_IDX);
	heads[0] = vd_blk_build(&d, BLK_T_OUT, 8, &one, 1, &st[0]);
	heads[1] = vd_blk_build(&d, BLK_T_OUT, 20, two, 2, &st[1]);
	heads[2] = vd_blk_build(&d, BLK_T_FLUSH, 0, NULL, 0, &st[2]);
	for (int k = 0; k < 3; k++)
		vd_stage(&d, heads[k]);
	vd_publish_idx(&d, d.avail_idx);
	kick_watched();
	cr_assert_eq(w.refetches, 0, "%u fields or heads read twice", w.refetches);
	cr_assert_eq(w.writes, 0);
	for (int k = 0; k < 3; k++) {
		cr_assert(vd_get_used(&d, &id, &len));
		cr_assert_eq(id, heads[k]);
		cr_assert_eq(d.ram[st[k]], BLK_S_OK);
		cr_assert_eq(w.head_reads[k], 1, "avail entry %d read %u times", k, w.head_reads[k]);
	}
	vd_file(&d, 8 * 512, back, 1024);
	cr_assert_arr_eq(back, d.ram + src, 1024);
	vd_file(&d, 20 * 512, back, 1024);
	cr_assert_arr_eq(back, d.ram + src, 1024);
	cr_assert_eq(vd_status(&d), S_ALL_OK);
	vd_check_guards();
}

/* A chain that loops back on itself revisits a descriptor the guest has
 * since made hostile: the device must fail (NEEDS_RESET), touching
 * nothing outside guest RAM and completing nothing. */
Test(double_fetch, looping_chain_rewritten_underneath_fails_the_device)
{
	uint64_t hdr = vd_alloc(&d, 16), buf = vd_alloc(&d, 512);
	uint32_t id, len;

	vd_init(&d, FEAT_BASIC);
	vd_wr32(&d, hdr, BLK_T_IN);
	vd_wr64(&d, hdr + 8, 0);
	vd_desc(&d, 0, hdr, 16, F_NEXT, 1);
	vd_desc(&d, 1, buf, 512, F_NEXT | F_WRITE, 0);   /* back to 0 */
	vd_post(&d, 0);
	kick_watched();
	cr_assert_eq(w.writes, 0);
	cr_assert(vd_status(&d) & S_NEEDS_RESET, "a looping chain did not fail the device");
	cr_assert_not(vd_get_used(&d, &id, &len), "a broken chain was completed");
	vd_check_guards();
}
