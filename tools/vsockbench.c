/* vsockbench.c - vsock throughput and round-trip latency: a server for the guest, a client for the host.
 *
 * usage: vsockbench serve PORT
 *        vsockbench client (--unix PATH | --cid CID) PORT [-m MIB] [-n PINGS] [-t SEC] [-q]
 *
 * serve (in the guest) listens on AF_VSOCK port PORT and answers requests, one
 * connection at a time, until a client sends QUIT. client (on the host) connects
 * through mayfly's hybrid vsock (--unix: the Unix socket of `mayfly boot --vsock
 * PATH`, "CONNECT PORT\n", "OK n\n") or an AF_VSOCK socket (--cid: vhost-vsock),
 * retrying for up to SEC seconds (default 120) while the guest boots, then
 * measures MIB MiB (default 64; 0: none) host to guest and guest to host and
 * PINGS (default 1000; 0: none) 1-byte round trips, with -q then tells the
 * server to quit, and prints one line per result:
 *   vsockbench connected after MS ms
 *   vsockbench host-to-guest MIB SECONDS MiB/s
 *   vsockbench guest-to-host MIB SECONDS MiB/s
 *   vsockbench ping PINGS median_us p10_us p90_us min_us max_us
 *   vsockbench status 0
 * Every 4 KiB of a stream starts with its block number, checked by the reader,
 * so lost, repeated or reordered data fails the run (exit 1) at the cost of 8
 * bytes per 4 KiB. Exit: 0 done, 1 a failure (one line on stderr), 2 usage. */
#include <errno.h>
#include <sys/socket.h>   /* before vm_sockets.h, which needs struct sockaddr (aarch64) */
#include <linux/vm_sockets.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define CHUNK       (256 * 1024)
#define BLOCK       4096
#define MARK_XOR    0x76736f636b62656eULL   /* "vsockben" */
#define REQ_MAGIC   0x4e425356u             /* "VSBN" */
#define MAX_PINGS   100000
#define WARMUP_MIB  1

enum op { OP_SINK = 'S', OP_SOURCE = 'R', OP_PING = 'P', OP_QUIT = 'Q' };

/* A request, client to server; the server answers per op (see serve_one). */
struct req {
	uint32_t magic;
	uint32_t op;
	uint64_t arg;   /* bytes for SINK and SOURCE, round trips for PING */
};

static char buf[CHUNK];

static __attribute__((noreturn)) void die(const char *what)
{
	fprintf(stderr, "vsockbench: %s: %s\n", what, errno ? strerror(errno) : "failed");
	exit(1);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* One read (out=false) or write of up to len bytes, EINTR retried: the bytes
 * moved, or -1 (errno EPIPE for the end of the stream). */
static ssize_t io_once(int fd, void *p, size_t len, bool out)
{
	ssize_t n;

	do
		n = out ? write(fd, p, len) : read(fd, p, len);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		errno = EPIPE;
	return n > 0 ? n : -1;
}

static int io_all(int fd, void *p, size_t len, bool out)
{
	for (char *c = p; len;) {
		ssize_t n = io_once(fd, c, len, out);

		if (n < 0)
			return -1;
		c += n;
		len -= (size_t)n;
	}
	return 0;
}

static int read_all(int fd, void *p, size_t len)
{
	return io_all(fd, p, len, false);
}

static int write_all(int fd, const void *p, size_t len)
{
	return io_all(fd, (void *)p, len, true);   /* write() only reads it */
}

/* The byte at stream offset pos when it belongs to a block's marker: the
 * first 8 bytes of each 4 KiB block hold the block number (little endian,
 * xored with MARK_XOR). Returns -1 for the other bytes, which are not checked. */
static int mark_byte(uint64_t pos)
{
	uint64_t in = pos % BLOCK;

	if (in >= 8)
		return -1;
	return (int)(((pos / BLOCK) ^ MARK_XOR) >> (in * 8) & 0xff);
}

/* Stamps (check=false) or checks (check=true) the markers in p, which holds
 * the stream's bytes [off, off + len). Returns false on a wrong marker. */
static bool marks(char *p, uint64_t off, size_t len, bool check)
{
	uint64_t end = off + len;

	for (uint64_t b = off - off % BLOCK; b < end; b += BLOCK) {
		for (uint64_t pos = b; pos < b + 8 && pos < end; pos++) {
			if (pos < off)
				continue;
			if (!check)
				p[pos - off] = (char)mark_byte(pos);
			else if ((unsigned char)p[pos - off] != mark_byte(pos))
				return false;
		}
	}
	return true;
}

/* Sends (out=true) or receives and checks len bytes of the marked stream:
 * 0, -1 on an I/O error, -2 on wrong data (all of it is read first). */
static int stream(int fd, uint64_t len, bool out)
{
	bool ok = true;

	for (uint64_t off = 0; off < len;) {
		size_t want = len - off < CHUNK ? (size_t)(len - off) : CHUNK;
		ssize_t n;

		if (out)
			marks(buf, off, want, false);
		n = io_once(fd, buf, want, out);
		if (n < 0)
			return -1;
		if (!out)
			ok = marks(buf, off, (size_t)n, true) && ok;
		off += (uint64_t)n;
	}
	return ok ? 0 : -2;
}

static int echo_pings(int fd, uint64_t count)
{
	for (uint64_t i = 0; i < count; i++) {
		char c;

		if (read_all(fd, &c, 1) || write_all(fd, &c, 1))
			return -1;
	}
	return 0;
}

/* --- the server (guest) -------------------------------------------------- */

/* Serves one connection's requests until it closes: 0, or 1 after QUIT. */
static int serve_one(int fd)
{
	struct req r;
	uint64_t answer;

	while (read_all(fd, &r, sizeof(r)) == 0) {
		if (r.magic != REQ_MAGIC) {
			fprintf(stderr, "vsockbench: bad request magic\n");
			return 0;
		}
		switch (r.op) {
		case OP_SINK:
			/* The answer: the bytes taken, or 0 when the data was wrong. */
			answer = stream(fd, r.arg, false) ? 0 : r.arg;
			if (write_all(fd, &answer, sizeof(answer)))
				return 0;
			break;
		case OP_SOURCE:
			if (stream(fd, r.arg, true))
				return 0;
			break;
		case OP_PING:
			if (r.arg > MAX_PINGS || echo_pings(fd, r.arg))
				return 0;
			break;
		case OP_QUIT:
			answer = 0;
			write_all(fd, &answer, sizeof(answer));
			return 1;
		default:
			fprintf(stderr, "vsockbench: unknown request %u\n", r.op);
			return 0;
		}
	}
	return 0;
}

static int serve(unsigned port)
{
	struct sockaddr_vm sa = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_ANY,
				  .svm_port = port };
	int lfd = socket(AF_VSOCK, SOCK_STREAM, 0);

	if (lfd < 0)
		die("socket(AF_VSOCK)");
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 4))
		die("bind/listen");
	printf("vsockbench: listening on vsock port %u\n", port);
	fflush(stdout);
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		int quit;

		if (fd < 0) {
			if (errno == EINTR)
				continue;
			die("accept");
		}
		quit = serve_one(fd);
		close(fd);
		if (quit)
			break;
	}
	close(lfd);
	return 0;
}

/* --- the client (host) --------------------------------------------------- */

/* One connection attempt through mayfly's hybrid vsock: -1 to try again. */
static int connect_unix(const char *path, unsigned port)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char line[64];
	size_t n = 0;
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "vsockbench: socket path too long\n");
		exit(2);
	}
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0)
		die("socket(AF_UNIX)");
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
		goto retry;
	n = (size_t)snprintf(line, sizeof(line), "CONNECT %u\n", port);
	if (write_all(fd, line, n))
		goto retry;
	/* Byte by byte: nothing after the line may be taken from the stream. */
	for (n = 0; n < sizeof(line) - 1; n++) {
		if (read_all(fd, &line[n], 1))
			goto retry;
		if (line[n] == '\n')
			break;
	}
	line[n] = '\0';
	if (strncmp(line, "OK ", 3))
		goto retry;
	return fd;
retry:
	close(fd);
	return -1;
}

/* One connection attempt over AF_VSOCK (vhost-vsock): -1 to try again. */
static int connect_vsock(unsigned cid, unsigned port)
{
	struct sockaddr_vm sa = { .svm_family = AF_VSOCK, .svm_cid = cid, .svm_port = port };
	int fd = socket(AF_VSOCK, SOCK_STREAM, 0);

	if (fd < 0)
		die("socket(AF_VSOCK)");
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return fd;
	close(fd);
	return -1;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void request(int fd, enum op op, uint64_t arg)
{
	struct req r = { .magic = REQ_MAGIC, .op = op, .arg = arg };

	if (write_all(fd, &r, sizeof(r)))
		die("sending a request");
}

/* Host to guest: from the request to the guest's answer that it took it all. */
static double to_guest(int fd, uint64_t len)
{
	uint64_t t0 = now_ns(), answer;

	request(fd, OP_SINK, len);
	if (stream(fd, len, true) || read_all(fd, &answer, sizeof(answer)))
		die("host to guest");
	if (answer != len) {
		fprintf(stderr, "vsockbench: the guest received wrong data\n");
		exit(1);
	}
	return (double)(now_ns() - t0) / 1e9;
}

/* Guest to host: from the request to the last byte. */
static double from_guest(int fd, uint64_t len)
{
	uint64_t t0 = now_ns();
	int rc;

	request(fd, OP_SOURCE, len);
	rc = stream(fd, len, false);
	if (rc == -2) {
		fprintf(stderr, "vsockbench: wrong data from the guest\n");
		exit(1);
	}
	if (rc)
		die("guest to host");
	return (double)(now_ns() - t0) / 1e9;
}

static void pings(int fd, int count)
{
	uint64_t *rtt = calloc((size_t)count, sizeof(*rtt));

	if (!rtt)
		die("calloc");
	request(fd, OP_PING, (uint64_t)count);
	for (int i = 0; i < count; i++) {
		char c = (char)i, back;
		uint64_t t0 = now_ns();

		if (write_all(fd, &c, 1) || read_all(fd, &back, 1))
			die("ping");
		rtt[i] = now_ns() - t0;
		if (back != c) {
			fprintf(stderr, "vsockbench: ping %d came back wrong\n", i);
			exit(1);
		}
	}
	qsort(rtt, (size_t)count, sizeof(*rtt), cmp_u64);
	printf("vsockbench ping %d %.1f %.1f %.1f %.1f %.1f\n", count,
	       (count % 2 ? rtt[count / 2] : (rtt[count / 2 - 1] + rtt[count / 2]) / 2) / 1e3,
	       rtt[count / 10] / 1e3, rtt[count * 9 / 10] / 1e3, rtt[0] / 1e3, rtt[count - 1] / 1e3);
	free(rtt);
}

static int client(const char *path, unsigned cid, unsigned port, unsigned mib, int count,
		  unsigned timeout_s, bool quit)
{
	uint64_t deadline = now_ns() + timeout_s * 1000000000ULL, len = (uint64_t)mib << 20, t0 = now_ns();
	struct timespec nap = { 0, 20 * 1000000 };
	uint64_t answer;
	double s;
	int fd;

	/* The guest may still be booting: try again until it listens. */
	while ((fd = path ? connect_unix(path, port) : connect_vsock(cid, port)) < 0) {
		if (now_ns() > deadline) {
			fprintf(stderr, "vsockbench: no server on port %u within %u s\n", port, timeout_s);
			return 1;
		}
		nanosleep(&nap, NULL);
	}
	printf("vsockbench connected after %.1f ms\n", (double)(now_ns() - t0) / 1e6);
	fflush(stdout);
	if (mib) {
		/* A short round first, so neither side starts cold (credit, buffers, pages). */
		to_guest(fd, WARMUP_MIB << 20);
		from_guest(fd, WARMUP_MIB << 20);
		s = to_guest(fd, len);
		printf("vsockbench host-to-guest %u %.3f %.1f\n", mib, s, mib / s);
		fflush(stdout);
		s = from_guest(fd, len);
		printf("vsockbench guest-to-host %u %.3f %.1f\n", mib, s, mib / s);
		fflush(stdout);
	}
	if (count)
		pings(fd, count);
	if (quit) {
		request(fd, OP_QUIT, 0);
		if (read_all(fd, &answer, sizeof(answer)))
			die("quit");
	}
	close(fd);
	printf("vsockbench status 0\n");
	return 0;
}

static __attribute__((noreturn)) void usage(void)
{
	fprintf(stderr, "usage: vsockbench serve PORT\n"
		"       vsockbench client (--unix PATH | --cid CID) PORT [-m MIB] [-n PINGS] [-t SEC] [-q]\n");
	exit(2);
}

/* A number in [lo, hi], or usage(). */
static unsigned number(const char *s, unsigned lo, unsigned hi)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		usage();
	return (unsigned)v;
}

int main(int argc, char **argv)
{
	const char *path = NULL;
	unsigned cid = 0, port, mib = 64, timeout_s = 120;
	int count = 1000, i = 2;
	bool quit = false;

	if (argc == 3 && !strcmp(argv[1], "serve"))
		return serve(number(argv[2], 1, UINT32_MAX - 1));
	if (argc < 5 || strcmp(argv[1], "client"))
		usage();
	if (!strcmp(argv[i], "--unix"))
		path = argv[i + 1];
	else if (!strcmp(argv[i], "--cid"))
		cid = number(argv[i + 1], 1, UINT32_MAX - 1);
	else
		usage();
	i += 2;
	port = number(argv[i++], 1, UINT32_MAX - 1);
	while (i < argc) {
		if (!strcmp(argv[i], "-q")) {
			quit = true;
			i++;
			continue;
		}
		if (i + 1 == argc)
			usage();
		if (!strcmp(argv[i], "-m"))
			mib = number(argv[i + 1], 0, 4096);
		else if (!strcmp(argv[i], "-n"))
			count = (int)number(argv[i + 1], 0, MAX_PINGS);
		else if (!strcmp(argv[i], "-t"))
			timeout_s = number(argv[i + 1], 1, 3600);
		else
			usage();
		i += 2;
	}
	return client(path, cid, port, mib, count, timeout_s, quit);
}
