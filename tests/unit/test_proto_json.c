/* test_proto_json.c - protobuf's binary encoding to JSON and back on envd's messages: bytes protoc made (not our C) decoded, our encoding read back by protoc, and hostile bytes refused with a reason. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "protoc_run.h"
#include "serve/e2b_msg.h"
#include "serve/proto_json.h"
#include "envd_filesystem.pb-c.h"
#include "envd_process.pb-c.h"

/* protoc --encode or --decode of type over envd's .proto files. */
static uint8_t *protoc(const char *mode, const char *type, const void *in, size_t len,
		       size_t *outlen)
{
	static const char *const dirs[] = { "ENVD_PROTO_DIR", "COMMON_PROTO_DIR", NULL };

	return protoc_run(mode, type, dirs, in, len, outlen);
}

static json_t *decode_text(const ProtobufCMessageDescriptor *d, const char *type,
			   const char *text)
{
	size_t n;
	uint8_t *bytes = protoc("encode", type, text, strlen(text), &n);
	char err[300] = "";
	json_t *j = proto_json_decode(d, bytes, n, err, sizeof(err));

	cr_assert_not_null(j, "%s: %s", text, err);
	free(bytes);
	return j;
}

static void assert_json(json_t *j, const char *want)
{
	json_t *w = json_loads(want, 0, NULL);
	char *got = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);

	cr_assert_not_null(w, "%s", want);
	cr_assert(json_equal(j, w), "got %s, want %s", got, want);
	free(got);
	json_decref(w);
	json_decref(j);
}

Test(proto_json, decodes_what_protoc_encodes_as_the_json_mapping_has_it)
{
	assert_json(decode_text(&process__start_request__descriptor, "process.StartRequest",
				"process { cmd: \"/bin/sh\" args: \"-c\" args: \"echo \\303\\251\" "
				"envs { key: \"A\" value: \"1\" } envs { key: \"B\" value: \"\" } } "
				"pty { size { cols: 80 rows: 24 } } tag: \"t\""),
		    "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\",\"echo \u00e9\"],"
		    "\"envs\":{\"A\":\"1\",\"B\":\"\"}},"
		    "\"pty\":{\"size\":{\"cols\":80,\"rows\":24}},\"tag\":\"t\"}");
	/* A field sent with its default value (E2B's proto3 "optional" stdin:
	 * false, which our .proto cannot mark, so protoc leaves it out): seen. */
	assert_json(proto_json_decode(&process__start_request__descriptor,
				      (const uint8_t *)"\x0a\x04\x0a\x02ls\x20\x00", 8, NULL, 0),
		    "{\"process\":{\"cmd\":\"ls\"},\"stdin\":false}");
	/* An enum by name, a oneof's member, bytes as base64. */
	assert_json(decode_text(&process__send_signal_request__descriptor,
				"process.SendSignalRequest",
				"process { pid: 4242 } signal: SIGNAL_SIGKILL"),
		    "{\"process\":{\"pid\":4242},\"signal\":\"SIGNAL_SIGKILL\"}");
	assert_json(decode_text(&process__send_input_request__descriptor,
				"process.SendInputRequest",
				"process { pid: 7 } input { stdin: \"hi\\000\\377\" }"),
		    "{\"process\":{\"pid\":7},\"input\":{\"stdin\":\"aGkA/w==\"}}");
	/* A field name of two words: lowerCamelCase. */
	assert_json(decode_text(&filesystem__get_watcher_events_request__descriptor,
				"filesystem.GetWatcherEventsRequest", "watcher_id: \"ab\""),
		    "{\"watcherId\":\"ab\"}");
	assert_json(decode_text(&filesystem__list_dir_request__descriptor, "filesystem.ListDirRequest",
				""), "{}");
}

Test(proto_json, the_decoded_json_is_what_the_handlers_parse)
{
	/* protoc's bytes, then stdin: false (field 4, 0) as the SDK sends it. */
	static const char text[] = "process { cmd: \"ls\" args: \"-l\" envs { key: \"K\" value: "
				   "\"v\" } cwd: \"/tmp\" }";
	size_t n;
	uint8_t *bytes = protoc("encode", "process.StartRequest", text, strlen(text), &n);
	char *json, err[300] = "";
	struct e2b_start s;
	json_t *j;

	bytes[n++] = 0x20;
	bytes[n++] = 0x00;
	j = proto_json_decode(&process__start_request__descriptor, bytes, n, err, sizeof(err));
	cr_assert_not_null(j, "%s", err);
	json = json_dumps(j, JSON_COMPACT);
	cr_assert_eq(e2b_parse_start((const uint8_t *)json, strlen(json), &s, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_eq(s.argc, 2);
	cr_assert_str_eq(s.argv[0], "ls");
	cr_assert_str_eq(s.argv[1], "-l");
	cr_assert_str_eq(s.env[0], "K=v");
	cr_assert_str_eq(s.cwd, "/tmp");
	cr_assert_not(s.stdin_open, "stdin: false on the wire is seen");
	e2b_start_free(&s);
	free(json);
	free(bytes);
	json_decref(j);
}

/* Our encoding of json, as protoc reads it back. */
static char *encode_read_back(const ProtobufCMessageDescriptor *d, const char *type,
			      const char *json)
{
	json_t *j = json_loads(json, 0, NULL);
	char err[300] = "";
	uint8_t *bytes;
	size_t n, tn;
	char *text;

	cr_assert_not_null(j, "%s", json);
	cr_assert_eq(proto_json_encode(d, j, &bytes, &n, err, sizeof(err)), 0, "%s: %s", json, err);
	text = (char *)protoc("decode", type, bytes, n, &tn);
	free(bytes);
	json_decref(j);
	return text;
}

Test(proto_json, protoc_reads_what_the_renderers_make_encoded)
{
	static const uint8_t out[] = { 'h', 'i', 0, 0xff };
	char *ev = e2b_event_end(-2, true, "exit status 254", "boom"), *data, *text;
	struct e2b_entry en = { .name = "a", .path = "/root/a", .type = 1, .size = 1ull << 40,
				.mode = 0644, .mtime_s = 1704067200 };
	json_t *entry, *resp;

	text = encode_read_back(&process__start_response__descriptor, "process.StartResponse", ev);
	cr_assert(strstr(text, "exit_code: -2") && strstr(text, "exited: true") &&
		  strstr(text, "status: \"exit status 254\"") && strstr(text, "error: \"boom\""),
		  "%s", text);
	free(text);
	free(ev);
	data = e2b_event_data("stdout", out, sizeof(out));
	text = encode_read_back(&process__start_response__descriptor, "process.StartResponse", data);
	cr_assert(strstr(text, "stdout: \"hi\\000\\377\""), "%s", text);
	free(text);
	free(data);
	/* EntryInfo: an enum, an int64 as a string, a Timestamp. */
	snprintf(en.permissions, sizeof(en.permissions), "-rw-r--r--");
	entry = e2b_entry_json(&en);
	resp = json_pack("{s:o}", "entry", entry);
	data = json_dumps(resp, JSON_COMPACT);
	json_decref(resp);
	text = encode_read_back(&filesystem__stat_response__descriptor, "filesystem.StatResponse",
				data);
	cr_assert(strstr(text, "type: FILE_TYPE_FILE") && strstr(text, "size: 1099511627776") &&
		  strstr(text, "mode: 420") && strstr(text, "seconds: 1704067200") &&
		  strstr(text, "permissions: \"-rw-r--r--\""), "%s", text);
	free(text);
	free(data);
	/* A map, and a repeated message. */
	text = encode_read_back(&process__list_response__descriptor, "process.ListResponse",
				"{\"processes\":[{\"pid\":1,\"config\":{\"cmd\":\"a\",\"envs\":"
				"{\"K\":\"v\"}}},{\"pid\":2}]}");
	cr_assert(strstr(text, "key: \"K\"") && strstr(text, "value: \"v\"") &&
		  strstr(text, "pid: 2"), "%s", text);
	free(text);
}

Test(proto_json, a_round_trip_gives_the_same_json)
{
	static const char *const msgs[] = {
		"{\"event\":{\"start\":{\"pid\":12}}}",
		"{\"event\":{\"end\":{\"exitCode\":-1,\"exited\":true,\"status\":\"x\"}}}",
		"{\"event\":{\"keepalive\":{}}}",
		"{\"event\":{\"data\":{\"pty\":\"AAEC\"}}}",
	};

	for (size_t i = 0; i < sizeof(msgs) / sizeof(msgs[0]); i++) {
		json_t *j = json_loads(msgs[i], 0, NULL);
		char err[300] = "";
		uint8_t *b;
		size_t n;

		cr_assert_eq(proto_json_encode(&process__start_response__descriptor, j, &b, &n, err,
					       sizeof(err)), 0, "%s", err);
		json_decref(j);
		assert_json(proto_json_decode(&process__start_response__descriptor, b, n, err,
					      sizeof(err)), msgs[i]);
		free(b);
	}
}

static void assert_refused(const ProtobufCMessageDescriptor *d, const void *bytes, size_t n,
			   const char *why)
{
	char err[300] = "";
	json_t *j = proto_json_decode(d, bytes, n, err, sizeof(err));

	cr_assert_null(j, "%s: decoded", why);
	cr_assert(strstr(err, why), "want '%s', got '%s'", why, err);
}

Test(proto_json, hostile_bytes_are_refused_with_a_reason)
{
	const ProtobufCMessageDescriptor *stat = &filesystem__stat_request__descriptor;
	uint8_t long_varint[12];

	assert_refused(stat, "\x0a\x09/tm", 5, "past the message's end");
	assert_refused(stat, "\x0a\x03/\x00x", 5, "NUL");
	assert_refused(stat, "\x0a\x02\xc3\x28", 4, "not UTF-8");
	assert_refused(stat, "\x0a", 1, "past the message's end");
	assert_refused(stat, "\x08\x01", 2, "wire type 0");
	assert_refused(stat, "\x00\x01", 2, "malformed field tag");
	assert_refused(stat, "\x80", 1, "malformed field tag");
	/* Unknown fields are skipped, unless they cannot be. */
	assert_json(proto_json_decode(stat, (const uint8_t *)"\x10\x05\x1a\x01x\x0a\x01/", 8, NULL, 0),
		    "{\"path\":\"/\"}");
	assert_refused(stat, "\x13\x14", 2, "cannot be skipped");   /* field 2, a group */
	assert_refused(stat, "\x1d\x01\x02", 3, "cannot be skipped");
	/* A varint of eleven bytes, and one whose tenth byte overflows. */
	memset(long_varint, 0xff, 11);
	long_varint[11] = 0x01;
	assert_refused(&filesystem__list_dir_request__descriptor, "\x10\xff\xff\xff\xff\xff\xff"
		       "\xff\xff\xff\x02", 11, "overlong varint");
	assert_refused(&filesystem__list_dir_request__descriptor, long_varint, sizeof(long_varint),
		       "malformed field tag");
	/* 600,000 empty args in a 1.2 MB message: refused at the bound, not built. */
	{
		size_t n = 600000, len = 2 + 4 + 2 * n;
		uint8_t *m = malloc(len), *p = m;

		cr_assert_not_null(m);
		*p++ = 0x0a;   /* process: a length of 4 bytes, 2n + 2 */
		*p++ = (uint8_t)(((2 * n + 2) & 0x7f) | 0x80);
		*p++ = (uint8_t)((((2 * n + 2) >> 7) & 0x7f) | 0x80);
		*p++ = (uint8_t)(((2 * n + 2) >> 14) & 0x7f);
		*p++ = 0x0a;   /* cmd "" */
		*p++ = 0x00;
		for (size_t i = 0; i < n; i++) {
			*p++ = 0x12;   /* args "" */
			*p++ = 0x00;
		}
		assert_refused(&process__start_request__descriptor, m, (size_t)(p - m),
			       "more than 8192 values");
		free(m);
		(void)len;
	}
	/* A packed field that is not repeated, and a nested message cut short. */
	assert_refused(&filesystem__list_dir_request__descriptor, "\x12\x01\x01", 3, "packed");
	assert_refused(&process__start_request__descriptor, "\x0a\x03\x0a\x05/b", 5,
		       "past the message's end");
}

static void assert_not_encoded(const ProtobufCMessageDescriptor *d, const char *json,
			       const char *why)
{
	json_t *j = json_loads(json, 0, NULL);
	char err[300] = "";
	uint8_t *b = NULL;
	size_t n;

	cr_assert_not_null(j, "%s", json);
	cr_assert_eq(proto_json_encode(d, j, &b, &n, err, sizeof(err)), -EINVAL, "%s", json);
	cr_assert(strstr(err, why), "%s: want '%s', got '%s'", json, why, err);
	cr_assert_null(b);
	json_decref(j);
}

Test(proto_json, json_that_does_not_fit_the_message_is_not_encoded)
{
	const ProtobufCMessageDescriptor *sig = &process__send_signal_request__descriptor;

	assert_not_encoded(sig, "{\"nope\":1}", "no field nope");
	assert_not_encoded(sig, "{\"signal\":\"SIGHUP\"}", "no value SIGHUP");
	assert_not_encoded(sig, "{\"process\":{\"pid\":4294967296}}", "unsigned 32-bit");
	assert_not_encoded(sig, "{\"process\":{\"pid\":-1}}", "unsigned 32-bit");
	assert_not_encoded(sig, "{\"process\":[]}", "not a JSON object");
	assert_not_encoded(&process__send_input_request__descriptor,
			   "{\"input\":{\"stdin\":\"not base64!\"}}", "not base64");
	assert_not_encoded(&process__start_response__descriptor,
			   "{\"event\":{\"end\":{\"exitCode\":\"x\"}}}", "32-bit integer");
	assert_not_encoded(&process__start_response__descriptor,
			   "{\"event\":{\"end\":{\"exited\":1}}}", "true or false");
	assert_not_encoded(&filesystem__stat_response__descriptor,
			   "{\"entry\":{\"modifiedTime\":\"2024-01-01 00:00:00\"}}", "RFC 3339");
	assert_not_encoded(&filesystem__stat_response__descriptor,
			   "{\"entry\":{\"modifiedTime\":\"2024-01-01T00:00:00+01:00\"}}", "UTC");
	assert_not_encoded(&process__list_response__descriptor, "{\"processes\":{}}",
			   "not an array");
	assert_not_encoded(&filesystem__stat_response__descriptor, "{\"entry\":{\"size\":\"1e3\"}}",
			   "64-bit integer");
}
