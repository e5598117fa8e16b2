/* connect.c - the Connect RPC protocol over HTTP/1.1, its JSON and binary codecs, as pure functions: envelopes, codes, error bodies, request headers. */
#include "serve/connect.h"
#include "agent_client/events.h"
#include "lib/errmsg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define NR_CODES (CONNECT_UNAUTHENTICATED + 1)

static const struct {
	const char *name;
	int status;
} codes[NR_CODES] = {
	[CONNECT_OK] = { "ok", 200 },
	[CONNECT_CANCELED] = { "canceled", 499 },
	[CONNECT_UNKNOWN] = { "unknown", 500 },
	[CONNECT_INVALID_ARGUMENT] = { "invalid_argument", 400 },
	[CONNECT_DEADLINE_EXCEEDED] = { "deadline_exceeded", 504 },
	[CONNECT_NOT_FOUND] = { "not_found", 404 },
	[CONNECT_ALREADY_EXISTS] = { "already_exists", 409 },
	[CONNECT_PERMISSION_DENIED] = { "permission_denied", 403 },
	[CONNECT_RESOURCE_EXHAUSTED] = { "resource_exhausted", 429 },
	[CONNECT_FAILED_PRECONDITION] = { "failed_precondition", 400 },
	[CONNECT_ABORTED] = { "aborted", 409 },
	[CONNECT_OUT_OF_RANGE] = { "out_of_range", 400 },
	[CONNECT_UNIMPLEMENTED] = { "unimplemented", 501 },
	[CONNECT_INTERNAL] = { "internal", 500 },
	[CONNECT_UNAVAILABLE] = { "unavailable", 503 },
	[CONNECT_DATA_LOSS] = { "data_loss", 500 },
	[CONNECT_UNAUTHENTICATED] = { "unauthenticated", 401 },
};

/* An enum may hold any int: every lookup goes through this. */
static bool is_code(enum connect_code c)
{
	return (unsigned)c < NR_CODES;
}

const char *connect_code_name(enum connect_code c)
{
	return is_code(c) ? codes[c].name : "unknown";
}

int connect_code_status(enum connect_code c)
{
	return is_code(c) ? codes[c].status : 500;
}

enum connect_code connect_code_of_errno(int err)
{
	switch (err) {
	case ENOENT:
		return CONNECT_NOT_FOUND;
	case EEXIST:
		return CONNECT_ALREADY_EXISTS;
	case EACCES: case EPERM: case EROFS:
		return CONNECT_PERMISSION_DENIED;
	case EINVAL: case ENAMETOOLONG: case ELOOP: case ENOTDIR: case EISDIR:
		return CONNECT_INVALID_ARGUMENT;
	case ETIMEDOUT:
		return CONNECT_DEADLINE_EXCEEDED;
	case ENOSPC: case EDQUOT: case EFBIG:
		return CONNECT_RESOURCE_EXHAUSTED;
	case ECANCELED:
		return CONNECT_CANCELED;
	case EBUSY: case ENOTEMPTY:
		return CONNECT_FAILED_PRECONDITION;
	case ECONNREFUSED: case ECONNRESET: case EPIPE:
		return CONNECT_UNAVAILABLE;
	default:
		return CONNECT_INTERNAL;
	}
}

int connect_unwrap(const uint8_t *body, size_t len, const uint8_t **msg, size_t *msglen,
		   const char **why)
{
	uint32_t n;

	if (len < CONNECT_ENVELOPE_LEN)
		return errmsg_why(why, -EINVAL, "body of %zu bytes is shorter than an envelope",
				  len);
	if (body[0] & CONNECT_FLAG_COMPRESSED)
		return errmsg_why(why, -EINVAL, "compressed message (no compression was offered)");
	if (body[0] & CONNECT_FLAG_END_STREAM)
		return errmsg_why(why, -EINVAL, "end-stream envelope in a request");
	if (body[0])
		return errmsg_why(why, -EINVAL, "unknown envelope flags 0x%02x", body[0]);
	n = (uint32_t)body[1] << 24 | (uint32_t)body[2] << 16 | (uint32_t)body[3] << 8 | body[4];
	if (n > CONNECT_MAX_MESSAGE)
		return errmsg_why(why, -EINVAL, "message of %u bytes, over the %u we take", n,
				  CONNECT_MAX_MESSAGE);
	/* One request message: a short body is cut, a long one has a second. */
	if (n != len - CONNECT_ENVELOPE_LEN)
		return errmsg_why(why, -EINVAL, "envelope says %u bytes, %zu follow it", n,
				  len - CONNECT_ENVELOPE_LEN);
	*msg = body + CONNECT_ENVELOPE_LEN;
	*msglen = n;
	return 0;
}

void connect_envelope(uint8_t out[CONNECT_ENVELOPE_LEN], uint8_t flags, uint32_t len)
{
	out[0] = flags;
	out[1] = (uint8_t)(len >> 24);
	out[2] = (uint8_t)(len >> 16);
	out[3] = (uint8_t)(len >> 8);
	out[4] = (uint8_t)len;
}

json_t *connect_json_text(const char *s, size_t max)
{
	static const char fffd[] = "\xef\xbf\xbd";
	size_t len = strnlen(s, max), i = 0, o = 0;
	/* Every byte a U+FFFD at the worst, and never past max. */
	char *out = malloc((len < max / 3 ? len * 3 : max) + 1);
	json_t *j;

	if (!out)
		return NULL;
	while (i < len) {
		bool cut;
		size_t ok = utf8_valid_prefix((const uint8_t *)s + i, len - i, &cut);

		if (ok > max - o) {
			/* Back to the start of the character that would not fit. */
			ok = max - o;
			while (ok && ((uint8_t)s[i + ok] & 0xc0) == 0x80)
				ok--;
			memcpy(out + o, s + i, ok);
			o += ok;
			break;
		}
		memcpy(out + o, s + i, ok);
		o += ok;
		i += ok;
		/* A sequence cut at max may go on in what was not read: left out. */
		if (i == len || (cut && len == max) || max - o < sizeof(fffd) - 1)
			break;
		memcpy(out + o, fffd, sizeof(fffd) - 1);
		o += sizeof(fffd) - 1;
		i++;
	}
	j = json_stringn(out, o);
	free(out);
	return j;
}

/* {"code":...,"message":...}, the object both error forms carry. */
static json_t *error_object(enum connect_code c, const char *message)
{
	json_t *e = json_object(), *m;
	const char *name = is_code(c) && c != CONNECT_OK ? codes[c].name : "unknown";

	if (!e)
		return NULL;
	if (json_object_set_new(e, "code", json_string(name)))
		goto out_free;
	if (message && *message) {
		m = connect_json_text(message, CONNECT_MAX_ERROR_TEXT);
		if (!m || json_object_set_new(e, "message", m))
			goto out_free;
	}
	return e;
out_free:
	json_decref(e);
	return NULL;
}

/* Compact text of j, which it drops; NULL when j is (out of memory). */
static char *dump(json_t *j)
{
	char *s;

	if (!j)
		return NULL;
	s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return s;
}

char *connect_error_json(enum connect_code c, const char *message)
{
	return dump(error_object(c, message));
}

char *connect_end_stream_json(enum connect_code c, const char *message)
{
	json_t *e;

	if (c == CONNECT_OK)
		return dump(json_object());
	e = error_object(c, message);
	return e ? dump(json_pack("{s:o}", "error", e)) : NULL;
}

/* type, then nothing or "; charset=utf-8" (Connect's own client writes
 * "application/json" and matches ^application/json(; ?charset=utf-?8)?$). */
static bool is_type(const char *ct, const char *type)
{
	size_t n = strlen(type);

	if (!ct || strncasecmp(ct, type, n))
		return false;
	ct += n;
	if (!*ct)
		return true;
	if (*ct++ != ';')
		return false;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	if (strncasecmp(ct, "charset=", 8))
		return false;
	ct += 8;
	return !strcasecmp(ct, "utf-8") || !strcasecmp(ct, "utf8");
}

/* One of the two types of a kind of call. */
static int codec_of(const char *ct, const char *json, const char *proto,
		    enum connect_codec *codec)
{
	if (is_type(ct, json))
		*codec = CONNECT_CODEC_JSON;
	else if (is_type(ct, proto))
		*codec = CONNECT_CODEC_PROTO;
	else
		return -EINVAL;
	return 0;
}

int connect_unary_codec(const char *content_type, enum connect_codec *codec)
{
	return codec_of(content_type, "application/json", "application/proto", codec);
}

int connect_stream_codec(const char *content_type, enum connect_codec *codec)
{
	return codec_of(content_type, "application/connect+json", "application/connect+proto",
			codec);
}

const char *connect_content_type(enum connect_codec codec, bool stream)
{
	if (codec == CONNECT_CODEC_PROTO)
		return stream ? "application/connect+proto" : "application/proto";
	return stream ? "application/connect+json" : "application/json";
}

int connect_timeout_ms(const char *header, uint64_t *ms)
{
	uint64_t v = 0;
	size_t i;

	*ms = 0;
	if (!header)
		return 0;
	for (i = 0; header[i] >= '0' && header[i] <= '9'; i++) {
		if (i == 10)
			return -EINVAL;
		v = v * 10 + (uint64_t)(header[i] - '0');
	}
	if (!i || header[i] || !v)
		return -EINVAL;
	*ms = v;
	return 0;
}

bool connect_queue_push_bytes(struct connect_queue *q, uint8_t flags, uint8_t *msg, size_t len)
{
	size_t need = q->len + CONNECT_ENVELOPE_LEN + len;

	if (!msg)
		return false;
	if (need > q->cap) {
		uint8_t *n = realloc(q->buf, need);

		if (!n) {
			free(msg);
			return false;
		}
		q->buf = n;
		q->cap = need;
	}
	connect_envelope(q->buf + q->len, flags, (uint32_t)len);
	memcpy(q->buf + q->len + CONNECT_ENVELOPE_LEN, msg, len);
	q->len = need;
	free(msg);
	return true;
}

bool connect_queue_push(struct connect_queue *q, uint8_t flags, char *msg)
{
	return connect_queue_push_bytes(q, flags, (uint8_t *)msg, msg ? strlen(msg) : 0);
}

size_t connect_queue_take(struct connect_queue *q, void *out, size_t max)
{
	size_t n = q->len - q->off < max ? q->len - q->off : max;

	if (!n)
		return 0;
	memcpy(out, q->buf + q->off, n);
	q->off += n;
	if (q->off == q->len)
		q->off = q->len = 0;
	return n;
}

void connect_queue_drop(struct connect_queue *q)
{
	q->off = q->len = 0;
}

void connect_queue_free(struct connect_queue *q)
{
	free(q->buf);
	*q = (struct connect_queue){ 0 };
}
