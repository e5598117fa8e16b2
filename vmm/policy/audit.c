/* audit.c - the audit log: hash-chained JSON lines, appended whole under an flock and synced, and their verification. */
#include "policy/audit.h"
#include "agent_client/events.h"
#include "lib/base64.h"
#include "lib/clock.h"
#include "lib/image_id.h"
#include "lib/json_shape.h"
#include "lib/sock_io.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HEX_LEN      (2 * AUDIT_HASH_LEN)
#define TAIL_CHUNK   (64u << 10)
#define SELF_KEY     ",\"line_sha256\":\""
/* A line ends with SELF_KEY, 64 hex digits, "}" and the newline. */
#define SELF_TAIL    (sizeof(SELF_KEY) - 1 + HEX_LEN + 3)

static void hex(const uint8_t h[AUDIT_HASH_LEN], char out[HEX_LEN + 1])
{
	image_hash_hex(h, out);
}

static void sha256(const void *data, size_t len, uint8_t out[AUDIT_HASH_LEN])
{
	SHA2_CTX ctx;

	SHA256Init(&ctx);
	SHA256Update(&ctx, data, len);
	SHA256Final(out, &ctx);
}

void audit_sha256_hex(const void *data, size_t len, char out[HEX_LEN + 1])
{
	uint8_t h[AUDIT_HASH_LEN];

	sha256(data, len, h);
	hex(h, out);
}

json_t *audit_bytes(const void *s, size_t len)
{
	bool cut;
	char *b64;
	json_t *j;

	if (utf8_valid_prefix(s, len, &cut) == len)
		return json_stringn(s, len);
	b64 = malloc(BASE64_LEN(len) + 1);
	if (!b64)
		return NULL;
	base64_encode(s, len, b64);
	j = json_pack("{s:s}", "base64", b64);
	free(b64);
	return j;
}

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return rc;
}

static int pread_all(int fd, void *buf, size_t len, uint64_t off)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = pread(fd, p, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;   /* the file shrank under us */
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

/* The seq of a line (without its newline), or 0 when it is not a record. */
static uint64_t line_seq(const char *line, size_t len)
{
	json_t *j = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
	json_t *seq = json_object_get(j, "seq");
	uint64_t n = json_is_integer(seq) && json_integer_value(seq) > 0 ?
		     (uint64_t)json_integer_value(seq) : 0;

	json_decref(j);
	return n;
}

/* Learn the chain's end from the file: the last line's hash and seq. */
static int read_tail(struct audit_log *log, uint64_t size, char *err, size_t errlen)
{
	uint64_t start = size - 1, floor = size > AUDIT_LINE_MAX ? size - AUDIT_LINE_MAX : 0;
	uint8_t chunk[TAIL_CHUNK];
	char *line;
	int rc;

	memset(log->head, 0, sizeof(log->head));
	log->seq = 0;
	if (size == 0)
		return 0;
	rc = pread_all(log->fd, chunk, 1, size - 1);
	if (rc)
		return fail(err, errlen, rc, "cannot read the audit log: %s", strerror(-rc));
	if (chunk[0] != '\n')
		return fail(err, errlen, -EBADMSG, "the audit log's last line is cut short "
			    "(see mayfly audit verify): refusing to append to it");
	/* Back from the last newline to the one before it (or the start). */
	while (start > floor) {
		size_t n = start - floor < TAIL_CHUNK ? (size_t)(start - floor) : TAIL_CHUNK;
		bool found = false;

		rc = pread_all(log->fd, chunk, n, start - n);
		if (rc)
			return fail(err, errlen, rc, "cannot read the audit log: %s", strerror(-rc));
		for (size_t i = n; i-- > 0;) {
			if (chunk[i] == '\n') {
				start = start - n + i + 1;
				found = true;
				break;
			}
		}
		if (found)
			break;
		start -= n;
	}
	if (size - start > AUDIT_LINE_MAX)
		return fail(err, errlen, -EBADMSG, "the audit log's last line is longer than %u bytes",
			    AUDIT_LINE_MAX);
	line = malloc(size - start);
	if (!line)
		return fail(err, errlen, -ENOMEM, "out of memory");
	rc = pread_all(log->fd, line, size - start, start);
	if (!rc) {
		sha256(line, size - start, log->head);
		log->seq = line_seq(line, size - start - 1);
		if (!log->seq)
			rc = -EBADMSG;
	}
	free(line);
	if (rc)
		return fail(err, errlen, rc, "the audit log's last line is not a record (see mayfly "
			    "audit verify): %s", rc == -EBADMSG ? "refusing to append to it" : strerror(-rc));
	return 0;
}

/* Wait (bounded) for the lock other mayfly processes take to append. */
static int lock_log(int fd)
{
	for (int i = 0; i < AUDIT_LOCK_WAIT_S * 100; i++) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return 0;
		if (errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		usleep(10000);
	}
	return -ETIMEDOUT;
}

int audit_open(struct audit_log *log, const char *path, char *err, size_t errlen)
{
	struct stat st;
	char *copy;
	int rc, dfd;

	memset(log, 0, sizeof(*log));
	log->remote = -1;
	/* O_NONBLOCK: a FIFO in its place must fail below, not hang us here. */
	log->fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0600);
	if (log->fd < 0)
		return fail(err, errlen, -errno, "cannot open the audit log '%s': %s", path,
			    strerror(errno));
	/* O_APPEND on a write-only fd; reading the tail needs another. */
	close(log->fd);
	log->fd = open(path, O_RDWR | O_APPEND | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (log->fd < 0 || fstat(log->fd, &st) < 0) {
		rc = -errno;
		if (log->fd >= 0)
			close(log->fd);
		log->fd = -1;
		return fail(err, errlen, rc, "cannot open the audit log '%s': %s", path, strerror(-rc));
	}
	if (!S_ISREG(st.st_mode)) {
		close(log->fd);
		log->fd = -1;
		return fail(err, errlen, -EINVAL, "the audit log '%s' is not a regular file", path);
	}
	pthread_mutex_init(&log->lock, NULL);
	/* A new log's name must survive a crash as much as its lines do. */
	copy = strdup(path);
	if (copy && (dfd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		fsync(dfd);
		close(dfd);
	}
	free(copy);
	rc = lock_log(log->fd);
	if (!rc) {
		rc = fstat(log->fd, &st) < 0 ? -errno : read_tail(log, (uint64_t)st.st_size, err, errlen);
		log->end = (uint64_t)st.st_size;
		log->known = !rc;
		flock(log->fd, LOCK_UN);
	} else {
		fail(err, errlen, rc, "cannot lock the audit log '%s': %s", path, strerror(-rc));
	}
	if (rc) {
		audit_close(log);
		return rc;
	}
	return 0;
}

/* The line for rec after the chain's end: "{v,seq,prev,time,...rec,line_sha256}\n". */
static char *build_line(struct audit_log *log, json_t *rec, size_t *len)
{
	char prev[HEX_LEN + 1], when[40], selfhex[HEX_LEN + 1];
	uint8_t self[AUDIT_HASH_LEN];
	struct timespec now;
	struct tm tm;
	json_t *obj;
	char *body, *line = NULL;
	size_t n;

	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	n = strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(when + n, sizeof(when) - n, ".%03ldZ", now.tv_nsec / 1000000);
	hex(log->head, prev);
	obj = json_pack("{s:i, s:I, s:s, s:s}", "v", AUDIT_VERSION, "seq", (json_int_t)(log->seq + 1),
			"prev", prev, "time", when);
	if (!obj || json_object_update_missing(obj, rec)) {
		json_decref(obj);
		return NULL;
	}
	body = json_dumps(obj, JSON_COMPACT);
	json_decref(obj);
	if (!body)
		return NULL;
	n = strlen(body) - 1;   /* without the closing brace */
	sha256(body, n, self);
	hex(self, selfhex);
	if (asprintf(&line, "%.*s%s%s\"}\n", (int)n, body, SELF_KEY, selfhex) < 0)
		line = NULL;
	free(body);
	*len = line ? strlen(line) : 0;
	return line;
}

static int append_locked(struct audit_log *log, json_t *rec, char *err, size_t errlen)
{
	struct stat st;
	size_t len = 0;
	char *line;
	ssize_t w;
	int rc;

	if (fstat(log->fd, &st) < 0)
		return fail(err, errlen, -errno, "cannot stat the audit log: %s", strerror(errno));
	/* Another process appended since (or someone truncated): read its end. */
	if (!log->known || (uint64_t)st.st_size != log->end) {
		rc = read_tail(log, (uint64_t)st.st_size, err, errlen);
		if (rc)
			return rc;
		log->end = (uint64_t)st.st_size;
		log->known = true;
	}
	line = build_line(log, rec, &len);
	if (!line)
		return fail(err, errlen, -ENOMEM, "cannot build an audit record: out of memory");
	if (len > AUDIT_LINE_MAX) {
		free(line);
		return fail(err, errlen, -E2BIG, "an audit record of %zu bytes is over the %u-byte limit",
			    len, AUDIT_LINE_MAX);
	}
	do
		w = write(log->fd, line, len);
	while (w < 0 && errno == EINTR);
	rc = w == (ssize_t)len ? 0 : w < 0 ? -errno : -ENOSPC;
	if (rc) {
		/* Never leave half a line: the chain would end in a torn record. */
		if (w > 0 && ftruncate(log->fd, (off_t)log->end) < 0)
			log->known = false;
	} else if (fdatasync(log->fd) < 0) {
		rc = -errno;
	}
	if (!rc) {
		sha256(line, len, log->head);
		log->seq++;
		log->end += len;
	}
	free(line);
	if (rc)
		return fail(err, errlen, rc, "cannot write the audit log: %s", strerror(-rc));
	return 0;
}

/* The writer's answer to one record. */
struct audit_reply {
	int32_t rc;
	char err[200];
};

/* One record to the writer (audit_writer.c) and its answer. The lock held. */
static int remote_append(struct audit_log *log, json_t *rec, char *err, size_t errlen)
{
	/* Its own lock wait, then a grace. */
	uint64_t deadline = clock_now_ns() + (AUDIT_LOCK_WAIT_S + 5) * 1000000000ULL;
	char *text = json_dumps(rec, JSON_COMPACT);
	struct audit_reply r;
	uint32_t len = text ? (uint32_t)strlen(text) : 0;
	int rc;

	if (!text || strlen(text) >= AUDIT_LINE_MAX) {
		free(text);
		return fail(err, errlen, text ? -E2BIG : -ENOMEM, "cannot record the call: %s",
			    text ? "the record is too large" : "out of memory");
	}
	rc = sock_move_all(log->remote, &len, sizeof(len), true, deadline);
	if (!rc)
		rc = sock_move_all(log->remote, text, len, true, deadline);
	if (!rc)
		rc = sock_move_all(log->remote, &r, sizeof(r), false, deadline);
	free(text);
	if (rc)
		return fail(err, errlen, -EIO, "the audit log's writer %s",
			    rc == -ETIMEDOUT ? "did not answer in time" : "is gone");
	r.err[sizeof(r.err) - 1] = '\0';
	if (r.rc > 0 || r.rc < -4095)
		return fail(err, errlen, -EIO, "the audit log's writer answered out of range");
	if (r.rc)
		return fail(err, errlen, r.rc, "%s", r.err);
	return 0;
}

int audit_serve_one(struct audit_log *log, int fd)
{
	struct audit_reply r = { 0 };
	uint32_t len;
	json_t *rec = NULL;
	char *text;
	int rc;

	rc = sock_move_all(fd, &len, sizeof(len), false, 0);
	if (rc)
		return rc;
	/* Never more than a sender may send: past that, the stream is not ours. */
	text = len && len < AUDIT_LINE_MAX ? malloc(len) : NULL;
	if (!text || sock_move_all(fd, text, len, false, 0)) {
		free(text);
		return -EPROTO;
	}
	if (json_shape_within(text, len, AUDIT_RECORD_VALUES, AUDIT_RECORD_DEPTH))
		rec = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
	free(text);
	if (!json_is_object(rec))
		r.rc = fail(r.err, sizeof(r.err), -EINVAL, "a record that is not a JSON object of at "
			    "most %u values was refused", AUDIT_RECORD_VALUES);
	else
		r.rc = audit_append(log, rec, r.err, sizeof(r.err));
	json_decref(rec);
	return sock_move_all(fd, &r, sizeof(r), true, 0);
}

int audit_append(struct audit_log *log, json_t *rec, char *err, size_t errlen)
{
	int rc;

	pthread_mutex_lock(&log->lock);
	if (log->remote >= 0 && !log->failed) {
		rc = remote_append(log, rec, err, errlen);
		log->failed = rc != 0;
	} else if (log->failed || log->fd < 0) {
		rc = fail(err, errlen, -EIO, "the audit log failed earlier: no more calls are recorded");
	} else {
		rc = lock_log(log->fd);
		if (rc) {
			fail(err, errlen, rc, "cannot lock the audit log: %s", strerror(-rc));
		} else {
			rc = append_locked(log, rec, err, errlen);
			flock(log->fd, LOCK_UN);
		}
		log->failed = rc != 0;
	}
	pthread_mutex_unlock(&log->lock);
	return rc;
}

void audit_close(struct audit_log *log)
{
	int status;

	if (log->fd < 0 && log->remote < 0)
		return;
	if (log->fd >= 0)
		close(log->fd);
	log->fd = -1;
	if (log->remote >= 0) {
		/* The writer ends at the end of file, once no process holds it. */
		close(log->remote);
		log->remote = -1;
		if (log->owner == getpid())
			while (waitpid(log->writer, &status, 0) < 0 && errno == EINTR)
				;
	}
	pthread_mutex_destroy(&log->lock);
}

/* One line (len bytes, the newline included) against the chain so far. */
static bool check_line(const char *line, size_t len, uint64_t seq, const char *prev, char *why,
		       size_t whylen)
{
	char self[HEX_LEN + 1];
	const char *tail;
	json_error_t jerr;
	json_t *j, *v;
	bool ok = false;

	if (len < SELF_TAIL + 2 || line[0] != '{') {
		snprintf(why, whylen, "not an audit record");
		return false;
	}
	tail = line + len - SELF_TAIL;
	if (memcmp(tail, SELF_KEY, sizeof(SELF_KEY) - 1) ||
	    memcmp(tail + sizeof(SELF_KEY) - 1 + HEX_LEN, "\"}\n", 3)) {
		snprintf(why, whylen, "its line_sha256 is not its last member");
		return false;
	}
	audit_sha256_hex(line, (size_t)(tail - line), self);
	if (memcmp(tail + sizeof(SELF_KEY) - 1, self, HEX_LEN)) {
		snprintf(why, whylen, "its content does not match its line_sha256 (edited)");
		return false;
	}
	j = json_loadb(line, len - 1, JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_object(j)) {
		snprintf(why, whylen, "not a JSON object: %s", j ? "another type" : jerr.text);
	} else if (json_integer_value(json_object_get(j, "v")) != AUDIT_VERSION ||
		   !json_is_integer(json_object_get(j, "v"))) {
		snprintf(why, whylen, "not a version %d record", AUDIT_VERSION);
	} else if (!json_is_integer(v = json_object_get(j, "seq")) ||
		   (uint64_t)json_integer_value(v) != seq) {
		snprintf(why, whylen, "seq is %lld, want %llu (a line removed, inserted or moved)",
			 json_is_integer(v) ? (long long)json_integer_value(v) : -1LL,
			 (unsigned long long)seq);
	} else if (!json_is_string(v = json_object_get(j, "prev")) || strcmp(json_string_value(v), prev)) {
		snprintf(why, whylen, "prev does not match the line before it (a line before it "
			 "edited, removed, inserted or moved)");
	} else if (!json_is_string(json_object_get(j, "time"))) {
		snprintf(why, whylen, "no time");
	} else {
		ok = true;
	}
	json_decref(j);
	return ok;
}

int audit_verify(const char *path, const char *want_head, struct audit_verdict *v)
{
	bool head_seen = !want_head;
	size_t cap = AUDIT_LINE_MAX + 1, have = 0;
	char prev[HEX_LEN + 1];
	char *buf;
	int fd, rc = 0;
	bool eof = false;

	memset(v, 0, sizeof(*v));
	memset(prev, '0', HEX_LEN);
	prev[HEX_LEN] = '\0';
	snprintf(v->head, sizeof(v->head), "%s", prev);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	buf = malloc(cap);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	while (!rc) {
		char *nl = memchr(buf, '\n', have);
		size_t len;

		if (!nl && !eof && have < cap) {
			ssize_t n = read(fd, buf + have, cap - have);

			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				rc = -errno;
				break;
			}
			eof = n == 0;
			have += (size_t)n;
			continue;
		}
		if (!nl) {
			if (have) {
				v->bad_line = v->records + 1;
				if (have >= cap)
					snprintf(v->why, sizeof(v->why), "longer than %u bytes",
						 AUDIT_LINE_MAX);
				else
					snprintf(v->why, sizeof(v->why), "cut short (no newline at its end)");
				rc = 1;
			}
			break;
		}
		len = (size_t)(nl - buf) + 1;
		if (!check_line(buf, len, v->records + 1, prev, v->why, sizeof(v->why))) {
			v->bad_line = v->records + 1;
			rc = 1;
			break;
		}
		audit_sha256_hex(buf, len, prev);
		snprintf(v->head, sizeof(v->head), "%s", prev);
		if (want_head && !strcmp(prev, want_head))
			head_seen = true;
		v->records++;
		memmove(buf, buf + len, have - len);
		have -= len;
	}
	free(buf);
	close(fd);
	if (!rc && !head_seen) {
		v->bad_line = v->records + 1;
		snprintf(v->why, sizeof(v->why), "no line has the head %.12s...: lines were removed "
			 "from the end", want_head);
		rc = 1;
	}
	return rc;
}
