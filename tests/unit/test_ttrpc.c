/* test_ttrpc.c - ttrpc's codec (vmm/shim/ttrpc.c): the header as ttrpc lays it out, frames cut anywhere, Request and Response both ways, and what a hostile peer sends. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shim/task.pb-c.h"
#include "shim/ttrpc.h"
#include "shim/ttrpc.pb-c.h"

/* github.com/containerd/ttrpc channel.go, restated: length u32 BE, stream
 * id u32 BE, type u8 (1 request, 2 response), flags u8; 4 MiB at most. */
#define SPEC_HEADER_LEN 10
#define SPEC_MAX        (4u << 20)

Test(ttrpc_header, layout)
{
	static const uint8_t wire[] = { 0x00, 0x00, 0x01, 0x02, 0x80, 0x00, 0x00, 0x07, 0x01, 0x5a };
	struct ttrpc_header h = { .length = 0x0102, .stream_id = 0x80000007, .type = 1, .flags = 0x5a };
	uint8_t out[TTRPC_HEADER_LEN];

	cr_assert_eq(TTRPC_HEADER_LEN, SPEC_HEADER_LEN);
	cr_assert_eq(TTRPC_MESSAGE_MAX, SPEC_MAX);
	ttrpc_header_encode(&h, out);
	cr_assert_arr_eq(out, wire, sizeof(wire));
	memset(&h, 0, sizeof(h));
	cr_assert_eq(ttrpc_header_decode(&h, wire, sizeof(wire)), 0);
	cr_assert_eq(h.length, 0x0102);
	cr_assert_eq(h.stream_id, 0x80000007);
	cr_assert_eq(h.type, 1);
	cr_assert_eq(h.flags, 0x5a);
}

Test(ttrpc_header, bounded_length)
{
	uint8_t wire[TTRPC_HEADER_LEN];
	struct ttrpc_header h = { .length = SPEC_MAX, .stream_id = 3, .type = 1 };

	ttrpc_header_encode(&h, wire);
	cr_assert_eq(ttrpc_header_decode(&h, wire, sizeof(wire)), 0);
	h.length = SPEC_MAX + 1;
	ttrpc_header_encode(&h, wire);
	memset(&h, 0, sizeof(h));
	cr_assert_eq(ttrpc_header_decode(&h, wire, sizeof(wire)), -EMSGSIZE);
	cr_assert_eq(h.stream_id, 3, "the stream to answer on is known");
	memset(wire, 0xff, 4);
	cr_assert_eq(ttrpc_header_decode(&h, wire, sizeof(wire)), -EMSGSIZE);
	for (size_t n = 0; n < TTRPC_HEADER_LEN; n++)
		cr_assert_eq(ttrpc_header_decode(&h, wire, n), -EAGAIN, "%zu bytes", n);
}

/* Three frames back to back: an empty body, a small one, one of 100 KiB. */
static size_t three_frames(uint8_t **out)
{
	static const size_t lens[] = { 0, 5, 100 * 1024 };
	size_t total = 0, at = 0;
	uint8_t *p;

	for (int i = 0; i < 3; i++)
		total += TTRPC_HEADER_LEN + lens[i];
	p = malloc(total);
	cr_assert_not_null(p);
	for (int i = 0; i < 3; i++) {
		struct ttrpc_header h = { .length = (uint32_t)lens[i], .stream_id = 2u * i + 1, .type = 1 };

		ttrpc_header_encode(&h, p + at);
		at += TTRPC_HEADER_LEN;
		for (size_t j = 0; j < lens[i]; j++)
			p[at++] = (uint8_t)(j * 7 + i);
	}
	*out = p;
	return total;
}

static void check_frame(const struct ttrpc_frame *f, int i)
{
	static const size_t lens[] = { 0, 5, 100 * 1024 };

	cr_assert_eq(f->h.stream_id, 2u * i + 1);
	cr_assert_eq(f->h.length, lens[i]);
	cr_assert_eq(f->body == NULL, lens[i] == 0);
	for (size_t j = 0; j < lens[i]; j++)
		cr_assert_eq(f->body[j], (uint8_t)(j * 7 + i), "frame %d byte %zu", i, j);
}

Test(ttrpc_reader, frames_cut_anywhere)
{
	uint8_t *stream;
	size_t total = three_frames(&stream);
	static const size_t steps[] = { 1, 2, 3, 9, 10, 11, 4095, 65536, 1 << 20 };

	for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
		struct ttrpc_reader r;
		int got = 0;

		ttrpc_reader_init(&r);
		for (size_t at = 0; at < total;) {
			size_t n = total - at < steps[s] ? total - at : steps[s], used;

			while (n) {
				struct ttrpc_frame f;
				int rc = ttrpc_reader_feed(&r, stream + at, n, &used, &f);

				cr_assert_geq(rc, 0);
				cr_assert_leq(used, n);
				at += used;
				n -= used;
				if (rc == 1) {
					check_frame(&f, got++);
					free(f.body);
				} else {
					cr_assert_eq(n, 0, "0 means all was taken");
				}
			}
		}
		cr_assert_eq(got, 3, "step %zu", steps[s]);
		cr_assert_eq(r.body, NULL);
		ttrpc_reader_release(&r);
	}
	free(stream);
}

Test(ttrpc_reader, allocates_what_came_not_what_is_claimed)
{
	struct ttrpc_header h = { .length = SPEC_MAX, .stream_id = 1, .type = 1 };
	uint8_t buf[TTRPC_HEADER_LEN + 100] = { 0 };
	struct ttrpc_reader r;
	struct ttrpc_frame f;
	size_t used;

	ttrpc_header_encode(&h, buf);
	ttrpc_reader_init(&r);
	cr_assert_eq(ttrpc_reader_want(&r), TTRPC_HEADER_LEN);
	cr_assert_eq(ttrpc_reader_feed(&r, buf, sizeof(buf), &used, &f), 0);
	cr_assert_eq(used, sizeof(buf));
	cr_assert_leq(r.cap, 4096, "4 MiB claimed, 100 bytes came: %zu allocated", r.cap);
	cr_assert_eq(ttrpc_reader_want(&r), SPEC_MAX - 100);
	ttrpc_reader_release(&r);
}

Test(ttrpc_reader, oversized_stops_the_stream)
{
	struct ttrpc_header h = { .length = SPEC_MAX + 1, .stream_id = 9, .type = 1 };
	uint8_t buf[TTRPC_HEADER_LEN + 4];
	struct ttrpc_reader r;
	struct ttrpc_frame f;
	size_t used;

	ttrpc_header_encode(&h, buf);
	ttrpc_reader_init(&r);
	cr_assert_eq(ttrpc_reader_feed(&r, buf, sizeof(buf), &used, &f), -EMSGSIZE);
	cr_assert_eq(used, TTRPC_HEADER_LEN);
	cr_assert_eq(f.h.stream_id, 9);
	cr_assert_eq(f.body, NULL);
	cr_assert_eq(r.body, NULL, "nothing allocated for it");
	cr_assert_eq(ttrpc_reader_feed(&r, buf + used, 4, &used, &f), -EMSGSIZE);
	cr_assert_eq(used, 0);
	ttrpc_reader_release(&r);
}

static const struct ttrpc_kv md2[] = {
	{ TTRPC_NS_KEY, "k8s.io" }, { "x-empty", "" },
};

static const uint8_t binary_payload[] = { 0x0a, 0x00, 0xff, 0x00, 0x80, 0x01 };

Test(ttrpc_request, round_trip)
{
	struct ttrpc_request in = {
		.service = "containerd.task.v2.Task", .method = "Kill", .payload = binary_payload,
		.payload_len = sizeof(binary_payload), .timeout_ns = -5, .md = md2, .n_md = 2,
	}, out;
	struct ttrpc_header h;
	const char *why = "";
	uint8_t *frame;
	size_t len;

	cr_assert_eq(ttrpc_request_encode(&in, 0xfffffff1, &frame, &len), 0);
	cr_assert_eq(ttrpc_header_decode(&h, frame, len), 0);
	cr_assert_eq(h.length, len - TTRPC_HEADER_LEN);
	cr_assert_eq(h.stream_id, 0xfffffff1);
	cr_assert_eq(h.type, TTRPC_TYPE_REQUEST);
	cr_assert_eq(h.flags, 0);
	cr_assert_eq(ttrpc_request_decode(&out, frame + TTRPC_HEADER_LEN, h.length, &why), 0, "%s", why);
	free(frame);
	cr_assert_str_eq(out.service, in.service);
	cr_assert_str_eq(out.method, in.method);
	cr_assert_eq(out.payload_len, sizeof(binary_payload));
	cr_assert_arr_eq(out.payload, binary_payload, sizeof(binary_payload));
	cr_assert_eq(out.timeout_ns, -5);
	cr_assert_eq(out.n_md, 2);
	cr_assert_str_eq(out.md[0].key, TTRPC_NS_KEY);
	cr_assert_str_eq(out.md[1].value, "");
	cr_assert_str_eq(ttrpc_request_namespace(&out), "k8s.io");
	cr_assert_str_eq(ttrpc_request_md(&out, "X-EMPTY"), "", "keys without case");
	cr_assert_null(ttrpc_request_md(&out, "x-none"));
	ttrpc_request_release(&out);
}

Test(ttrpc_request, namespace_keys)
{
	struct ttrpc_kv grpc[] = { { TTRPC_NS_KEY_GRPC, "default" } };
	struct ttrpc_kv both[] = { { TTRPC_NS_KEY_GRPC, "default" }, { TTRPC_NS_KEY, "k8s.io" } };
	struct ttrpc_request r = { .md = grpc, .n_md = 1 };

	cr_assert_str_eq(ttrpc_request_namespace(&r), "default");
	r.md = both;
	r.n_md = 2;
	cr_assert_str_eq(ttrpc_request_namespace(&r), "k8s.io", "ttrpc's own key first");
	r.n_md = 0;
	cr_assert_null(ttrpc_request_namespace(&r));
}

Test(ttrpc_request, encode_refuses)
{
	char longname[TTRPC_NAME_MAX + 2], longval[TTRPC_MD_VALUE_MAX + 2];
	struct ttrpc_kv many[TTRPC_MD_MAX + 1], bad[1];
	struct ttrpc_request r = { .service = "s", .method = "m" };
	uint8_t *frame;
	size_t len;

	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	memset(longval, 'v', sizeof(longval) - 1);
	longval[sizeof(longval) - 1] = '\0';
	for (int i = 0; i <= TTRPC_MD_MAX; i++)
		many[i] = (struct ttrpc_kv){ "k", "v" };
	const char *names[] = { "", "a b", "a\tb", "\x7f", longname };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		r.service = names[i];
		cr_assert_eq(ttrpc_request_encode(&r, 1, &frame, &len), -EINVAL, "%zu", i);
		cr_assert_null(frame);
		r.service = "s";
		r.method = names[i];
		cr_assert_eq(ttrpc_request_encode(&r, 1, &frame, &len), -EINVAL, "%zu", i);
		r.method = "m";
	}
	longname[TTRPC_NAME_MAX] = '\0';
	r.service = longname;
	cr_assert_eq(ttrpc_request_encode(&r, 1, &frame, &len), 0, "exactly the longest name");
	free(frame);
	r.md = many;
	r.n_md = TTRPC_MD_MAX + 1;
	cr_assert_eq(ttrpc_request_encode(&r, 1, &frame, &len), -EINVAL);
	r.n_md = TTRPC_MD_MAX;
	cr_assert_eq(ttrpc_request_encode(&r, 1, &frame, &len), 0);
	free(frame);
	r.md = bad;
	r.n_md = 1;
	bad[0] = (struct ttrpc_kv){ "", "v" };
	cr_assert_eq(ttrpc_request_encode(&r, 1, &frame, &len), -EINVAL);
	bad[0] = (struct ttrpc_kv){ "k", longval };
	cr_assert_eq(ttrpc_request_encode(&r, 1, &frame, &len), -EINVAL);
	longval[TTRPC_MD_VALUE_MAX] = '\0';
	cr_assert_eq(ttrpc_request_encode(&r, 1, &frame, &len), 0);
	free(frame);
	r.n_md = 0;
	r.payload_len = 1;
	cr_assert_eq(ttrpc_request_encode(&r, 1, &frame, &len), -EINVAL, "a length without bytes");
}

/* A Request body the codec would never write, made with the generated
 * code: what a peer that is not us may send. */
static size_t raw_request(uint8_t *out, const char *service, size_t slen, const char *method,
			  size_t mlen, Ttrpc__KeyValue **kv, size_t nkv)
{
	Ttrpc__Request m = TTRPC__REQUEST__INIT;

	m.service = (ProtobufCBinaryData){ slen, (uint8_t *)service };
	m.method = (ProtobufCBinaryData){ mlen, (uint8_t *)method };
	m.metadata = kv;
	m.n_metadata = nkv;
	cr_assert_leq(ttrpc__request__get_packed_size(&m), 1 << 20);
	return ttrpc__request__pack(&m, out);
}

Test(ttrpc_request, decode_refuses)
{
	static uint8_t buf[1 << 20];
	static char value[TTRPC_MD_VALUE_MAX + 1];
	Ttrpc__KeyValue kv[TTRPC_MD_MAX + 1], *kvp[TTRPC_MD_MAX + 1];
	struct ttrpc_request r;
	const char *why;
	size_t n;

	for (int i = 0; i <= TTRPC_MD_MAX; i++) {
		ttrpc__key_value__init(&kv[i]);
		kv[i].key = (ProtobufCBinaryData){ 1, (uint8_t *)"k" };
		kvp[i] = &kv[i];
	}
	struct { const char *s; size_t sl; const char *m; size_t ml; size_t nkv; } cases[] = {
		{ "svc", 3, "Start\0Kill", 10, 0 },   /* a NUL in a name */
		{ "s\0", 2, "m", 1, 0 },
		{ "", 0, "m", 1, 0 },                 /* no service */
		{ "s", 1, "", 0, 0 },                 /* no method */
		{ "s", 1, "m m", 3, 0 },              /* a space */
		{ "s", 1, "m", 1, TTRPC_MD_MAX + 1 }, /* too many pairs */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		why = "";
		n = raw_request(buf, cases[i].s, cases[i].sl, cases[i].m, cases[i].ml, kvp, cases[i].nkv);
		cr_assert_eq(ttrpc_request_decode(&r, buf, n, &why), -EBADMSG, "case %zu", i);
		cr_assert_neq(strlen(why), 0);
		cr_assert_null(r.owned);
	}
	/* Metadata: an empty key, a NUL in a key or value, a value too long. */
	kv[0].key = (ProtobufCBinaryData){ 0, NULL };
	n = raw_request(buf, "s", 1, "m", 1, kvp, 1);
	cr_assert_eq(ttrpc_request_decode(&r, buf, n, &why), -EBADMSG);
	kv[0].key = (ProtobufCBinaryData){ 3, (uint8_t *)"a\0b" };
	n = raw_request(buf, "s", 1, "m", 1, kvp, 1);
	cr_assert_eq(ttrpc_request_decode(&r, buf, n, &why), -EBADMSG);
	kv[0].key = (ProtobufCBinaryData){ 1, (uint8_t *)"k" };
	kv[0].value = (ProtobufCBinaryData){ 2, (uint8_t *)"\0v" };
	n = raw_request(buf, "s", 1, "m", 1, kvp, 1);
	cr_assert_eq(ttrpc_request_decode(&r, buf, n, &why), -EBADMSG);
	memset(value, 'v', sizeof(value));
	kv[0].value = (ProtobufCBinaryData){ sizeof(value), (uint8_t *)value };
	n = raw_request(buf, "s", 1, "m", 1, kvp, 1);
	cr_assert_eq(ttrpc_request_decode(&r, buf, n, &why), -EBADMSG);
	kv[0].value.len--;
	n = raw_request(buf, "s", 1, "m", 1, kvp, 1);
	cr_assert_eq(ttrpc_request_decode(&r, buf, n, &why), 0, "the longest value: %s", why);
	ttrpc_request_release(&r);
}

Test(ttrpc_request, every_truncation)
{
	struct ttrpc_request in = {
		.service = "containerd.task.v2.Task", .method = "Start", .payload = binary_payload,
		.payload_len = sizeof(binary_payload), .timeout_ns = 1000000000, .md = md2, .n_md = 2,
	}, out;
	const char *why;
	uint8_t *frame, *cut;
	size_t len;
	int whole = 0;

	cr_assert_eq(ttrpc_request_encode(&in, 1, &frame, &len), 0);
	for (size_t n = 0; n <= len - TTRPC_HEADER_LEN; n++) {
		/* Exactly n bytes on the heap: a read past them is ASan's. */
		cut = malloc(n ? n : 1);
		memcpy(cut, frame + TTRPC_HEADER_LEN, n);
		int rc = ttrpc_request_decode(&out, cut, n, &why);

		cr_assert(rc == 0 || rc == -EBADMSG, "%zu bytes: %d", n, rc);
		if (!rc) {
			/* Cut between two fields: a valid shorter request. */
			cr_assert_str_eq(out.service, in.service);
			cr_assert_str_eq(out.method, in.method);
			whole += n == len - TTRPC_HEADER_LEN;
			ttrpc_request_release(&out);
		}
		free(cut);
	}
	cr_assert_eq(whole, 1);
	free(frame);
}

/* A small generator of its own: the same garbage on every run. */
static uint32_t rnd(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

Test(ttrpc_request, garbage)
{
	uint32_t seed = 0x7772c0de;
	struct ttrpc_request r;
	struct ttrpc_response resp;
	const char *why;

	for (int i = 0; i < 20000; i++) {
		size_t n = rnd(&seed) % 256;
		uint8_t *p = malloc(n ? n : 1);

		for (size_t j = 0; j < n; j++)
			p[j] = (uint8_t)rnd(&seed);
		if (n > 4 && i % 2)
			p[0] = 0x0a, p[1] = (uint8_t)(n - 2 < 127 ? n - 2 : 127);  /* a plausible start */
		int rc = ttrpc_request_decode(&r, p, n, &why);

		cr_assert(rc == 0 || rc == -EBADMSG);
		if (!rc)
			ttrpc_request_release(&r);
		rc = ttrpc_response_decode(&resp, p, n, &why);
		cr_assert(rc == 0 || rc == -EBADMSG);
		if (!rc) {
			cr_assert_leq(resp.code, TTRPC_CODE_MAX);
			ttrpc_response_release(&resp);
		}
		free(p);
	}
}

/* 4 MiB of two-byte empty metadata pairs, then of three-byte unknown
 * fields: protobuf-c would spend tens of bytes on each; the budget
 * refuses them fast instead. */
Test(ttrpc_request, memory_budget)
{
	size_t n = SPEC_MAX - 16;
	uint8_t *p = malloc(n);
	struct ttrpc_request r;
	const char *why = "";
	struct timespec t0, t1;

	cr_assert_not_null(p);
	for (size_t i = 0; i + 2 <= n; i += 2)
		p[i] = 0x2a, p[i + 1] = 0x00;   /* field 5, length 0 */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cr_assert_eq(ttrpc_request_decode(&r, p, n - n % 2, &why), -EBADMSG);
	for (size_t i = 0; i + 3 <= n; i += 3)
		p[i] = 0xf8, p[i + 1] = 0x07, p[i + 2] = 0x00;   /* field 127, varint 0 */
	cr_assert_eq(ttrpc_request_decode(&r, p, n - n % 3, &why), -EBADMSG);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	cr_assert_lt(t1.tv_sec - t0.tv_sec, 3, "refused in well under a second each");
	cr_assert_neq(strstr(why, "too many fields"), NULL, "%s", why);
	free(p);
}

Test(ttrpc_response, round_trip)
{
	struct ttrpc_response in = { .code = TTRPC_OK, .payload = binary_payload,
				     .payload_len = sizeof(binary_payload) }, out;
	struct ttrpc_header h;
	const char *why = "";
	uint8_t *frame;
	size_t len;

	cr_assert_eq(ttrpc_response_encode(&in, 7, &frame, &len), 0);
	cr_assert_eq(ttrpc_header_decode(&h, frame, len), 0);
	cr_assert_eq(h.type, TTRPC_TYPE_RESPONSE);
	cr_assert_eq(h.stream_id, 7);
	cr_assert_eq(frame[TTRPC_HEADER_LEN], 0x0a, "a status even for OK");
	cr_assert_eq(frame[TTRPC_HEADER_LEN + 1], 0x00, "an empty one");
	cr_assert_eq(ttrpc_response_decode(&out, frame + TTRPC_HEADER_LEN, h.length, &why), 0);
	free(frame);
	cr_assert_eq(out.code, TTRPC_OK);
	cr_assert_str_eq(out.message, "");
	cr_assert_arr_eq(out.payload, binary_payload, sizeof(binary_payload));
	ttrpc_response_release(&out);

	in = (struct ttrpc_response){ .code = TTRPC_FAILED_PRECONDITION, .message = "task c1 is paused" };
	cr_assert_eq(ttrpc_response_encode(&in, 9, &frame, &len), 0);
	cr_assert_eq(ttrpc_response_decode(&out, frame + TTRPC_HEADER_LEN, len - TTRPC_HEADER_LEN,
					   &why), 0);
	free(frame);
	cr_assert_eq(out.code, TTRPC_FAILED_PRECONDITION);
	cr_assert_str_eq(out.message, "task c1 is paused");
	cr_assert_eq(out.payload_len, 0);
	ttrpc_response_release(&out);

	for (int32_t bad = -1; bad <= TTRPC_CODE_MAX + 1; bad += TTRPC_CODE_MAX + 2) {
		in.code = bad;
		cr_assert_eq(ttrpc_response_encode(&in, 9, &frame, &len), -EINVAL);
	}
}

Test(ttrpc_response, no_status_is_ok_and_strange_codes_unknown)
{
	Ttrpc__Response m = TTRPC__RESPONSE__INIT;
	Google__Rpc__Status st = GOOGLE__RPC__STATUS__INIT;
	struct ttrpc_response out;
	const char *why;
	uint8_t buf[64];
	size_t n;

	n = ttrpc__response__pack(&m, buf);
	cr_assert_eq(n, 0);
	cr_assert_eq(ttrpc_response_decode(&out, buf, n, &why), 0);
	cr_assert_eq(out.code, TTRPC_OK);
	ttrpc_response_release(&out);
	m.status = &st;
	st.code = -3;
	st.message = "negative";
	n = ttrpc__response__pack(&m, buf);
	cr_assert_eq(ttrpc_response_decode(&out, buf, n, &why), 0);
	cr_assert_eq(out.code, TTRPC_UNKNOWN);
	cr_assert_str_eq(out.message, "negative");
	ttrpc_response_release(&out);
}

Test(ttrpc_codes, names_and_errnos)
{
	cr_assert_str_eq(ttrpc_code_name(TTRPC_OK), "OK");
	cr_assert_str_eq(ttrpc_code_name(12), "UNIMPLEMENTED");
	cr_assert_str_eq(ttrpc_code_name(TTRPC_UNAUTHENTICATED), "UNAUTHENTICATED");
	cr_assert_str_eq(ttrpc_code_name(17), "?");
	cr_assert_str_eq(ttrpc_code_name(-1), "?");
	/* google.rpc.Code, restated from googleapis' code.proto. */
	cr_assert_eq(TTRPC_CANCELLED, 1);
	cr_assert_eq(TTRPC_UNKNOWN, 2);
	cr_assert_eq(TTRPC_INVALID_ARGUMENT, 3);
	cr_assert_eq(TTRPC_DEADLINE_EXCEEDED, 4);
	cr_assert_eq(TTRPC_NOT_FOUND, 5);
	cr_assert_eq(TTRPC_ALREADY_EXISTS, 6);
	cr_assert_eq(TTRPC_FAILED_PRECONDITION, 9);
	cr_assert_eq(TTRPC_UNIMPLEMENTED, 12);
	cr_assert_eq(TTRPC_INTERNAL, 13);
	cr_assert_eq(TTRPC_UNAVAILABLE, 14);
	cr_assert_eq(ttrpc_code_from_errno(0), TTRPC_OK);
	cr_assert_eq(ttrpc_code_from_errno(-ENOENT), TTRPC_NOT_FOUND);
	cr_assert_eq(ttrpc_code_from_errno(ENOENT), TTRPC_NOT_FOUND);
	cr_assert_eq(ttrpc_code_from_errno(-EEXIST), TTRPC_ALREADY_EXISTS);
	cr_assert_eq(ttrpc_code_from_errno(-EINVAL), TTRPC_INVALID_ARGUMENT);
	cr_assert_eq(ttrpc_code_from_errno(-ETIMEDOUT), TTRPC_DEADLINE_EXCEEDED);
	cr_assert_eq(ttrpc_code_from_errno(-ENOSYS), TTRPC_UNIMPLEMENTED);
	cr_assert_eq(ttrpc_code_from_errno(-EBUSY), TTRPC_FAILED_PRECONDITION);
	cr_assert_eq(ttrpc_code_from_errno(-EIO), TTRPC_INTERNAL);
}

Test(ttrpc_payload, pack_and_unpack)
{
	Containerd__Task__V2__WaitResponse w = CONTAINERD__TASK__V2__WAIT_RESPONSE__INIT, *back;
	Google__Protobuf__Timestamp ts = GOOGLE__PROTOBUF__TIMESTAMP__INIT;
	Google__Protobuf__Empty empty = GOOGLE__PROTOBUF__EMPTY__INIT;
	ProtobufCMessage *m;
	const char *why = "";
	uint8_t *p;
	size_t n;

	ts.seconds = 1767225600;
	ts.nanos = 42;
	w.exit_status = 137;
	w.exited_at = &ts;
	cr_assert_eq(ttrpc_pack(&w.base, &p, &n), 0);
	cr_assert_eq(ttrpc_unpack(&containerd__task__v2__wait_response__descriptor, p, n, &m, &why), 0);
	back = (Containerd__Task__V2__WaitResponse *)m;
	cr_assert_eq(back->exit_status, 137);
	cr_assert_not_null(back->exited_at);
	cr_assert_eq(back->exited_at->seconds, 1767225600);
	cr_assert_eq(back->exited_at->nanos, 42);
	ttrpc_unpacked_free(m);
	/* Truncated: refused, never a crash. */
	cr_assert_eq(ttrpc_unpack(&containerd__task__v2__wait_response__descriptor, p, n - 1, &m, &why),
		     -EBADMSG);
	cr_assert_null(m);
	free(p);
	cr_assert_eq(ttrpc_pack(&empty.base, &p, &n), 0);
	cr_assert_null(p);
	cr_assert_eq(n, 0);
	cr_assert_eq(ttrpc_unpack(&google__protobuf__empty__descriptor, NULL, 0, &m, &why), 0);
	ttrpc_unpacked_free(m);
}
