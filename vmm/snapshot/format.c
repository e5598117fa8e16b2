/* format.c - write and parse the snapshot `state` file: header, crc32-checked sections, end marker. */
#include "format.h"
#include "lib/errmsg.h"
#include "lib/atomic_file.h"

#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

const char *snap_section_name(uint32_t type, char *buf, size_t size)
{
	switch (type) {
	case SNAP_SEC_END:
		snprintf(buf, size, "end marker");
		break;
	case SNAP_SEC_CONFIG:
		snprintf(buf, size, "config");
		break;
	case SNAP_SEC_CPUID:
		snprintf(buf, size, "cpuid");
		break;
	case SNAP_SEC_VM:
		snprintf(buf, size, "vm");
		break;
	case SNAP_SEC_FILES:
		snprintf(buf, size, "files");
		break;
	case SNAP_SEC_SERIAL:
		snprintf(buf, size, "serial");
		break;
	case SNAP_SEC_I8042:
		snprintf(buf, size, "i8042");
		break;
	case SNAP_SEC_BOOT_TIMER:
		snprintf(buf, size, "boot timer");
		break;
	case SNAP_SEC_WORKINGSET:
		snprintf(buf, size, "working set");
		break;
	default:
		if (type >= SNAP_SEC_VCPU_BASE && type - SNAP_SEC_VCPU_BASE < SNAP_SEC_VCPU_MAX)
			snprintf(buf, size, "vcpu %" PRIu32, type - SNAP_SEC_VCPU_BASE);
		else if (type >= SNAP_SEC_VIRTIO_BASE && type - SNAP_SEC_VIRTIO_BASE < SNAP_SEC_VIRTIO_MAX)
			snprintf(buf, size, "virtio slot %" PRIu32, type - SNAP_SEC_VIRTIO_BASE);
		else if (type >= SNAP_SEC_OVERLAY_BASE && type - SNAP_SEC_OVERLAY_BASE < SNAP_SEC_VIRTIO_MAX)
			snprintf(buf, size, "overlay of virtio slot %" PRIu32, type - SNAP_SEC_OVERLAY_BASE);
		else
			snprintf(buf, size, "type 0x%" PRIx32, type);
		break;
	}
	return buf;
}

/* zlib's crc32 takes a uInt length: feed large payloads in pieces. */
static uint32_t crc_update(uint32_t crc, const uint8_t *p, uint64_t len)
{
	while (len) {
		uInt n = len > (1u << 30) ? (1u << 30) : (uInt)len;

		crc = (uint32_t)crc32(crc, p, n);
		p += n;
		len -= n;
	}
	return crc;
}

/* A section's crc32: its type and length as stored, then its payload. */
static uint32_t section_crc(uint32_t type, uint64_t len, const uint8_t *payload)
{
	uint32_t type_le = htole32(type);
	uint64_t len_le = htole64(len);
	uint32_t crc = (uint32_t)crc32(0, Z_NULL, 0);

	crc = crc_update(crc, (const uint8_t *)&type_le, sizeof(type_le));
	crc = crc_update(crc, (const uint8_t *)&len_le, sizeof(len_le));
	return crc_update(crc, payload, len);
}

static void put_section_header(struct snap_out *o, uint32_t type, uint32_t crc, uint64_t len)
{
	snap_out_u32(o, type);
	snap_out_u32(o, crc);
	snap_out_u64(o, len);
}

void snap_writer_init(struct snap_writer *w)
{
	memset(w, 0, sizeof(*w));
	snap_out_init(&w->out);
	snap_out_put(&w->out, SNAP_MAGIC, SNAP_MAGIC_LEN);
	snap_out_u32(&w->out, SNAP_FORMAT_VERSION);
	snap_out_u32(&w->out, 0);   /* flags: none defined */
}

int snap_writer_add(struct snap_writer *w, uint32_t type, const void *payload, size_t len)
{
	if (w->out.err)
		return w->out.err;
	if (type == SNAP_SEC_END)
		return -EINVAL;
	for (unsigned i = 0; i < w->nr; i++)
		if (w->types[i] == type)
			return -EEXIST;
	if (w->nr >= SNAP_MAX_SECTIONS)
		return -E2BIG;
	put_section_header(&w->out, type, section_crc(type, len, payload), len);
	snap_out_put(&w->out, payload, len);
	if (w->out.err)
		return w->out.err;
	w->types[w->nr++] = type;
	return 0;
}

int snap_writer_add_out(struct snap_writer *w, uint32_t type, struct snap_out *o,
			const char **why)
{
	int rc = o->err ? o->err : snap_writer_add(w, type, o->data, o->len);

	snap_out_free(o);
	return rc ? errmsg_why(why, rc, "cannot add state section 0x%x: %s", type, strerror(-rc)) : 0;
}

int snap_writer_finish(struct snap_writer *w, const uint8_t **data, size_t *len)
{
	if (!w->out.err)
		put_section_header(&w->out, SNAP_SEC_END,
				   crc_update((uint32_t)crc32(0, Z_NULL, 0), w->out.data, w->out.len), 0);
	if (w->out.err)
		return w->out.err;
	*data = w->out.data;
	*len = w->out.len;
	return 0;
}

int snap_writer_write_fd(struct snap_writer *w, int fd, const char **why)
{
	const uint8_t *data;
	size_t len, done = 0;
	int rc = snap_writer_finish(w, &data, &len);

	if (rc)
		return errmsg_why(why, rc, "out of memory building the snapshot state");
	while (done < len) {
		ssize_t n = write(fd, data + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : -EIO;
			return errmsg_why(why, rc, "cannot write the state file: %s", strerror(-rc));
		}
		done += (size_t)n;
	}
	return 0;
}

static int writer_fill(int fd, void *opaque, const char **why)
{
	return snap_writer_write_fd(opaque, fd, why);
}

int snap_writer_save(struct snap_writer *w, const char *path, const char **why)
{
	return atomic_file_fill(path, writer_fill, w, why);
}

void snap_writer_free(struct snap_writer *w)
{
	snap_out_free(&w->out);
	w->nr = 0;
}

const struct snap_section *snap_find(const struct snap_file *f, uint32_t type)
{
	for (unsigned i = 0; i < f->nr; i++)
		if (f->sec[i].type == type)
			return &f->sec[i];
	return NULL;
}

/* The end marker at `off`: length 0, the crc of everything before it, and
 * the last thing in the file. */
static int check_end(const uint8_t *b, size_t len, size_t off, uint32_t crc, uint64_t slen,
		     const char **why)
{
	if (slen != 0)
		return errmsg_why(why, -EBADMSG, "corrupt snapshot state: end marker at offset %zu has length %" PRIu64,
				off, slen);
	if (crc != crc_update((uint32_t)crc32(0, Z_NULL, 0), b, off))
		return errmsg_why(why, -EBADMSG, "corrupt snapshot state: whole-file crc32 mismatch at the end marker (offset %zu)",
				off);
	if (len - off != SNAP_SECTION_HEADER)
		return errmsg_why(why, -EBADMSG, "corrupt snapshot state: %zu bytes after the end marker",
				len - off - SNAP_SECTION_HEADER);
	return 0;
}

int snap_parse(struct snap_file *f, const void *buf, size_t len,
	       const uint32_t *required, size_t nr_required, const char **why)
{
	const uint8_t *b = buf;
	struct snap_in in;
	uint8_t magic[SNAP_MAGIC_LEN];
	char name[32];
	size_t off = SNAP_HEADER_SIZE;
	uint32_t flags;

	f->nr = 0;
	f->version = 0;
	snap_in_init(&in, buf, len);
	if (!snap_in_get(&in, magic, sizeof(magic)) || memcmp(magic, SNAP_MAGIC, SNAP_MAGIC_LEN))
		return errmsg_why(why, -EBADMSG, "not a mayfly snapshot state file (bad magic)");
	f->version = snap_in_u32(&in);
	flags = snap_in_u32(&in);
	if (in.bad)
		return errmsg_why(why, -EBADMSG, "corrupt snapshot state: truncated in the file header");
	if (f->version != SNAP_FORMAT_VERSION)
		return errmsg_why(why, -ENOTSUP, "snapshot state format version %" PRIu32 ", this mayfly reads version %u (make the snapshot again)",
				f->version, SNAP_FORMAT_VERSION);
	if (flags != 0)
		return errmsg_why(why, -EBADMSG, "corrupt snapshot state: unknown header flags 0x%" PRIx32, flags);

	for (;;) {
		uint32_t type, crc;
		uint64_t slen;

		if (len - off < SNAP_SECTION_HEADER)
			return errmsg_why(why, -EBADMSG, len == off ?
					"corrupt snapshot state: truncated at offset %zu, no end marker" :
					"corrupt snapshot state: truncated in a section header at offset %zu", off);
		snap_in_init(&in, b + off, SNAP_SECTION_HEADER);
		type = snap_in_u32(&in);
		crc = snap_in_u32(&in);
		slen = snap_in_u64(&in);
		if (type == SNAP_SEC_END) {
			int rc = check_end(b, len, off, crc, slen, why);

			if (rc)
				return rc;
			break;
		}
		snap_section_name(type, name, sizeof(name));
		if (slen > len - off - SNAP_SECTION_HEADER)
			return errmsg_why(why, -EBADMSG, "corrupt snapshot state: section %s at offset %zu claims %" PRIu64 " bytes, %zu remain",
					name, off, slen, len - off - SNAP_SECTION_HEADER);
		if (section_crc(type, slen, b + off + SNAP_SECTION_HEADER) != crc)
			return errmsg_why(why, -EBADMSG, "corrupt snapshot state: crc32 mismatch in section %s at offset %zu",
					name, off);
		if (snap_find(f, type))
			return errmsg_why(why, -EBADMSG, "corrupt snapshot state: section %s twice", name);
		if (f->nr >= SNAP_MAX_SECTIONS)
			return errmsg_why(why, -EBADMSG, "corrupt snapshot state: more than %u sections",
					SNAP_MAX_SECTIONS);
		f->sec[f->nr++] = (struct snap_section){ type, b + off + SNAP_SECTION_HEADER, slen };
		off += SNAP_SECTION_HEADER + (size_t)slen;
	}

	for (size_t i = 0; i < nr_required; i++)
		if (!snap_find(f, required[i]))
			return errmsg_why(why, -EBADMSG, "incomplete snapshot state: no %s section",
					snap_section_name(required[i], name, sizeof(name)));
	return 0;
}
