/* ttrpc.h - containerd's ttrpc, the codec: the frame header, a frame reader, Request and Response through protobuf-c, google.rpc codes (pure: bytes in, checked data out, no I/O). */
#ifndef MAYFLY_SHIM_TTRPC_H
#define MAYFLY_SHIM_TTRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/*
 * A frame (github.com/containerd/ttrpc channel.go): a 10-byte header, then
 * `length` bytes of body, a protobuf ttrpc.Request (type 1) or
 * ttrpc.Response (type 2), vmm/shim/proto/ttrpc.proto.
 *   length     u32 big-endian, the body's, at most TTRPC_MESSAGE_MAX
 *   stream id  u32 big-endian; a client's are odd, its response has the same
 *   type       u8
 *   flags      u8 (reserved by unary ttrpc; read and ignored)
 */
#define TTRPC_HEADER_LEN   10
#define TTRPC_MESSAGE_MAX  (4u << 20)   /* ttrpc's messageLengthMax */

/* What a Request may hold; more is refused as malformed. containerd's
 * own requests stay far below (a name is tens of bytes; one metadata
 * pair, the namespace). */
#define TTRPC_NAME_MAX     256    /* a service or method name */
#define TTRPC_MD_MAX       64     /* metadata pairs */
#define TTRPC_MD_KEY_MAX   256
#define TTRPC_MD_VALUE_MAX 4096

/* The namespace of a call: containerd puts it in the request's metadata
 * under this key (namespaces.TTRPCHeader; "containerd-namespace" is the
 * gRPC one, accepted too by ttrpc_request_namespace). */
#define TTRPC_NS_KEY       "containerd-namespace-ttrpc"
#define TTRPC_NS_KEY_GRPC  "containerd-namespace"

enum ttrpc_type {
	TTRPC_TYPE_REQUEST = 1,
	TTRPC_TYPE_RESPONSE = 2,
};

/* google.rpc.Code (googleapis google/rpc/code.proto): a Response's status. */
enum ttrpc_code {
	TTRPC_OK = 0,
	TTRPC_CANCELLED = 1,
	TTRPC_UNKNOWN = 2,
	TTRPC_INVALID_ARGUMENT = 3,
	TTRPC_DEADLINE_EXCEEDED = 4,
	TTRPC_NOT_FOUND = 5,
	TTRPC_ALREADY_EXISTS = 6,
	TTRPC_PERMISSION_DENIED = 7,
	TTRPC_RESOURCE_EXHAUSTED = 8,
	TTRPC_FAILED_PRECONDITION = 9,
	TTRPC_ABORTED = 10,
	TTRPC_OUT_OF_RANGE = 11,
	TTRPC_UNIMPLEMENTED = 12,
	TTRPC_INTERNAL = 13,
	TTRPC_UNAVAILABLE = 14,
	TTRPC_DATA_LOSS = 15,
	TTRPC_UNAUTHENTICATED = 16,
	TTRPC_CODE_MAX = TTRPC_UNAUTHENTICATED,
};

/* "NOT_FOUND" and so on; "?" for a number that is no code. */
const char *ttrpc_code_name(int32_t code);

/* The code for a -errno (or errno), as containerd's errdefs read codes
 * back (ErrNotFound, ErrAlreadyExists, ...): 0 OK; ENOENT, ESRCH
 * NOT_FOUND; EEXIST ALREADY_EXISTS; EINVAL INVALID_ARGUMENT; ETIMEDOUT
 * DEADLINE_EXCEEDED; ECANCELED CANCELLED; ENOSYS, EOPNOTSUPP
 * UNIMPLEMENTED; EBUSY FAILED_PRECONDITION; EAGAIN UNAVAILABLE; EPERM,
 * EACCES PERMISSION_DENIED; ENOMEM, ENOSPC RESOURCE_EXHAUSTED; anything
 * else INTERNAL. */
int32_t ttrpc_code_from_errno(int err);

struct ttrpc_header {
	uint32_t length;
	uint32_t stream_id;
	uint8_t type;       /* enum ttrpc_type; others are the reader's caller's to ignore */
	uint8_t flags;
};

void ttrpc_header_encode(const struct ttrpc_header *h, uint8_t out[TTRPC_HEADER_LEN]);

/* The first TTRPC_HEADER_LEN bytes of buf (len). 0; -EAGAIN: fewer bytes
 * than a header; -EMSGSIZE: a length over TTRPC_MESSAGE_MAX (*h filled all
 * the same, so the caller can answer on its stream). */
int ttrpc_header_decode(struct ttrpc_header *h, const uint8_t *buf, size_t len);

/* Whole frames out of a byte stream cut anywhere. The body is allocated as
 * its bytes come (doubling from 4 KiB up to the length), never at the size
 * a header claims before those bytes are there. Zeroed is ready
 * (ttrpc_reader_init does it); one per connection. */
struct ttrpc_reader {
	uint8_t hdr[TTRPC_HEADER_LEN];
	size_t hdr_got;
	bool have_header;
	struct ttrpc_header h;
	uint8_t *body;
	size_t cap, got;
};

struct ttrpc_frame {
	struct ttrpc_header h;
	uint8_t *body;      /* h.length bytes, malloc'd, the caller's (NULL when 0) */
};

void ttrpc_reader_init(struct ttrpc_reader *r);

/* Take bytes of buf (len) up to the end of the next frame; *used says how
 * many were taken (the rest is for the next call). 1: *f holds a whole
 * frame, now the caller's (free f->body); 0: all taken, more needed;
 * -EMSGSIZE: a header with a length over TTRPC_MESSAGE_MAX (f->h holds it,
 * body NULL); -ENOMEM. After an error the reader takes nothing more: the
 * stream has lost its frame boundaries (ttrpc_reader_release, close). */
int ttrpc_reader_feed(struct ttrpc_reader *r, const uint8_t *buf, size_t len, size_t *used,
		      struct ttrpc_frame *f);

/* How many more bytes the current frame needs: what a reader may read
 * from a socket without taking a byte of the next frame. */
size_t ttrpc_reader_want(const struct ttrpc_reader *r);

/* Free a partly read body; the reader is zeroed (ready again). */
void ttrpc_reader_release(struct ttrpc_reader *r);

struct ttrpc_kv {
	const char *key;
	const char *value;
};

/* A call. To encode, the caller's strings; decoded, every pointer is into
 * `owned`, one allocation ttrpc_request_release frees. */
struct ttrpc_request {
	const char *service;         /* "containerd.task.v2.Task" */
	const char *method;          /* "Create" */
	const uint8_t *payload;      /* the method's request message */
	size_t payload_len;
	int64_t timeout_ns;          /* the caller's deadline from now; 0: none, < 0: already passed */
	const struct ttrpc_kv *md;   /* metadata, in the order sent; a key may repeat */
	size_t n_md;
	void *owned;
};

/* A whole frame (header and body) for r on stream_id into *frame
 * (malloc'd, *len bytes). r is checked as ttrpc_request_decode checks.
 * 0, -EINVAL (a name or metadata pair it would refuse), -EMSGSIZE (a body
 * over TTRPC_MESSAGE_MAX), -ENOMEM. */
int ttrpc_request_encode(const struct ttrpc_request *r, uint32_t stream_id, uint8_t **frame,
			 size_t *len) __attribute__((warn_unused_result));

/* A request frame's body (len bytes). Checked: the protobuf itself (a
 * truncated or malformed one, or one whose decoding would take more than
 * about four times its size in memory, is refused); service and method of
 * 1..TTRPC_NAME_MAX bytes of printable ASCII without spaces; at most
 * TTRPC_MD_MAX metadata pairs, each key 1..TTRPC_MD_KEY_MAX bytes and value
 * at most TTRPC_MD_VALUE_MAX, no NUL in either. 0 (release r after), or
 * -EBADMSG with *why (r then needs no release), -ENOMEM. */
int ttrpc_request_decode(struct ttrpc_request *r, const uint8_t *body, size_t len,
			 const char **why) __attribute__((warn_unused_result));

void ttrpc_request_release(struct ttrpc_request *r);

/* The first value of metadata key (compared without case, as ttrpc's MD
 * lowercases keys), or NULL. */
const char *ttrpc_request_md(const struct ttrpc_request *r, const char *key);

/* The call's containerd namespace: TTRPC_NS_KEY, else TTRPC_NS_KEY_GRPC,
 * else NULL. */
const char *ttrpc_request_namespace(const struct ttrpc_request *r);

/* An answer. To encode, the caller's; decoded, pointers into `owned`. */
struct ttrpc_response {
	int32_t code;                /* enum ttrpc_code */
	const char *message;         /* why, with a code other than OK; "" for none */
	const uint8_t *payload;      /* the method's response message (OK only) */
	size_t payload_len;
	void *owned;
};

/* A whole frame for r on stream_id into *frame (malloc'd, *len bytes).
 * Every response carries a status, as ttrpc's Go server sends one (code 0
 * encodes as an empty Status). 0, -EINVAL (a code outside 0..16, a NULL
 * message counts as ""), -EMSGSIZE, -ENOMEM. */
int ttrpc_response_encode(const struct ttrpc_response *r, uint32_t stream_id, uint8_t **frame,
			  size_t *len) __attribute__((warn_unused_result));

/* A response frame's body. No status is OK (ttrpc's Go client reads it
 * so); a code outside 0..16 becomes UNKNOWN, so a caller may switch on
 * it; details (google.rpc.Status's Anys) are dropped. 0 (release r after),
 * -EBADMSG with *why, -ENOMEM. */
int ttrpc_response_decode(struct ttrpc_response *r, const uint8_t *body, size_t len,
			  const char **why) __attribute__((warn_unused_result));

void ttrpc_response_release(struct ttrpc_response *r);

/* A payload: the generated code's message into *out (malloc'd, *len
 * bytes; NULL and 0 for a message with every field at its default).
 * 0, -EMSGSIZE (over TTRPC_MESSAGE_MAX), -ENOMEM. */
int ttrpc_pack(const ProtobufCMessage *m, uint8_t **out, size_t *len)
	__attribute__((warn_unused_result));

/* A payload into a message of descriptor d (&containerd__task__v2__create_task_request__descriptor,
 * ...), through protobuf-c with the same memory bound as a Request. 0 with
 * *out (free it with ttrpc_unpacked_free), or -EBADMSG with *why. */
int ttrpc_unpack(const ProtobufCMessageDescriptor *d, const uint8_t *data, size_t len,
		 ProtobufCMessage **out, const char **why) __attribute__((warn_unused_result));

void ttrpc_unpacked_free(ProtobufCMessage *m);

#endif
