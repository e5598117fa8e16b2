/* calls.h - mayfly serve's tool calls into a sandbox through its guest agent: exec (streamed as JSON lines), signals, files; each approved and audited. */
#ifndef MAYFLY_SERVE_CALLS_H
#define MAYFLY_SERVE_CALLS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "serve/api.h"
#include "serve/service.h"
#include "protocol.h"

/* The outcome of a call that is not a stream: an HTTP status; for an
 * error a message and a code for the JSON error ("refused" for the
 * approver's no). */
struct call_result {
	int status;
	const char *code;
	char error[400];
};

struct exec_stream;

/* Start req (moved into the stream: the caller's copy is emptied) on sb,
 * which the caller holds (service_get); the stream puts it back when it
 * ends. 0 and *out: read the events with calls_exec_read, then
 * calls_exec_end. Else r says why (403 refused, 500 audit or start
 * failure) and sb is still the caller's to put. */
int calls_exec_start(struct service *svc, struct sandbox *sb, const char *caller,
		     struct api_exec *req, struct exec_stream **out, struct call_result *r);
/* The exec's id (for POST .../exec/ID/signal). */
uint64_t calls_exec_id(const struct exec_stream *s);
/* The reader's HTTP connection, client_fd: once its client has gone
 * (hung up), a read waiting for a silent command gives up. */
void calls_exec_watch(struct exec_stream *s, int client_fd);
/* The descriptor calls_exec_read reads: readable when it would not block. */
int calls_exec_fd(const struct exec_stream *s);
/* Up to len bytes of the JSON lines: >0, 0 at the end, -errno
 * (-ECONNRESET: the watched client went). Blocks. */
ssize_t calls_exec_read(struct exec_stream *s, char *buf, size_t len);
/* The reader is gone: a command still running is killed; waits for the
 * call to end (its audit record written), puts the sandbox back. */
void calls_exec_end(struct exec_stream *s);

/* The running exec of sb whose command is the guest's pid: its id, 0 none. */
uint64_t calls_exec_of_pid(struct service *svc, struct sandbox *sb, uint32_t pid);
/* E2B's envd, on the running exec exec_id of sb (its api_exec's
 * stdin_open, pty): input for its stdin (all of it, or 503 while the
 * command has not read what came before), the end of its stdin, its
 * pty's new size. 0, or an HTTP status with r: 404 no such exec, 409 its
 * stdin closed or no pty. */
int calls_exec_input(struct service *svc, struct sandbox *sb, uint64_t exec_id, const void *data,
		     size_t len, struct call_result *r);
int calls_exec_close_stdin(struct service *svc, struct sandbox *sb, uint64_t exec_id,
			   struct call_result *r);
int calls_exec_resize(struct service *svc, struct sandbox *sb, uint64_t exec_id, uint16_t rows,
		      uint16_t cols, struct call_result *r);

/* sb's running execs whose pid is known: [{"pid": N, "exec": ID, "argv": [...]}]. */
json_t *calls_exec_list(struct service *svc, struct sandbox *sb);

/* Pass signo to the running exec exec_id of sb. 0 (202), 404 none. */
int calls_signal(struct service *svc, struct sandbox *sb, uint64_t exec_id, int signo,
		 struct call_result *r);

/* Files: path checked by the caller (api_check_path). Each fills r. */

/* PUT, streamed: calls_put_begin (approved, the agent's replacing write
 * open: 0 and *out; else r says why), calls_put_data with each piece of
 * the body (0 or -errno: more than the service's max_file is -EFBIG),
 * then calls_put_end with 0 to commit (204), or the -errno that stopped
 * it (the guest's file is then as before). The end records the call and
 * frees the stream; sb is the caller's to put. */
struct file_put;
int calls_put_begin(struct service *svc, struct sandbox *sb, const char *caller, const char *path,
		    uint32_t mode, struct file_put **out, struct call_result *r);
int calls_put_data(struct file_put *p, const void *data, size_t n);
void calls_put_end(struct file_put *p, int rc, struct call_result *r);

/* GET, streamed: calls_get_begin (approved, stat'd, the read started:
 * 0, *out and *size, UINT64_MAX when unknown; else r says why: 404, 409
 * a directory, 413 larger than max_file), then calls_get_read (> 0
 * bytes, 0 at the end, -errno: the body is cut short) and calls_get_end
 * (the call recorded, the stream freed). The stream holds sb (a hold of
 * its own, beside the caller's) until its end. */
struct file_get;
int calls_get_begin(struct service *svc, struct sandbox *sb, const char *caller, const char *path,
		    struct file_get **out, uint64_t *size, struct call_result *r);
ssize_t calls_get_read(struct file_get *g, void *buf, size_t len);
void calls_get_end(struct file_get *g);

/* dir/name into out (cap bytes), one '/' between them (dir "/" too): 0,
 * or -ENAMETOOLONG when it does not fit. A listing's entry's path. */
int calls_child_path(char *out, size_t cap, const char *dir, const char *name);

/* *out: a JSON array on 200, each entry {name, type, mode, size}; with
 * mtime also its modification time (Unix seconds, a stat each, the first
 * CALLS_LIST_STAT_MAX entries; an entry gone meanwhile has none). */
#define CALLS_LIST_STAT_MAX 10000
void calls_file_list(struct service *svc, struct sandbox *sb, const char *caller, const char *path,
		     bool mtime, json_t **out, struct call_result *r);
/* The guest's figures now (a file call, tool read_file, op metrics: gated
 * and recorded as a read of "/"): *si, and in *cpu_pct the share of all
 * its CPUs busy (0..100) since this sandbox's previous metrics call, or
 * since its guest booted for the first. */
void calls_metrics(struct service *svc, struct sandbox *sb, const char *caller,
		   struct proto_sysinfo *si, double *cpu_pct, struct call_result *r);
void calls_file_stat(struct service *svc, struct sandbox *sb, const char *caller, const char *path,
		     json_t **out, struct call_result *r);
void calls_mkdir(struct service *svc, struct sandbox *sb, const char *caller, const char *path,
		 bool parents, struct call_result *r);
/* rename(2) in the guest, approved and audited as write_file "rename"
 * (the call names "to" too). */
void calls_rename(struct service *svc, struct sandbox *sb, const char *caller, const char *from,
		  const char *to, struct call_result *r);
void calls_remove(struct service *svc, struct sandbox *sb, const char *caller, const char *path,
		  bool recursive, struct call_result *r);

/* A published port's TCP connection: recorded as tool "port" {port}
 * (never put to the approver: it reads nothing of the guest's by
 * itself), then the agent's PORT. 0 and *out; else r says why: 502
 * "port_closed" nothing listens there, 503 "busy" the agent relays as
 * many as it takes, or the agent's failure. sb is the caller's; the
 * connection does not hold it (a delete or pause ends it). */
struct port_conn;
int calls_port_open(struct service *svc, struct sandbox *sb, const char *caller, unsigned port,
		    struct port_conn **out, struct call_result *r);
/* Its socket: the guest server's bytes, raw. */
int calls_port_fd(const struct port_conn *pc);
/* What the guest's server sent with the agent's OK (to be passed on
 * before anything read from the socket): *len bytes, then none. */
const uint8_t *calls_port_early(struct port_conn *pc, size_t *len);
/* The connection ends: closed, recorded with its bytes each way and err
 * (NULL: it went well). */
void calls_port_close(struct port_conn *pc, uint64_t bytes_in, uint64_t bytes_out,
		      const char *err);

/* A directory's events (E2B's WatchDir and watchers), on a guest agent
 * connection of its own: approved and recorded like a file call (tool
 * "watch", with the events it gave); it holds no sandbox. 0, or an HTTP
 * status in r: 404 no such directory, 400 not a directory, 503 the agent
 * relays and watches as much as it takes. */
struct watch_conn;
int calls_watch_open(struct service *svc, struct sandbox *sb, const char *caller, const char *path,
		     bool recursive, struct watch_conn **out, struct call_result *r);
/* The next event: agent_watch_next's (agent_client/watch.h). */
int calls_watch_next(struct watch_conn *w, int timeout_ms, int client_fd, unsigned *kind,
		     char *name, size_t cap, char *why, size_t whylen);
/* Closed and recorded; err: why it ended (NULL: its client ended it). */
void calls_watch_close(struct watch_conn *w, const char *err);

#endif
