/* audit.h - the audit log: one JSON line per tool call, each carrying the sha256 of the line before it, appended under a lock and synced. */
#ifndef MAYFLY_POLICY_AUDIT_H
#define MAYFLY_POLICY_AUDIT_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define AUDIT_VERSION     1
/* A record longer than this is never written, and verify refuses it. */
#define AUDIT_LINE_MAX    (4u << 20)
/* How long an append waits for another process holding the log's lock. */
#define AUDIT_LOCK_WAIT_S 10
#define AUDIT_HASH_LEN    32

/*
 * The format (docs/audit.md). Each record is one line: a JSON object
 * whose first members are
 *   "v": 1, "seq": N (1, 2, ... in file order),
 *   "prev": the sha256 (hex) of the whole previous line, its newline
 *           included; 64 zeros for the first line,
 *   "time": UTC, RFC 3339 with milliseconds,
 * then the caller's members, and last "line_sha256": the sha256 (hex) of
 * the line's bytes before the ',"line_sha256"' member. So an edited,
 * removed, inserted or reordered line, or a line cut short, breaks the
 * chain at a place verify can name. Lines cut off the end at a line
 * boundary, or a tail rewritten with fresh hashes, can only be seen
 * against a head hash kept elsewhere (verify prints the head).
 */
struct audit_log {
	pthread_mutex_t lock;      /* one append at a time within the process */
	int fd;                    /* O_APPEND; -1 when closed */
	bool failed;               /* an append failed: the log refuses the rest */
	/* The chain's end as this process last saw it: reused while the
	 * file's size says nobody else appended since. */
	bool known;
	uint64_t end;              /* file size after our last append */
	uint64_t seq;              /* the last line's seq */
	uint8_t head[AUDIT_HASH_LEN];   /* sha256 of the last line */
	/* Given to a writer process (audit_writer.h): fd is closed here, and
	 * each append is a request over this socket; -1 when not. */
	int remote;
	pid_t writer, owner;       /* the writer; the process that forked it */
};

/* Open (create, mode 0600) the log at path for appending. Several
 * processes may share one log: each append takes an exclusive flock for
 * the time of one write and sync. An existing log that does not end with
 * a newline (a torn or edited last line) is refused. 0, or -errno with
 * one line in err. */
int audit_open(struct audit_log *log, const char *path, char *err, size_t errlen)
	__attribute__((warn_unused_result));

/* Append one record built from rec (an object; its members follow the
 * chain's own, and it is not consumed); with a writer, through it. The line is written with one
 * write(2) and fdatasync'd before this returns: a call the caller saw
 * the result of is on disk. After a failure the log is marked failed and
 * every later append fails too (fail closed: the caller must not go on
 * as if audited). Thread-safe. 0, or -errno
 * with one line in err. */
int audit_append(struct audit_log *log, json_t *rec, char *err, size_t errlen);

/* Close the log; with a writer, the socket, and the process that forked
 * the writer waits for its end. */
void audit_close(struct audit_log *log);

/* A record sent to a writer holds at most this many JSON values, this
 * deep: the writer parses what a compromised sender sends. */
#define AUDIT_RECORD_VALUES (1u << 16)
#define AUDIT_RECORD_DEPTH  32

/* The writer's side (audit_writer.c): read one record from fd, append it
 * to log (one held locally), answer. 0; -EPIPE at the end of file;
 * -EPROTO for a stream not of records (the writer then ends). */
int audit_serve_one(struct audit_log *log, int fd);

/* A string for a record: s as a JSON string when it is valid UTF-8 (a
 * NUL inside is kept), else {"base64": ...} of its bytes. NULL when out
 * of memory. */
json_t *audit_bytes(const void *s, size_t len);

/* The sha256 of data in hex (65 bytes with the NUL). */
void audit_sha256_hex(const void *data, size_t len, char out[2 * AUDIT_HASH_LEN + 1]);

struct audit_verdict {
	uint64_t records;          /* lines that checked out */
	char head[2 * AUDIT_HASH_LEN + 1];   /* sha256 of the last good line */
	uint64_t bad_line;         /* 1-based: the first line that does not; 0 if none */
	char why[200];
};

/* Check the whole log at path: every line whole, a JSON object of this
 * version, seq counting from 1, prev the hash of the line before and
 * line_sha256 its own; and when want_head (hex) is not NULL, one of its
 * lines hashes to it (else lines were cut off the end: bad_line is then
 * the line after the last). 0 when intact (v->records, v->head), 1 with
 * v->bad_line and v->why at the first line that is not, or -errno when
 * the file cannot be read. */
int audit_verify(const char *path, const char *want_head, struct audit_verdict *v);

#endif
