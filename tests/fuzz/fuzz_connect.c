/* fuzz_connect.c - libFuzzer target: what reaches mayfly serve's E2B front end (a client's request body, its message, its headers; a published port's guest server's response head and a Host name) through the envelope reader, every E2B message parser and the published port's parsers. */
#include "fuzz_common.h"
#include "serve/connect.h"
#include "serve/e2b_msg.h"
#include "serve/port_msg.h"
#include "serve/proto_json.h"
#include "envd_filesystem.pb-c.h"
#include "envd_process.pb-c.h"

#include <jansson.h>
#include <signal.h>

/*
 * Input: a request body (tests/fuzz/make-connect-seeds writes the seeds).
 * It goes to connect_unwrap; the message it unwraps, or the whole input
 * when it is refused, goes to every e2b_parse_* and, as text up to its
 * first NUL, to connect_timeout_ms, the content-type checks and the error
 * renderers. libFuzzer hands over a heap copy of exactly the input and a
 * message ends where the input does, so a read past either is caught. Checks besides the sanitizers:
 *  - an unwrapped message is the body after its 5-byte header, at most
 *    CONNECT_MAX_MESSAGE bytes;
 *  - a parsed request holds what the header promises: argv of 1 to
 *    E2B_MAX_ARGS non-empty-headed strings, NULL-terminated; "K=V" env
 *    entries; pty sizes and depths in range; a signal of 9 or 15; a
 *    selector by pid or by a non-empty tag; input of at most E2B_MAX_INPUT
 *    bytes that renders back as a data event;
 *  - every rendered text (error bodies, end-stream, end events) is JSON a
 *    parser reads back, with its message within its bound;
 *  - the whole input as a guest server's response head: a parsed head lies
 *    within the input, its status is 100-599, every header is inside the
 *    head, and a head is "incomplete" only below PORT_HEAD_MAX; as a Host
 *    header (up to its first NUL): a port of 1-65535 and an id of
 *    [A-Za-z0-9_-] when it names a sandbox's.
 */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_log_init();
	return 0;
}

static void check_start(const uint8_t *m, size_t n)
{
	struct e2b_start s;
	char err[256];

	if (e2b_parse_start(m, n, &s, err, sizeof(err))) {
		if (s.argv || s.owner)
			fuzz_broken("a refused start holds memory", err);
		return;
	}
	if (s.argc < 1 || s.argc > E2B_MAX_ARGS || s.argv[s.argc] || !*s.argv[0])
		fuzz_broken("start's argv", NULL);
	if (s.nenv < 0 || s.nenv > E2B_MAX_ARGS || s.env[s.nenv])
		fuzz_broken("start's env count", NULL);
	for (int i = 0; i < s.nenv; i++)
		if (!strchr(s.env[i], '=') || s.env[i][0] == '=')
			fuzz_broken("an env entry that is no K=V", s.env[i]);
	if (s.pty && (s.cols < 1 || s.cols > E2B_MAX_PTY || s.rows < 1 || s.rows > E2B_MAX_PTY))
		fuzz_broken("a pty size out of range", NULL);
	if ((s.has_cwd && !s.cwd[0]) || (s.has_tag && !s.tag[0]))
		fuzz_broken("an empty cwd or tag said to be there", NULL);
	e2b_start_free(&s);
}

static void check_process_calls(const uint8_t *m, size_t n)
{
	char err[256], tag[16];
	uint32_t pid;
	unsigned cols, rows;
	uint8_t *data;
	size_t len;
	bool pty;
	int signo;

	if (!e2b_parse_selector(m, n, &pid, tag, sizeof(tag), err, sizeof(err)) && pid && tag[0])
		fuzz_broken("a selector with both a pid and a tag", tag);
	if (!e2b_parse_signal(m, n, &pid, &signo, err, sizeof(err)) &&
	    signo != SIGKILL && signo != SIGTERM)
		fuzz_broken("a signal other than KILL or TERM", NULL);
	if (!e2b_parse_update(m, n, &pid, &cols, &rows, err, sizeof(err)) &&
	    (!cols != !rows || cols > E2B_MAX_PTY || rows > E2B_MAX_PTY))
		fuzz_broken("an update's size", NULL);
	if (!e2b_parse_input(m, n, &pid, &data, &len, &pty, err, sizeof(err))) {
		char *ev;

		if (!data || len > E2B_MAX_INPUT)
			fuzz_broken("input over its bound", NULL);
		ev = e2b_event_data(pty ? "pty" : "stdout", data, len);
		if (!ev)
			fuzz_broken("input that does not render as data", NULL);
		free(ev);
		free(data);
	} else if (data) {
		fuzz_broken("refused input holds memory", err);
	}
}

static void check_filesystem_calls(const uint8_t *m, size_t n)
{
	char err[256], path[64], dst[64];
	unsigned depth;
	bool rec;

	if (!e2b_parse_path(m, n, path, sizeof(path), err, sizeof(err)) && !path[0])
		fuzz_broken("an empty path", NULL);
	if (!e2b_parse_list_dir(m, n, path, sizeof(path), &depth, err, sizeof(err)) &&
	    (depth < 1 || depth > E2B_MAX_DEPTH))
		fuzz_broken("a depth out of range", NULL);
	if (!e2b_parse_move(m, n, path, dst, sizeof(path), err, sizeof(err)) && (!path[0] || !dst[0]))
		fuzz_broken("an empty move", NULL);
	(void)e2b_parse_watch_dir(m, n, path, sizeof(path), &rec, err, sizeof(err));
	if (!e2b_parse_watcher_id(m, n, path, sizeof(path), err, sizeof(err)) && !path[0])
		fuzz_broken("an empty watcher id", NULL);
}

/* s must be JSON that reads back; its message, if any, within max bytes. */
static void check_json(char *s, const char *what, size_t max)
{
	json_t *j, *msg;

	if (!s)
		fuzz_broken("a render failed", what);
	j = json_loads(s, 0, NULL);
	if (!j)
		fuzz_broken("a render is not JSON", what);
	msg = json_object_get(json_object_get(j, "error") ? json_object_get(j, "error") : j,
			      "message");
	if (!msg) {
		json_t *end = json_object_get(json_object_get(j, "event"), "end");

		msg = json_object_get(end, "status");
	}
	if (msg && json_string_length(msg) > max)
		fuzz_broken("a message over its bound", what);
	json_decref(j);
	free(s);
}

static void check_text(const uint8_t *m, size_t n)
{
	char *t = malloc(n + 1);
	enum connect_code c = (enum connect_code)(n % 20);
	enum connect_codec codec;
	uint64_t ms;

	if (!t)
		fuzz_die("out of memory");
	memcpy(t, m, n);
	t[n] = '\0';
	if (!connect_timeout_ms(t, &ms) && (ms < 1 || ms > 9999999999ull))
		fuzz_broken("a timeout out of range", t);
	if (!connect_unary_codec(t, &codec) && !connect_stream_codec(t, &codec))
		fuzz_broken("a content type both unary and stream", t);
	check_json(connect_error_json(c, t), "error body", CONNECT_MAX_ERROR_TEXT);
	check_json(connect_end_stream_json(c, t), "end-stream", CONNECT_MAX_ERROR_TEXT);
	check_json(e2b_event_end((int)n - 3, n & 1, t, t), "end event", E2B_MAX_TEXT);
	free(t);
}

static void check_port(const uint8_t *data, size_t size)
{
	static struct port_head h;
	char id[PORT_ID_MAX + 1], *host;
	const char *why = NULL;
	unsigned port = 0;
	int rc = port_parse_head((const char *)data, size, &h, &why);

	if (rc == 1) {
		if (h.head_len > size || h.head_len > PORT_HEAD_MAX || h.status < 100 ||
		    h.status > 599 || h.nheaders > PORT_MAX_HEADERS || h.content_length < -1)
			fuzz_broken("a parsed head out of its bounds", NULL);
		for (unsigned i = 0; i < h.nheaders; i++)
			if ((size_t)h.headers[i].name + h.headers[i].name_len > h.head_len ||
			    (size_t)h.headers[i].value + h.headers[i].value_len > h.head_len ||
			    !h.headers[i].name_len)
				fuzz_broken("a header outside its head", NULL);
	} else if (rc == 0 ? size >= PORT_HEAD_MAX : (rc != -EPROTO && rc != -E2BIG) || !why) {
		fuzz_broken("a head neither parsed nor refused with a reason", why);
	}
	host = strndup((const char *)data, size);
	if (host && port_parse_host(host, "mayfly.test", &port, id)) {
		if (!port || port > 65535 || !id[0] || strlen(id) > PORT_ID_MAX ||
		    strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") !=
			    strlen(id))
			fuzz_broken("a host parsed to a bad port or id", host);
	}
	free(host);
}

/* The binary codec: each request type decoded, or refused with a reason;
 * what decodes encodes again, and decodes to the same JSON. */
static void check_proto(const uint8_t *m, size_t n)
{
	static const ProtobufCMessageDescriptor *const types[] = {
		&process__start_request__descriptor, &process__connect_request__descriptor,
		&process__send_input_request__descriptor, &process__send_signal_request__descriptor,
		&process__update_request__descriptor, &filesystem__list_dir_request__descriptor,
		&filesystem__move_request__descriptor, &filesystem__watch_dir_request__descriptor,
	};

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		char err[300] = "";
		json_t *j = proto_json_decode(types[i], m, n, err, sizeof(err)), *again;
		uint8_t *b;
		size_t blen;

		if (!j) {
			if (!err[0])
				fuzz_broken("a protobuf refused without a reason", types[i]->name);
			continue;
		}
		if (proto_json_encode(types[i], j, &b, &blen, err, sizeof(err)))
			fuzz_broken("a decoded protobuf that does not encode", err);
		again = proto_json_decode(types[i], b, blen, err, sizeof(err));
		if (!again || !json_equal(j, again))
			fuzz_broken("a protobuf that does not decode the same twice", types[i]->name);
		json_decref(again);
		json_decref(j);
		free(b);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *msg = NULL;
	size_t len = 0;
	const char *why = NULL;

	if (!connect_unwrap(data, size, &msg, &len, &why)) {
		if (msg != data + CONNECT_ENVELOPE_LEN || len != size - CONNECT_ENVELOPE_LEN ||
		    len > CONNECT_MAX_MESSAGE)
			fuzz_broken("an unwrapped message outside its envelope", NULL);
	} else {
		if (!why || !*why)
			fuzz_broken("a refusal without a reason", NULL);
		msg = data;
		len = size;
	}
	check_start(msg, len);
	check_process_calls(msg, len);
	check_filesystem_calls(msg, len);
	check_text(msg, len);
	check_port(data, size);
	check_proto(msg, len);
	return 0;
}
