/* test_connect.c - the Connect protocol as a peer (connect-es, the E2B SDK) reads it: envelope bytes, every refusal of a request body, codes and statuses, error bodies valid JSON whatever the message holds, request headers. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "serve/connect.h"

/* connectrpc.com/docs/protocol, restated on purpose. */
#define SPEC_ENVELOPE 5
#define SPEC_MIB      (1u << 20)

static void check_bytes(const uint8_t *got, const char *want, size_t n)
{
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(got[i], (uint8_t)want[i], "byte %zu: 0x%02x, want 0x%02x", i, got[i],
			     (uint8_t)want[i]);
}

Test(connect, envelope_is_flags_then_a_big_endian_length)
{
	uint8_t h[CONNECT_ENVELOPE_LEN];

	cr_assert_eq(CONNECT_ENVELOPE_LEN, SPEC_ENVELOPE);
	cr_assert_eq(CONNECT_MAX_MESSAGE, SPEC_MIB);
	connect_envelope(h, 0, 0x6b);
	check_bytes(h, "\x00\x00\x00\x00\x6b", 5);
	connect_envelope(h, CONNECT_FLAG_END_STREAM, 0x01020304);
	check_bytes(h, "\x02\x01\x02\x03\x04", 5);
	connect_envelope(h, CONNECT_FLAG_COMPRESSED, UINT32_MAX);
	check_bytes(h, "\x01\xff\xff\xff\xff", 5);
}

/* The request connect-web sends for Start, as captured on the wire. */
Test(connect, unwrap_takes_one_envelope_and_points_inside_the_body)
{
	static const char msg[] = "{\"process\":{\"cmd\":\"/bin/bash\"}}";
	uint8_t body[64];
	const uint8_t *m = NULL;
	size_t n = 0;
	const char *why = NULL;

	connect_envelope(body, 0, sizeof(msg) - 1);
	memcpy(body + 5, msg, sizeof(msg) - 1);
	cr_assert_eq(connect_unwrap(body, 5 + sizeof(msg) - 1, &m, &n, &why), 0, "%s", why);
	cr_assert_eq(m, body + 5);
	cr_assert_eq(n, sizeof(msg) - 1);
	cr_assert_eq(connect_unwrap((const uint8_t *)"\0\0\0\0\0", 5, &m, &n, NULL), 0,
		     "an empty message is one envelope too");
	cr_assert_eq(n, 0);
}

static void refused(const char *body, size_t len, const char *what)
{
	const uint8_t *m = NULL;
	size_t n = 7;
	const char *why = NULL;

	cr_assert_eq(connect_unwrap((const uint8_t *)body, len, &m, &n, &why), -EINVAL, "%s", what);
	cr_assert(why && *why && !strchr(why, '\n'), "%s: one line of why", what);
	cr_assert_null(m, "%s: no message", what);
	cr_assert_eq(n, 7, "%s: msglen untouched", what);
	cr_assert_eq(connect_unwrap((const uint8_t *)body, len, &m, &n, NULL), -EINVAL,
		     "%s: why may be NULL", what);
}

Test(connect, unwrap_refuses_every_body_that_is_not_exactly_one_plain_envelope)
{
	refused("", 0, "empty");
	refused("\0\0\0\0", 4, "header cut");
	refused("\0\0\0\0\x02{}x", 8, "a byte after the message");
	refused("\0\0\0\0\x02{}\0\0\0\0\0", 12, "a second envelope");
	refused("\0\0\0\0\x03{}", 7, "the message cut");
	refused("\0\0\0\x01\0{}", 7, "length over the body");
	refused("\x01\0\0\0\x02{}", 7, "compressed");
	refused("\x02\0\0\0\x02{}", 7, "end-stream");
	refused("\x03\0\0\0\x02{}", 7, "compressed end-stream");
	refused("\x80\0\0\0\x02{}", 7, "unknown flag");
	refused("\0\xff\xff\xff\xff", 5, "4 GiB said");
}

Test(connect, unwrap_takes_one_mib_and_refuses_a_byte_more)
{
	size_t len = SPEC_ENVELOPE + SPEC_MIB + 1;
	uint8_t *body = calloc(1, len);
	const uint8_t *m;
	size_t n;
	const char *why = NULL;

	cr_assert_not_null(body);
	connect_envelope(body, 0, SPEC_MIB);
	cr_assert_eq(connect_unwrap(body, len - 1, &m, &n, &why), 0, "%s", why);
	cr_assert_eq(n, SPEC_MIB);
	connect_envelope(body, 0, SPEC_MIB + 1);
	cr_assert_eq(connect_unwrap(body, len, &m, &n, &why), -EINVAL);
	cr_assert_not_null(strstr(why, "over"), "%s", why);
	free(body);
}

Test(connect, codes_have_their_wire_names_and_statuses)
{
	static const struct { enum connect_code c; int num; const char *name; int status; } t[] = {
		{ CONNECT_CANCELED, 1, "canceled", 499 },
		{ CONNECT_UNKNOWN, 2, "unknown", 500 },
		{ CONNECT_INVALID_ARGUMENT, 3, "invalid_argument", 400 },
		{ CONNECT_DEADLINE_EXCEEDED, 4, "deadline_exceeded", 504 },
		{ CONNECT_NOT_FOUND, 5, "not_found", 404 },
		{ CONNECT_ALREADY_EXISTS, 6, "already_exists", 409 },
		{ CONNECT_PERMISSION_DENIED, 7, "permission_denied", 403 },
		{ CONNECT_RESOURCE_EXHAUSTED, 8, "resource_exhausted", 429 },
		{ CONNECT_FAILED_PRECONDITION, 9, "failed_precondition", 400 },
		{ CONNECT_ABORTED, 10, "aborted", 409 },
		{ CONNECT_OUT_OF_RANGE, 11, "out_of_range", 400 },
		{ CONNECT_UNIMPLEMENTED, 12, "unimplemented", 501 },
		{ CONNECT_INTERNAL, 13, "internal", 500 },
		{ CONNECT_UNAVAILABLE, 14, "unavailable", 503 },
		{ CONNECT_DATA_LOSS, 15, "data_loss", 500 },
		{ CONNECT_UNAUTHENTICATED, 16, "unauthenticated", 401 },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		cr_assert_eq((int)t[i].c, t[i].num);
		cr_assert_str_eq(connect_code_name(t[i].c), t[i].name);
		cr_assert_eq(connect_code_status(t[i].c), t[i].status, "%s", t[i].name);
	}
	cr_assert_str_eq(connect_code_name(CONNECT_OK), "ok");
	cr_assert_eq(connect_code_status(CONNECT_OK), 200);
	cr_assert_str_eq(connect_code_name((enum connect_code)17), "unknown");
	cr_assert_str_eq(connect_code_name((enum connect_code)-1), "unknown");
	cr_assert_eq(connect_code_status((enum connect_code)17), 500);
	cr_assert_eq(connect_code_status((enum connect_code)-1), 500);
}

Test(connect, errno_maps_to_the_code_the_sdk_acts_on)
{
	static const struct { int err; enum connect_code c; } t[] = {
		{ ENOENT, CONNECT_NOT_FOUND }, { EEXIST, CONNECT_ALREADY_EXISTS },
		{ EACCES, CONNECT_PERMISSION_DENIED }, { EPERM, CONNECT_PERMISSION_DENIED },
		{ EROFS, CONNECT_PERMISSION_DENIED }, { EINVAL, CONNECT_INVALID_ARGUMENT },
		{ ENAMETOOLONG, CONNECT_INVALID_ARGUMENT }, { ELOOP, CONNECT_INVALID_ARGUMENT },
		{ ENOTDIR, CONNECT_INVALID_ARGUMENT }, { EISDIR, CONNECT_INVALID_ARGUMENT },
		{ ETIMEDOUT, CONNECT_DEADLINE_EXCEEDED }, { ENOSPC, CONNECT_RESOURCE_EXHAUSTED },
		{ EDQUOT, CONNECT_RESOURCE_EXHAUSTED }, { EFBIG, CONNECT_RESOURCE_EXHAUSTED },
		{ ECANCELED, CONNECT_CANCELED }, { EBUSY, CONNECT_FAILED_PRECONDITION },
		{ ENOTEMPTY, CONNECT_FAILED_PRECONDITION }, { ECONNREFUSED, CONNECT_UNAVAILABLE },
		{ ECONNRESET, CONNECT_UNAVAILABLE }, { EPIPE, CONNECT_UNAVAILABLE },
		{ EIO, CONNECT_INTERNAL }, { ENOMEM, CONNECT_INTERNAL }, { 0, CONNECT_INTERNAL },
		{ -ENOENT, CONNECT_INTERNAL }, { 100000, CONNECT_INTERNAL },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		cr_assert_eq(connect_code_of_errno(t[i].err), t[i].c, "errno %d", t[i].err);
}

static void json_eq(char *got, const char *want)
{
	cr_assert_not_null(got);
	cr_assert_str_eq(got, want);
	free(got);
}

Test(connect, error_bodies_are_exact_compact_json)
{
	json_eq(connect_error_json(CONNECT_NOT_FOUND, "no such file"),
		"{\"code\":\"not_found\",\"message\":\"no such file\"}");
	json_eq(connect_error_json(CONNECT_INTERNAL, NULL), "{\"code\":\"internal\"}");
	json_eq(connect_error_json(CONNECT_INTERNAL, ""), "{\"code\":\"internal\"}");
	json_eq(connect_error_json(CONNECT_OK, "x"), "{\"code\":\"unknown\",\"message\":\"x\"}");
	json_eq(connect_error_json((enum connect_code)99, NULL), "{\"code\":\"unknown\"}");
	json_eq(connect_error_json(CONNECT_INVALID_ARGUMENT, "a\"b\\c\n\x01\x7f/"),
		"{\"code\":\"invalid_argument\",\"message\":\"a\\\"b\\\\c\\n\\u0001\x7f/\"}");
	json_eq(connect_end_stream_json(CONNECT_OK, "ignored"), "{}");
	json_eq(connect_end_stream_json(CONNECT_DEADLINE_EXCEEDED, "timeout"),
		"{\"error\":{\"code\":\"deadline_exceeded\",\"message\":\"timeout\"}}");
	json_eq(connect_end_stream_json(CONNECT_UNAVAILABLE, NULL),
		"{\"error\":{\"code\":\"unavailable\"}}");
}

/* The message member of an error body, after a JSON parser read it. */
static char *message_of(const char *in)
{
	char *s = connect_error_json(CONNECT_INTERNAL, in), *out;
	json_error_t je;
	json_t *j;

	cr_assert_not_null(s);
	j = json_loads(s, 0, &je);
	cr_assert_not_null(j, "%s: %s", s, je.text);
	out = strdup(json_string_value(json_object_get(j, "message")));
	json_decref(j);
	free(s);
	return out;
}

static void message_is(const char *in, const char *want)
{
	char *got = message_of(in);

	cr_assert_str_eq(got, want, "%s", in);
	free(got);
}

Test(connect, error_messages_become_valid_utf8_with_u_fffd)
{
	message_is("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\x9f", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\x9f");
	message_is("a\xff" "b", "a\xef\xbf\xbd" "b");
	message_is("\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd");                 /* overlong '/' */
	message_is("\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");  /* a surrogate */
	message_is("\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
	message_is("end\xe2\x82", "end\xef\xbf\xbd\xef\xbf\xbd");          /* cut at the end */
	message_is("\x80x", "\xef\xbf\xbdx");                               /* a lone continuation */
}

Test(connect, error_messages_are_cut_at_1024_bytes_on_a_character)
{
	char in[2048], *got;

	memset(in, 'a', sizeof(in) - 1);
	in[sizeof(in) - 1] = '\0';
	got = message_of(in);
	cr_assert_eq(strlen(got), CONNECT_MAX_ERROR_TEXT);
	free(got);
	/* 1023 bytes, then a 3-byte euro sign that would end at 1026. */
	memcpy(in + 1023, "\xe2\x82\xac", 3);
	got = message_of(in);
	cr_assert_eq(strlen(got), 1023);
	free(got);
	memset(in, 'a', 1022);
	memcpy(in + 1021, "\xe2\x82\xac", 3);   /* ends at 1024 exactly: kept */
	got = message_of(in);
	cr_assert_eq(strlen(got), 1024);
	cr_assert_eq(memcmp(got + 1021, "\xe2\x82\xac", 3), 0);
	free(got);
	memset(in, 'a', 1022);
	in[1022] = '\xff';                       /* U+FFFD would end at 1025 */
	got = message_of(in);
	cr_assert_eq(strlen(got), 1022);
	free(got);
}

Test(connect, json_text_reads_at_most_max_bytes_and_keeps_them_valid)
{
	char unterminated[4] = { 'a', 'b', 'c', 'd' };
	json_t *j = connect_json_text(unterminated, 3);

	cr_assert_str_eq(json_string_value(j), "abc");
	json_decref(j);
	j = connect_json_text("abc", 0);
	cr_assert_str_eq(json_string_value(j), "");
	json_decref(j);
	j = connect_json_text("\xf0\x9f\x90\x9f", 3);
	cr_assert_str_eq(json_string_value(j), "", "a 4-byte character does not fit 3");
	json_decref(j);
}

Test(connect, content_types_of_its_two_codecs)
{
	static const char *const unary[] = {
		"application/json", "application/json; charset=utf-8", "Application/JSON",
		"application/json;charset=UTF-8", "application/json; charset=utf8",
	};
	static const char *const neither[] = {
		"", "application/json ", "application/jsonx", "application/protobuf",
		"application/json; charset=latin1", "application/json; charset=utf-8; x=y",
		"application/json;", "text/json", "application/proto2", "application/x-protobuf",
		"application/connect+json2", "application/grpc+json", "application/grpc+proto",
	};
	enum connect_codec c;

	for (size_t i = 0; i < sizeof(unary) / sizeof(unary[0]); i++) {
		char stream[80];

		c = CONNECT_CODEC_PROTO;
		cr_assert_eq(connect_unary_codec(unary[i], &c), 0, "%s", unary[i]);
		cr_assert_eq(c, CONNECT_CODEC_JSON, "%s", unary[i]);
		cr_assert_eq(connect_stream_codec(unary[i], &c), -EINVAL, "%s", unary[i]);
		snprintf(stream, sizeof(stream), "application/connect+json%s", unary[i] + 16);
		cr_assert_eq(connect_stream_codec(stream, &c), 0, "%s", stream);
		cr_assert_eq(connect_unary_codec(stream, &c), -EINVAL, "%s", stream);
	}
	cr_assert_eq(connect_unary_codec("application/proto", &c), 0);
	cr_assert_eq(c, CONNECT_CODEC_PROTO);
	cr_assert_eq(connect_stream_codec("Application/Connect+Proto", &c), 0);
	cr_assert_eq(c, CONNECT_CODEC_PROTO);
	cr_assert_eq(connect_stream_codec("application/proto", &c), -EINVAL);
	cr_assert_eq(connect_unary_codec("application/connect+proto", &c), -EINVAL);
	for (size_t i = 0; i < sizeof(neither) / sizeof(neither[0]); i++)
		cr_assert(connect_unary_codec(neither[i], &c) && connect_stream_codec(neither[i], &c),
			  "%s", neither[i]);
	cr_assert_eq(connect_unary_codec(NULL, &c), -EINVAL);
	cr_assert_eq(connect_stream_codec(NULL, &c), -EINVAL);
	cr_assert_str_eq(connect_content_type(CONNECT_CODEC_PROTO, true), "application/connect+proto");
	cr_assert_str_eq(connect_content_type(CONNECT_CODEC_PROTO, false), "application/proto");
	cr_assert_str_eq(connect_content_type(CONNECT_CODEC_JSON, true), "application/connect+json");
	cr_assert_str_eq(connect_content_type(CONNECT_CODEC_JSON, false), "application/json");
}

Test(connect, timeout_is_one_to_ten_digits)
{
	static const char *const bad[] = {
		"", "0", "00", "-1", "+1", " 1", "1 ", "1.5", "0x10", "1e3", "abc", "12345678901",
	};
	uint64_t ms = 7;

	cr_assert_eq(connect_timeout_ms(NULL, &ms), 0);
	cr_assert_eq(ms, 0, "no header: no deadline");
	cr_assert_eq(connect_timeout_ms("60000", &ms), 0);
	cr_assert_eq(ms, 60000);
	cr_assert_eq(connect_timeout_ms("1", &ms), 0);
	cr_assert_eq(ms, 1);
	cr_assert_eq(connect_timeout_ms("007", &ms), 0);
	cr_assert_eq(ms, 7);
	cr_assert_eq(connect_timeout_ms("9999999999", &ms), 0);
	cr_assert_eq(ms, 9999999999ull);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ms = 7;
		cr_assert_eq(connect_timeout_ms(bad[i], &ms), -EINVAL, "\"%s\"", bad[i]);
		cr_assert_eq(ms, 0, "\"%s\"", bad[i]);
	}
}

Test(connect, a_queue_gives_its_envelopes_back_in_any_pieces)
{
	struct connect_queue q = { 0 };
	uint8_t out[64];
	size_t n = 0, got;

	cr_assert_eq(connect_queue_take(&q, out, sizeof(out)), 0, "an empty queue gives nothing");
	cr_assert(connect_queue_push(&q, 0, strdup("{\"a\":1}")));
	cr_assert(connect_queue_push(&q, CONNECT_FLAG_END_STREAM, strdup("{}")));
	cr_assert_not(connect_queue_push(&q, 0, NULL), "out of memory is no envelope");
	while ((got = connect_queue_take(&q, out + n, 3)) > 0)
		n += got;
	cr_assert_eq(n, 2 * CONNECT_ENVELOPE_LEN + 7 + 2);
	cr_assert(!memcmp(out, "\0\0\0\0\7{\"a\":1}\2\0\0\0\2{}", n));
	/* Emptied: pushing starts again at the front. */
	cr_assert(connect_queue_push(&q, 0, strdup("{}")));
	connect_queue_drop(&q);
	cr_assert_eq(connect_queue_take(&q, out, sizeof(out)), 0, "dropped");
	connect_queue_free(&q);
	connect_queue_free(&q);   /* twice: harmless */
}
