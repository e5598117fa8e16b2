/* fuzz_blk.c - libFuzzer target: a hostile guest drives virtio-mmio registers, the virtqueue and virtio-blk requests. */
#include "disk/disk.h"
#include "fuzz_virtio.h"
#include "lib/log.h"
#include "mem/mem.h"
#include "virtio/blk.h"

#include <errno.h>
#include <linux/virtio_blk.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * Input layout (tests/fuzz/make-seeds writes the same):
 *
 *   byte 0        flags: bit 0 raw-register mode (no preset set-up: the
 *                 script must bring the device up itself); bit 1 negotiate
 *                 EVENT_IDX; bits 2-4 queue size index into queue_sizes[];
 *                 bit 5 serve the base read-only as a raw disk (VIRTIO_BLK_F_RO);
 *                 bit 6 put the rings at the top of RAM, bit 7 with the avail
 *                 ring's event field past the end (see layout_for)
 *   bytes 1-2     script length L, little-endian (cut to what is there)
 *   L bytes       the script: operations, see run_script()
 *   the rest      guest RAM from gpa 0, zero-padded to RAM_SIZE
 *
 * The script comes before RAM, not after a fixed 64 KiB image, so that
 * inputs stay small (a valid request is well under 1 KiB): libFuzzer
 * mutates short inputs far faster, and a seed never has to carry 64 KiB
 * of zeros to reach its script.
 *
 * In the preset mode (the default, flags bit 0 clear) the device is brought
 * to DRIVER_OK through its registers with queue 0 at a fixed layout, so the
 * fuzzer starts at request parsing.
 */
#define RAM_SIZE   (64u * 1024)
#define GUARD_SIZE 4096u
#define DISK_SIZE  (1024u * 1024)
#define MAX_OPS    64u       /* script operations run per input */
#define FLAG_RAW       0x01
#define FLAG_EVENT_IDX 0x02
#define FLAG_READ_ONLY 0x20
#define FLAG_RINGS_TOP 0x40
#define FLAG_RINGS_OUT 0x80

static const uint16_t queue_sizes[8] = { 8, 16, 32, 64, 128, 256, 1, 2 };

/* Guest RAM between two guard zones (fuzz_common.h: poisoned for ASan,
 * canaries checked after every input). */
FUZZ_ARENA(RAM_SIZE, GUARD_SIZE);

static struct guest_mem mem;
static struct virtio_blk blk;
static char base_path[64];     /* /proc/self/fd/N of the unlinked base image */

static void die(const char *what)
{
	fprintf(stderr, "fuzz_blk: %s: %s\n", what, strerror(errno));
	exit(1);
}

/*
 * Backend: a copy-on-write disk over a 1 MiB base image. Copy-on-write
 * rather than raw on a memfd because it is what mayfly serves guests by
 * default and has the more intricate code (partial-block fills, dirty
 * runs). Each input opens a fresh one: guest writes then never leak from
 * one input into the next (a read into the ring would otherwise make a
 * crash depend on earlier inputs), and a fresh overlay is one NORESERVE
 * mapping, cheap. The base is created once in $TMPDIR and unlinked at
 * once, so nothing is left behind; reopening goes through /proc/self/fd.
 * A flag bit serves the same base as a read-only raw disk instead, for the
 * read-only paths (and raw.c's reads); never a writable raw one, whose
 * writes would reach the shared base and carry over between inputs.
 */
static void make_base_image(void)
{
	const char *tmp = getenv("TMPDIR");
	char path[4096];
	static uint8_t sector[DISK_SECTOR_SIZE];
	int fd;

	snprintf(path, sizeof(path), "%s/mayfly-fuzz-base-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	fd = mkstemp(path);
	if (fd < 0)
		die("cannot create the base image");
	unlink(path);
	/* Sector s holds bytes s, s+1, ...: any misplaced read shows. */
	for (uint32_t s = 0; s < DISK_SIZE / DISK_SECTOR_SIZE; s++) {
		for (uint32_t i = 0; i < DISK_SECTOR_SIZE; i++)
			sector[i] = (uint8_t)(s + i);
		if (write(fd, sector, sizeof(sector)) != (ssize_t)sizeof(sector))
			die("cannot write the base image");
	}
	snprintf(base_path, sizeof(base_path), "/proc/self/fd/%d", fd);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *lvl = getenv("MAYFLY_FUZZ_LOG");
	struct disk disk;
	const char *why = "";

	(void)argc;
	(void)argv;
	/* Errors only: a broken guest fails the device on most inputs, and even
	 * those lines are one per input; run-fuzz also closes the target's
	 * stderr (-close_fd_mask=2). MAYFLY_FUZZ_LOG=debug when reproducing. */
	log_init("fuzz", lvl && !strcmp(lvl, "debug") ? LOG_DEBUG : LOG_ERROR);
	make_base_image();
	if (disk_open_cow(&disk, base_path, &why)) {
		fprintf(stderr, "fuzz_blk: cannot open %s: %s\n", base_path, why);
		exit(1);
	}
	disk_close(&disk);

	guards_set(arena.lo, arena.hi, GUARD_SIZE);
	mem_init_fake(&mem, arena.ram, RAM_SIZE);
	return 0;
}

/* Named so the stack trace says what broke. */
__attribute__((noinline))
static void guest_ram_guard_smashed(void)
{
	fprintf(stderr, "fuzz_blk: a write landed outside guest RAM (guard canary changed)\n");
	abort();
}

__attribute__((noinline))
static void chain_neither_returned_nor_failed(void)
{
	fprintf(stderr, "fuzz_blk: a popped chain was not pushed, yet the device is healthy\n");
	abort();
}

struct layout {
	uint16_t size;
	uint64_t desc, avail, used;
};

/* Where the preset puts queue 0; it depends only on the flags. Bottom: the
 * descriptor table at gpa 0, the avail ring right after it, the used ring
 * after that (4-byte aligned). Top: the other way round, the avail ring
 * ending at the last byte of RAM, or (FLAG_RINGS_OUT) 2 bytes past it: its
 * used_event field outside guest memory, which QUEUE_READY must refuse. */
static struct layout layout_for(uint8_t flags)
{
	struct layout l;

	l.size = queue_sizes[(flags >> 2) & 7];
	if (flags & FLAG_RINGS_TOP) {
		l.avail = RAM_SIZE - (6 + 2u * l.size) + (flags & FLAG_RINGS_OUT ? 2 : 0);
		l.used = (l.avail - (6 + 8u * l.size)) & ~3ull;
		l.desc = (l.used - 16u * l.size) & ~15ull;
	} else {
		l.desc = 0;
		l.avail = 16u * l.size;
		l.used = (l.avail + 6 + 2u * l.size + 3) & ~3ull;
	}
	return l;
}

/* What a driver does (virtio 1.2, 3.1.1), through the same registers. */
static void bring_up(uint8_t flags)
{
	struct layout l = layout_for(flags);

	fuzz_negotiate(&blk.mmio, flags & FLAG_EVENT_IDX);
	fuzz_queue_setup(&blk.mmio, 0, l.size, l.desc, l.avail, l.used);
	fuzz_driver_ok(&blk.mmio);
}

/* The device pushes every chain it pops, unless the chain had no status
 * byte: then it popped one, pushed nothing and failed itself. */
static void check_queue(void)
{
	const struct vq *q = &blk.mmio.queues[0];
	uint16_t unreturned = (uint16_t)(q->last_avail_idx - q->used_idx);

	if (unreturned > 1 || (unreturned == 1 && !(blk.mmio.status & VIRTIO_CONFIG_S_NEEDS_RESET)))
		chain_neither_returned_nor_failed();
}

static void kick(void)
{
	virtio_mmio_kick(&blk.mmio, 0);
	check_queue();
}

/*
 * Operations, one opcode byte (taken modulo 8) then operands; a script cut
 * short reads zeros, and only the first MAX_OPS operations run. Register
 * offsets are taken modulo 0x200 (registers and the config space), guest
 * addresses modulo RAM_SIZE.
 *   0 write32  off:u16 val:u32       a 32-bit register write
 *   1 read     off:u16 len:u8        a read of 1..8 bytes
 *   2 writeN   off:u16 len:u8 val:u64  a write of 1..8 bytes (odd widths)
 *   3 kick                           the I/O thread runs queue 0
 *   4 poke     gpa:u16 n:u8 bytes    the guest rewrites 1..16 bytes of RAM
 *   5 publish  head:u16              the guest adds head to the avail ring
 *                                    (preset layout) and bumps avail.idx
 *   6 reset    -                     the driver resets and brings the
 *                                    device up again (preset layout)
 *   7 kick
 */
static void run_script(struct cursor *c, uint8_t flags)
{
	struct layout l = layout_for(flags);

	/* Bounded, so a long input stays as fast as a short one: exec speed is
	 * what finds bugs, and 64 steps reach any state a longer script can. */
	for (unsigned n = 0; n < MAX_OPS && c->left; n++) {
		uint8_t op = take8(c) & 7;
		uint8_t buf[8] = { 0 };
		uint64_t off, val;
		uint32_t len, gpa;

		switch (op) {
		case 0:
			off = take16(c) & 0x1ff;
			fuzz_reg_write(&blk.mmio, off, take32(c));
			break;
		case 1:
			off = take16(c) & 0x1ff;
			len = 1 + (take8(c) & 7);
			virtio_mmio_io(&blk.mmio, off, buf, len, false);
			break;
		case 2:
			off = take16(c) & 0x1ff;
			len = 1 + (take8(c) & 7);
			val = take32(c);
			val |= (uint64_t)take32(c) << 32;
			memcpy(buf, &val, 8);
			virtio_mmio_io(&blk.mmio, off, buf, len, true);
			break;
		case 4:
			gpa = take16(c) % RAM_SIZE;
			len = 1 + (take8(c) & 15);
			for (uint32_t i = 0; i < len && gpa + i < RAM_SIZE; i++)
				arena.ram[gpa + i] = take8(c);
			break;
		case 5: {
			uint16_t head = take16(c);
			uint8_t *avail = arena.ram + l.avail;
			uint16_t idx = (uint16_t)(avail[2] | avail[3] << 8);

			memcpy(avail + 4 + 2 * (idx & (l.size - 1)), &head, 2);
			idx++;
			avail[2] = (uint8_t)idx;
			avail[3] = (uint8_t)(idx >> 8);
			break;
		}
		case 6:
			bring_up(flags);
			break;
		default:
			kick();
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cursor script = { NULL, 0 };
	const char *why = "";
	struct disk disk;
	uint8_t flags = 0;
	size_t ram_len;

	if (size >= 1)
		flags = data[0];
	if (size >= 3) {
		size_t len = (size_t)(data[1] | data[2] << 8);

		script.p = data + 3;
		script.left = len < size - 3 ? len : size - 3;
		data += 3 + script.left;
		size -= 3 + script.left;
	} else {
		size = 0;
	}
	ram_len = size < RAM_SIZE ? size : RAM_SIZE;
	if (ram_len)
		memcpy(arena.ram, data, ram_len);
	memset(arena.ram + ram_len, 0, RAM_SIZE - ram_len);

	if ((flags & FLAG_READ_ONLY ? disk_open_raw(&disk, base_path, true, &why)
				    : disk_open_cow(&disk, base_path, &why))) {
		fprintf(stderr, "fuzz_blk: cannot open %s: %s\n", base_path, why);
		abort();
	}
	if (virtio_blk_init(&blk, &disk, &mem, "vda")) {
		fprintf(stderr, "fuzz_blk: virtio_blk_init failed\n");
		abort();
	}
	if (!(flags & FLAG_RAW))
		bring_up(flags);
	run_script(&script, flags);
	/* Every input ends with the I/O thread looking at the queue once, so a
	 * RAM image alone (empty script) still makes requests. */
	kick();
	if (log_enabled(LOG_INFO))   /* MAYFLY_FUZZ_LOG=debug: what the input did */
		virtio_blk_log_stats(&blk);
	virtio_blk_destroy(&blk);

	if (!guards_intact(arena.lo, arena.hi, GUARD_SIZE))
		guest_ram_guard_smashed();
	return 0;
}
