/* snapshot.h - a running VM saved to a snapshot directory, and a snapshot loaded back for vm_build to restore. */
#ifndef MAYFLY_VM_SNAPSHOT_H
#define MAYFLY_VM_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vm/config.h"
#include "lib/image_id.h"
#include "snapshot/format.h"

struct vm;
struct arch_snapshot;
struct ws_range;

/* The files of a snapshot directory. */
#define SNAPSHOT_STATE       "state"
#define SNAPSHOT_MEMORY      "memory"
#define SNAPSHOT_OVERLAY_FMT "disk-%s"    /* a copy-on-write disk's overlay: disk-vda */
#define SNAPSHOT_OVERLAY_ROOT "disk-vda"  /* the only one: the root's */

/* What a snapshot depends on: the kernel it booted and the root image
 * under its copy-on-write disk (content), and its own memory and overlay
 * files (so that a file changed since, by accident or on purpose, is
 * refused rather than run). */
struct snapshot_files {
	struct image_id kernel;
	bool has_rootfs;
	struct image_id rootfs;
	struct image_id memory;
	bool has_overlay;
	struct image_id overlay;    /* the rootfs's overlay: disk-vda */
};

/* A snapshot loaded for a restore. */
struct snapshot {
	char *dir;                  /* its own copy */
	uint8_t *state;             /* the whole state file; sections point into it */
	size_t state_len;
	struct snap_file *file;
	struct vm_config cfg;       /* as saved: the VM to rebuild */
	struct arch_snapshot *arch; /* the architecture's part: its CPU description */
	struct snapshot_files files;
	struct ws_range *ws;        /* the working set's runs (NULL: none saved) */
	size_t nr_ws;
};

/* Read and check DIR/state: every section's crc, the format version, the
 * config, CPUID and file identities; the memory and overlay files present
 * and unchanged since the snapshot was written. 0, or -errno with *why:
 * -ENOENT no snapshot there, -ENOTSUP another format version, -EBADMSG a
 * corrupt or truncated file, -ESTALE a memory or overlay file that changed.
 * Touches no KVM and runs no guest code. On failure s holds nothing
 * (snapshot_free is still safe); on success snapshot_free gives it back. */
int snapshot_load(struct snapshot *s, const char *dir, const char **why)
	__attribute__((warn_unused_result));
void snapshot_free(struct snapshot *s);

/* DIR/name into out. 0 or -ENAMETOOLONG. */
int snapshot_path(const char *dir, const char *name, char *out, size_t len);

/* What a save wrote. */
struct snapshot_stats {
	uint64_t memory_bytes;      /* data in the memory file (holes not counted) */
	uint64_t overlay_bytes;     /* data in the overlay files */
	size_t state_bytes;
	uint64_t pause_us;          /* vCPUs parked to state written */
	uint64_t workingset_pages;  /* pages in the working set section (0: none) */
};

/* From now until the save, the pages the guest writes are its working
 * set: vm_snapshot_save records them, and a restore populates them
 * (copied, writable) before the guest runs, so the guest's first touch of
 * each costs one nested page fault, not a read fault and then a
 * copy-on-write one. Call it before a command representative of what
 * restored VMs run. 0 or -errno (the snapshot is then saved without). */
int vm_workingset_begin(struct vm *vm) __attribute__((warn_unused_result));

/* What a snapshot records of the files the VM was built from, taken
 * before it runs (and before the jail, which cannot reach them). */
struct snapshot_sources {
	struct image_id kernel, rootfs;
	bool has_rootfs;
};

/* Before the VM, as the caller: identify cfg's kernel and root image
 * into *src and make the empty directory a snapshot for dir is written
 * into, beside dir (tmp: its absolute path). 0 or -errno with *why. */
int vm_snapshot_tmpdir(const char *dir, const struct vm_config *cfg, char *tmp, size_t len,
		       struct snapshot_sources *src, const char **why);

/* After a successful save, outside any jail: tmp's files become the
 * caller's, and tmp takes dir's place (an older snapshot there is
 * replaced whole; anything else there is refused). On failure tmp is
 * removed. 0 or -errno with *why. */
int vm_snapshot_install(const char *tmp, const char *dir, const char **why);

/* The same for a save this very process wrote (unjailed: --no-jail, or no
 * user namespace), from its snapshot thread under its filter: the files
 * are already the caller's, so no owner is read or changed (geteuid,
 * getegid and lchown are not in the snapshot role). */
int vm_snapshot_install_own(const char *tmp, const char *dir, const char **why);

/* Remove tmp and the snapshot files in it (a failed save). */
void vm_snapshot_discard(const char *tmp);

/* Save the running VM into tmp (vm_snapshot_tmpdir's): park every vCPU,
 * stop the I/O thread (device work drained), then write memory, overlays
 * and state. The guest agent must have been quiesced (its connections
 * closed) first. The VM cannot go on afterwards: the caller ends it. 0
 * or -errno with *why (what was written stays for vm_snapshot_discard). */
int vm_snapshot_save(struct vm *vm, const char *tmp, const struct snapshot_sources *src,
		     struct snapshot_stats *stats,
		     const char **why) __attribute__((warn_unused_result));

/* A live save's files (mayfly pause, fork): empty regular files open
 * read-write, named by the process that opened them (a jailed VM cannot
 * name any) and renamed into place by it afterwards. */
struct snapshot_fds {
	int memory, overlay, state;
};

/* Close the open ones, set all to -1. */
void snapshot_fds_close(struct snapshot_fds *fds);

/* vm_snapshot_save in two steps, for a VM that may go on afterwards.
 * With every vCPU parked (vm_pause) and the I/O thread parked
 * (event_loop_pause): the vCPU, VM and device sections into w, guest RAM
 * into fds->memory, the copy-on-write root's overlay into fds->overlay
 * (f->has_overlay then true; without one that file stays empty). f's
 * kernel and rootfs identities are the caller's. 0 or -errno with *why. */
int vm_snapshot_capture(struct vm *vm, const struct snapshot_fds *fds, struct snap_writer *w,
			struct snapshot_files *f, struct snapshot_stats *stats, const char **why)
	__attribute__((warn_unused_result));
/* Then, the VM running again or not: the memory and overlay files'
 * identities (hashed through their fds), the files section, the state
 * written into fds->state, every file synced. 0 or -errno with *why. */
int vm_snapshot_finish(struct snap_writer *w, const struct snapshot_fds *fds,
		       struct snapshot_files *f, struct snapshot_stats *stats, const char **why)
	__attribute__((warn_unused_result));

/* For vm_build, in this order: the host's CPU is one the guest can go on
 * on (kvm_sys_fd: /dev/kvm; vm_fd: the VM, made but empty), ... */
int snapshot_check_host(const struct snapshot *s, int kvm_sys_fd, int vm_fd, const char **why);
/* ... then, with devices and vCPUs created, put every saved state in
 * place. Runs no guest code. */
int vm_snapshot_restore(struct vm *vm, const struct snapshot *s, const char **why)
	__attribute__((warn_unused_result));

#endif
