/* test_vsock_flood.c - 256 connections with full buffers both ways: what the host holds for them stays under the device's documented cap, measured. */
#include "vsock_guest.h"
#include "virtio/vsock_conn.h"

#include <sys/socket.h>

/*
 * docs/virtio.md ("Memory"): host-to-guest bytes are never buffered (a
 * guest that does not read leaves them in the host program's socket), and
 * guest-to-host bytes wait in at most one VSOCK_CONN_BUF ring per
 * connection, so a VM's vsock device holds at most VSOCK_MAX_CONNS *
 * VSOCK_CONN_BUF = 64 MiB of connection data. Measured here as the growth
 * of this process's resident set (/proc/self/statm): a bound generous
 * enough for AddressSanitizer (its shadow is an eighth more, its
 * allocator's redzones and quarantine some more), tight enough that a
 * second ring per connection, or bytes taken past the guest's credit,
 * would pass it.
 */
#define CONNS      VSOCK_MAX_CONNS
#define CAP_BYTES  ((uint64_t)VSOCK_MAX_CONNS * VSOCK_CONN_BUF)
#define SLACK      (24ull << 20)       /* sanitizers, socket bookkeeping, stacks */
#define GUEST_PORT 1024

static int fds[CONNS];
static struct gconn gcs[CONNS];

TestSuite(vsock_flood, .init = vsock_setup, .fini = vsock_teardown, .timeout = 150);

/* Resident bytes of this process now. */
static uint64_t rss_bytes(void)
{
	unsigned long size, resident;
	FILE *f = fopen("/proc/self/statm", "r");

	cr_assert_not_null(f);
	cr_assert_eq(fscanf(f, "%lu %lu", &size, &resident), 2);
	fclose(f);
	return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* The connection whose host port is `hport`. */
static struct gconn *by_port(uint32_t hport)
{
	uint32_t i = hport - gcs[0].hport;

	cr_assert_lt(i, CONNS, "a packet for host port %u", hport);
	return &gcs[i];
}

/* 256 host clients, each accepted by the guest on GUEST_PORT. */
static void open_all(void)
{
	guest_init(FEAT_VERSION_1);
	for (int i = 0; i < CONNS; i++) {
		rx_post(1, RX_DEFAULT);
		fds[i] = host_conn(&gcs[i], GUEST_PORT);
		cr_assert_eq(gcs[i].hport, gcs[0].hport + (uint32_t)i);
	}
	cr_assert_eq(vs->nr_conns, CONNS);
	/* Touch the tx area once: the guest's RAM is not the device's. */
	memset(d.ram + TX_BASE, 0, TX_END - TX_BASE);
}

/* Bytes the device holds in its rings now. */
static uint64_t buffered(void)
{
	uint64_t n = 0;

	for (struct vsock_conn *c = vs->conns; c; c = c->next)
		n += c->buf_len;
	return n;
}

/* Every host client writes until its socket takes no more; the guest has
 * no rx buffer and never reads. The device must leave it all in the
 * sockets: nothing read, nothing held. */
Test(vsock_flood, guest_that_never_reads_costs_the_host_nothing)
{
	static uint8_t chunk[MAX_PAYLOAD];
	uint64_t before, after, written = 0;

	open_all();
	spin();
	before = rss_bytes();
	for (int i = 0; i < CONNS; i++) {
		ssize_t n;

		while ((n = send(fds[i], chunk, sizeof(chunk), MSG_NOSIGNAL | MSG_DONTWAIT)) > 0)
			written += (uint64_t)n;
		cr_assert(n < 0 && errno == EAGAIN, "send: %s", strerror(errno));
		spin();
	}
	spin();
	after = rss_bytes();
	cr_log_info("never-reading guest: %llu MiB waiting in 256 host sockets, host RSS %+lld KiB",
		    (unsigned long long)(written >> 20), ((long long)after - (long long)before) / 1024);
	cr_assert_geq(written, (uint64_t)CONNS * 64 * 1024, "the host sockets took only %llu bytes",
		      (unsigned long long)written);
	cr_assert_eq(vs->bytes_to_guest, 0, "the device read for a guest with no buffers");
	cr_assert_eq(buffered(), 0);
	cr_assert_lt(after, before + SLACK, "RSS grew by %llu KiB for bytes the device never read",
		     (unsigned long long)(after - before) / 1024);
	expect_no_rx();
	cr_assert_eq(vs->nr_conns, CONNS);
}

/* The guest sends on every connection as long as its credit lasts, and
 * the host clients never read: the sockets fill, then every ring does.
 * The host's growth stays under the cap; a packet past the credit resets
 * its connection and is not kept. */
Test(vsock_flood, full_rings_on_every_connection_stay_under_the_cap)
{
	static uint8_t chunk[MAX_PAYLOAD];
	uint64_t before, full, after;
	bool more = true;

	open_all();
	spin();
	before = rss_bytes();
	for (int round = 0; more; round++) {
		cr_assert_lt(round, 32, "the windows never closed");
		more = false;
		for (int i = 0; i < CONNS; i++) {
			struct gconn *gc = &gcs[i];
			uint32_t credit;

			while ((credit = gc->peer_buf_alloc - (gc->tx_cnt - gc->peer_fwd_cnt)) > 0) {
				gsend(gc, OP_RW, 0, chunk, credit < MAX_PAYLOAD ? credit : MAX_PAYLOAD);
				more = true;
			}
		}
		/* Credit updates for what the sockets took, one per
		 * connection: more than the rx queue holds at once. */
		for (int got = 1; got;) {
			rx_post(rxq.nr_free, RX_DEFAULT);
			spin();
			for (got = 0; rx_get(&p); got++) {
				cr_assert_eq(p.op, OP_CREDIT_UPDATE, "op %u during the flood", p.op);
				gtake(by_port(p.src_port), &p);
			}
		}
	}
	full = rss_bytes();
	cr_assert_eq(buffered(), CAP_BYTES, "the rings hold %llu bytes, not all %llu",
		     (unsigned long long)buffered(), (unsigned long long)CAP_BYTES);
	for (int i = 0; i < CONNS; i++)
		gsend(&gcs[i], OP_RW, 0, chunk, 4096);   /* past the credit: reset */
	spin();
	after = rss_bytes();
	cr_log_info("full rings: %llu MiB held, host RSS +%llu MiB (cap %llu MiB); past credit: "
		    "%u connections left, RSS +%llu MiB", (unsigned long long)(CAP_BYTES >> 20),
		    (unsigned long long)((full - before) >> 20), (unsigned long long)(CAP_BYTES >> 20),
		    vs->nr_conns, (unsigned long long)((after - before) >> 20));
	cr_assert_lt(full, before + CAP_BYTES + CAP_BYTES / 8 + SLACK,
		     "RSS grew by %llu MiB for %llu MiB of rings",
		     (unsigned long long)((full - before) >> 20), (unsigned long long)(CAP_BYTES >> 20));
	cr_assert_lt(after, before + CAP_BYTES + CAP_BYTES / 8 + SLACK,
		     "RSS grew by %llu MiB after bytes past the credit",
		     (unsigned long long)((after - before) >> 20));
	cr_assert_eq(buffered(), 0, "bytes past the credit are held, or reset rings kept");
	for (int i = 0; i < CONNS; i++)
		expect_closed(fds[i]);
}
