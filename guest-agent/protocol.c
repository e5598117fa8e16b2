/* protocol.c - the frame codec shared by mayfly and its guest agent: pure, bounded, hostile-input safe. */
#include "protocol.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The length field counts the header bytes after itself plus the payload. */
#define LEN_MIN ((uint32_t)(PROTO_HEADER_LEN - 4))
#define LEN_MAX ((uint32_t)(PROTO_HEADER_LEN - 4 + PROTO_MAX_PAYLOAD))

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void wr32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

int proto_frame_decode(const uint8_t *buf, size_t len, struct proto_frame *f)
{
	uint32_t flen;

	if (len < 4)
		return 0;
	flen = rd32(buf);
	/* Refuse a bad length before waiting for bytes that may never come. */
	if (flen < LEN_MIN || flen > LEN_MAX)
		return -EPROTO;
	if (len - 4 < flen)
		return 0;
	f->version = buf[4];
	f->type = buf[5];
	f->flags = rd16(buf + 6);
	f->id = rd32(buf + 8);
	f->payload = buf + PROTO_HEADER_LEN;
	f->payload_len = flen - LEN_MIN;
	if (f->version != PROTO_VERSION)
		return -EPROTONOSUPPORT;
	return (int)(flen + 4);
}

/* Reserve n more bytes, or poison the writer: a frame is built whole or not at all. */
static uint8_t *wr_reserve(struct proto_writer *w, size_t n)
{
	uint8_t *p;

	if (w->error)
		return NULL;
	if (n > w->cap - w->len || w->len + n - PROTO_HEADER_LEN > PROTO_MAX_PAYLOAD) {
		w->error = true;
		return NULL;
	}
	p = w->buf + w->len;
	w->len += n;
	return p;
}

void proto_begin(struct proto_writer *w, uint8_t *buf, size_t cap, uint8_t type, uint32_t id)
{
	w->buf = buf;
	w->cap = cap;
	w->len = 0;
	w->error = !buf || cap < PROTO_HEADER_LEN;
	if (w->error)
		return;
	wr32(buf, 0);        /* fixed by proto_end */
	buf[4] = PROTO_VERSION;
	buf[5] = type;
	buf[6] = buf[7] = 0;
	wr32(buf + 8, id);
	w->len = PROTO_HEADER_LEN;
}

void proto_put_u16(struct proto_writer *w, uint16_t v)
{
	uint8_t *p = wr_reserve(w, 2);

	if (p) {
		p[0] = (uint8_t)v;
		p[1] = (uint8_t)(v >> 8);
	}
}

void proto_put_u32(struct proto_writer *w, uint32_t v)
{
	uint8_t *p = wr_reserve(w, 4);

	if (p)
		wr32(p, v);
}

void proto_put_u64(struct proto_writer *w, uint64_t v)
{
	uint8_t *p = wr_reserve(w, 8);

	if (p) {
		wr32(p, (uint32_t)v);
		wr32(p + 4, (uint32_t)(v >> 32));
	}
}

void proto_put_bytes(struct proto_writer *w, const void *data, uint32_t len)
{
	uint8_t *p;

	if (len > 0 && !data) {
		w->error = true;
		return;
	}
	/* Check the total first so a failed put leaves no half field behind. */
	p = wr_reserve(w, 4 + (size_t)len);
	if (!p)
		return;
	wr32(p, len);
	if (len)
		memcpy(p + 4, data, len);
}

void proto_put_str(struct proto_writer *w, const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n > PROTO_MAX_PAYLOAD) {
		w->error = true;
		return;
	}
	proto_put_bytes(w, s, (uint32_t)n);
}

int proto_end(struct proto_writer *w)
{
	if (w->error || w->len < PROTO_HEADER_LEN)
		return -EMSGSIZE;
	wr32(w->buf, (uint32_t)(w->len - 4));
	return (int)w->len;
}

void proto_reader_init(struct proto_reader *r, const struct proto_frame *f)
{
	r->p = f->payload;
	r->len = f->payload_len;
	r->pos = 0;
	r->error = false;
}

/* A pointer to the next n payload bytes, consumed; NULL (and error) when short. */
static const uint8_t *rd_take(struct proto_reader *r, uint32_t n)
{
	const uint8_t *p;

	if (r->error || n > r->len - r->pos) {
		r->error = true;
		return NULL;
	}
	p = r->p + r->pos;
	r->pos += n;
	return p;
}

bool proto_get_u16(struct proto_reader *r, uint16_t *v)
{
	const uint8_t *p = rd_take(r, 2);

	if (p)
		*v = rd16(p);
	return p != NULL;
}

bool proto_get_u32(struct proto_reader *r, uint32_t *v)
{
	const uint8_t *p = rd_take(r, 4);

	if (p)
		*v = rd32(p);
	return p != NULL;
}

bool proto_get_u64(struct proto_reader *r, uint64_t *v)
{
	const uint8_t *p = rd_take(r, 8);

	if (p)
		*v = (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
	return p != NULL;
}

bool proto_get_bytes(struct proto_reader *r, const uint8_t **data, uint32_t *len)
{
	uint32_t n;
	const uint8_t *p;

	if (!proto_get_u32(r, &n))
		return false;
	p = rd_take(r, n);       /* n is checked against what is left, not added */
	if (!p)
		return false;
	*data = p;
	*len = n;
	return true;
}

bool proto_get_str(struct proto_reader *r, char *out, size_t cap)
{
	const uint8_t *p;
	uint32_t n;

	if (!proto_get_bytes(r, &p, &n))
		return false;
	if (cap == 0 || n > cap - 1 || memchr(p, 0, n)) {
		r->error = true;
		return false;
	}
	memcpy(out, p, n);
	out[n] = '\0';
	return true;
}

bool proto_done(const struct proto_reader *r)
{
	return !r->error && r->pos == r->len;
}

int proto_exec_encode(struct proto_writer *w, uint32_t id, const struct proto_exec *e)
{
	uint32_t i;

	proto_begin(w, w->buf, w->cap, PROTO_EXEC, id);
	proto_put_u32(w, e->flags);
	proto_put_u32(w, e->timeout_ms);
	proto_put_u16(w, e->rows);
	proto_put_u16(w, e->cols);
	proto_put_str(w, e->cwd);
	proto_put_u32(w, e->argc);
	for (i = 0; i < e->argc && !w->error; i++)
		proto_put_str(w, e->argv[i]);
	proto_put_u32(w, e->envc);
	for (i = 0; i < e->envc && !w->error; i++)
		proto_put_str(w, e->envp[i]);
	if (e->flags & PROTO_EXEC_ROOT) {
		if (!proto_exec_root_valid(e))
			return -EINVAL;
		proto_put_str(w, e->root);
		proto_put_u32(w, e->uid);
		proto_put_u32(w, e->gid);
		proto_put_u32(w, e->umask);
		proto_put_u32(w, e->ngroups);
		for (i = 0; i < e->ngroups; i++)
			proto_put_u32(w, e->groups[i]);
	}
	return proto_end(w);
}

bool proto_path_canonical(const char *path)
{
	const char *p = path, *end;
	size_t n;

	if (path[0] != '/' || strnlen(path, PROTO_MAX_PATH) >= PROTO_MAX_PATH)
		return false;
	if (path[1] == '\0')
		return true;
	/* Each component after a '/': not empty (no "//", no '/' at the end),
	 * not "." and not "..". */
	for (p = path + 1;; p = end + 1) {
		end = strchrnul(p, '/');
		n = (size_t)(end - p);
		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		if (*end == '\0')
			return true;
	}
}

bool proto_exec_root_valid(const struct proto_exec *e)
{
	if (!proto_path_canonical(e->root) || e->uid == UINT32_MAX || e->gid == UINT32_MAX ||
	    e->umask > 0777 || e->ngroups > PROTO_MAX_GROUPS)
		return false;
	for (uint32_t i = 0; i < e->ngroups; i++)
		if (e->groups[i] == UINT32_MAX)
			return false;
	return true;
}

/* PROTO_EXEC_ROOT's fields, after the lists: read into e, then checked. */
static bool exec_read_root(struct proto_reader *r, struct proto_exec *e)
{
	if (!proto_get_str(r, e->root, sizeof(e->root)) || !proto_get_u32(r, &e->uid) ||
	    !proto_get_u32(r, &e->gid) || !proto_get_u32(r, &e->umask) ||
	    !proto_get_u32(r, &e->ngroups) || e->ngroups > PROTO_MAX_GROUPS)
		return false;
	for (uint32_t i = 0; i < e->ngroups; i++)
		if (!proto_get_u32(r, &e->groups[i]))
			return false;
	return proto_exec_root_valid(e);
}

/* One string list: count, then count byte strings, each checked for NUL and,
 * for env entries, for a "K=" prefix. Adds each string's size + 1 to *bytes. */
static bool exec_scan_list(struct proto_reader *r, uint32_t min, bool is_env,
			   uint32_t *count, size_t *bytes)
{
	uint32_t n, i, len;
	const uint8_t *s, *eq;

	if (!proto_get_u32(r, &n) || n < min || n > PROTO_MAX_ARGS)
		return false;
	for (i = 0; i < n; i++) {
		if (!proto_get_bytes(r, &s, &len) || memchr(s, 0, len))
			return false;
		if (is_env) {
			eq = memchr(s, '=', len);
			if (!eq || eq == s)
				return false;
		}
		*bytes += (size_t)len + 1;
	}
	*count = n;
	return true;
}

/* Copy one string list (already validated) into ptrs[] and the string area. */
static void exec_copy_list(struct proto_reader *r, char **ptrs, char **area)
{
	uint32_t n = 0, i, len;
	const uint8_t *s;

	proto_get_u32(r, &n);
	for (i = 0; i < n; i++) {
		proto_get_bytes(r, &s, &len);
		memcpy(*area, s, len);
		(*area)[len] = '\0';
		ptrs[i] = *area;
		*area += (size_t)len + 1;
	}
	ptrs[n] = NULL;
}

int proto_exec_decode(const struct proto_frame *f, struct proto_exec *e)
{
	struct proto_reader r;
	struct proto_reader lists;
	size_t bytes = 0, ptrs;
	char *area;

	memset(e, 0, sizeof(*e));
	if (f->type != PROTO_EXEC)
		return -EPROTO;
	proto_reader_init(&r, f);
	if (!proto_get_u32(&r, &e->flags) || !proto_get_u32(&r, &e->timeout_ms) ||
	    !proto_get_u16(&r, &e->rows) || !proto_get_u16(&r, &e->cols) ||
	    !proto_get_str(&r, e->cwd, sizeof(e->cwd)))
		goto err_proto;
	/* Pass 1 validates and sizes; nothing is allocated for a bad frame. Sizes
	 * are bounded by the payload (256 KiB) and 2 x PROTO_MAX_ARGS: no overflow. */
	lists = r;
	if (!exec_scan_list(&r, 1, false, &e->argc, &bytes) ||
	    !exec_scan_list(&r, 0, true, &e->envc, &bytes) ||
	    ((e->flags & PROTO_EXEC_ROOT) && !exec_read_root(&r, e)) || !proto_done(&r))
		goto err_proto;

	ptrs = ((size_t)e->argc + 1 + e->envc + 1) * sizeof(char *);
	e->strings = malloc(ptrs + bytes);
	if (!e->strings) {
		memset(e, 0, sizeof(*e));
		return -ENOMEM;
	}
	/* One block: argv[], envp[], then the characters. */
	e->argv = (char **)(void *)e->strings;
	e->envp = e->argv + e->argc + 1;
	area = e->strings + ptrs;
	exec_copy_list(&lists, e->argv, &area);
	exec_copy_list(&lists, e->envp, &area);
	return 0;

err_proto:
	memset(e, 0, sizeof(*e));
	return -EPROTO;
}

void proto_exec_free(struct proto_exec *e)
{
	free(e->strings);
	e->strings = NULL;
	e->argv = e->envp = NULL;
	e->argc = e->envc = 0;
}

int proto_stat_encode(struct proto_writer *w, uint32_t id, const struct proto_stat *st)
{
	proto_begin(w, w->buf, w->cap, PROTO_STAT_RESULT, id);
	proto_put_u32(w, st->type);
	proto_put_u32(w, st->mode);
	proto_put_u64(w, st->size);
	proto_put_u64(w, (uint64_t)st->mtime_ns);
	return proto_end(w);
}

int proto_stat_decode(const struct proto_frame *f, struct proto_stat *st)
{
	struct proto_reader r;
	uint64_t mtime;

	if (f->type != PROTO_STAT_RESULT)
		return -EPROTO;
	proto_reader_init(&r, f);
	if (!proto_get_u32(&r, &st->type) || !proto_get_u32(&r, &st->mode) ||
	    !proto_get_u64(&r, &st->size) || !proto_get_u64(&r, &mtime) || !proto_done(&r))
		return -EPROTO;
	st->mtime_ns = (int64_t)mtime;
	return 0;
}

int proto_sysinfo_encode(struct proto_writer *w, uint32_t id, const struct proto_sysinfo *s)
{
	proto_begin(w, w->buf, w->cap, PROTO_SYSINFO_RESULT, id);
	proto_put_u32(w, s->cpus);
	proto_put_u64(w, s->cpu_busy);
	proto_put_u64(w, s->cpu_total);
	proto_put_u64(w, s->mem_total);
	proto_put_u64(w, s->mem_available);
	proto_put_u64(w, s->mem_cached);
	proto_put_u64(w, s->disk_total);
	proto_put_u64(w, s->disk_free);
	return proto_end(w);
}

int proto_sysinfo_decode(const struct proto_frame *f, struct proto_sysinfo *s)
{
	struct proto_reader r;

	if (f->type != PROTO_SYSINFO_RESULT)
		return -EPROTO;
	proto_reader_init(&r, f);
	if (!proto_get_u32(&r, &s->cpus) || !proto_get_u64(&r, &s->cpu_busy) ||
	    !proto_get_u64(&r, &s->cpu_total) || !proto_get_u64(&r, &s->mem_total) ||
	    !proto_get_u64(&r, &s->mem_available) || !proto_get_u64(&r, &s->mem_cached) ||
	    !proto_get_u64(&r, &s->disk_total) || !proto_get_u64(&r, &s->disk_free) ||
	    !proto_done(&r))
		return -EPROTO;
	if (s->cpus < 1 || s->cpus > PROTO_MAX_CPUS || s->cpu_busy > s->cpu_total ||
	    s->mem_available > s->mem_total || s->mem_cached > s->mem_total ||
	    s->disk_free > s->disk_total)
		return -EPROTO;
	return 0;
}

const char *proto_type_name(uint8_t type)
{
	static const char *const names[] = {
		[PROTO_HELLO] = "HELLO", [PROTO_PING] = "PING", [PROTO_EXEC] = "EXEC",
		[PROTO_STDIN] = "STDIN", [PROTO_SIGNAL] = "SIGNAL", [PROTO_RESIZE] = "RESIZE",
		[PROTO_FILE_WRITE] = "FILE_WRITE", [PROTO_FILE_READ] = "FILE_READ",
		[PROTO_FILE_DATA] = "FILE_DATA", [PROTO_FILE_END] = "FILE_END",
		[PROTO_STAT] = "STAT", [PROTO_LIST] = "LIST", [PROTO_MKDIR] = "MKDIR",
		[PROTO_REMOVE] = "REMOVE", [PROTO_SHUTDOWN] = "SHUTDOWN",
		[PROTO_QUIESCE] = "QUIESCE", [PROTO_FRESHEN] = "FRESHEN",
		[PROTO_NET] = "NET", [PROTO_RENAME] = "RENAME",
		[PROTO_PORT] = "PORT", [PROTO_WATCH] = "WATCH", [PROTO_SYSINFO] = "SYSINFO",
		[PROTO_HELLO_OK] = "HELLO_OK", [PROTO_PONG] = "PONG", [PROTO_OK] = "OK",
		[PROTO_ERROR] = "ERROR", [PROTO_EXEC_STARTED] = "EXEC_STARTED",
		[PROTO_STDOUT] = "STDOUT", [PROTO_STDERR] = "STDERR", [PROTO_EXIT] = "EXIT",
		[PROTO_STAT_RESULT] = "STAT_RESULT", [PROTO_LIST_ENTRIES] = "LIST_ENTRIES",
		[PROTO_WATCH_EVENT] = "WATCH_EVENT", [PROTO_SYSINFO_RESULT] = "SYSINFO_RESULT",
	};

	if (type < sizeof(names) / sizeof(names[0]) && names[type])
		return names[type];
	return "unknown";
}
