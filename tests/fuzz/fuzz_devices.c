/* fuzz_devices.c - libFuzzer target: hostile snapshot payloads through every device's restore, and the restored virtio devices at work on hostile RAM. */
#include "devices/boot_timer.h"
#include "devices/i8042.h"
#include "devices/serial.h"
#include "disk/disk.h"
#include "lib/event.h"
#include "lib/log.h"
#include "mem/mem.h"
#include "virtio/blk.h"
#include "virtio/mmio.h"
#include "virtio/vsock.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/*
 * Input layout (tests/fuzz/make-device-seeds writes the same):
 *
 *   byte 0      which restore, modulo 6: 0 serial_restore, 1 i8042_restore,
 *               2 boot_timer_restore, 3 virtio_mmio_restore of a virtio-blk
 *               (copy-on-write, 1 MiB), 4 virtio_mmio_restore of a
 *               virtio-vsock (no socket file), 5 disk_open_cow_restored's
 *               bitmap (a 1 MiB base and overlay)
 *   bytes 1-2   payload length L, little-endian (cut to what is there)
 *   L bytes     the payload, copied into a buffer of exactly L bytes, so
 *               AddressSanitizer catches a read one byte past it
 *   the rest    guest RAM from gpa 0, zero-padded to 64 KiB (modes 3, 4)
 *
 * Checks besides the sanitizers: a payload a device accepted saves again
 * to the very same bytes (decoding is exact: nothing dropped, nothing
 * invented; the boot timer excepted, which restores as "fired now"). A
 * restored virtio device then does what a restored VM does first: resume,
 * and one turn of the I/O thread on each queue, on the fuzzer's RAM; a
 * restored overlay is read whole. MAYFLY_FUZZ_LOG=debug says why each
 * payload was refused.
 */
#define RAM_SIZE  (64u * 1024)
#define DISK_SIZE (1024u * 1024)

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t ram[RAM_SIZE] __attribute__((aligned(4096)));
static struct guest_mem mem;
static char base_path[64], overlay_path[64];   /* /proc/self/fd/N of unlinked files */
static bool verbose;

static void die(const char *what)
{
	fprintf(stderr, "fuzz_devices: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void report(const char *what, int rc, const char *why)
{
	if (verbose)
		fprintf(stderr, "%s: %d %s\n", what, rc, rc && why ? why : "");
}

__attribute__((noinline))
static void saved_differently(const char *what)
{
	fprintf(stderr, "fuzz_devices: %s: an accepted payload saves to other bytes\n", what);
	abort();
}

/* The bytes a restored device saves are the payload it took. */
static void expect_same(const char *what, const struct snap_out *o, const uint8_t *p, size_t len)
{
	if (o->err == 0 && (o->len != len || (len && memcmp(o->data, p, len))))
		saved_differently(what);
}

/* An unlinked temporary file of DISK_SIZE bytes, its /proc/self/fd path in
 * `path`; every 4 KiB block starts with its number. */
static void make_file(char *path, size_t size)
{
	const char *tmp = getenv("TMPDIR");
	char name[4096];
	int fd;

	snprintf(name, sizeof(name), "%s/mayfly-fuzz-dev-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	fd = mkstemp(name);
	if (fd < 0)
		die("cannot create a disk file");
	unlink(name);
	if (ftruncate(fd, DISK_SIZE) < 0)
		die("cannot size a disk file");
	for (uint32_t b = 0; b < DISK_SIZE / 4096; b += 3)
		if (pwrite(fd, &b, sizeof(b), (off_t)b * 4096) != (ssize_t)sizeof(b))
			die("cannot write a disk file");
	snprintf(path, size, "/proc/self/fd/%d", fd);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *lvl = getenv("MAYFLY_FUZZ_LOG");

	(void)argc;
	(void)argv;
	verbose = lvl && !strcmp(lvl, "debug");
	log_init("fuzz", verbose ? LOG_DEBUG : LOG_ERROR);
	make_file(base_path, sizeof(base_path));
	make_file(overlay_path, sizeof(overlay_path));
	mem_init_fake(&mem, ram, RAM_SIZE);
	return 0;
}

static void fuzz_serial(const uint8_t *p, size_t len)
{
	static struct serial s;
	struct snap_out o;
	const char *why = NULL;
	int rc;

	serial_init(&s, NULL, NULL, NULL);
	rc = serial_restore(&s, p, len, &why);
	report("serial", rc, why);
	if (rc == 0) {
		snap_out_init(&o);
		serial_save(&s, &o);
		expect_same("serial", &o, p, len);
		snap_out_free(&o);
	}
	serial_destroy(&s);
}

static void fuzz_i8042(const uint8_t *p, size_t len)
{
	struct i8042 dev;
	const char *why = NULL;

	i8042_init(&dev, NULL, NULL);
	report("i8042", i8042_restore(&dev, p, len, &why), why);
}

static void fuzz_boot_timer(const uint8_t *p, size_t len)
{
	struct boot_timer bt;
	const char *why = NULL;
	int rc;

	boot_timer_init(&bt, 0);
	rc = boot_timer_restore(&bt, p, len, &why);
	report("boot timer", rc, why);
	/* Restored as fired means fired: 0 would make a second boot time. */
	if (rc == 0 && memcmp(p, "\0\0\0\0\0\0\0\0", 8) && boot_timer_elapsed_us(&bt) == 0)
		abort();
}

/* Restore a virtio device, save it again, then resume it and give each
 * queue one turn of the I/O thread, as a restored VM does first. */
static void restore_and_run(const char *what, struct virtio_mmio *m, const uint8_t *p,
			    size_t len)
{
	struct snap_out o;
	const char *why = NULL;
	int rc = virtio_mmio_restore(m, p, len, &why);

	report(what, rc, why);
	if (rc)
		return;
	snap_out_init(&o);
	rc = virtio_mmio_save(m, &o, &why);
	if (rc)   /* nothing ran since the restore: there is nothing to refuse */
		abort();
	expect_same(what, &o, p, len);
	snap_out_free(&o);
	virtio_mmio_resume(m);
	for (unsigned q = 0; q < m->ops->nr_queues; q++) {
		virtio_mmio_kick(m, q);
		if (verbose)
			fprintf(stderr, "%s queue %u: popped up to %u, used up to %u\n", what, q,
				m->queues[q].last_avail_idx, m->queues[q].used_idx);
	}
}

static void fuzz_blk(const uint8_t *p, size_t len)
{
	static struct virtio_blk blk;
	struct disk disk;
	const char *why = "";

	if (disk_open_cow(&disk, base_path, &why) || virtio_blk_init(&blk, &disk, &mem, "vda")) {
		fprintf(stderr, "fuzz_devices: cannot set up virtio-blk: %s\n", why);
		abort();
	}
	restore_and_run("virtio-blk", &blk.mmio, p, len);
	virtio_blk_destroy(&blk);
}

static void fuzz_vsock(const uint8_t *p, size_t len)
{
	static struct virtio_vsock v;
	static struct event_loop loop;
	const char *why = "";

	/* A loop per input: a device's destroy leaves its loop alone. */
	if (event_loop_init(&loop) || virtio_vsock_init(&v, NULL, 3, &mem, &loop, &why)) {
		fprintf(stderr, "fuzz_devices: cannot set up virtio-vsock: %s\n", why);
		abort();
	}
	restore_and_run("virtio-vsock", &v.mmio, p, len);
	virtio_vsock_destroy(&v);
	event_loop_destroy(&loop);
}

static void fuzz_overlay(const uint8_t *p, size_t len)
{
	static uint8_t buf[DISK_SIZE];
	struct iovec iov = { buf, sizeof(buf) };
	struct disk disk;
	const char *why = NULL;
	int rc = disk_open_cow_restored(&disk, base_path, overlay_path, p, len, &why);

	report("overlay", rc, why);
	if (rc)
		return;
	if (disk.ops->readv(&disk, &iov, 1, 0))
		abort();
	disk_close(&disk);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t len = 0, rest;
	uint8_t *payload;
	uint8_t mode;

	if (size == 0)
		return 0;
	mode = data[0] % 6;
	if (size >= 3)
		len = (size_t)(data[1] | data[2] << 8) < size - 3 ? (size_t)(data[1] | data[2] << 8)
								 : size - 3;
	payload = malloc(len ? len : 1);
	if (!payload)
		return 0;
	if (len)
		memcpy(payload, data + 3, len);
	rest = size >= 3 ? size - 3 - len : 0;
	if (rest > RAM_SIZE)
		rest = RAM_SIZE;
	if (rest)
		memcpy(ram, data + 3 + len, rest);
	memset(ram + rest, 0, RAM_SIZE - rest);
	switch (mode) {
	case 0: fuzz_serial(payload, len); break;
	case 1: fuzz_i8042(payload, len); break;
	case 2: fuzz_boot_timer(payload, len); break;
	case 3: fuzz_blk(payload, len); break;
	case 4: fuzz_vsock(payload, len); break;
	default: fuzz_overlay(payload, len); break;
	}
	free(payload);
	return 0;
}
