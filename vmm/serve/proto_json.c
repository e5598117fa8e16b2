/* proto_json.c - protobuf's binary encoding to its JSON mapping and back, driven by protobuf-c's descriptors: the wire walked here (protobuf-c has no JSON mapping, and its unpacker cannot tell a NUL inside a string), every length and varint bounded. */
#include "serve/proto_json.h"
#include "lib/base64.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_SGROUP = 3, WT_EGROUP = 4, WT_I32 = 5 };

#define NAME_MAX_JSON 128
#define TIMESTAMP "google.protobuf.Timestamp"
/* 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z, the mapping's range. */
#define TS_MIN (-62135596800LL)
#define TS_MAX 253402300799LL

struct why {
	char *buf;
	size_t len;
	size_t values;             /* decoding: values made so far */
};

static int fail(struct why *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct why *w, const char *fmt, ...)
{
	va_list ap;

	if (w->len) {
		va_start(ap, fmt);
		vsnprintf(w->buf, w->len, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* The field's JSON name: lowerCamelCase of its proto name. */
static void json_name(const char *name, char out[NAME_MAX_JSON])
{
	size_t o = 0;
	bool up = false;

	for (; *name && o < NAME_MAX_JSON - 1; name++) {
		if (*name == '_') {
			up = true;
			continue;
		}
		out[o++] = up && *name >= 'a' && *name <= 'z' ? (char)(*name - 'a' + 'A') : *name;
		up = false;
	}
	out[o] = '\0';
}

/* The wire type a field of this type is sent with; -1 for the fixed-width
 * and floating types, which envd does not use and we do not map. */
static int wire_type(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_BOOL: case PROTOBUF_C_TYPE_ENUM:
		return WT_VARINT;
	case PROTOBUF_C_TYPE_STRING: case PROTOBUF_C_TYPE_BYTES: case PROTOBUF_C_TYPE_MESSAGE:
		return WT_LEN;
	default:
		return -1;
	}
}

/* protoc's map entry: "XEntry" { key = 1; value = 2; }. */
static bool is_map_entry(const ProtobufCMessageDescriptor *m)
{
	size_t n = strlen(m->name);

	return m->n_fields == 2 && n > 5 && !strcmp(m->name + n - 5, "Entry") &&
	       m->fields[0].id == 1 && !strcmp(m->fields[0].name, "key") &&
	       m->fields[1].id == 2 && !strcmp(m->fields[1].name, "value");
}

static bool is_timestamp(const ProtobufCFieldDescriptor *f)
{
	return f->type == PROTOBUF_C_TYPE_MESSAGE &&
	       !strcmp(((const ProtobufCMessageDescriptor *)f->descriptor)->name, TIMESTAMP);
}

/* ---- decoding ---- */

static int read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	uint64_t r = 0;

	for (int i = 0; i < 10; i++) {
		uint8_t b;

		if (*p == end)
			return -1;
		b = *(*p)++;
		/* The tenth byte holds the 64th bit only. */
		if (i == 9 && b > 1)
			return -1;
		r |= (uint64_t)(b & 0x7f) << (7 * i);
		if (!(b & 0x80)) {
			*v = r;
			return 0;
		}
	}
	return -1;
}

static json_t *decode_message(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len,
			      int depth, struct why *w);

static json_t *decimal(bool is_signed, uint64_t v)
{
	char s[24];

	if (is_signed)
		snprintf(s, sizeof(s), "%" PRId64, (int64_t)v);
	else
		snprintf(s, sizeof(s), "%" PRIu64, v);
	return json_string(s);
}

static json_t *varint_json(const ProtobufCFieldDescriptor *f, uint64_t v)
{
	const ProtobufCEnumValue *ev;

	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
		return json_integer((int32_t)(uint32_t)v);
	case PROTOBUF_C_TYPE_SINT32:
		return json_integer((int32_t)((uint32_t)v >> 1) ^ -(int32_t)(v & 1));
	case PROTOBUF_C_TYPE_UINT32:
		return json_integer((uint32_t)v);
	case PROTOBUF_C_TYPE_INT64:
		return decimal(true, v);
	case PROTOBUF_C_TYPE_SINT64:
		return decimal(true, (v >> 1) ^ -(v & 1));
	case PROTOBUF_C_TYPE_UINT64:
		return decimal(false, v);
	case PROTOBUF_C_TYPE_BOOL:
		return json_boolean(v != 0);
	default:   /* ENUM: its name, or the number of a value we do not know */
		ev = protobuf_c_enum_descriptor_get_value(f->descriptor, (int)(int32_t)(uint32_t)v);
		return ev ? json_string(ev->name) : json_integer((int32_t)(uint32_t)v);
	}
}

/* {"seconds":"S","nanos":N} as RFC 3339, or NULL when out of range. */
static json_t *timestamp_json(json_t *m)
{
	const char *s = json_string_value(json_object_get(m, "seconds"));
	json_int_t nanos = json_integer_value(json_object_get(m, "nanos"));
	long long secs = s ? strtoll(s, NULL, 10) : 0;
	char out[48];
	struct tm tm;
	time_t t;
	size_t n;

	if (secs < TS_MIN || secs > TS_MAX || nanos < 0 || nanos > 999999999)
		return NULL;
	t = (time_t)secs;
	if (!gmtime_r(&t, &tm))
		return NULL;
	n = strftime(out, sizeof(out), "%Y-%m-%dT%H:%M:%S", &tm);
	if (nanos)
		n += (size_t)snprintf(out + n, sizeof(out) - n, ".%09lld", (long long)nanos);
	snprintf(out + n, sizeof(out) - n, "Z");
	return json_string(out);
}

static json_t *len_json(const ProtobufCFieldDescriptor *f, const uint8_t *p, size_t n, int depth,
			struct why *w)
{
	char *b64;
	json_t *j;

	switch (f->type) {
	case PROTOBUF_C_TYPE_STRING:
		if (memchr(p, 0, n) || !(j = json_stringn((const char *)p, n))) {
			fail(w, "field %s: a string that is not UTF-8 or holds a NUL", f->name);
			return NULL;
		}
		return j;
	case PROTOBUF_C_TYPE_BYTES:
		b64 = malloc(BASE64_LEN(n) + 1);
		if (!b64)
			return NULL;
		base64_encode(p, n, b64);
		j = json_string(b64);
		free(b64);
		return j;
	default:   /* MESSAGE */
		j = decode_message(f->descriptor, p, n, depth + 1, w);
		if (j && is_timestamp(f)) {
			json_t *t = timestamp_json(j);

			json_decref(j);
			if (!t)
				fail(w, "field %s: a timestamp out of range", f->name);
			return t;
		}
		return j;
	}
}

/* v (taken) into obj as field f: appended if repeated, set if a map
 * entry, replacing an earlier value otherwise. */
static int put_member(json_t *obj, const ProtobufCFieldDescriptor *f, json_t *v, struct why *w)
{
	char name[NAME_MAX_JSON];
	json_t *have;

	if (++w->values > PROTO_JSON_MAX_VALUES) {
		json_decref(v);
		return fail(w, "more than %d values", PROTO_JSON_MAX_VALUES);
	}
	json_name(f->name, name);
	if (f->label != PROTOBUF_C_LABEL_REPEATED)
		return json_object_set_new(obj, name, v) ? -ENOMEM : 0;
	have = json_object_get(obj, name);
	if (f->type == PROTOBUF_C_TYPE_MESSAGE && is_map_entry(f->descriptor)) {
		const char *key = json_string_value(json_object_get(v, "key"));
		json_t *val = json_object_get(v, "value");
		int rc;

		if (!json_object_get(v, "key")) {
			key = "";
		} else if (!key) {
			json_decref(v);
			return fail(w, "field %s: a map key that is not a string", f->name);
		}
		if (!have && json_object_set_new(obj, name, have = json_object())) {
			json_decref(v);
			return -ENOMEM;
		}
		rc = json_object_set_new(have, key, val ? json_incref(val) : json_string(""));
		json_decref(v);
		return rc ? -ENOMEM : 0;
	}
	if (!have && json_object_set_new(obj, name, have = json_array())) {
		json_decref(v);
		return -ENOMEM;
	}
	return json_array_append_new(have, v) ? -ENOMEM : 0;
}

/* One field's value at *p (wire type wt), into obj. */
static int decode_field(json_t *obj, const ProtobufCFieldDescriptor *f, int wt, const uint8_t **p,
			const uint8_t *end, int depth, struct why *w)
{
	int want = wire_type(f->type);
	uint64_t v, n;
	json_t *j;

	if (want < 0)
		return fail(w, "field %s: a type this mapping does not carry", f->name);
	if (wt == WT_VARINT && want == WT_VARINT) {
		if (read_varint(p, end, &v))
			return fail(w, "field %s: a truncated or overlong varint", f->name);
		j = varint_json(f, v);
		return j ? put_member(obj, f, j, w) : -ENOMEM;
	}
	if (wt != WT_LEN)
		return fail(w, "field %s: wire type %d, not the field's", f->name, wt);
	if (read_varint(p, end, &n) || n > (uint64_t)(end - *p))
		return fail(w, "field %s: a length past the message's end", f->name);
	if (want == WT_VARINT) {
		/* A packed repeated scalar: varints back to back. */
		const uint8_t *q = *p, *qend = *p + n;

		if (f->label != PROTOBUF_C_LABEL_REPEATED)
			return fail(w, "field %s: packed values for a single one", f->name);
		*p = qend;
		while (q < qend) {
			int rc;

			if (read_varint(&q, qend, &v))
				return fail(w, "field %s: a truncated packed varint", f->name);
			j = varint_json(f, v);
			rc = j ? put_member(obj, f, j, w) : -ENOMEM;
			if (rc)
				return rc;
		}
		return 0;
	}
	j = len_json(f, *p, (size_t)n, depth, w);
	*p += n;
	return j ? put_member(obj, f, j, w) : -EINVAL;
}

static int skip_value(int wt, const uint8_t **p, const uint8_t *end)
{
	uint64_t n;

	switch (wt) {
	case WT_VARINT:
		return read_varint(p, end, &n);
	case WT_I64:
		n = 8;
		break;
	case WT_I32:
		n = 4;
		break;
	case WT_LEN:
		if (read_varint(p, end, &n))
			return -1;
		break;
	default:   /* groups, and the types 6 and 7 that do not exist */
		return -1;
	}
	if (n > (uint64_t)(end - *p))
		return -1;
	*p += n;
	return 0;
}

static json_t *decode_message(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len,
			      int depth, struct why *w)
{
	const uint8_t *end = p + len;
	json_t *obj;

	if (depth > PROTO_JSON_MAX_DEPTH) {
		fail(w, "%s: messages nested deeper than %d", d->name, PROTO_JSON_MAX_DEPTH);
		return NULL;
	}
	obj = json_object();
	while (obj && p < end) {
		const ProtobufCFieldDescriptor *f;
		uint64_t key;
		int rc;

		if (read_varint(&p, end, &key) || key >> 3 == 0 || key >> 3 > 536870911) {
			fail(w, "%s: a malformed field tag", d->name);
			goto out_free;
		}
		f = protobuf_c_message_descriptor_get_field(d, (unsigned)(key >> 3));
		if (!f) {
			/* An unknown field: skipped, as every protobuf reader does. */
			if (skip_value((int)(key & 7), &p, end)) {
				fail(w, "%s: unknown field %u cannot be skipped", d->name,
				     (unsigned)(key >> 3));
				goto out_free;
			}
			continue;
		}
		rc = decode_field(obj, f, (int)(key & 7), &p, end, depth, w);
		if (rc) {
			if (rc == -ENOMEM)
				fail(w, "out of memory");
			goto out_free;
		}
	}
	if (!obj)
		fail(w, "out of memory");
	return obj;
out_free:
	json_decref(obj);
	return NULL;
}

json_t *proto_json_decode(const ProtobufCMessageDescriptor *d, const uint8_t *buf, size_t len,
			  char *err, size_t errlen)
{
	struct why w = { err, errlen, 0 };

	return decode_message(d, buf, len, 0, &w);
}

/* ---- encoding ---- */

struct out {
	uint8_t *buf;
	size_t len, cap;
};

static int put(struct out *o, const void *p, size_t n, struct why *w)
{
	if (n > PROTO_JSON_MAX_OUT - o->len)
		return fail(w, "the message is over %u bytes", PROTO_JSON_MAX_OUT);
	if (o->len + n > o->cap) {
		size_t cap = o->cap ? o->cap : 64;
		uint8_t *b;

		while (cap < o->len + n)
			cap *= 2;
		b = realloc(o->buf, cap);
		if (!b)
			return -ENOMEM;
		o->buf = b;
		o->cap = cap;
	}
	if (n)
		memcpy(o->buf + o->len, p, n);
	o->len += n;
	return 0;
}

static int put_varint(struct out *o, uint64_t v, struct why *w)
{
	uint8_t b[10];
	size_t n = 0;

	do {
		b[n] = (uint8_t)(v & 0x7f);
		v >>= 7;
		if (v)
			b[n] |= 0x80;
		n++;
	} while (v);
	return put(o, b, n, w);
}

static int put_tag(struct out *o, uint32_t id, int wt, struct why *w)
{
	return put_varint(o, (uint64_t)id << 3 | (unsigned)wt, w);
}

/* The bytes of sub (freed) as field id's length-delimited value. */
static int put_sub(struct out *o, uint32_t id, struct out *sub, struct why *w)
{
	int rc = put_tag(o, id, WT_LEN, w);

	if (!rc)
		rc = put_varint(o, sub->len, w);
	if (!rc)
		rc = put(o, sub->buf, sub->len, w);
	free(sub->buf);
	return rc;
}

/* A JSON integer, or a string of one (the mapping's form of 64-bit ones),
 * within [lo, hi] as signed or [0, hi] as unsigned. */
static int integer_of(const json_t *v, bool is_signed, int64_t lo, uint64_t hi, uint64_t *out)
{
	const char *s = json_string_value(v);
	char *end;

	if (json_is_integer(v)) {
		json_int_t i = json_integer_value(v);

		if ((is_signed && (i < lo || i > (int64_t)hi)) || (!is_signed && (i < 0 ||
		    (uint64_t)i > hi)))
			return -1;
		*out = (uint64_t)i;
		return 0;
	}
	if (!s || !*s || (s[0] == '-' && !is_signed))
		return -1;
	errno = 0;
	if (is_signed) {
		long long i = strtoll(s, &end, 10);

		if (errno || *end || i < lo || i > (int64_t)hi)
			return -1;
		*out = (uint64_t)i;
	} else {
		unsigned long long u = strtoull(s, &end, 10);

		if (errno || *end || u > hi)
			return -1;
		*out = u;
	}
	return 0;
}

static int varint_of(const ProtobufCFieldDescriptor *f, const json_t *v, uint64_t *out,
		     struct why *w)
{
	const ProtobufCEnumValue *ev;
	uint64_t u;

	switch (f->type) {
	case PROTOBUF_C_TYPE_BOOL:
		if (!json_is_boolean(v))
			return fail(w, "field %s: not true or false", f->name);
		*out = json_is_true(v);
		return 0;
	case PROTOBUF_C_TYPE_ENUM:
		if (json_is_string(v)) {
			ev = protobuf_c_enum_descriptor_get_value_by_name(f->descriptor,
									  json_string_value(v));
			if (!ev)
				return fail(w, "field %s: no value %s", f->name, json_string_value(v));
			*out = (uint64_t)(int64_t)ev->value;
			return 0;
		}
		if (integer_of(v, true, INT32_MIN, INT32_MAX, &u) || json_is_string(v))
			return fail(w, "field %s: not an enum value", f->name);
		*out = u;
		return 0;
	case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32:
		if (integer_of(v, true, INT32_MIN, INT32_MAX, &u))
			return fail(w, "field %s: not a 32-bit integer", f->name);
		/* int32 goes sign-extended to 64 bits; sint32 zigzag'd. */
		*out = f->type == PROTOBUF_C_TYPE_INT32 ? u :
		       (uint32_t)((uint32_t)(int32_t)u << 1) ^ (uint32_t)((int32_t)u >> 31);
		return 0;
	case PROTOBUF_C_TYPE_UINT32:
		if (integer_of(v, false, 0, UINT32_MAX, &u))
			return fail(w, "field %s: not an unsigned 32-bit integer", f->name);
		*out = u;
		return 0;
	case PROTOBUF_C_TYPE_UINT64:
		if (integer_of(v, false, 0, UINT64_MAX, &u))
			return fail(w, "field %s: not an unsigned 64-bit integer", f->name);
		*out = u;
		return 0;
	default:   /* INT64, SINT64 */
		if (integer_of(v, true, INT64_MIN, INT64_MAX, &u))
			return fail(w, "field %s: not a 64-bit integer", f->name);
		*out = f->type == PROTOBUF_C_TYPE_INT64 ? u : (u << 1) ^ (uint64_t)((int64_t)u >> 63);
		return 0;
	}
}

/* "YYYY-MM-DDTHH:MM:SS[.frac]Z" as Timestamp's two fields. */
static int timestamp_of(const ProtobufCFieldDescriptor *f, const json_t *v, struct out *sub,
			struct why *w)
{
	const char *s = json_string_value(v);
	struct tm tm = { 0 };
	int y, mo, d, h, mi, sec, n = 0, rc;
	long long nanos = 0, secs;

	if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6 ||
	    n != 19 || y < 1 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 59)
		return fail(w, "field %s: not an RFC 3339 time", f->name);
	s += n;
	if (*s == '.') {
		int digits = 0;

		for (s++; *s >= '0' && *s <= '9' && digits < 9; s++, digits++)
			nanos = nanos * 10 + (*s - '0');
		if (!digits)
			return fail(w, "field %s: not an RFC 3339 time", f->name);
		for (; digits < 9; digits++)
			nanos *= 10;
	}
	if (strcmp(s, "Z"))
		return fail(w, "field %s: a time not in UTC ('Z')", f->name);
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	secs = (long long)timegm(&tm);
	rc = secs ? put_tag(sub, 1, WT_VARINT, w) : 0;
	if (!rc && secs)
		rc = put_varint(sub, (uint64_t)secs, w);
	if (!rc && nanos)
		rc = put_tag(sub, 2, WT_VARINT, w);
	if (!rc && nanos)
		rc = put_varint(sub, (uint64_t)nanos, w);
	return rc;
}

static int encode_message(const ProtobufCMessageDescriptor *d, const json_t *j, struct out *o,
			  int depth, struct why *w);

/* One value of field f. */
static int encode_value(const ProtobufCFieldDescriptor *f, const json_t *v, struct out *o,
			int depth, struct why *w)
{
	struct out sub = { 0 };
	const char *s;
	uint64_t u = 0;
	uint8_t *raw;
	long n;
	int rc;

	switch (wire_type(f->type)) {
	case WT_VARINT:
		rc = varint_of(f, v, &u, w);
		if (!rc)
			rc = put_tag(o, f->id, WT_VARINT, w);
		return rc ? rc : put_varint(o, u, w);
	case WT_LEN:
		break;
	default:
		return fail(w, "field %s: a type this mapping does not carry", f->name);
	}
	if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
		rc = is_timestamp(f) ? timestamp_of(f, v, &sub, w) :
		     encode_message(f->descriptor, v, &sub, depth + 1, w);
		if (rc) {
			free(sub.buf);
			return rc;
		}
		return put_sub(o, f->id, &sub, w);
	}
	s = json_string_value(v);
	if (!s)
		return fail(w, "field %s: not a string", f->name);
	if (f->type == PROTOBUF_C_TYPE_STRING) {
		rc = put_tag(o, f->id, WT_LEN, w);
		if (!rc)
			rc = put_varint(o, json_string_length(v), w);
		return rc ? rc : put(o, s, json_string_length(v), w);
	}
	/* BYTES: standard base64, as the mapping writes it. */
	raw = malloc(json_string_length(v) / 4 * 3 + 1);
	if (!raw)
		return -ENOMEM;
	n = base64_decode(s, json_string_length(v), raw);
	if (n < 0) {
		free(raw);
		return fail(w, "field %s: not base64", f->name);
	}
	rc = put_tag(o, f->id, WT_LEN, w);
	if (!rc)
		rc = put_varint(o, (uint64_t)n, w);
	if (!rc)
		rc = put(o, raw, (size_t)n, w);
	free(raw);
	return rc;
}

/* A map's object: one entry message per member. */
static int encode_map(const ProtobufCFieldDescriptor *f, const json_t *v, struct out *o,
		      int depth, struct why *w)
{
	const ProtobufCMessageDescriptor *e = f->descriptor;
	const char *key;
	json_t *val;
	int rc = 0;

	if (!json_is_object(v))
		return fail(w, "field %s: a map that is not an object", f->name);
	json_object_foreach((json_t *)v, key, val) {
		struct out sub = { 0 };
		json_t *k = json_string(key);

		rc = k ? encode_value(&e->fields[0], k, &sub, depth + 1, w) : -ENOMEM;
		json_decref(k);
		if (!rc)
			rc = encode_value(&e->fields[1], val, &sub, depth + 1, w);
		if (rc) {
			free(sub.buf);
			return rc;
		}
		rc = put_sub(o, f->id, &sub, w);
		if (rc)
			return rc;
	}
	return rc;
}

static const ProtobufCFieldDescriptor *field_named(const ProtobufCMessageDescriptor *d,
						    const char *key)
{
	char name[NAME_MAX_JSON];

	for (unsigned i = 0; i < d->n_fields; i++) {
		json_name(d->fields[i].name, name);
		/* Readers of the mapping take the proto name too. */
		if (!strcmp(name, key) || !strcmp(d->fields[i].name, key))
			return &d->fields[i];
	}
	return NULL;
}

static int encode_message(const ProtobufCMessageDescriptor *d, const json_t *j, struct out *o,
			  int depth, struct why *w)
{
	const char *key;
	json_t *v;

	if (depth > PROTO_JSON_MAX_DEPTH)
		return fail(w, "%s: messages nested deeper than %d", d->name, PROTO_JSON_MAX_DEPTH);
	if (!json_is_object(j))
		return fail(w, "%s: not a JSON object", d->name);
	json_object_foreach((json_t *)j, key, v) {
		const ProtobufCFieldDescriptor *f = field_named(d, key);
		size_t i;
		json_t *e;
		int rc = 0;

		if (!f)
			return fail(w, "%s has no field %s", d->name, key);
		if (json_is_null(v))
			continue;
		if (f->label != PROTOBUF_C_LABEL_REPEATED) {
			rc = encode_value(f, v, o, depth, w);
		} else if (f->type == PROTOBUF_C_TYPE_MESSAGE && is_map_entry(f->descriptor)) {
			rc = encode_map(f, v, o, depth, w);
		} else if (!json_is_array(v)) {
			rc = fail(w, "field %s: a repeated field that is not an array", f->name);
		} else {
			json_array_foreach(v, i, e) {
				rc = encode_value(f, e, o, depth, w);
				if (rc)
					break;
			}
		}
		if (rc)
			return rc;
	}
	return 0;
}

int proto_json_encode(const ProtobufCMessageDescriptor *d, const json_t *j, uint8_t **out,
		      size_t *outlen, char *err, size_t errlen)
{
	struct why w = { err, errlen, 0 };
	struct out o = { 0 };
	int rc = encode_message(d, j, &o, 0, &w);

	/* An empty message is zero bytes, still a buffer to hand over. */
	if (!rc && !o.buf && !(o.buf = malloc(1)))
		rc = -ENOMEM;
	if (rc) {
		if (rc == -ENOMEM)
			fail(&w, "out of memory");
		free(o.buf);
		return rc;
	}
	*out = o.buf;
	*outlen = o.len;
	return 0;
}
