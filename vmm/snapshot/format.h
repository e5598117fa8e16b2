/* format.h - the snapshot `state` file: versioned, sectioned, each section crc32-checked (docs/snapshot.md). */
#ifndef MAYFLY_SNAPSHOT_FORMAT_H
#define MAYFLY_SNAPSHOT_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "codec.h"

/*
 * Layout (all integers little-endian; docs/snapshot.md has the details):
 *
 *   header   magic "MAYFLYST" (8) | version u32 | flags u32 (0)
 *   section  type u32 | crc32 u32 | length u64 | payload[length]    (repeated)
 *   end      type 0   | crc32 of every byte before it | length 0
 *
 * A section's crc32 (zlib's) covers its type, its length and its payload, in
 * that order, as stored. Nothing may follow the end marker.
 */
#define SNAP_MAGIC          "MAYFLYST"
#define SNAP_MAGIC_LEN      8
#define SNAP_FORMAT_VERSION 2u
#define SNAP_HEADER_SIZE    16u
#define SNAP_SECTION_HEADER 16u
#define SNAP_MAX_SECTIONS   512u

/* Section types. One section of each type per file. Numbers are never
 * reused for another meaning; a new or changed layout bumps
 * SNAP_FORMAT_VERSION. 0x10-0xfff: free for devices and the front end. */
enum snap_section_type {
	SNAP_SEC_END = 0,          /* the end marker; never a real section */
	SNAP_SEC_CONFIG = 1,       /* the vm_config the VM was built from */
	SNAP_SEC_CPUID = 2,        /* cpuid_encode(): the CPUID table the guest was given */
	SNAP_SEC_VM = 3,           /* vm_state_encode(): irqchip, PIT, KVM clock */
	SNAP_SEC_FILES = 4,        /* the identity of every file the snapshot depends on */
	SNAP_SEC_ARM64 = 5,        /* arm64_vm_state_encode(): the CPU target, the GICv3 (arm64's
				    * VM-wide state; x86's are CPUID and VM) */
	SNAP_SEC_SERIAL = 0x10,    /* serial_save(): the 16550A at COM1 */
	SNAP_SEC_I8042 = 0x11,     /* i8042_save(): empty */
	SNAP_SEC_BOOT_TIMER = 0x12,   /* boot_timer_save() */
	SNAP_SEC_WORKINGSET = 0x13,   /* optional: workingset_encode(), pages to populate */
	SNAP_SEC_VIRTIO_BASE = 0x20,  /* + virtio-mmio slot: virtio_mmio_save() */
	SNAP_SEC_OVERLAY_BASE = 0x40, /* + slot of a copy-on-write virtio-blk: disk_cow_save() */
	SNAP_SEC_VCPU_BASE = 0x1000,  /* + vCPU index: vcpu_state_encode() */
};
#define SNAP_SEC_VIRTIO_MAX  32u
#define SNAP_SEC_VIRTIO(i)   ((uint32_t)SNAP_SEC_VIRTIO_BASE + (uint32_t)(i))
#define SNAP_SEC_OVERLAY(i)  ((uint32_t)SNAP_SEC_OVERLAY_BASE + (uint32_t)(i))
#define SNAP_SEC_VCPU_MAX 256u
#define SNAP_SEC_VCPU(i)  ((uint32_t)SNAP_SEC_VCPU_BASE + (uint32_t)(i))

/* One section of a parsed file: a view into the caller's buffer. */
struct snap_section {
	uint32_t type;
	const uint8_t *data;
	uint64_t len;
};

/* A parsed state file: its sections in file order. */
struct snap_file {
	uint32_t version;
	unsigned nr;
	struct snap_section sec[SNAP_MAX_SECTIONS];
};

/* Builds a state file in memory. */
struct snap_writer {
	struct snap_out out;
	unsigned nr;
	uint32_t types[SNAP_MAX_SECTIONS];
};

/* A readable name for a section type ("cpuid", "vcpu 3", "type 0x42")
 * in `buf` of `size` bytes; returns buf. */
const char *snap_section_name(uint32_t type, char *buf, size_t size);

/* Start a file: the header, no sections yet. Nothing allocated on failure;
 * the first add reports it. */
void snap_writer_init(struct snap_writer *w);

/* Append a section with a copy of payload[0, len). Returns 0; -EINVAL for
 * type SNAP_SEC_END; -EEXIST when the type is already in the file; -E2BIG
 * past SNAP_MAX_SECTIONS (the writer unchanged); -ENOMEM (every later call
 * fails too). */
int snap_writer_add(struct snap_writer *w, uint32_t type, const void *payload, size_t len)
	__attribute__((warn_unused_result));
/* snap_writer_add of what an encoder built in o (its own error first),
 * o freed either way; on failure *why names the section. 0 or -errno. */
int snap_writer_add_out(struct snap_writer *w, uint32_t type, struct snap_out *o,
			const char **why) __attribute__((warn_unused_result));

/* Append the end marker and write the file to `path` atomically: a
 * temporary file (mode 0600) in the same directory, fsync, rename. On failure
 * nothing is left behind and an existing `path` is untouched. 0 or -errno
 * with *why a one-line reason. The writer is finished either way: free it. */
int snap_writer_save(struct snap_writer *w, const char *path, const char **why)
	__attribute__((warn_unused_result));
/* The same into `fd`, an empty file open for writing, from its current
 * offset, not synced. */
int snap_writer_write_fd(struct snap_writer *w, int fd, const char **why)
	__attribute__((warn_unused_result));

/* Append the end marker and hand out the whole file (for tests and fuzz
 * seeds): *data stays owned by the writer. 0 or -ENOMEM. */
int snap_writer_finish(struct snap_writer *w, const uint8_t **data, size_t *len)
	__attribute__((warn_unused_result));

void snap_writer_free(struct snap_writer *w);

/* Parse the state file in buf[0, len) (untrusted: any bytes). Pure: reads
 * only the buffer, allocates nothing. Checks, and refuses with *why naming
 * what and where:
 *  - bad magic, nonzero header flags, a section header or payload cut short,
 *    a length past the end of the buffer, no end marker, bytes after it,
 *    a crc mismatch (naming the section), the same type twice, more than
 *    SNAP_MAX_SECTIONS, a type in `required` (nr_required entries) missing:
 *    -EBADMSG;
 *  - a format version other than SNAP_FORMAT_VERSION: -ENOTSUP (the message
 *    gives both numbers).
 * On success `f` holds views into buf (keep buf alive while using them). */
int snap_parse(struct snap_file *f, const void *buf, size_t len,
	       const uint32_t *required, size_t nr_required, const char **why)
	__attribute__((warn_unused_result));

/* The section of `type` in a parsed file, or NULL. */
const struct snap_section *snap_find(const struct snap_file *f, uint32_t type);

#endif
