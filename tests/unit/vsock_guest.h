/* vsock_guest.h - the vsock tests' fake guest driver (over fake RAM) and host clients (real Unix sockets), shared by test_vsock_*.c. */
#ifndef MAYFLY_TEST_VSOCK_GUEST_H
#define MAYFLY_TEST_VSOCK_GUEST_H

#define RAM_SIZE (8u << 20)
#include "virtio_driver.h"   /* its vd_arena is vsock_guest.c's: check it with vg_check_guards */
#include "virtio/vsock.h"

#include <sys/socket.h>
#include <sys/types.h>

/* The packet header as virtio 1.2, 5.10.6 lays it out: 44 bytes, little-endian. */
#define H_SRC_CID     0
#define H_DST_CID     8
#define H_SRC_PORT    16
#define H_DST_PORT    20
#define H_LEN         24
#define H_TYPE        28
#define H_OP          30
#define H_FLAGS       32
#define H_BUF_ALLOC   36
#define H_FWD_CNT     40
#define HDR           44

#define OP_REQUEST        1
#define OP_RESPONSE       2
#define OP_RST            3
#define OP_SHUTDOWN       4
#define OP_RW             5
#define OP_CREDIT_UPDATE  6
#define OP_CREDIT_REQUEST 7
#define SHUT_RCV_F        1
#define SHUT_SEND_F       2
#define TYPE_STREAM       1
#define TYPE_SEQPACKET    2
#define HOST_CID          2
#define GUEST_CID         3
#define DEVICE_ID_VSOCK   19
#define FEAT_SEQPACKET    (1ULL << 1)

#define DEV_BUF           (256 * 1024)    /* the buf_alloc the device advertises */
#define MAX_PAYLOAD       (64 * 1024)
#define PORT_BASE         (1u << 30)

/* Guest memory: rings, a wrapping tx area, one 64 KiB slot per rx descriptor. */
#define RXQ_GPA    0x10000
#define TXQ_GPA    0x14000
#define EVQ_GPA    0x18000
#define RXQ_SIZE   64
#define TX_BASE    0x100000
#define TX_END     0x300000
#define RX_BASE    0x300000
#define RX_SLOT    0x10100
#define RX_FILL    0xcc           /* rx buffers are pre-filled: writes past used len show */
#define RX_DEFAULT (4096 + HDR)

/* A packet as the guest sees it. */
struct pkt {
	uint64_t src_cid, dst_cid;
	uint32_t src_port, dst_port, len;
	uint16_t type, op;
	uint32_t flags, buf_alloc, fwd_cnt;
	uint8_t data[MAX_PAYLOAD];
};

/* The guest's end of one connection, tracking credit both ways. */
struct gconn {
	uint32_t gport, hport;
	uint32_t buf_alloc;      /* what the guest advertises */
	uint32_t fwd_cnt;        /* payload bytes the guest consumed */
	uint32_t peer_buf_alloc, peer_fwd_cnt;   /* the device's window, last heard */
	uint32_t tx_cnt;         /* payload bytes the guest sent */
};

extern struct vdrv d;
extern struct virtio_vsock *vs;
extern struct event_loop loop;
extern struct vdq rxq, txq, evq;
extern char dir[200], sock_path[256];
extern struct pkt p;      /* scratch: 64 KiB is too much for every test's stack */

/* ---- fixture ---- */

/* A device listening on sock_path in a fresh temporary directory, over
 * fresh fake RAM, its sockets in `loop` (which the test runs itself). */
void vsock_setup(void);
void vsock_teardown(void);

/* The same with no socket file (path NULL): only local connections. The
 * temporary directory is still made, to show nothing appears in it. */
void vsock_setup_nopath(void);

/* Fake RAM untouched outside its bounds. */
void vg_check_guards(void);

/* Run the I/O thread's part on this thread until nothing fires. A loop
 * that never settles is a device that spins. Returns the batches run. */
int spin(void);

/* Run the loop for `ms` milliseconds (timers). */
void spin_ms(int ms);

/* ---- the guest driver ---- */

/* Negotiate `features` and bring the three queues up (rx: RXQ_SIZE). */
void guest_init(uint64_t features);

/* The rx slot of descriptor `head`. */
uint64_t rx_gpa(uint32_t head);

/* Post n rx buffers of `size` bytes, one descriptor each, and kick. */
void rx_post(int n, uint32_t size);

/* Decode a 44-byte header from guest memory. */
void pkt_decode(const uint8_t *h, struct pkt *out);

/* The next packet the device put in an rx buffer, if any. Checks the
 * framing: a host-to-guest stream packet, used len = header + payload, and
 * not a byte written past it. */
bool rx_get(struct pkt *out);
void expect_rx(struct pkt *out, uint16_t op);
void expect_no_rx(void);

/* Room in the wrapping tx area. */
uint64_t tx_alloc(uint32_t len);

void put_hdr(uint8_t *h, uint64_t src_cid, uint64_t dst_cid, uint32_t src_port,
	     uint32_t dst_port, uint32_t len, uint16_t type, uint16_t op, uint32_t flags,
	     uint32_t buf_alloc, uint32_t fwd_cnt);

/* Send one tx chain and kick; the device must give it back, unwritten. */
void tx_segs(const struct vseg *s, int n);

/* A packet with every header field chosen: header and payload in separate
 * descriptors; `avail` payload bytes really there (may differ from len). */
void tx_raw(uint64_t src_cid, uint64_t dst_cid, uint32_t src_port, uint32_t dst_port,
	    uint16_t type, uint16_t op, uint32_t flags, uint32_t buf_alloc, uint32_t fwd_cnt,
	    const void *data, uint32_t len, uint32_t avail);

/* A header-only packet from the guest, posted on tx but not kicked, and
 * not waited for: the device may keep it a while. Returns its head. */
uint16_t tx_post_hdr(uint32_t src_port, uint32_t dst_port, uint16_t op, uint32_t flags);

/* A well-formed packet on connection gc. */
void gsend(struct gconn *gc, uint16_t op, uint32_t flags, const void *data, uint32_t len);

/* A packet for the guest on gc: learn the device's window, count payload. */
void gtake(struct gconn *gc, const struct pkt *q);

/* The guest's REQUEST on gc is answered by RST. */
void guest_conn_refused(struct gconn *gc);

/* Collect RW packets on gc until `len` bytes came, compare with want. */
void guest_expect(struct gconn *gc, const void *want, uint32_t len);

/* ---- the host side ---- */

int client_open_at(const char *path);
int client_open(void);
void client_send(int fd, const void *buf, size_t len);
void client_say(int fd, const char *s);

/* Up to len bytes, waiting at most ms: the count, 0 on EOF, -1 on nothing. */
ssize_t client_recv(int fd, void *buf, size_t len, int ms);

/* Exactly len bytes, spinning the loop between tries. */
void client_expect(int fd, const void *want, size_t len);

/* The device closed its end: EOF (after any data, which is skipped). */
void expect_closed(int fd);

/* The device keeps the socket open and sends nothing. */
void expect_open(int fd);

/* A host listener at PATH_port, for guest-initiated connections. */
int host_listen(uint32_t port);

/* On client socket fd, say `line`: the guest gets a REQUEST for `port`
 * from a host port, and gc is its end (the guest has not answered). */
void host_request(int fd, const char *line, struct gconn *gc, uint32_t port);

/* On client socket fd, "CONNECT <port>\n" and the guest accepts: the
 * client reads "OK <host port>\n". */
void host_handshake(int fd, struct gconn *gc, uint32_t port);

/* Host client connects to guest port `port` and the guest accepts.
 * Returns the client's fd. */
int host_conn(struct gconn *gc, uint32_t port);

/* Guest connects from gport to host port hport, where lfd listens:
 * RESPONSE for the guest, and the accepted host socket is returned. */
int guest_conn(struct gconn *gc, uint32_t gport, uint32_t hport, int lfd);

#endif
