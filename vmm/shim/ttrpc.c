/* ttrpc.c - ttrpc's frames and its Request and Response, checked at the boundary, through protobuf-c; no I/O. */
#include "shim/ttrpc.h"
#include "shim/ttrpc.pb-c.h"
#include "lib/errmsg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define READER_FIRST_CAP 4096

/* protobuf-c allocates as it decodes: the structs of sub-messages, the
 * arrays of repeated fields, a copy of every string and bytes field and of
 * every unknown field. A legitimate message needs about its own size; a
 * hostile one of empty sub-messages or unknown fields could make 4 MiB
 * cost over 100 MiB. The decoder gets this much and fails beyond it. */
#define UNPACK_BUDGET(len) (4 * (size_t)(len) + 64 * 1024)

static const char *const code_names[] = {
	"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
	"ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
	"UNAUTHENTICATED",
};
_Static_assert(sizeof(code_names) / sizeof(code_names[0]) == TTRPC_CODE_MAX + 1,
	       "one name per google.rpc.Code");

const char *ttrpc_code_name(int32_t code)
{
	return code >= 0 && code <= TTRPC_CODE_MAX ? code_names[code] : "?";
}

int32_t ttrpc_code_from_errno(int err)
{
	switch (err < 0 ? -err : err) {
	case 0: return TTRPC_OK;
	case ENOENT: case ESRCH: return TTRPC_NOT_FOUND;
	case EEXIST: return TTRPC_ALREADY_EXISTS;
	case EINVAL: return TTRPC_INVALID_ARGUMENT;
	case ETIMEDOUT: return TTRPC_DEADLINE_EXCEEDED;
	case ECANCELED: return TTRPC_CANCELLED;
	case ENOSYS: case EOPNOTSUPP: return TTRPC_UNIMPLEMENTED;
	case EBUSY: return TTRPC_FAILED_PRECONDITION;
	case EAGAIN: return TTRPC_UNAVAILABLE;
	case EPERM: case EACCES: return TTRPC_PERMISSION_DENIED;
	case ENOMEM: case ENOSPC: return TTRPC_RESOURCE_EXHAUSTED;
	default: return TTRPC_INTERNAL;
	}
}

static void put32be(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t get32be(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void ttrpc_header_encode(const struct ttrpc_header *h, uint8_t out[TTRPC_HEADER_LEN])
{
	put32be(out, h->length);
	put32be(out + 4, h->stream_id);
	out[8] = h->type;
	out[9] = h->flags;
}

int ttrpc_header_decode(struct ttrpc_header *h, const uint8_t *buf, size_t len)
{
	if (len < TTRPC_HEADER_LEN)
		return -EAGAIN;
	h->length = get32be(buf);
	h->stream_id = get32be(buf + 4);
	h->type = buf[8];
	h->flags = buf[9];
	return h->length > TTRPC_MESSAGE_MAX ? -EMSGSIZE : 0;
}

void ttrpc_reader_init(struct ttrpc_reader *r)
{
	memset(r, 0, sizeof(*r));
}

size_t ttrpc_reader_want(const struct ttrpc_reader *r)
{
	return r->have_header ? r->h.length - r->got : TTRPC_HEADER_LEN - r->hdr_got;
}

/* Room for `need` body bytes: double, from READER_FIRST_CAP, never past
 * the header's length (already checked against TTRPC_MESSAGE_MAX). */
static int reader_grow(struct ttrpc_reader *r, size_t need)
{
	size_t cap = r->cap ? r->cap : READER_FIRST_CAP;
	uint8_t *p;

	if (need <= r->cap)
		return 0;
	while (cap < need)
		cap *= 2;
	if (cap > r->h.length)
		cap = r->h.length;
	p = realloc(r->body, cap);
	if (!p)
		return -ENOMEM;
	r->body = p;
	r->cap = cap;
	return 0;
}

int ttrpc_reader_feed(struct ttrpc_reader *r, const uint8_t *buf, size_t len, size_t *used,
		      struct ttrpc_frame *f)
{
	size_t n = 0, take;
	int rc;

	*used = 0;
	f->body = NULL;
	if (r->hdr_got > TTRPC_HEADER_LEN)          /* an earlier error: taken nothing since */
		return -EMSGSIZE;
	while (!r->have_header) {
		if (n == len)
			goto more;
		r->hdr[r->hdr_got++] = buf[n++];
		if (r->hdr_got < TTRPC_HEADER_LEN)
			continue;
		rc = ttrpc_header_decode(&r->h, r->hdr, TTRPC_HEADER_LEN);
		if (rc) {
			f->h = r->h;
			r->hdr_got = TTRPC_HEADER_LEN + 1;   /* stuck: the boundaries are lost */
			*used = n;
			return rc;
		}
		r->have_header = true;
	}
	take = len - n < r->h.length - r->got ? len - n : r->h.length - r->got;
	if (take) {
		if (reader_grow(r, r->got + take)) {
			r->hdr_got = TTRPC_HEADER_LEN + 1;
			*used = n;
			return -ENOMEM;
		}
		memcpy(r->body + r->got, buf + n, take);
		r->got += take;
		n += take;
	}
	*used = n;
	if (r->got < r->h.length)
		return 0;
	f->h = r->h;
	f->body = r->body;
	memset(r, 0, sizeof(*r));
	return 1;
more:
	*used = n;
	return 0;
}

void ttrpc_reader_release(struct ttrpc_reader *r)
{
	free(r->body);
	memset(r, 0, sizeof(*r));
}

/* The decoder's allocator: malloc within a budget (freed with plain free,
 * so protobuf_c_message_free_unpacked(m, NULL) frees what it made). */
struct budget {
	size_t left;
};

static void *budget_alloc(void *opaque, size_t size)
{
	struct budget *b = opaque;

	if (size > b->left)
		return NULL;
	b->left -= size;
	return malloc(size ? size : 1);
}

static void budget_free(void *opaque, void *p)
{
	(void)opaque;
	free(p);
}

int ttrpc_unpack(const ProtobufCMessageDescriptor *d, const uint8_t *data, size_t len,
		 ProtobufCMessage **out, const char **why)
{
	struct budget b = { .left = UNPACK_BUDGET(len) };
	ProtobufCAllocator a = { .alloc = budget_alloc, .free = budget_free, .allocator_data = &b };

	*out = NULL;
	if (len > TTRPC_MESSAGE_MAX)
		return errmsg_why(why, -EBADMSG, "a %s of %zu bytes (at most %u)", d->name, len,
				  TTRPC_MESSAGE_MAX);
	*out = protobuf_c_message_unpack(d, &a, len, data);
	if (!*out)
		return errmsg_why(why, -EBADMSG, "not a %s: a truncated or malformed protobuf, or too "
				  "many fields for its %zu bytes", d->name, len);
	return 0;
}

void ttrpc_unpacked_free(ProtobufCMessage *m)
{
	if (m)
		protobuf_c_message_free_unpacked(m, NULL);
}

int ttrpc_pack(const ProtobufCMessage *m, uint8_t **out, size_t *len)
{
	size_t n = protobuf_c_message_get_packed_size(m);

	*out = NULL;
	*len = 0;
	if (n > TTRPC_MESSAGE_MAX)
		return -EMSGSIZE;
	if (!n)
		return 0;
	*out = malloc(n);
	if (!*out)
		return -ENOMEM;
	*len = protobuf_c_message_pack(m, *out);
	return 0;
}

/* A header and room for a body of n bytes in one allocation, so a frame
 * goes out in one write. */
static int frame_alloc(size_t n, uint32_t stream_id, uint8_t type, uint8_t **frame, size_t *len)
{
	struct ttrpc_header h = { .length = (uint32_t)n, .stream_id = stream_id, .type = type };

	*frame = NULL;
	*len = 0;
	if (n > TTRPC_MESSAGE_MAX)
		return -EMSGSIZE;
	*frame = malloc(TTRPC_HEADER_LEN + n);
	if (!*frame)
		return -ENOMEM;
	ttrpc_header_encode(&h, *frame);
	*len = TTRPC_HEADER_LEN + n;
	return 0;
}

/* A service or method name: 1..TTRPC_NAME_MAX bytes of printable ASCII
 * without a space (every ttrpc name is a dotted identifier). */
static bool name_ok(const uint8_t *p, size_t n)
{
	if (!n || n > TTRPC_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (p[i] <= ' ' || p[i] > '~')
			return false;
	return true;
}

static bool md_ok(const uint8_t *k, size_t kn, const uint8_t *v, size_t vn)
{
	return kn && kn <= TTRPC_MD_KEY_MAX && vn <= TTRPC_MD_VALUE_MAX && !memchr(k, 0, kn) &&
	       (!vn || !memchr(v, 0, vn));
}

static ProtobufCBinaryData bin(const void *p, size_t n)
{
	return (ProtobufCBinaryData){ .len = n, .data = (uint8_t *)(uintptr_t)p };
}

int ttrpc_request_encode(const struct ttrpc_request *r, uint32_t stream_id, uint8_t **frame,
			 size_t *len)
{
	Ttrpc__Request m = TTRPC__REQUEST__INIT;
	Ttrpc__KeyValue kv[TTRPC_MD_MAX], *kvp[TTRPC_MD_MAX];
	int rc;

	*frame = NULL;
	*len = 0;
	if (!r->service || !r->method || !name_ok((const uint8_t *)r->service, strlen(r->service)) ||
	    !name_ok((const uint8_t *)r->method, strlen(r->method)) || r->n_md > TTRPC_MD_MAX ||
	    (r->payload_len && !r->payload))
		return -EINVAL;
	m.service = bin(r->service, strlen(r->service));
	m.method = bin(r->method, strlen(r->method));
	m.payload = bin(r->payload, r->payload_len);
	m.timeout_nano = r->timeout_ns;
	for (size_t i = 0; i < r->n_md; i++) {
		const char *k = r->md[i].key, *v = r->md[i].value ? r->md[i].value : "";

		if (!k || !md_ok((const uint8_t *)k, strlen(k), (const uint8_t *)v, strlen(v)))
			return -EINVAL;
		ttrpc__key_value__init(&kv[i]);
		kv[i].key = bin(k, strlen(k));
		kv[i].value = bin(v, strlen(v));
		kvp[i] = &kv[i];
	}
	m.n_metadata = r->n_md;
	m.metadata = kvp;
	rc = frame_alloc(ttrpc__request__get_packed_size(&m), stream_id, TTRPC_TYPE_REQUEST, frame,
			 len);
	if (!rc)
		ttrpc__request__pack(&m, *frame + TTRPC_HEADER_LEN);
	return rc;
}

/* Copy n bytes to *at as a NUL-terminated string; returns it. */
static char *put_str(char **at, const void *p, size_t n)
{
	char *s = *at;

	if (n)
		memcpy(s, p, n);
	s[n] = '\0';
	*at += n + 1;
	return s;
}

int ttrpc_request_decode(struct ttrpc_request *r, const uint8_t *body, size_t len,
			 const char **why)
{
	ProtobufCMessage *pm;
	Ttrpc__Request *m;
	struct ttrpc_kv *kv;
	size_t size;
	char *at;
	int rc;

	memset(r, 0, sizeof(*r));
	rc = ttrpc_unpack(&ttrpc__request__descriptor, body, len, &pm, why);
	if (rc)
		return rc;
	m = (Ttrpc__Request *)pm;
	if (!name_ok(m->service.data, m->service.len) || !name_ok(m->method.data, m->method.len)) {
		rc = errmsg_why(why, -EBADMSG, "a service or method name that is empty, longer than "
				"%d bytes or not printable ASCII", TTRPC_NAME_MAX);
		goto out;
	}
	if (m->n_metadata > TTRPC_MD_MAX) {
		rc = errmsg_why(why, -EBADMSG, "%zu metadata pairs (at most %d)", m->n_metadata,
				TTRPC_MD_MAX);
		goto out;
	}
	/* One allocation: the pairs, then every string, then the payload. */
	size = m->n_metadata * sizeof(*kv) + m->service.len + m->method.len + 2 + m->payload.len;
	for (size_t i = 0; i < m->n_metadata; i++) {
		const Ttrpc__KeyValue *p = m->metadata[i];

		if (!md_ok(p->key.data, p->key.len, p->value.data, p->value.len)) {
			rc = errmsg_why(why, -EBADMSG, "metadata pair %zu: an empty key, a key over %d "
					"or a value over %d bytes, or a NUL", i, TTRPC_MD_KEY_MAX,
					TTRPC_MD_VALUE_MAX);
			goto out;
		}
		size += p->key.len + p->value.len + 2;
	}
	r->owned = malloc(size);
	if (!r->owned) {
		rc = -ENOMEM;
		goto out;
	}
	kv = r->owned;
	at = (char *)(kv + m->n_metadata);
	for (size_t i = 0; i < m->n_metadata; i++) {
		kv[i].key = put_str(&at, m->metadata[i]->key.data, m->metadata[i]->key.len);
		kv[i].value = put_str(&at, m->metadata[i]->value.data, m->metadata[i]->value.len);
	}
	r->md = kv;
	r->n_md = m->n_metadata;
	r->service = put_str(&at, m->service.data, m->service.len);
	r->method = put_str(&at, m->method.data, m->method.len);
	if (m->payload.len) {
		memcpy(at, m->payload.data, m->payload.len);
		r->payload = (const uint8_t *)at;
		r->payload_len = m->payload.len;
	}
	r->timeout_ns = m->timeout_nano;
out:
	ttrpc_unpacked_free(pm);
	return rc;
}

void ttrpc_request_release(struct ttrpc_request *r)
{
	free(r->owned);
	memset(r, 0, sizeof(*r));
}

const char *ttrpc_request_md(const struct ttrpc_request *r, const char *key)
{
	for (size_t i = 0; i < r->n_md; i++)
		if (!strcasecmp(r->md[i].key, key))
			return r->md[i].value;
	return NULL;
}

const char *ttrpc_request_namespace(const struct ttrpc_request *r)
{
	const char *ns = ttrpc_request_md(r, TTRPC_NS_KEY);

	return ns ? ns : ttrpc_request_md(r, TTRPC_NS_KEY_GRPC);
}

int ttrpc_response_encode(const struct ttrpc_response *r, uint32_t stream_id, uint8_t **frame,
			  size_t *len)
{
	Ttrpc__Response m = TTRPC__RESPONSE__INIT;
	Google__Rpc__Status st = GOOGLE__RPC__STATUS__INIT;
	int rc;

	*frame = NULL;
	*len = 0;
	if (r->code < 0 || r->code > TTRPC_CODE_MAX || (r->payload_len && !r->payload))
		return -EINVAL;
	st.code = r->code;
	st.message = (char *)(uintptr_t)(r->message ? r->message : "");
	m.status = &st;
	m.payload = bin(r->payload, r->payload_len);
	rc = frame_alloc(ttrpc__response__get_packed_size(&m), stream_id, TTRPC_TYPE_RESPONSE, frame,
			 len);
	if (!rc)
		ttrpc__response__pack(&m, *frame + TTRPC_HEADER_LEN);
	return rc;
}

int ttrpc_response_decode(struct ttrpc_response *r, const uint8_t *body, size_t len,
			  const char **why)
{
	ProtobufCMessage *pm;
	Ttrpc__Response *m;
	const char *msg = "";
	size_t mlen;
	char *at;
	int rc;

	memset(r, 0, sizeof(*r));
	rc = ttrpc_unpack(&ttrpc__response__descriptor, body, len, &pm, why);
	if (rc)
		return rc;
	m = (Ttrpc__Response *)pm;
	if (m->status) {
		r->code = m->status->code;
		if (r->code < 0 || r->code > TTRPC_CODE_MAX)
			r->code = TTRPC_UNKNOWN;
		msg = m->status->message ? m->status->message : "";
	}
	mlen = strlen(msg);
	r->owned = malloc(mlen + 1 + m->payload.len);
	if (!r->owned) {
		rc = -ENOMEM;
		goto out;
	}
	at = r->owned;
	r->message = put_str(&at, msg, mlen);
	if (m->payload.len) {
		memcpy(at, m->payload.data, m->payload.len);
		r->payload = (const uint8_t *)at;
		r->payload_len = m->payload.len;
	}
out:
	ttrpc_unpacked_free(pm);
	return rc;
}

void ttrpc_response_release(struct ttrpc_response *r)
{
	free(r->owned);
	memset(r, 0, sizeof(*r));
}
