/* ctl_msg.h - the control socket's messages (mayfly pause and fork to a booted VM): fixed layouts, checked on both ends, file descriptors alongside. */
#ifndef MAYFLY_CONTROL_CTL_MSG_H
#define MAYFLY_CONTROL_CTL_MSG_H

#include <stddef.h>
#include <stdint.h>

/* boot --vsock PATH listens on PATH.ctl (SOCK_SEQPACKET, mode 0600): host
 * side only, the guest never reaches it. */
#define CTL_SUFFIX     ".ctl"
#define CTL_MAGIC      "MFLYCTL2"     /* 8 bytes; a new layout gets a new one */
#define CTL_MAGIC_LEN  8
#define CTL_NFDS       3              /* memory, disk-vda, state */
#define CTL_DIR_MAX    512            /* the snapshot's name, for the VM's log line */
#define CTL_DISK_ID_MAX 20            /* DISK_INSERT's serial (virtio-blk's 20 bytes) */
#define CTL_TEXT_MAX   240            /* a reply's reason */

enum ctl_op {
	CTL_OP_PAUSE = 1,   /* save, then end the VM once the client commits */
	CTL_OP_FORK = 2,    /* save, the VM goes on */
	CTL_OP_COMMIT = 3,  /* after a pause's OK: the snapshot is in place, end */
	CTL_OP_ABORT = 4,   /* after a pause's OK: it is not, go on running */
	CTL_OP_READY = 5,   /* wait until the guest agent is freshened: OK, else FAILED */
	CTL_OP_SUSPEND = 6, /* the vCPUs and the I/O thread stop where they are: OK */
	CTL_OP_RESUME = 7,  /* they go on: OK (also when not suspended) */
	CTL_OP_STOP = 8,    /* end the VM now, exit 0 (its owner is done with it): OK */
	CTL_OP_DISK_INSERT = 9,   /* the one descriptor's image into spare slot `slot`,
				   * serial `dir` ("": the image's own): OK, else REFUSED */
	CTL_OP_DISK_USAGE = 10,   /* OK: overlay_bytes what the disks' overlays hold,
				   * CTL_FLAG_DISK_FULL when one holds its --disk-quota */
	CTL_OP_MAX = CTL_OP_DISK_USAGE,
};

enum ctl_status {
	CTL_ST_OK = 0,
	CTL_ST_BUSY = 1,        /* a call in flight: try again after it */
	CTL_ST_REFUSED = 2,     /* this VM cannot be saved (it goes on): text says why */
	CTL_ST_FAILED = 3,      /* the save failed (the VM goes on): text says why */
	CTL_ST_BAD_REQUEST = 4, /* a malformed message */
	CTL_ST_MAX = CTL_ST_BAD_REQUEST,
};

#define CTL_FLAG_OVERLAY 1u   /* reply: disk-vda was written (else it stays empty) */
#define CTL_FLAG_DISK_FULL 2u /* DISK_USAGE's reply: the guest's writes to new blocks fail */

/* mayfly pause / fork exit codes (docs/exit-codes.md). */
enum ctl_exit {
	CTL_EXIT_OK = 0,
	CTL_EXIT_INTERNAL = 1,   /* the save or the files failed, a timeout */
	CTL_EXIT_USAGE = 2,
	CTL_EXIT_NO_VM = 3,      /* no control socket there, or not a mayfly one */
	CTL_EXIT_EXISTS = 4,     /* --out exists and is not an empty directory */
	CTL_EXIT_BUSY = 5,       /* a call in flight: retry after it */
	CTL_EXIT_REFUSED = 6,    /* this VM cannot be saved; it goes on running */
};

/* Magic, op u32, dir length u32, dir bytes (zero padded), slot u32. */
#define CTL_REQUEST_LEN (CTL_MAGIC_LEN + 8 + CTL_DIR_MAX + 4)
/* Magic, status u32, flags u32, five u64 (memory bytes, overlay bytes,
 * state bytes, guest paused us, total us), text length u32, text. */
#define CTL_REPLY_LEN (CTL_MAGIC_LEN + 8 + 5 * 8 + 4 + CTL_TEXT_MAX)

struct ctl_request {
	uint32_t op;
	char dir[CTL_DIR_MAX + 1];   /* a save's snapshot name; DISK_INSERT's serial */
	uint32_t slot;               /* DISK_INSERT only (else 0) */
};

struct ctl_reply {
	uint32_t status;
	uint32_t flags;
	uint64_t memory_bytes, overlay_bytes, state_bytes;
	uint64_t paused_us, total_us;
	char text[CTL_TEXT_MAX + 1];
};

/* Into buf (CTL_REQUEST_LEN bytes); dir is cut at CTL_DIR_MAX. */
void ctl_request_encode(const struct ctl_request *r, uint8_t *buf);

/* A request as received with nfds descriptors: exactly CTL_REQUEST_LEN
 * bytes, the magic, a known op, CTL_NFDS descriptors for a pause or fork,
 * one for DISK_INSERT and none otherwise, a dir length within bounds
 * (CTL_DISK_ID_MAX for DISK_INSERT), printable, NUL-free, zero padding,
 * and slot 0 but for DISK_INSERT. 0 or -EBADMSG with *why. */
int ctl_request_decode(struct ctl_request *r, const uint8_t *buf, size_t len, int nfds,
		       const char **why);

void ctl_reply_encode(const struct ctl_reply *r, uint8_t *buf);
/* 0, or -EBADMSG with *why (another length, magic, status, flags, a text
 * too long). */
int ctl_reply_decode(struct ctl_reply *r, const uint8_t *buf, size_t len, const char **why);

/* PATH.ctl for the --vsock PATH. 0 or -ENAMETOOLONG (a Unix socket path
 * has 107 bytes). */
int ctl_socket_path(const char *vsock_path, char *out, size_t len);

/* The address of the socket file path. 0 or -ENAMETOOLONG. */
struct sockaddr_un;
int ctl_sockaddr(const char *path, struct sockaddr_un *a);

/* One message (SOCK_SEQPACKET) with up to CTL_NFDS descriptors. 0 or
 * -errno (never SIGPIPE). */
int ctl_send(int sock, const void *buf, size_t len, const int *fds, int nfds);

/* Wait up to timeout_ms (or until cancel_fd, if >= 0, is readable:
 * -ECANCELED) for one message into buf (len bytes): its length, 0 at the
 * peer's end, or -errno (-ETIMEDOUT; -EMSGSIZE for a longer message;
 * -EBADMSG for more than max_fds descriptors or cut control data, with
 * every descriptor that came closed). *nfds descriptors (close-on-exec)
 * go to fds. */
int ctl_recv(int sock, void *buf, size_t len, int *fds, int max_fds, int *nfds, int timeout_ms,
	     int cancel_fd);

#endif
