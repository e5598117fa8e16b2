/* protocol.h - the framed, versioned protocol between mayfly (host) and its guest agent; one codec for both sides. */
#ifndef MAYFLY_AGENT_PROTOCOL_H
#define MAYFLY_AGENT_PROTOCOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * A connection carries frames both ways. Every frame:
 *
 *   u32 length      bytes that follow this field (PROTO_HEADER_LEN - 4 + payload)
 *   u8  version     PROTO_VERSION
 *   u8  type        enum proto_type
 *   u16 flags       0 (reserved; a receiver ignores unknown flag bits)
 *   u32 id          request id chosen by the host; replies and events carry it
 *   ... payload     type-specific, at most PROTO_MAX_PAYLOAD bytes
 *
 * All integers are little-endian. Strings and byte strings in payloads are
 * u32 length + bytes (no NUL on the wire). docs/protocol.md is the reference.
 */
#define PROTO_VERSION      1
#define PROTO_HEADER_LEN   12                  /* length + version + type + flags + id */
#define PROTO_MAX_PAYLOAD  (256 * 1024)        /* a frame larger than this is malformed */
#define PROTO_CHUNK        (64 * 1024)         /* data chunks are sent at most this big */
#define PROTO_AGENT_PORT   1024                /* the agent's vsock port */
#define PROTO_MAX_ARGS     1024                /* argv and env entries each */
#define PROTO_MAX_PATH     4096
#define PROTO_MAX_GROUPS   64                  /* EXEC's supplementary groups (PROTO_EXEC_ROOT) */
#define PROTO_SEED_MIN     16                  /* FRESHEN's seed, bytes */
#define PROTO_SEED_MAX     64

enum proto_type {
	/* host -> agent: requests */
	PROTO_HELLO = 1,        /* {u32 version}: first frame; agent answers HELLO_OK */
	PROTO_PING = 2,         /* {} -> PONG: health */
	PROTO_EXEC = 3,         /* struct proto_exec -> EXEC_STARTED or ERROR, then
	                         * STDOUT/STDERR chunks and one EXIT */
	PROTO_STDIN = 4,        /* {bytes data} to process `id`; empty data = EOF */
	PROTO_SIGNAL = 5,       /* {u32 signo} to process `id` -> OK or ERROR */
	PROTO_RESIZE = 6,       /* {u16 rows, u16 cols} of process `id`'s PTY -> OK or ERROR */
	PROTO_FILE_WRITE = 7,   /* {str path, u32 mode, u32 flags} -> OK or ERROR; then
	                         * FILE_DATA chunks and FILE_END from the host -> OK or ERROR */
	PROTO_FILE_READ = 8,    /* {str path} -> FILE_DATA chunks, then FILE_END; or ERROR */
	PROTO_FILE_DATA = 9,    /* {bytes data}: a chunk of a file, either direction */
	PROTO_FILE_END = 10,    /* {}: end of a file's data, either direction */
	PROTO_STAT = 11,        /* {str path} -> STAT_RESULT or ERROR */
	PROTO_LIST = 12,        /* {str path} -> LIST_ENTRIES (several, last has more=0) or ERROR */
	PROTO_MKDIR = 13,       /* {str path, u32 mode, u32 parents} -> OK or ERROR */
	PROTO_REMOVE = 14,      /* {str path, u32 recursive} -> OK or ERROR */
	PROTO_SHUTDOWN = 15,    /* {} -> OK, then the agent syncs and powers the VM off */
	PROTO_QUIESCE = 16,     /* {} -> OK: synced, every connection then closed; until
	                         * FRESHEN only HELLO, PING and FRESHEN are served */
	PROTO_FRESHEN = 17,     /* {u64 realtime_ns, bytes seed} -> OK: a restored VM takes
	                         * the host's wall clock and fresh entropy */
	PROTO_NET = 18,         /* {u32 proxy_port, u32 host_port} -> OK: serve the HTTP proxy
	                         * on 127.0.0.1:proxy_port, each client relayed to vsock
	                         * CID 2 host_port; later EXECs get the proxy environment */
	PROTO_RENAME = 19,      /* {str from, str to} -> OK or ERROR: rename(2) */
	PROTO_PORT = 20,        /* {u32 port} -> OK, then the connection carries raw bytes
				 * to and from 127.0.0.1:port in the guest; or ERROR and the
				 * agent closes it */
	PROTO_WATCH = 21,       /* {str path, u32 recursive} -> OK, then WATCH_EVENT frames
				 * until the host closes the connection, or ERROR (the
				 * watch's end: the directory gone, events lost) and the
				 * agent closes it; the host sends nothing after WATCH */
	PROTO_SYSINFO = 22,     /* {str path} -> SYSINFO_RESULT or ERROR: the guest's CPUs,
				 * CPU time, memory, and the file system holding path */

	/* agent -> host: replies and events */
	PROTO_HELLO_OK = 64,    /* {u32 version, str agent_version} */
	PROTO_PONG = 65,        /* {u64 uptime_ms} */
	PROTO_OK = 66,          /* {}: a request succeeded */
	PROTO_ERROR = 67,       /* {u32 errno, str message}: a request failed */
	PROTO_EXEC_STARTED = 68,/* {u32 pid} */
	PROTO_STDOUT = 69,      /* {bytes data} */
	PROTO_STDERR = 70,      /* {bytes data} */
	PROTO_EXIT = 71,        /* {u32 kind, i32 code, u32 signo, u64 duration_us} */
	PROTO_STAT_RESULT = 72, /* struct proto_stat */
	PROTO_LIST_ENTRIES = 73,/* {u32 more, u32 count, count x (str name, u32 type, u32 mode, u64 size)} */
	PROTO_WATCH_EVENT = 74, /* {u32 kind, str name}: name relative to the watched directory */
	PROTO_SYSINFO_RESULT = 75, /* struct proto_sysinfo */
};

/* PROTO_EXEC flags */
#define PROTO_EXEC_PTY    1u    /* run on a pseudo-terminal: stdout carries both streams */
#define PROTO_EXEC_STDIN  2u    /* the host will send STDIN frames; else stdin is /dev/null */
/* The payload goes on with {str root, u32 uid, u32 gid, u32 umask, u32 ngroups,
 * ngroups x u32}: the process is chrooted into root (a container's root file
 * system) and runs as exactly that user. An agent that predates the bit finds
 * bytes left over and refuses the frame: it never runs such a process
 * unchrooted. */
#define PROTO_EXEC_ROOT   4u

/* PROTO_FILE_WRITE flags */
#define PROTO_WRITE_CREATE 1u   /* create if missing */
#define PROTO_WRITE_TRUNC  2u   /* truncate if present */
#define PROTO_WRITE_APPEND 4u
/* Written to a new temporary file beside the path (mode exactly), renamed
 * over it once FILE_END's fsync succeeds, removed if the transfer ends in
 * any other way: the path holds the old file or the whole new one, never
 * a part. CREATE, TRUNC and APPEND are then ignored. */
#define PROTO_WRITE_REPLACE 8u

/* PROTO_EXIT kinds */
enum proto_exit_kind {
	PROTO_EXIT_CODE = 0,    /* exited: code holds the status */
	PROTO_EXIT_SIGNAL = 1,  /* killed by signo */
	PROTO_EXIT_TIMEOUT = 2, /* the wall-clock timeout ran out; killed by signo (SIGKILL) */
};

/* WATCH_EVENT kinds (E2B's EventType numbers) */
enum proto_watch_kind {
	PROTO_WATCH_CREATE = 1, PROTO_WATCH_WRITE = 2, PROTO_WATCH_REMOVE = 3,
	PROTO_WATCH_RENAME = 4, PROTO_WATCH_CHMOD = 5,
};

/* File types in STAT_RESULT and LIST_ENTRIES */
enum proto_file_type {
	PROTO_FT_OTHER = 0, PROTO_FT_FILE = 1, PROTO_FT_DIR = 2, PROTO_FT_SYMLINK = 3,
};

/* A decoded frame header plus a view of its payload (points into the buffer
 * it was decoded from). */
struct proto_frame {
	uint8_t version;
	uint8_t type;
	uint16_t flags;
	uint32_t id;
	const uint8_t *payload;
	uint32_t payload_len;
};

/* Decode the frame at the start of buf[0..len). Returns the frame's total
 * size (> 0) with *f filled, 0 when more bytes are needed, or a negative
 * errno when the bytes can never be a valid frame; the receiver then closes
 * the connection:
 *   -EPROTO           the length field is below PROTO_HEADER_LEN - 4 or above
 *                     PROTO_HEADER_LEN - 4 + PROTO_MAX_PAYLOAD (checked as soon
 *                     as its 4 bytes are in, before waiting for the rest)
 *   -EPROTONOSUPPORT  a whole frame of another version; *f is filled (payload
 *                     included), so the receiver can first answer ERROR with
 *                     the frame's id.
 * Unknown types are not an error here. */
int proto_frame_decode(const uint8_t *buf, size_t len, struct proto_frame *f);

/* A bounded writer for building a frame: proto_begin writes the header,
 * the put_* helpers append payload fields, proto_end fixes the length.
 * Any overflow of `cap` or of PROTO_MAX_PAYLOAD sets `error` and later
 * calls do nothing; proto_end then returns -EMSGSIZE. */
struct proto_writer {
	uint8_t *buf;
	size_t cap;
	size_t len;
	bool error;
};
void proto_begin(struct proto_writer *w, uint8_t *buf, size_t cap, uint8_t type, uint32_t id);
void proto_put_u16(struct proto_writer *w, uint16_t v);
void proto_put_u32(struct proto_writer *w, uint32_t v);
void proto_put_u64(struct proto_writer *w, uint64_t v);
void proto_put_bytes(struct proto_writer *w, const void *data, uint32_t len);   /* u32 len + bytes */
void proto_put_str(struct proto_writer *w, const char *s);                     /* as bytes */
/* Returns the frame's total length, or -EMSGSIZE. */
int proto_end(struct proto_writer *w);

/* A bounded reader over a payload: get_* fail (return false, set error)
 * when the payload is too short; strings are copied NUL-terminated into
 * caller buffers and refused when longer than the buffer or holding a NUL. */
struct proto_reader {
	const uint8_t *p;
	uint32_t len;
	uint32_t pos;
	bool error;
};
void proto_reader_init(struct proto_reader *r, const struct proto_frame *f);
bool proto_get_u16(struct proto_reader *r, uint16_t *v);
bool proto_get_u32(struct proto_reader *r, uint32_t *v);
bool proto_get_u64(struct proto_reader *r, uint64_t *v);
/* A view of a byte string inside the payload (no copy). */
bool proto_get_bytes(struct proto_reader *r, const uint8_t **data, uint32_t *len);
bool proto_get_str(struct proto_reader *r, char *out, size_t cap);
/* True when the whole payload was consumed without error (trailing bytes
 * are an error: a frame means exactly one thing). */
bool proto_done(const struct proto_reader *r);

/* PROTO_EXEC, decoded. Strings point into `strings`, owned by the struct. */
struct proto_exec {
	uint32_t flags;              /* PROTO_EXEC_* */
	uint32_t timeout_ms;         /* 0 = none */
	uint16_t rows, cols;         /* PTY size when PROTO_EXEC_PTY */
	char cwd[PROTO_MAX_PATH];    /* "" = the agent's default (/root) */
	uint32_t argc, envc;         /* argc >= 1 */
	char **argv;                 /* argc entries + NULL */
	char **envp;                 /* envc entries "K=V" + NULL */
	char *strings;               /* one allocation behind argv/envp */
	/* With PROTO_EXEC_ROOT only (else root "" and the rest 0): */
	char root[PROTO_MAX_PATH];   /* canonical absolute path (proto_path_canonical) */
	uint32_t uid, gid;           /* not (uint32_t)-1: setuid's "unchanged" */
	uint32_t umask;              /* 0 to 0777 */
	uint32_t ngroups;            /* 0 to PROTO_MAX_GROUPS */
	uint32_t groups[PROTO_MAX_GROUPS];   /* the supplementary groups, exactly */
};
/* Encode: {u32 flags, u32 timeout_ms, u16 rows, u16 cols, str cwd,
 *          u32 argc, argc x str, u32 envc, envc x str}, and with
 *          PROTO_EXEC_ROOT in flags {str root, u32 uid, u32 gid, u32 umask,
 *          u32 ngroups, ngroups x u32}.
 * w->buf and w->cap name the buffer; the frame is built from w->buf on (a
 * frame already begun there is rebuilt). Reads flags, timeout_ms, rows, cols,
 * cwd, argc, argv, envc, envp (not strings), and the root fields with
 * PROTO_EXEC_ROOT. Returns the frame's total length, or -EMSGSIZE, or
 * -EINVAL for root fields the decoder would refuse (proto_exec_root_valid).
 * proto_stat_encode is used the same way (the length or -EMSGSIZE). */
int proto_exec_encode(struct proto_writer *w, uint32_t id, const struct proto_exec *e);
/* Decode and validate (f->type PROTO_EXEC, argc 1..PROTO_MAX_ARGS, envc <=
 * PROTO_MAX_ARGS, each env entry "K=V" with a non-empty K, cwd shorter than
 * PROTO_MAX_PATH, no NUL inside a string, with PROTO_EXEC_ROOT the root
 * fields as proto_exec_root_valid says, no trailing bytes). 0, -EPROTO, or
 * -ENOMEM. On success the caller owns e->strings: proto_exec_free. On failure
 * nothing is left allocated. */
int proto_exec_decode(const struct proto_frame *f, struct proto_exec *e);
void proto_exec_free(struct proto_exec *e);
/* True when path is absolute and canonical, shorter than PROTO_MAX_PATH:
 * "/", or "/" followed by components separated by single '/', none of them
 * empty, "." or "..", and no '/' at the end. */
bool proto_path_canonical(const char *path);
/* True when e's root fields are what PROTO_EXEC_ROOT allows: root canonical
 * (proto_path_canonical), uid and gid (and each group) not (uint32_t)-1,
 * umask at most 0777, ngroups at most PROTO_MAX_GROUPS. */
bool proto_exec_root_valid(const struct proto_exec *e);

/* PROTO_STAT_RESULT */
struct proto_stat {
	uint32_t type;               /* enum proto_file_type */
	uint32_t mode;               /* permission bits */
	uint64_t size;
	int64_t mtime_ns;
};
/* {u32 type, u32 mode, u64 size, i64 mtime_ns}. encode: the frame's total
 * length or -EMSGSIZE; decode: 0, or -EPROTO (not a STAT_RESULT, short,
 * trailing bytes). */
int proto_stat_encode(struct proto_writer *w, uint32_t id, const struct proto_stat *st);
int proto_stat_decode(const struct proto_frame *f, struct proto_stat *st);

/* PROTO_SYSINFO_RESULT: the guest's own figures, as envd reports them. */
#define PROTO_MAX_CPUS 4096
struct proto_sysinfo {
	uint32_t cpus;               /* online, 1..PROTO_MAX_CPUS */
	uint64_t cpu_busy, cpu_total;   /* /proc/stat's cpu line since boot, in ticks:
				      * all of it, and all but idle and iowait */
	uint64_t mem_total, mem_available, mem_cached;   /* bytes: /proc/meminfo's
				      * MemTotal, MemAvailable, Cached */
	uint64_t disk_total, disk_free;   /* bytes: statvfs's f_blocks and f_bavail in
				      * f_frsize units */
};
/* {u32 cpus, u64 cpu_busy, u64 cpu_total, u64 mem_total, u64 mem_available,
 * u64 mem_cached, u64 disk_total, u64 disk_free}. encode: the frame's
 * total length or -EMSGSIZE; decode: 0, or -EPROTO (not a SYSINFO_RESULT,
 * short, trailing bytes, or figures that cannot be: cpus outside
 * 1..PROTO_MAX_CPUS, a part larger than its whole). */
int proto_sysinfo_encode(struct proto_writer *w, uint32_t id, const struct proto_sysinfo *s);
int proto_sysinfo_decode(const struct proto_frame *f, struct proto_sysinfo *s);

/* A human name for a frame type, for logs ("EXEC", "unknown"). */
const char *proto_type_name(uint8_t type);

#endif
