/* codec.h - bounded little-endian encoding and decoding of snapshot section payloads. */
#ifndef MAYFLY_SNAPSHOT_CODEC_H
#define MAYFLY_SNAPSHOT_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * An encoder appends to a growable buffer and remembers the first failure, so
 * a run of puts needs one check at the end. A decoder reads from a cursor over
 * untrusted bytes: every get is bounds-checked, a short read zero-fills the
 * destination and marks the cursor bad, and snap_in_end() tells whether the
 * payload was consumed exactly. All integers are little-endian.
 */

struct snap_out {
	uint8_t *data;
	size_t len;
	size_t cap;
	int err;                /* 0, or -ENOMEM after the first failed growth */
};

struct snap_in {
	const uint8_t *p;
	size_t left;
	bool bad;               /* a get ran past the end */
};

/* An empty buffer (no allocation until the first put). */
void snap_out_init(struct snap_out *o);

/* Append n bytes (n may be 0). On failure o->err becomes -ENOMEM and every
 * later put is ignored. */
void snap_out_put(struct snap_out *o, const void *p, size_t n);
void snap_out_u32(struct snap_out *o, uint32_t v);
void snap_out_u64(struct snap_out *o, uint64_t v);

/* Free the buffer and reset it to empty. */
void snap_out_free(struct snap_out *o);

/* A cursor over [data, data+len). data may be NULL when len is 0. */
void snap_in_init(struct snap_in *in, const void *data, size_t len);

/* Copy n bytes to dst and advance. Past the end: dst zero-filled, the cursor
 * marked bad and left where it was; returns false. */
bool snap_in_get(struct snap_in *in, void *dst, size_t n);
uint32_t snap_in_u32(struct snap_in *in);
uint64_t snap_in_u64(struct snap_in *in);

/* True when no get failed and every byte was consumed: a payload with
 * trailing bytes is as wrong as a short one. */
bool snap_in_end(const struct snap_in *in);

/* ioctl(fd, req, arg); on failure *why is "<name>: <strerror>". The save
 * and restore steps of vcpu_state and vm_state are chains of these.
 * 0 or -errno. */
int snap_ioctl(int fd, unsigned long req, void *arg, const char *name, const char **why);

#endif
