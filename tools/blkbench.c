/* blkbench.c - block device throughput from inside a guest, for tools/bench-blk.
 *
 * usage: blkbench [options] DEVICE [TEST...]
 *   TEST        seq-write seq-read rand-read rand-write verify (default: all five,
 *               in that order)
 *   -m MiB      sequential region at the start of the device (default 64)
 *   -b KiB      sequential request size (default 1024)
 *   -n OPS      random operations per random test (default 4000)
 *   -k KiB      random request size (default 4)
 *   -s SEED     PRNG seed for the random offsets (default 1)
 *
 * Every request is O_DIRECT from a page-aligned buffer, one at a time (queue
 * depth 1), timed with CLOCK_MONOTONIC. Write tests end with fdatasync(), inside
 * the timed span. One line per test on stdout:
 *   blkbench seq-write MiB/s 123.4 bytes 67108864 secs 0.519 ops 64 syncs 1
 *   blkbench rand-read IOPS 5678 bytes 16384000 secs 0.704 ops 4000 syncs 0
 * and for verify: "blkbench verify ok sectors N" or "blkbench verify FAILED ...".
 *
 * Data: every 512-byte sector written carries a header (magic, its own byte
 * offset, a tag: 1 for seq-write, 2 for rand-write) and a fixed fill. The reads
 * check the headers (a few compares per sector, not timed separately):
 * seq-read expects tag 1; rand-read accepts tag 1 inside the sequential region
 * and all-zero headers outside it (a fresh, zeroed image); verify rereads the
 * sequential region and every rand-write block and expects the final contents.
 * A mismatch is printed and makes the exit status 1, so a device that loses or
 * misplaces data is caught, not just timed. verify also works on the image file
 * on the host after the VM has gone (without O_DIRECT where the file system
 * refuses it), with the same options.
 *
 * Exit status: 0 all tests ran and the data was right, 1 a data mismatch or an
 * I/O error, 2 bad usage. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SECTOR 512u
#define MAGIC 0x4242594c4659414dULL /* "MAYFLYBB" */
#define TAG_SEQ 1
#define TAG_RAND 2
#define MAX_REPORTED_ERRORS 10

struct sector_header {
	uint64_t magic, offset, tag;
};

static const char *dev_path;
static int fd = -1;
static uint64_t dev_size;
static uint64_t seq_bytes = 64ULL << 20, seq_bs = 1ULL << 20;
static uint64_t rand_ops = 4000, rand_bs = 4096, seed = 1;
static unsigned char *buf;
static unsigned long errors;   /* data mismatches */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
	fprintf(stderr, "blkbench: %s: %s\n", what, strerror(errno));
	printf("blkbench error %s: %s\n", what, strerror(errno));
	exit(1);
}

/* xorshift64*: deterministic offsets, the same for every VMM and run. */
static uint64_t prng_state;
static uint64_t prng_next(void)
{
	uint64_t x = prng_state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	prng_state = x;
	return x * 0x2545f4914f6cdd1dULL;
}

/* rand-read and rand-write draw from different sequences of the same seed. */
static void prng_seed(uint64_t test)
{
	prng_state = (seed * 0x9e3779b97f4a7c15ULL) ^ (test << 32) ^ 0x853c49e6748fea9bULL;
	if (!prng_state)
		prng_state = 1;
	for (int i = 0; i < 8; i++)
		prng_next();
}

static uint64_t rand_offset(void)
{
	return prng_next() % (dev_size / rand_bs) * rand_bs;
}

static void stamp(unsigned char *p, uint64_t len, uint64_t offset, uint64_t tag)
{
	for (uint64_t o = 0; o < len; o += SECTOR) {
		struct sector_header h = { MAGIC, offset + o, tag };

		memcpy(p + o, &h, sizeof(h));
	}
}

/* Checks the sector headers of len bytes read at offset. want_tag 0: tag 1
 * inside the sequential region, zeros outside it (rand-read's view). */
static void check(const char *test, const unsigned char *p, uint64_t len, uint64_t offset,
		  uint64_t want_tag)
{
	for (uint64_t o = 0; o < len; o += SECTOR) {
		struct sector_header h, want = { MAGIC, offset + o, want_tag };

		memcpy(&h, p + o, sizeof(h));
		if (!want_tag) {
			if (offset + o < seq_bytes)
				want.tag = TAG_SEQ;
			else
				want = (struct sector_header){ 0, 0, 0 };
		}
		if (!memcmp(&h, &want, sizeof(h)))
			continue;
		if (errors++ < MAX_REPORTED_ERRORS)
			printf("blkbench %s MISMATCH at byte %" PRIu64 ": magic %#" PRIx64
			       " offset %" PRIu64 " tag %" PRIu64 ", expected magic %#" PRIx64
			       " offset %" PRIu64 " tag %" PRIu64 "\n",
			       test, offset + o, h.magic, h.offset, h.tag, want.magic, want.offset,
			       want.tag);
	}
}

static void xfer(int write, uint64_t offset, uint64_t len)
{
	uint64_t done = 0;

	while (done < len) {
		ssize_t n = write ? pwrite(fd, buf + done, len - done, (off_t)(offset + done))
				  : pread(fd, buf + done, len - done, (off_t)(offset + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			char what[96];

			if (n == 0)
				errno = EIO;
			snprintf(what, sizeof(what), "%s of %" PRIu64 " bytes at %" PRIu64,
				 write ? "write" : "read", len - done, offset + done);
			die(what);
		}
		done += (uint64_t)n;
	}
}

static void report(const char *test, uint64_t ops, uint64_t bytes, int syncs, double secs,
		   int iops)
{
	if (secs <= 0)
		secs = 1e-9;
	if (iops)
		printf("blkbench %s IOPS %.0f", test, (double)ops / secs);
	else
		printf("blkbench %s MiB/s %.1f", test, (double)bytes / secs / (1 << 20));
	printf(" bytes %" PRIu64 " secs %.3f ops %" PRIu64 " syncs %d\n", bytes, secs, ops, syncs);
	fflush(stdout);
}

static void seq_write(void)
{
	double t0 = now();
	uint64_t ops = 0;

	for (uint64_t off = 0; off < seq_bytes; off += seq_bs, ops++) {
		stamp(buf, seq_bs, off, TAG_SEQ);
		xfer(1, off, seq_bs);
	}
	if (fdatasync(fd))
		die("fdatasync");
	report("seq-write", ops, seq_bytes, 1, now() - t0, 0);
}

static void seq_read(void)
{
	double t0 = now(), spent_checking = 0;
	uint64_t ops = 0;

	for (uint64_t off = 0; off < seq_bytes; off += seq_bs, ops++) {
		double c;

		xfer(0, off, seq_bs);
		c = now();
		check("seq-read", buf, seq_bs, off, TAG_SEQ);
		spent_checking += now() - c;
	}
	report("seq-read", ops, seq_bytes, 0, now() - t0 - spent_checking, 0);
}

static void rand_read(void)
{
	double t0 = now(), spent_checking = 0;

	prng_seed(1);
	for (uint64_t i = 0; i < rand_ops; i++) {
		uint64_t off = rand_offset();
		double c;

		xfer(0, off, rand_bs);
		c = now();
		check("rand-read", buf, rand_bs, off, 0);
		spent_checking += now() - c;
	}
	report("rand-read", rand_ops, rand_ops * rand_bs, 0, now() - t0 - spent_checking, 1);
}

static void rand_write(void)
{
	double t0 = now();

	prng_seed(2);
	for (uint64_t i = 0; i < rand_ops; i++) {
		uint64_t off = rand_offset();

		stamp(buf, rand_bs, off, TAG_RAND);
		xfer(1, off, rand_bs);
	}
	if (fdatasync(fd))
		die("fdatasync");
	report("rand-write", rand_ops, rand_ops * rand_bs, 1, now() - t0, 1);
}

/* The final contents: the sequential region (tag 1 but where rand-write wrote),
 * then every rand-write block (tag 2). Not timed. */
static void verify(void)
{
	unsigned long before = errors;
	uint64_t sectors = 0;
	unsigned char *rbuf;
	uint64_t nblocks = dev_size / rand_bs;
	unsigned char *written = calloc(nblocks / 8 + 1, 1);

	if (!written)
		die("calloc");
	prng_seed(2);
	for (uint64_t i = 0; i < rand_ops; i++) {
		uint64_t b = rand_offset() / rand_bs;

		written[b / 8] |= (unsigned char)(1u << (b % 8));
	}
	for (uint64_t off = 0; off < seq_bytes; off += seq_bs) {
		xfer(0, off, seq_bs);
		for (uint64_t o = 0; o < seq_bs; o += rand_bs) {
			uint64_t b = (off + o) / rand_bs;
			int rw = written[b / 8] >> (b % 8) & 1;

			check("verify", buf + o, rand_bs, off + o, rw ? TAG_RAND : TAG_SEQ);
		}
		sectors += seq_bs / SECTOR;
	}
	rbuf = buf;
	for (uint64_t b = seq_bytes / rand_bs; b < nblocks; b++) {
		if (!(written[b / 8] >> (b % 8) & 1))
			continue;
		xfer(0, b * rand_bs, rand_bs);
		check("verify", rbuf, rand_bs, b * rand_bs, TAG_RAND);
		sectors += rand_bs / SECTOR;
	}
	free(written);
	if (errors == before)
		printf("blkbench verify ok sectors %" PRIu64 "\n", sectors);
	else
		printf("blkbench verify FAILED mismatched-sectors %lu of %" PRIu64 "\n",
		       errors - before, sectors);
	fflush(stdout);
}

static const struct {
	const char *name;
	void (*run)(void);
} tests[] = {
	{ "seq-write", seq_write },
	{ "seq-read", seq_read },
	{ "rand-read", rand_read },
	{ "rand-write", rand_write },
	{ "verify", verify },
};
#define NTESTS (sizeof(tests) / sizeof(tests[0]))

static void usage(void)
{
	fprintf(stderr, "usage: blkbench [-m SEQ_MiB] [-b SEQ_KiB] [-n RAND_OPS] [-k RAND_KiB] "
			"[-s SEED] DEVICE [seq-write|seq-read|rand-read|rand-write|verify...]\n");
	exit(2);
}

static uint64_t number(const char *s)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || !v)
		usage();
	return v;
}

int main(int argc, char **argv)
{
	struct stat st;
	int opt, only_verify = 1;

	while ((opt = getopt(argc, argv, "m:b:n:k:s:")) != -1) {
		switch (opt) {
		case 'm': seq_bytes = number(optarg) << 20; break;
		case 'b': seq_bs = number(optarg) << 10; break;
		case 'n': rand_ops = number(optarg); break;
		case 'k': rand_bs = number(optarg) << 10; break;
		case 's': seed = number(optarg); break;
		default: usage();
		}
	}
	if (optind >= argc)
		usage();
	dev_path = argv[optind++];
	for (int i = optind; i < argc; i++) {
		size_t t;

		for (t = 0; t < NTESTS && strcmp(argv[i], tests[t].name); t++)
			;
		if (t == NTESTS)
			usage();
		if (strcmp(argv[i], "verify"))
			only_verify = 0;
	}
	if (optind == argc)
		only_verify = 0;
	if (seq_bytes % seq_bs || seq_bs % rand_bs || rand_bs % SECTOR) {
		fprintf(stderr, "blkbench: need SEQ_MiB a multiple of SEQ_KiB, SEQ_KiB of RAND_KiB, "
				"RAND_KiB of 512 bytes\n");
		return 2;
	}

	fd = open(dev_path, (only_verify ? O_RDONLY : O_RDWR) | O_DIRECT | O_CLOEXEC);
	if (fd < 0 && errno == EINVAL && only_verify) /* e.g. tmpfs: no O_DIRECT */
		fd = open(dev_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die(dev_path);
	if (fstat(fd, &st))
		die("fstat");
	if (S_ISBLK(st.st_mode)) {
		if (ioctl(fd, BLKGETSIZE64, &dev_size))
			die("BLKGETSIZE64");
	} else {
		dev_size = (uint64_t)st.st_size;
	}
	if (dev_size < seq_bytes || dev_size < rand_bs) {
		fprintf(stderr, "blkbench: %s has %" PRIu64 " bytes, fewer than the %" PRIu64
				" the sequential tests use\n", dev_path, dev_size, seq_bytes);
		return 2;
	}
	if (posix_memalign((void **)&buf, 4096, seq_bs))
		die("posix_memalign");
	memset(buf, 0xa5, seq_bs);
	printf("blkbench device %s bytes %" PRIu64 " seq %" PRIu64 "x%" PRIu64 " rand %" PRIu64
	       "x%" PRIu64 "\n", dev_path, dev_size, seq_bytes / seq_bs, seq_bs, rand_ops, rand_bs);
	fflush(stdout);

	for (size_t t = 0; t < NTESTS; t++) {
		int wanted = optind == argc;

		for (int i = optind; i < argc; i++)
			wanted |= !strcmp(argv[i], tests[t].name);
		if (wanted)
			tests[t].run();
	}
	if (errors) {
		printf("blkbench FAILED: %lu mismatched sectors\n", errors);
		return 1;
	}
	return 0;
}
