/* e2b_codec.h - a Connect call's codec on envd's methods: the handlers speak JSON, and a call in the binary codec has its request read into that JSON and its replies written back as protobuf, through proto_json with envd's descriptors. */
#ifndef MAYFLY_SERVE_E2B_CODEC_H
#define MAYFLY_SERVE_E2B_CODEC_H

#include <jansson.h>
#include <microhttpd.h>
#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "serve/connect.h"

struct e2b_codec {
	enum connect_codec codec;
	bool stream;
	const ProtobufCMessageDescriptor *in, *out;   /* the method's request and reply */
};

/* method ("process.Process/Start", one of envd's) called with this
 * request Content-Type: 0 with *c; -ENOENT no such method in envd's
 * services; -EINVAL a Content-Type that is not Connect's JSON or binary
 * one for this kind of call (a stream's or a unary call's). */
int e2b_codec_of(const char *method, const char *content_type, struct e2b_codec *c);

/* The request's message (a unary body, or a stream's unwrapped message)
 * as the JSON the handlers parse: in the JSON codec msg itself, in the
 * binary one decoded into *owned (malloc'd, the caller frees it; NULL
 * otherwise). 0 with *json and *jsonlen, or -EINVAL with one line in err
 * (invalid_argument), -ENOMEM. */
int e2b_codec_request(const struct e2b_codec *c, const uint8_t *msg, size_t len,
		      const uint8_t **json, size_t *jsonlen, char **owned, char *err, size_t errlen);

/* A unary call's reply: j (taken; NULL: out of memory) as its response
 * message, in the call's codec. */
enum MHD_Result e2b_codec_reply(struct MHD_Connection *conn, const struct e2b_codec *c, json_t *j);

/* One more message of a stream: msg (malloc'd JSON text, taken; NULL: out
 * of memory) in the call's codec. An end-stream message stays JSON, as
 * Connect has it in both codecs. false when it could not be queued. */
bool e2b_codec_push(const struct e2b_codec *c, struct connect_queue *q, uint8_t flags, char *msg);

#endif
