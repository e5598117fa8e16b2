/* vm-cycles.c - tiny-guest VMs built, run to their end and destroyed, one after another and many alive at once: nothing is left behind (fds, threads, mappings, memory).
 *
 * usage: vm-cycles GUEST CYCLES AT_ONCE
 *   GUEST    a tiny guest that ends itself by reset (boot-timer-only.elf)
 *   CYCLES   VMs built, run and destroyed one after another
 *   AT_ONCE  VMs built together, each run to its end while all of them
 *            exist, then destroyed together
 *
 * Each VM is what `mayfly boot` makes from the same parts (vm_build, vm_run,
 * vm_destroy: the builder's whole recipe and every thread vm_run starts),
 * with a copy-on-write disk and an in-process vsock device, so the I/O
 * thread, disk files, eventfds and the vsock device come and go too. A
 * warm-up, a few VMs in turn and one round of AT_ONCE together, comes
 * first: what the process sets up once (the log writer's first start,
 * malloc's per-thread arenas, glibc's thread stack cache, the allocator's
 * high-water mark for AT_ONCE VMs) is not a leak. Then the process's open
 * descriptors (/proc/self/fd), threads (/proc/self/task), mappings
 * (/proc/self/maps lines), heap in use (allocated, not freed: ASan's
 * counter, or mallinfo2) and resident memory (/proc/self/statm) are
 * counted, the cycles run, and they are counted again: descriptors and
 * threads must be exactly as before, the heap within HEAP_SLACK (64 bytes
 * per VM over 1,000 VMs), mappings within MAPS_SLACK lines and resident
 * memory within RSS_SLACK: the allocator keeps what it mapped once, so the
 * heap check is the one that catches a leak, the resident set one that is
 * not on the heap (memory mapped and never unmapped), the mappings one
 * mapping per VM (1,000 more; the allocator itself maps a few new regions
 * as it goes, hence the slack). New mappings are listed.
 *
 * Output: one line per phase with the counts and the time taken, then
 * "vm-cycles: ok" or a line per difference. Exit status 0 ok, 1 something
 * was left behind or a VM did not end by its reset, 2 usage or setup.
 * (There is one VM per process in mayfly; vm_run cannot run two VMs in one
 * process at the same time, as they would share the log writer, so "at
 * once" means alive together, each run in turn.)
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define HAVE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAVE_ASAN 1
#endif
#endif
#ifdef HAVE_ASAN
/* The sanitizer runtime's (gcc has no header for it). */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif

#include "lib/clock.h"
#include "dir_count.h"
#include "vm/config.h"
#include "lib/log.h"
#include "vm/vm.h"

#define WARMUP_CYCLES 3
#define HEAP_SLACK    (64ull << 10)
#define MAPS_SLACK    64        /* seen: +11 to +14 over 1,000 VMs and 50 at once, under ASan */
#define RSS_SLACK     (16ull << 20)
#define DISK_SIZE     (1u << 20)
#define MAPS_MAX      4096

struct counts {
	long fds, tasks, maps;
	unsigned long long rss, heap;
};

static char maps_before[MAPS_MAX][128];
static long nr_maps_before;

static struct vm_config cfg;

/* Heap bytes allocated and not freed: what a leak grows, whatever the
 * allocator keeps mapped. */
static unsigned long long heap_in_use(void)
{
#ifdef HAVE_ASAN
	return __sanitizer_get_current_allocated_bytes();
#else
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
#endif
}

/* Keep the mappings' address ranges and names (not their flags or
 * offsets), to show which are new. */
static void save_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];

	nr_maps_before = 0;
	while (f && nr_maps_before < MAPS_MAX && fgets(line, sizeof(line), f)) {
		memcpy(maps_before[nr_maps_before], line, sizeof(maps_before[0]) - 1);
		maps_before[nr_maps_before++][sizeof(maps_before[0]) - 1] = '\0';
	}
	if (f)
		fclose(f);
}

static void show_new_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int shown = 0;

	while (f && shown < 24 && fgets(line, sizeof(line), f)) {
		long i = 0;

		while (i < nr_maps_before && strncmp(maps_before[i], line, sizeof(maps_before[0]) - 1))
			i++;
		if (i == nr_maps_before) {
			printf("vm-cycles: new mapping: %s", line);
			shown++;
		}
	}
	if (f)
		fclose(f);
}

static struct counts count(void)
{
	/* open_fds counts the descriptor that reads /proc/self/fd too. */
	struct counts c = { open_fds() - 1, dir_count("/proc/self/task", ""), 0, 0,
			    heap_in_use() };
	unsigned long size, resident;
	FILE *f = fopen("/proc/self/maps", "r");
	int ch;

	while (f && (ch = fgetc(f)) != EOF)
		c.maps += ch == '\n';
	if (f)
		fclose(f);
	f = fopen("/proc/self/statm", "r");
	if (f && fscanf(f, "%lu %lu", &size, &resident) == 2)
		c.rss = (unsigned long long)resident * (unsigned long long)sysconf(_SC_PAGESIZE);
	if (f)
		fclose(f);
	return c;
}

static void show(const char *what, struct counts c, double secs)
{
	printf("vm-cycles: %s: %ld fds, %ld threads, %ld mappings, %llu KiB heap in use, "
	       "%llu KiB resident (%.1f s)\n", what, c.fds, c.tasks, c.maps, c.heap >> 10,
	       c.rss >> 10, secs);
	fflush(stdout);
}

static double since(uint64_t t0)
{
	return (double)(clock_now_ns() - t0) / 1e9;
}

/* Build n VMs, run each to its end (the guest resets: exit 0) while all of
 * them exist, destroy them all. 0, or 1 with a line saying which failed. */
static int cycle(unsigned n)
{
	struct vm *vms = calloc(n, sizeof(*vms));
	int rc = 0;
	unsigned built = 0;

	if (!vms) {
		fprintf(stderr, "vm-cycles: out of memory\n");
		return 1;
	}
	for (; built < n; built++) {
		int code = vm_build(&vms[built], &cfg, NULL, clock_now_ns());

		if (code) {
			fprintf(stderr, "vm-cycles: vm_build of VM %u (of %u alive) failed: exit %d\n",
				built + 1, n, code);
			vm_destroy(&vms[built]);
			rc = 1;
			break;
		}
	}
	for (unsigned i = 0; i < built && !rc; i++) {
		int code = vm_run(&vms[i]);

		if (code) {
			fprintf(stderr, "vm-cycles: VM %u ended with exit %d, not by its reset (0): %s\n",
				i + 1, code, vms[i].exit_reason);
			rc = 1;
		}
	}
	for (unsigned i = 0; i < built; i++)
		vm_destroy(&vms[i]);
	free(vms);
	return rc;
}

static int make_disk(char *path, size_t size)
{
	const char *tmp = getenv("TMPDIR");
	int fd;

	snprintf(path, size, "%s/vm-cycles-disk-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	fd = mkstemp(path);
	if (fd < 0 || ftruncate(fd, DISK_SIZE) < 0) {
		fprintf(stderr, "vm-cycles: cannot make a disk file: %s\n", strerror(errno));
		return -1;
	}
	close(fd);
	return 0;
}

static int compare(struct counts a, struct counts b)
{
	int bad = 0;

	if (b.fds != a.fds) {
		fprintf(stderr, "vm-cycles: %+ld file descriptors left open\n", b.fds - a.fds);
		bad = 1;
	}
	if (b.tasks != a.tasks) {
		fprintf(stderr, "vm-cycles: %+ld threads left running\n", b.tasks - a.tasks);
		bad = 1;
	}
	if (b.heap > a.heap + HEAP_SLACK) {
		fprintf(stderr, "vm-cycles: %llu KiB more heap in use (allowed %llu): a leak\n",
			(b.heap - a.heap) >> 10, HEAP_SLACK >> 10);
		bad = 1;
	}
	if (b.maps > a.maps + MAPS_SLACK) {
		fprintf(stderr, "vm-cycles: %+ld mappings left (allowed %d)\n", b.maps - a.maps,
			MAPS_SLACK);
		bad = 1;
	}
	if (b.rss > a.rss + RSS_SLACK) {
		fprintf(stderr, "vm-cycles: resident memory grew by %llu KiB (allowed %llu)\n",
			(b.rss - a.rss) >> 10, RSS_SLACK >> 10);
		bad = 1;
	}
	return bad;
}

int main(int argc, char **argv)
{
	struct rlimit nofile;
	struct counts before, mid, after;
	char disk[4096];
	unsigned long cycles, at_once;
	uint64_t t0;
	int bad = 0;

	if (argc != 4 || !(cycles = strtoul(argv[2], NULL, 10)) ||
	    !(at_once = strtoul(argv[3], NULL, 10))) {
		fprintf(stderr, "usage: vm-cycles GUEST CYCLES AT_ONCE\n");
		return 2;
	}
	/* Each VM alive holds a dozen descriptors (KVM, eventfds, disk). */
	if (!getrlimit(RLIMIT_NOFILE, &nofile)) {
		nofile.rlim_cur = nofile.rlim_max;
		setrlimit(RLIMIT_NOFILE, &nofile);
	}
	log_init("cycles", LOG_ERROR);
	config_init(&cfg);
	cfg.mem_mib = 16;
	cfg.cpus = 1;
	cfg.console_out = CONSOLE_OUT_DISCARD;
	cfg.log_level = LOG_ERROR;
	cfg.vsock = true;
	if (CONFIG_SET_PATH(cfg.kernel, argv[1]) || make_disk(disk, sizeof(disk)) ||
	    CONFIG_SET_PATH(cfg.rootfs, disk)) {
		fprintf(stderr, "vm-cycles: guest or disk path too long\n");
		return 2;
	}

	t0 = clock_now_ns();
	for (int i = 0; i < WARMUP_CYCLES && !bad; i++)
		bad = cycle(1);
	if (!bad)
		bad = cycle((unsigned)at_once);
	before = count();
	save_maps();
	show("after the warm-up", before, since(t0));

	t0 = clock_now_ns();
	for (unsigned long i = 0; i < cycles && !bad; i++)
		bad = cycle(1);
	mid = count();
	show(bad ? "sequential cycles (stopped at a failure)" : "after the sequential cycles", mid,
	     since(t0));
	printf("vm-cycles: %lu VMs built, run and destroyed one after another\n", cycles);

	t0 = clock_now_ns();
	if (!bad)
		bad = cycle((unsigned)at_once);
	after = count();
	show("after the VMs at once", after, since(t0));
	printf("vm-cycles: %lu VMs alive at once, each run to its end, then destroyed\n", at_once);
	unlink(disk);
	config_free(&cfg);
	bad |= compare(before, mid) | compare(before, after);
	show_new_maps();
	puts(bad ? "vm-cycles: FAILED" : "vm-cycles: ok");
	return bad;
}
