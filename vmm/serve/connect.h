/* connect.h - the Connect RPC protocol over HTTP/1.1, its JSON and binary codecs, as pure functions: envelopes, codes, error bodies, request headers. */
#ifndef MAYFLY_SERVE_CONNECT_H
#define MAYFLY_SERVE_CONNECT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A stream's message: flags (1 byte), length (4 bytes, big-endian), then
 * the JSON (connectrpc.com/docs/protocol, "Streaming-Request"). */
#define CONNECT_ENVELOPE_LEN     5
#define CONNECT_FLAG_COMPRESSED  0x01
#define CONNECT_FLAG_END_STREAM  0x02
#define CONNECT_MAX_MESSAGE      (1u << 20)   /* a request message we accept */
#define CONNECT_MAX_ERROR_TEXT   1024         /* an error's "message", in bytes */

/* Connect's codes: gRPC's numbers, snake_case names on the wire. */
enum connect_code {
	CONNECT_OK = 0,
	CONNECT_CANCELED = 1,
	CONNECT_UNKNOWN = 2,
	CONNECT_INVALID_ARGUMENT = 3,
	CONNECT_DEADLINE_EXCEEDED = 4,
	CONNECT_NOT_FOUND = 5,
	CONNECT_ALREADY_EXISTS = 6,
	CONNECT_PERMISSION_DENIED = 7,
	CONNECT_RESOURCE_EXHAUSTED = 8,
	CONNECT_FAILED_PRECONDITION = 9,
	CONNECT_ABORTED = 10,
	CONNECT_OUT_OF_RANGE = 11,
	CONNECT_UNIMPLEMENTED = 12,
	CONNECT_INTERNAL = 13,
	CONNECT_UNAVAILABLE = 14,
	CONNECT_DATA_LOSS = 15,
	CONNECT_UNAUTHENTICATED = 16,
};

/* The wire name ("not_found"); "ok" for CONNECT_OK, "unknown" for a value
 * that is no code. */
const char *connect_code_name(enum connect_code c);

/* The HTTP status of a unary error with this code (Connect's table:
 * not_found 404, invalid_argument 400, ...); 200 for CONNECT_OK, 500 for a
 * value that is no code. */
int connect_code_status(enum connect_code c);

/* The code for a positive errno from a guest or host call:
 *   ENOENT                                   not_found
 *   EEXIST                                   already_exists
 *   EACCES EPERM EROFS                       permission_denied
 *   EINVAL ENAMETOOLONG ELOOP ENOTDIR EISDIR invalid_argument
 *   ETIMEDOUT                                deadline_exceeded
 *   ENOSPC EDQUOT EFBIG                      resource_exhausted
 *   ECANCELED                                canceled
 *   EBUSY ENOTEMPTY                          failed_precondition
 *   ECONNREFUSED ECONNRESET EPIPE             unavailable
 *   anything else (0 and negatives too)      internal
 * The E2B SDK turns not_found into FileNotFoundError (files) or false
 * (exists, kill), already_exists into false (makeDir). */
enum connect_code connect_code_of_errno(int err);

/* A server-streaming request's body: exactly one envelope, flags 0
 * (compressed and end-stream refused), its length equal to the rest of
 * the body and at most CONNECT_MAX_MESSAGE. 0 with *msg (inside body) and
 * *msglen, or -EINVAL with one line in *why (errmsg_why's per-thread
 * buffer; why may be NULL). */
int connect_unwrap(const uint8_t *body, size_t len, const uint8_t **msg, size_t *msglen,
		   const char **why);

/* The 5-byte header before a message of len bytes. */
void connect_envelope(uint8_t out[CONNECT_ENVELOPE_LEN], uint8_t flags, uint32_t len);

/* A stream's envelopes not yet read by its client (zeroed: empty). */
struct connect_queue {
	uint8_t *buf;
	size_t len, off, cap;
};
/* msg (malloc'd text, taken; NULL: out of memory) as one more envelope.
 * false when it could not be queued. */
bool connect_queue_push(struct connect_queue *q, uint8_t flags, char *msg);
/* The same for a message of len bytes (malloc'd, taken; NULL: out of
 * memory), binary or not. */
bool connect_queue_push_bytes(struct connect_queue *q, uint8_t flags, uint8_t *msg, size_t len);
/* Up to max queued bytes into out: how many (0: the queue is empty, and
 * reset for more). */
size_t connect_queue_take(struct connect_queue *q, void *out, size_t max);
/* Empty it, keeping its buffer; connect_queue_free releases that. */
void connect_queue_drop(struct connect_queue *q);
void connect_queue_free(struct connect_queue *q);

/* A JSON string of the text at s (up to its NUL or max bytes, whichever
 * comes first), valid UTF-8 whatever s holds: each byte that is not part
 * of a valid sequence becomes U+FFFD (as Go's encoding/json does), and the
 * result is cut at a character boundary to at most max bytes. Control
 * bytes stay, for the JSON encoder to escape. NULL only when out of memory. */
json_t *connect_json_text(const char *s, size_t max);

/* A unary error's body, malloc'd compact JSON:
 * {"code":"not_found","message":"..."}. message (NULL or "": no member) goes
 * through connect_json_text with CONNECT_MAX_ERROR_TEXT. A code outside
 * 1..16 (CONNECT_OK too) is sent as unknown: an error body names an error.
 * NULL only when out of memory. */
char *connect_error_json(enum connect_code c, const char *message);

/* An end-stream message (the payload of a CONNECT_FLAG_END_STREAM
 * envelope), malloc'd: {} for CONNECT_OK, else
 * {"error":{"code":...,"message":...}} as connect_error_json's. NULL only
 * when out of memory. */
char *connect_end_stream_json(enum connect_code c, const char *message);

/* A call's codec: its messages as JSON or in protobuf's binary encoding.
 * Errors (a unary call's body, a stream's end message) are JSON in both. */
enum connect_codec { CONNECT_CODEC_JSON, CONNECT_CODEC_PROTO };

/* Content-Type of a unary request: application/json (optionally followed
 * by "; charset=utf-8" or utf8) is JSON, application/proto is protobuf,
 * case-insensitive. 0 with *codec, or -EINVAL for any other (NULL too). */
int connect_unary_codec(const char *content_type, enum connect_codec *codec);
/* The same for a stream: application/connect+json, application/connect+proto. */
int connect_stream_codec(const char *content_type, enum connect_codec *codec);
/* The Content-Type of a reply in codec: a stream's or a unary call's. */
const char *connect_content_type(enum connect_codec codec, bool stream);

/* Connect-Timeout-Ms: 1 to 10 ASCII digits, a positive number of
 * milliseconds, into *ms; -EINVAL for anything else (0 too: Connect's
 * timeout is positive). A NULL header is no deadline: 0 and *ms 0. */
int connect_timeout_ms(const char *header, uint64_t *ms);

#endif
