/* fuzz_vsock.c - libFuzzer target: a hostile guest's vsock packets of every op, and its rings, against the device with host connections open. */
#include "lib/event.h"
#include "fuzz_virtio.h"
#include "mem/mem.h"
#include "virtio/vsock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

/*
 * Input (tests/fuzz/make-vsock-seeds writes the same): byte 0 is flags (bit
 * 0 negotiates EVENT_IDX), then a script of at most MAX_OPS operations, one
 * opcode byte (modulo 10) then operands; a script cut short reads zeros.
 * Ports are one selector byte: bit 7 set, a raw u32 follows; else bit 6 set,
 * a guest port 1024 + (sel & 63); else a host port VSOCK_HOST_PORT_BASE +
 * (sel & 63) (the device numbers host connections from there).
 *   0 tx      split:u8 src_cid:u8 dst_cid:u8 src:port dst:port op:u8
 *             len_mode:u8 [len:u32] type:u8 flags:u32 buf_alloc:u32
 *             fwd_cnt:u32 n:u16 payload[n % 4053]
 *             a packet in a tx slot: header and payload in one descriptor,
 *             two (split 1), or the header cut after 20 bytes (split 2);
 *             cids: 0 the guest's (3), 1 the host (2), else raw; type 0
 *             stream (1), else raw; len_mode 0 the payload's length, else
 *             the raw len that follows (a lying header); then kick tx
 *   1 rx      n:u8 size:u16        post n % 17 rx buffers of 1..4096 bytes, kick
 *   2 connect port                 a host client (virtio_vsock_connect_local)
 *                                  says "CONNECT <port>\n"
 *   3 line    k:u8 n:u8 bytes[n % 80]   client k writes raw bytes
 *   4 send    k:u8 n:u16           client k writes n bytes of a pattern
 *   5 recv    k:u8 n:u16           client k reads up to n bytes
 *   6 close   k:u8 how:u8          client k: shutdown write (how & 1) or close
 *   7 spin                         the I/O thread runs until nothing fires
 *   8 poke    gpa:u32 n:u8 bytes   the guest rewrites 1..16 bytes of RAM
 *                                  (its rings too)
 *   9 reset   -                    the driver resets the device, brings it up
 *
 * Each input gets a fresh device and event loop (no Unix listener: host
 * connections come through virtio_vsock_connect_local, as the agent client
 * makes them), so nothing carries over. Checks besides the sanitizers:
 * guest RAM's guards are untouched; every tx chain popped is given back
 * unless the device failed; every rx buffer comes back with a used length
 * within the buffer and at least a header (while the guest never rewrote
 * its rings); the connection count stays under the cap; and after the
 * device is destroyed not one file descriptor is left open.
 */
#define RAM_SIZE   0x22000u
#define GUARD_SIZE 4096u
#define MAX_OPS    96u
#define MAX_CLIENTS 8

/* Rings and buffers: rx (16), tx (32: two descriptors per slot), event (4). */
#define RXQ_SIZE   16
#define TXQ_SIZE   32
#define EVQ_SIZE   4
#define RXQ_DESC   0x0000u
#define TXQ_DESC   0x0400u
#define EVQ_DESC   0x0800u
#define TX_BUF     0x1000u      /* 16 slots of 4 KiB */
#define RX_BUF     0x11000u     /* 16 buffers of 4 KiB */
#define EV_BUF     0x21000u
#define SLOT       0x1000u
#define HDR_LEN    44u

FUZZ_ARENA(RAM_SIZE, GUARD_SIZE);

static struct guest_mem mem;
static struct virtio_vsock v;
static struct event_loop loop;
static bool verbose;

/* The driver's side. */
static struct {
	uint16_t avail[3];          /* next avail index per queue */
	uint16_t used_seen;         /* rx used entries checked */
	uint16_t rx_size[RXQ_SIZE]; /* what each rx descriptor was posted with */
	uint16_t rx_busy;           /* rx descriptors the device has (bit per id) */
	bool poked;                 /* the guest rewrote RAM: rings may be anything */
	bool event_idx;
	int clients[MAX_CLIENTS];
	int nr_clients;
} drv;

static const struct { uint16_t size; uint32_t desc; } queues[3] = {
	{ RXQ_SIZE, RXQ_DESC }, { TXQ_SIZE, TXQ_DESC }, { EVQ_SIZE, EVQ_DESC },
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	verbose = fuzz_log_init();
	guards_set(arena.lo, arena.hi, GUARD_SIZE);
	mem_init_fake(&mem, arena.ram, RAM_SIZE);
	return 0;
}

static void put16(uint32_t gpa, uint16_t val)
{
	memcpy(arena.ram + gpa, &val, 2);
}

static void put32(uint32_t gpa, uint32_t val)
{
	memcpy(arena.ram + gpa, &val, 4);
}

static void put64(uint32_t gpa, uint64_t val)
{
	memcpy(arena.ram + gpa, &val, 8);
}

static uint32_t avail_gpa(unsigned q)
{
	return queues[q].desc + 16u * queues[q].size;
}

static uint32_t used_gpa(unsigned q)
{
	return (avail_gpa(q) + 6 + 2u * queues[q].size + 3) & ~3u;
}

static void put_desc(unsigned q, uint16_t i, uint64_t addr, uint32_t len, uint16_t flags,
		     uint16_t next)
{
	uint32_t d = queues[q].desc + 16u * i;

	put64(d, addr);
	put32(d + 8, len);
	put16(d + 12, flags);
	put16(d + 14, next);
}

/* Make head available on queue q (the driver's write barrier is program
 * order here: the device runs on this thread). */
static void publish(unsigned q, uint16_t head)
{
	uint32_t a = avail_gpa(q);

	put16(a + 4 + 2 * (drv.avail[q] & (queues[q].size - 1)), head);
	drv.avail[q]++;
	put16(a + 2, drv.avail[q]);
}

/* What a driver does (virtio 1.2, 3.1.1): features, three queues, the event
 * queue filled, DRIVER_OK. */
static void bring_up(void)
{
	memset(drv.avail, 0, sizeof(drv.avail));
	drv.used_seen = 0;
	drv.rx_busy = 0;
	memset(arena.ram, 0, TX_BUF);
	fuzz_negotiate(&v.mmio, drv.event_idx);
	for (unsigned q = 0; q < 3; q++)
		fuzz_queue_setup(&v.mmio, q, queues[q].size, queues[q].desc, avail_gpa(q),
				 used_gpa(q));
	fuzz_driver_ok(&v.mmio);
	for (uint16_t i = 0; i < EVQ_SIZE; i++) {
		put_desc(2, i, EV_BUF + 8u * i, 8, VRING_DESC_F_WRITE, 0);
		publish(2, i);
	}
	virtio_mmio_kick(&v.mmio, 2);
}

static bool healthy(void)
{
	return !(v.mmio.status & VIRTIO_CONFIG_S_NEEDS_RESET);
}

static uint16_t used_idx(unsigned q)
{
	uint16_t idx;

	memcpy(&idx, arena.ram + used_gpa(q) + 2, 2);
	return idx;
}

/* Every popped tx chain came back, unless the device failed (or waits for
 * room for the RSTs it owes: then the chain is not popped yet). */
static void check_tx(void)
{
	const struct vq *q = &v.mmio.queues[1];

	if (q->ready && q->last_avail_idx != q->used_idx && healthy())
		fuzz_broken("a popped tx chain was not given back, yet the device is healthy", NULL);
}

/* The rx buffers the device gave back: a header at least, and no more
 * than the buffer held. */
static void check_rx(void)
{
	uint32_t u = used_gpa(0);
	uint16_t idx = used_idx(0);

	if (drv.poked || !v.mmio.queues[0].ready)
		return;
	while (drv.used_seen != idx) {
		uint32_t id, len;

		memcpy(&id, arena.ram + u + 4 + 8 * (drv.used_seen & (RXQ_SIZE - 1)), 4);
		memcpy(&len, arena.ram + u + 8 + 8 * (drv.used_seen & (RXQ_SIZE - 1)), 4);
		if (id >= RXQ_SIZE || !(drv.rx_busy & 1u << id))
			fuzz_broken("an rx buffer came back that the device was not given", NULL);
		if (len < HDR_LEN || len > drv.rx_size[id])
			fuzz_broken("an rx buffer came back with a length it cannot hold", NULL);
		drv.rx_busy &= (uint16_t)~(1u << id);
		drv.used_seen++;
	}
}

static void kick(unsigned q)
{
	virtio_mmio_kick(&v.mmio, q);
	check_tx();
	check_rx();
}

static uint32_t take_port(struct cursor *c)
{
	uint8_t sel = take8(c);

	if (sel & 0x80)
		return take32(c);
	if (sel & 0x40)
		return 1024u + (sel & 63);
	return VSOCK_HOST_PORT_BASE + (sel & 63);
}

static uint64_t take_cid(struct cursor *c)
{
	uint8_t sel = take8(c);

	return sel == 0 ? VSOCK_GUEST_CID : sel == 1 ? VSOCK_HOST_CID : take64(c);
}

static void tx_packet(struct cursor *c)
{
	uint16_t slot = drv.avail[1] % (TXQ_SIZE / 2), head = (uint16_t)(2 * slot);
	uint32_t buf = TX_BUF + slot * SLOT, len, n;
	uint8_t split = take8(c) % 3, len_mode;
	uint8_t *h = arena.ram + buf;
	const uint8_t *payload;
	size_t got;

	put64(buf, take_cid(c));
	put64(buf + 8, take_cid(c));
	put32(buf + 16, take_port(c));
	put32(buf + 20, take_port(c));
	put16(buf + 30, take8(c) % 8);
	len_mode = take8(c);
	len = len_mode ? take32(c) : 0;
	put16(buf + 28, take8(c) ? take16(c) : VIRTIO_VSOCK_TYPE_STREAM);
	put32(buf + 32, take32(c));
	put32(buf + 36, take32(c));
	put32(buf + 40, take32(c));
	n = take16(c) % (SLOT - HDR_LEN + 1);
	payload = take_bytes(c, n, &got);
	memcpy(h + HDR_LEN, payload, got);
	put32(buf + 24, len_mode ? len : (uint32_t)got);
	if (split == 0 || got == 0) {
		put_desc(1, head, buf, HDR_LEN + (uint32_t)got, 0, 0);
	} else {
		uint32_t cut = split == 1 ? HDR_LEN : 20;

		put_desc(1, head, buf, cut, VRING_DESC_F_NEXT, (uint16_t)(head + 1));
		put_desc(1, (uint16_t)(head + 1), buf + cut, HDR_LEN + (uint32_t)got - cut, 0, 0);
	}
	publish(1, head);
	kick(1);
}

static void rx_post(struct cursor *c)
{
	unsigned n = take8(c) % 17;
	uint16_t size = (uint16_t)(1 + take16(c) % SLOT);

	for (unsigned i = 0; i < n; i++) {
		uint16_t id = 0;

		/* A driver posts only descriptors the device gave back. */
		while (id < RXQ_SIZE && (drv.rx_busy & 1u << id))
			id++;
		if (id == RXQ_SIZE)
			break;
		drv.rx_busy |= (uint16_t)(1u << id);
		put_desc(0, id, RX_BUF + id * SLOT, size, VRING_DESC_F_WRITE, 0);
		drv.rx_size[id] = size;
		publish(0, id);
	}
	kick(0);
}

static void spin(void)
{
	for (int i = 0; i < 1000 && event_loop_poll(&loop, 0) > 0; i++) {
		check_tx();
		check_rx();
	}
}

static void client_connect(struct cursor *c)
{
	char line[32];
	int fd, len;

	len = snprintf(line, sizeof(line), "CONNECT %u\n", take_port(c));
	if (drv.nr_clients == MAX_CLIENTS)
		return;
	fd = virtio_vsock_connect_local(&v);
	if (fd < 0)
		return;
	if (fcntl(fd, F_SETFL, O_NONBLOCK) || write(fd, line, (size_t)len) != len)
		fuzz_die("a new local connection");
	drv.clients[drv.nr_clients++] = fd;
}

static int *client(struct cursor *c)
{
	uint8_t k = take8(c);

	if (drv.nr_clients == 0)
		return NULL;
	return &drv.clients[k % drv.nr_clients];
}

static void client_write(int *fd, const void *p, size_t n)
{
	if (fd && *fd >= 0 && n && send(*fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 &&
	    errno != EAGAIN && errno != EPIPE && errno != ECONNRESET)
		fuzz_die("a client's write");
}

static void client_read(int *fd, size_t n)
{
	static uint8_t buf[65536];

	if (fd && *fd >= 0 && n && recv(*fd, buf, n, MSG_DONTWAIT) < 0 && errno != EAGAIN &&
	    errno != ECONNRESET)
		fuzz_die("a client's read");
}

static void run_script(struct cursor *c)
{
	static const uint8_t pattern[65536];
	for (unsigned n = 0; n < MAX_OPS && c->left; n++) {
		uint8_t op = take8(c) % 10;
		const uint8_t *p;
		uint32_t gpa;
		size_t got;
		int *fd;

		switch (op) {
		case 0: tx_packet(c); break;
		case 1: rx_post(c); break;
		case 2: client_connect(c); break;
		case 3:
			fd = client(c);
			p = take_bytes(c, take8(c) % 80, &got);
			client_write(fd, p, got);
			break;
		case 4:
			fd = client(c);
			client_write(fd, pattern, take16(c));
			break;
		case 5:
			fd = client(c);
			client_read(fd, take16(c));
			break;
		case 6:
			fd = client(c);
			if (take8(c) & 1) {
				if (fd && *fd >= 0)
					shutdown(*fd, SHUT_WR);
			} else if (fd && *fd >= 0) {
				close(*fd);
				*fd = -1;
			}
			break;
		case 7: spin(); break;
		case 8:
			gpa = take32(c) % RAM_SIZE;
			p = take_bytes(c, 1 + (take8(c) & 15), &got);
			for (size_t i = 0; i < got && gpa + i < RAM_SIZE; i++)
				arena.ram[gpa + i] = p[i];
			drv.poked = true;
			break;
		default:
			bring_up();
		}
		if (v.nr_conns > v.max_conns)
			fuzz_broken("more connections than the cap", NULL);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cursor c = { data, size };
	const char *why = "";
	int fd_before = lowest_free_fd();

	memset(&drv, 0, sizeof(drv));
	drv.event_idx = take8(&c) & 1;
	memset(arena.ram, 0, RAM_SIZE);
	if (event_loop_init(&loop) || virtio_vsock_init(&v, NULL, VSOCK_GUEST_CID, &mem, &loop, &why)) {
		fprintf(stderr, "fuzz_vsock: cannot set up virtio-vsock: %s\n", why);
		abort();
	}
	bring_up();
	run_script(&c);
	spin();
	if (verbose)
		virtio_vsock_log_stats(&v);
	virtio_vsock_destroy(&v);
	event_loop_destroy(&loop);
	for (int i = 0; i < drv.nr_clients; i++)
		if (drv.clients[i] >= 0)
			close(drv.clients[i]);
	if (!guards_intact(arena.lo, arena.hi, GUARD_SIZE))
		fuzz_broken("a write landed outside guest RAM (guard canary changed)", NULL);
	if (lowest_free_fd() != fd_before)
		fuzz_broken("a file descriptor was left open", NULL);
	return 0;
}
