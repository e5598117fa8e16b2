/* proto_json.h - protobuf's binary encoding to its JSON mapping and back, for any message protobuf-c describes: what lets handlers written for Connect's JSON codec serve its binary one. */
#ifndef MAYFLY_SERVE_PROTO_JSON_H
#define MAYFLY_SERVE_PROTO_JSON_H

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

#define PROTO_JSON_MAX_DEPTH 16          /* messages within messages */
#define PROTO_JSON_MAX_OUT   (64u << 20) /* an encoded message */
#define PROTO_JSON_MAX_VALUES 8192       /* a decoded message's fields and elements */

/*
 * The JSON mapping (protobuf.dev/programming-guides/json), as far as
 * envd's messages need it: a field's JSON name is its name in
 * lowerCamelCase; int32, uint32 and sint32 are numbers, 64-bit integers
 * decimal strings (a number is taken too when encoding); bool is
 * true/false; an enum is its value's name (a number is taken too); bytes
 * are standard base64; a repeated field is an array; a map (a repeated
 * message of two fields named key and value, as protoc makes them) is an
 * object; google.protobuf.Timestamp is an RFC 3339 string in UTC.
 */

/* buf[0..len), one message of type d, as a JSON object: every field on
 * the wire is in it, whatever its value (so a proto3 "optional" field
 * sent as 0 or "" is seen, as it is in JSON); a repeated field's values
 * in wire order, packed or not; a field sent twice, the last; unknown
 * fields left out. Refused, NULL with one line in err naming the field:
 * a truncated or overlong varint or length, a group, a wire type that is
 * not the field's, a string that is not UTF-8 or holds a NUL, messages
 * nested past PROTO_JSON_MAX_DEPTH, more than PROTO_JSON_MAX_VALUES values
 * (a 2-byte field would otherwise cost a JSON value of ~100 bytes: the
 * bound the JSON codec's json_shape check gives), field number 0. */
json_t *proto_json_decode(const ProtobufCMessageDescriptor *d, const uint8_t *buf, size_t len,
			  char *err, size_t errlen);

/* j, a JSON object of type d, in the binary encoding: *out (malloc'd,
 * also for an empty message) and *outlen; 0, or -EINVAL with one line in
 * err (a member that is no field of d, a value of the wrong kind or out
 * of its type's range, bad base64, an unknown enum name, more than
 * PROTO_JSON_MAX_OUT bytes), -ENOMEM. Null members are left out; every
 * other member is sent, its default value too. */
int proto_json_encode(const ProtobufCMessageDescriptor *d, const json_t *j, uint8_t **out,
		      size_t *outlen, char *err, size_t errlen);

#endif
