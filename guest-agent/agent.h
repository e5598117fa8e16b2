/* agent.h - the guest agent's state (connections, processes, file transfers) and its modules' contracts. */
#ifndef MAYFLY_AGENT_H
#define MAYFLY_AGENT_H

#include <dirent.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "protocol.h"

#define AGENT_VERSION      "mayfly-agent 0.1.0"
#define AGENT_MAX_CONNS    16                 /* more are accepted and closed at once */
#define AGENT_MAX_PROCS    64                 /* live processes per connection */
#define AGENT_MAX_XFERS    16                 /* open file transfers and listings per connection */
#define AGENT_FRAME_MAX    (PROTO_HEADER_LEN + PROTO_MAX_PAYLOAD)
#define AGENT_MAX_HANDOVERS 64                /* PORT relays and WATCH watchers at once (each a process) */
#define AGENT_WATCH_DIRS   4096               /* directories a recursive WATCH follows */
#define AGENT_PORT_CONNECT_MS 2000            /* a PORT's connect to 127.0.0.1, at most */
/* Output above this pauses everything that produces output for the connection
 * (child pipes, file reads, listings, new requests) until the host reads. */
#define AGENT_OUT_CAP      (1024 * 1024)
/* The buffer's hard size: the cap, what producers that checked the cap
 * just below it may add (one data frame and one reply), and the small events
 * no pause holds back: per process one EXEC_STARTED or exec ERROR (< 600
 * bytes) and one EXIT. Memory per connection is bounded by this, the input
 * buffer (one frame) and AGENT_STDIN_CAP + one frame of stdin. */
#define AGENT_OUT_HARD     (AGENT_OUT_CAP + AGENT_FRAME_MAX + AGENT_MAX_PROCS * 2 * 1024)
/* Stdin the connection's processes have not read yet; above this the
 * connection's input pauses. */
#define AGENT_STDIN_CAP    (256 * 1024)
#define AGENT_FLUSH_MS     1000               /* a closing connection's last chance to drain */
#define AGENT_TIMEOUT_DRAIN_MS 200            /* after a timeout kill: output left to escapees */
#define AGENT_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define AGENT_MAX_DEFAULT_ENV 128            /* ENV lines of an image's run defaults */

/* An image's run defaults (--defaults FILE, rootfs/oci-import's oci-config): ENV
 * entries every EXEC starts from (its own win), WORKDIR its default cwd, USER the
 * uid and gid it runs as. Pointers into defaults_load's buffer. */
struct agent_defaults {
	char *env[AGENT_MAX_DEFAULT_ENV];
	unsigned nenv;
	const char *workdir;        /* NULL: the agent's home */
	bool has_user;
	uid_t uid;
	gid_t gid;
};

struct agent;
struct conn;

/* One process started by EXEC. Its fds are -1 once closed. */
struct proc {
	struct proc *next;
	struct conn *conn;          /* NULL once orphaned (its connection closed) */
	uint32_t id;
	pid_t pid;                  /* also its process group and session */
	int status_fd;              /* CLOEXEC pipe: EOF = execve worked, data = errno */
	int out_fd, err_fd;         /* stdout and stderr pipes; the PTY master in PTY mode */
	int in_fd;                  /* stdin pipe, or a dup of the PTY master; -1 = none */
	bool pty;
	bool started;               /* EXEC_STARTED sent: output may flow */
	bool exec_failed;           /* ERROR sent instead: no EXIT */
	bool reaped, timed_out, done;
	bool in_eof;                /* close in_fd once the buffer is written */
	int wstatus;
	uint8_t *inbuf;             /* stdin not yet written: [in_off, in_len) */
	size_t in_len, in_off, in_cap;
	uint64_t start_us, end_us;
	uint64_t deadline_us;       /* start_us + the timeout; 0 = none */
	uint64_t drain_deadline_us; /* after a timeout: stop waiting for output EOF */
};

enum xfer_kind { XFER_WRITE, XFER_READ, XFER_LIST };

/* One file transfer or directory listing in progress. */
struct xfer {
	struct xfer *next;
	enum xfer_kind kind;
	uint32_t id;
	int fd;
	DIR *dir;
	int err;                    /* XFER_WRITE: first write error, reported at FILE_END */
	char *tmp, *final;          /* PROTO_WRITE_REPLACE: tmp renamed to final at FILE_END */
	bool done;
};

struct conn {
	struct conn *next;
	struct agent *a;
	int fd;
	bool hello;                 /* HELLO seen: other requests allowed */
	bool closing;               /* flushing its output, then closed; reads nothing */
	bool dead;                  /* closed: freed at the end of the loop iteration */
	uint64_t close_deadline_ms;
	uint8_t *in;                /* AGENT_FRAME_MAX bytes: one whole frame always fits */
	size_t in_len;
	uint8_t *out;
	size_t out_off, out_len, out_size;
	struct proc *procs;
	unsigned nprocs;
	struct xfer *xfers;
	unsigned nxfers;
	/* PORT or WATCH accepted: the connection goes to a child once the
	 * frame is consumed (handover_start). */
	enum { HANDOVER_NONE, HANDOVER_PORT, HANDOVER_WATCH } handover;
	uint32_t handover_id;       /* the request's id, for its OK or ERROR */
	unsigned port;              /* PORT's */
	char *watch_path;           /* WATCH's (malloc'd, absolute) */
	bool watch_recursive;
};

struct agent {
	int listen_fd;              /* -1 in --fd mode */
	int sig_fd;
	bool single;                /* --fd: exit when that connection ends */
	bool allow_shutdown;        /* SHUTDOWN powers the machine off (PID 1 implies it) */
	bool shutting_down;
	bool quiescing;             /* QUIESCE: close every connection, keep listening */
	bool stale;                 /* quiesced (a snapshot's copy): FRESHEN before any work */
	bool owns_guest;            /* vsock mode: FRESHEN sets the clock and the pool */
	bool verbose;
	const char *home;           /* default cwd and base of relative paths */
	struct agent_defaults defaults;
	uint64_t start_ms;
	struct conn *conns;
	unsigned nconns;
	struct proc *orphans;       /* killed, waiting to be reaped */
	pid_t net_pid;              /* NET: the proxy relay's process, 0: none */
	unsigned net_port;          /* NET: the proxy's port on 127.0.0.1, 0: no network */
	const char *net_unix;       /* --net-unix PATH: relay there, not to vsock (host tests) */
	pid_t handover_pids[AGENT_MAX_HANDOVERS];   /* PORT's and WATCH's children, 0: a free entry */
};

/* defaults.c */
/* Read the run defaults in FILE (lines "ENV K=V", "WORKDIR /dir", "USER u[:g]";
 * names looked up in ROOT/etc/passwd and ROOT/etc/group). 0; or -errno when
 * nothing could be read; or -EINVAL (a bad line, a USER not found), -E2BIG (too
 * many ENV) with every good line kept. Once per process (one static buffer). */
int defaults_load(struct agent_defaults *d, const char *path, const char *root);

/* util.c */
uint64_t now_ms(void);
uint64_t now_us(void);
void agent_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Kill a process group, or the process alone while its setsid() is pending. */
void kill_group(pid_t pid, int sig);
/* In a relay child just forked: it dies with the agent, has the default
 * signal mask, ignores SIGPIPE, and keeps nothing of the agent's but fd,
 * which becomes fd 3 (else _exit(1)). */
void relay_child_init(int fd);
/* enum proto_file_type of an st_mode. */
uint32_t file_type_of(mode_t m);

/* conn.c */
/* A connection for an accepted socket (made non-blocking here); NULL on ENOMEM
 * (fd closed). */
struct conn *conn_new(struct agent *a, int fd);
/* Read what the socket holds and handle every whole frame. */
void conn_on_readable(struct conn *c);
/* Write buffered output; resumes paused producers as it drains. */
void conn_on_writable(struct conn *c);
/* Handle frames left in the input buffer by an earlier pause. */
void conn_process(struct conn *c);
/* True while output or stdin backlog is over its cap: produce nothing more. */
bool conn_paused(const struct conn *c);
/* Stop serving: kill and orphan its processes, end its transfers; with flush,
 * keep the socket until the output drains or AGENT_FLUSH_MS pass. */
void conn_close(struct conn *c, bool flush);
/* Free a dead connection (the loop calls this between iterations). */
void conn_free(struct conn *c);

/* Build one frame at the end of c's output buffer: conn_begin, proto_put_*,
 * conn_end. conn_end returns 0, or -EMSGSIZE (the connection is then closed:
 * the caps above make that a bug, never a host's doing). */
void conn_begin(struct conn *c, struct proto_writer *w, uint8_t type, uint32_t id);
int conn_end(struct conn *c, struct proto_writer *w);
/* Frames with no payload (OK, FILE_END, PONG aside) and with one byte string. */
int conn_send_empty(struct conn *c, uint8_t type, uint32_t id);
int conn_send_data(struct conn *c, uint8_t type, uint32_t id, const void *data, uint32_t len);
/* ERROR {err (positive errno), message}. */
int conn_send_error(struct conn *c, uint32_t id, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* exec.c: request handlers return 0 (answered, maybe with ERROR) or -EPROTO
 * (malformed payload: the connection is closed). */
int exec_request(struct conn *c, const struct proto_frame *f);
int exec_stdin(struct conn *c, const struct proto_frame *f);
int exec_signal(struct conn *c, const struct proto_frame *f);
int exec_resize(struct conn *c, const struct proto_frame *f);
void proc_on_status(struct proc *p);
void proc_on_output(struct proc *p, int fd);
void proc_on_stdin_writable(struct proc *p);
/* Reap every exited child (after SIGCHLD) and send the EXITs now due. */
void procs_reap(struct agent *a);
/* Timeouts and drains that are due; lowers *timeout_ms to the next deadline. */
void procs_tick(struct agent *a, int *timeout_ms);
/* SIGKILL every process of c and move them to the orphans. */
void procs_detach(struct conn *c);
/* Free finished processes of c (done) and reaped orphans. */
void procs_sweep(struct agent *a, struct conn *c);

/* spawn.c */
struct proto_exec;
/* Fork and exec e in a new session. Fills p's pid and fds; 0 or -errno
 * (the agent's own failure: pipes, fork). execve's failure arrives later on
 * p->status_fd as {u32 stage, i32 errno}. */
int spawn_proc(struct agent *a, struct proc *p, const struct proto_exec *e);
/* What a {stage, errno} from status_fd means ("execve", "chdir", ...). */
const char *spawn_stage_name(uint32_t stage);

/* files.c */
/* A REPLACE write's temporary file is ".NAME" REPLACE_TAG "XXXXXX" beside NAME. */
#define REPLACE_TAG ".mayfly-"
/* True for such a name (a base name): a watch does not report it. */
bool file_is_replace_temp(const char *name);
int file_write_request(struct conn *c, const struct proto_frame *f);
int file_data_request(struct conn *c, const struct proto_frame *f);
int file_end_request(struct conn *c, const struct proto_frame *f);
int file_read_request(struct conn *c, const struct proto_frame *f);
int list_request(struct conn *c, const struct proto_frame *f);
/* One step of each read and listing while c is not paused; true when more
 * remains that the loop can do at once (c not paused). */
bool xfers_pump(struct conn *c);
/* End every transfer of c (a write is left as far as it got); safe anywhere. */
void xfers_end_all(struct conn *c);
/* Free c's ended transfers: only between loop iterations. */
void xfers_sweep(struct conn *c);

/* fsops.c */
int stat_request(struct conn *c, const struct proto_frame *f);
int mkdir_request(struct conn *c, const struct proto_frame *f);
int remove_request(struct conn *c, const struct proto_frame *f);
int rename_request(struct conn *c, const struct proto_frame *f);

/* sysinfo.c: SYSINFO, the guest's figures for getMetrics. */
int sysinfo_request(struct conn *c, const struct proto_frame *f);

/* freshen.c: QUIESCE (sync, then every connection closes) and FRESHEN
 * (the host's wall clock and seed, after a restore). */
int quiesce_request(struct conn *c, const struct proto_frame *f);
int freshen_request(struct conn *c, const struct proto_frame *f);

/* netrelay.c */
/* NET {u32 proxy_port, u32 host_port}: (re)start the proxy relay child. */
int net_request(struct conn *c, const struct proto_frame *f);
/* Kill the relay (QUIESCE: a snapshot holds no host connection; the end). */
void net_stop(struct agent *a);
/* With the proxy on, add its HTTP_PROXY, HTTPS_PROXY, ALL_PROXY (and
 * lowercase) and NO_PROXY to envp[n...] unless e sets them: at most 8
 * entries. The new count. */
int net_env(const struct agent *a, char **envp, int n, const struct proto_exec *e);
/* lo up, best effort: the guest's init leaves it down. */
void net_lo_up(void);
/* True, with an ERROR EAGAIN sent, when f must wait for FRESHEN. */
bool freshen_needed(struct conn *c, const struct proto_frame *f);

/* handover.c: a connection given to a child of its own (PORT, WATCH) */
/* 0 when c may be handed over (no processes or transfers on it, a free
 * child slot); else the ERROR is sent (named after `what`) and -EBUSY. */
int handover_check(struct conn *c, uint32_t id, const char *what);
/* Hand c over to a child running what c->handover names, answering
 * c->handover_id; rest is what the host sent after the frame. c is closed
 * here. */
void handover_start(struct conn *c, const uint8_t *rest, size_t len);
/* A child reaped: true when it was a handover's. */
bool handover_reaped(struct agent *a, pid_t pid);
/* Kill every handover child (QUIESCE: a snapshot holds no host connection). */
void handover_stop(struct agent *a);
/* Write all of p to fd (blocking): false when the host is gone. */
bool handover_write(int fd, const uint8_t *p, size_t len);

/* ports.c */
/* PORT {u32 port}: checked, then the connection marked for handover. */
int port_request(struct conn *c, const struct proto_frame *f);
/* The child: connects to 127.0.0.1:c->port, answers OK (or ERROR, and
 * ends) and then relays bytes both ways; rest first to the guest. */
void __attribute__((noreturn)) port_main(int hfd, unsigned port, uint32_t id,
					 const uint8_t *rest, size_t rest_len);

/* watch.c */
/* WATCH {str path, u32 recursive}: checked, then the connection marked
 * for handover. */
int watch_request(struct conn *c, const struct proto_frame *f);
/* The child: inotify on path (and, recursive, every directory under it,
 * AGENT_WATCH_DIRS at most), OK (or ERROR), then a WATCH_EVENT per event
 * until the host closes the connection or the watch ends (an ERROR). */
void __attribute__((noreturn)) watch_main(int hfd, const char *path, bool recursive, uint32_t id);

/* loop.c */
/* Serve until SHUTDOWN (returns 1), a --fd connection's end or SIGTERM (0),
 * or a fatal poll error (-errno). */
int loop_run(struct agent *a);

#endif
