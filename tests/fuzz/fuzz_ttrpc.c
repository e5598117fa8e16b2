/* fuzz_ttrpc.c - libFuzzer target: what a ttrpc peer sends (containerd, or anything that reaches the shim's socket) through the frame reader and the Request and Response decoders, and the shim's messages through protobuf-c. */
#include "fuzz_common.h"
#include "shim/cgroups2_metrics.pb-c.h"
#include "shim/containerd_events.pb-c.h"
#include "shim/events_ttrpc.pb-c.h"
#include "shim/task.pb-c.h"
#include "shim/ttrpc.h"
#include "shim/ttrpc.pb-c.h"

/*
 * Input: a mode byte, then (tests/fuzz/make-ttrpc-seeds writes the seeds):
 *   even  a chunk seed byte, then a byte stream from a peer: fed to a
 *         ttrpc_reader in chunks of 1 to 4096 bytes (sizes from the seed),
 *         each whole frame's body decoded as a Request (type 1) or a
 *         Response (any other type), as the server and the client do
 *   odd   a message index byte (modulo the table below), then a payload:
 *         unpacked as that message with ttrpc_unpack
 * Checks besides the sanitizers:
 *  - the reader takes every byte up to the first error, never more than it
 *    is given, and stops at a length over TTRPC_MESSAGE_MAX; a frame's body
 *    has the header's length;
 *  - a decoded Request holds what the decoder promises (names of 1..256
 *    printable bytes, at most 64 metadata pairs within their bounds), and
 *    encodes back to a frame that decodes to the same call; a decoded
 *    Response's code is a google.rpc code, and it round-trips too;
 *  - an unpacked message packs, and its packing, unpacked again, packs to
 *    the very same bytes (protobuf-c may refuse to read back the unknown
 *    fields it kept: see run_message).
 */
static const ProtobufCMessageDescriptor *const messages[] = {
	&containerd__task__v2__create_task_request__descriptor,
	&containerd__task__v2__state_response__descriptor,
	&containerd__task__v2__update_task_request__descriptor,
	&containerd__task__v2__pids_response__descriptor,
	&containerd__task__v2__exec_process_request__descriptor,
	&containerd__task__v2__kill_request__descriptor,
	&containerd__task__v2__wait_response__descriptor,
	&containerd__task__v2__delete_response__descriptor,
	&containerd__task__v2__stats_response__descriptor,
	&containerd__task__v2__checkpoint_task_request__descriptor,
	&containerd__events__task_exit__descriptor,
	&containerd__events__task_create__descriptor,
	&containerd__services__events__ttrpc__v1__forward_request__descriptor,
	&io__containerd__cgroups__v2__metrics__descriptor,
	&ttrpc__request__descriptor,
	&ttrpc__response__descriptor,
};
#define N_MESSAGES (sizeof(messages) / sizeof(messages[0]))

static bool debug;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	debug = fuzz_log_init();
	return 0;
}

static bool printable(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (!n || n > max)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] <= ' ' || s[i] > '~')
			return false;
	return true;
}

static void check_request(const uint8_t *body, size_t len)
{
	struct ttrpc_request r, again;
	struct ttrpc_header h;
	const char *why = "";
	uint8_t *frame;
	size_t flen;
	int rc = ttrpc_request_decode(&r, body, len, &why);

	if (rc == -EBADMSG) {
		if (!why || !why[0])
			fuzz_broken("a request refused without a reason", NULL);
		if (debug)
			fprintf(stderr, "request refused: %s\n", why);
		return;
	}
	if (rc)
		fuzz_broken("request decode: not 0 or -EBADMSG", strerror(-rc));
	if (!printable(r.service, TTRPC_NAME_MAX) || !printable(r.method, TTRPC_NAME_MAX))
		fuzz_broken("a decoded name out of its bounds", r.service);
	if (r.n_md > TTRPC_MD_MAX || (r.payload_len && !r.payload))
		fuzz_broken("decoded metadata or payload out of bounds", NULL);
	for (size_t i = 0; i < r.n_md; i++)
		if (!r.md[i].key[0] || strlen(r.md[i].key) > TTRPC_MD_KEY_MAX ||
		    strlen(r.md[i].value) > TTRPC_MD_VALUE_MAX)
			fuzz_broken("a decoded metadata pair out of its bounds", r.md[i].key);
	rc = ttrpc_request_encode(&r, 1, &frame, &flen);
	if (rc)
		fuzz_broken("a decoded request does not encode", strerror(-rc));
	if (ttrpc_header_decode(&h, frame, flen) || h.length != flen - TTRPC_HEADER_LEN ||
	    ttrpc_request_decode(&again, frame + TTRPC_HEADER_LEN, h.length, &why))
		fuzz_broken("a re-encoded request does not decode", why);
	if (strcmp(again.service, r.service) || strcmp(again.method, r.method) ||
	    again.timeout_ns != r.timeout_ns || again.n_md != r.n_md ||
	    again.payload_len != r.payload_len ||
	    (r.payload_len && memcmp(again.payload, r.payload, r.payload_len)))
		fuzz_broken("a request changed on its round trip", NULL);
	for (size_t i = 0; i < r.n_md; i++)
		if (strcmp(again.md[i].key, r.md[i].key) || strcmp(again.md[i].value, r.md[i].value))
			fuzz_broken("metadata changed on its round trip", r.md[i].key);
	free(frame);
	ttrpc_request_release(&again);
	ttrpc_request_release(&r);
}

static void check_response(const uint8_t *body, size_t len)
{
	struct ttrpc_response r, again;
	const char *why = "";
	uint8_t *frame;
	size_t flen;
	int rc = ttrpc_response_decode(&r, body, len, &why);

	if (rc == -EBADMSG)
		return;
	if (rc)
		fuzz_broken("response decode: not 0 or -EBADMSG", strerror(-rc));
	if (r.code < 0 || r.code > TTRPC_CODE_MAX || !r.message)
		fuzz_broken("a decoded code that is none", NULL);
	rc = ttrpc_response_encode(&r, 1, &frame, &flen);
	if (rc)
		fuzz_broken("a decoded response does not encode", strerror(-rc));
	if (ttrpc_response_decode(&again, frame + TTRPC_HEADER_LEN, flen - TTRPC_HEADER_LEN, &why))
		fuzz_broken("a re-encoded response does not decode", why);
	if (again.code != r.code || strcmp(again.message, r.message) ||
	    again.payload_len != r.payload_len ||
	    (r.payload_len && memcmp(again.payload, r.payload, r.payload_len)))
		fuzz_broken("a response changed on its round trip", NULL);
	free(frame);
	ttrpc_response_release(&again);
	ttrpc_response_release(&r);
}

static void run_stream(struct cursor *c)
{
	uint32_t seed = take8(c) * 2654435761u + 1;
	struct ttrpc_reader rd;
	size_t at = 0;

	ttrpc_reader_init(&rd);
	while (at < c->left) {
		size_t chunk, used;
		struct ttrpc_frame f;
		int rc;

		seed = seed * 1103515245u + 12345u;
		chunk = 1 + (seed >> 8) % 4096;
		if (chunk > c->left - at)
			chunk = c->left - at;
		rc = ttrpc_reader_feed(&rd, c->p + at, chunk, &used, &f);
		if (used > chunk)
			fuzz_broken("the reader took more than it was given", NULL);
		at += used;
		if (rc < 0) {
			if (rc != -EMSGSIZE || f.h.length <= TTRPC_MESSAGE_MAX || f.body)
				fuzz_broken("the reader failed but not for an oversized length", strerror(-rc));
			break;
		}
		if (rc == 0 && used != chunk)
			fuzz_broken("the reader wants more but left bytes", NULL);
		if (rc == 1) {
			if (f.h.length > TTRPC_MESSAGE_MAX || (f.h.length && !f.body))
				fuzz_broken("a frame without its body", NULL);
			if (f.h.type == TTRPC_TYPE_REQUEST)
				check_request(f.body, f.h.length);
			else
				check_response(f.body, f.h.length);
			free(f.body);
		}
	}
	ttrpc_reader_release(&rd);
}

static void run_message(struct cursor *c)
{
	const ProtobufCMessageDescriptor *d = messages[take8(c) % N_MESSAGES];
	ProtobufCMessage *m, *again;
	const char *why = "";
	uint8_t *p, *p2;
	size_t n, n2;

	if (ttrpc_unpack(d, c->p, c->left, &m, &why))
		return;
	if (ttrpc_pack(m, &p, &n))
		fuzz_broken("an unpacked message does not pack", d->name);
	/* protobuf-c keeps unknown fields and writes them back: one numbered
	 * 0 in an over-long tag ("80 00") it reads, then writes as "00",
	 * which it refuses. Not ours; what it reads again must be stable. */
	if (ttrpc_unpack(d, p, n, &again, &why)) {
		free(p);
		ttrpc_unpacked_free(m);
		return;
	}
	if (ttrpc_pack(again, &p2, &n2) || n2 != n || (n && memcmp(p, p2, n)))
		fuzz_broken("a message's packing is not stable", d->name);
	free(p);
	free(p2);
	ttrpc_unpacked_free(again);
	ttrpc_unpacked_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cursor c = { .p = data, .left = size };

	if (take8(&c) & 1)
		run_message(&c);
	else
		run_stream(&c);
	return 0;
}
