/* guest_files.h - where the default guest (kernel, initramfs, root image) that tools/build-guest builds is found. */
#ifndef MAYFLY_LAUNCH_GUEST_FILES_H
#define MAYFLY_LAUNCH_GUEST_FILES_H

#include <stdbool.h>
#include <stddef.h>

#include "vm/config.h"

/* Find `name` (e.g. "rootfs.ext4") in the default guest directories:
 * $MAYFLY_GUEST_DIR when set (and then nothing else), else the source
 * tree's .cache/guest (a development build), then the installed data dir.
 * 0 with out filled, or -ENOENT. */
int guest_files_find(const char *name, char *out, size_t len);

/* cfg->rootfs as the user named it: "agent" or "minimal" become the default
 * guest's agent.ext4 or rootfs.ext4 (anything else is a path, kept); empty
 * with want_default: agent.ext4 when built, else rootfs.ext4. 0, or -ENOENT
 * with err set to one line. */
int guest_files_rootfs(struct vm_config *cfg, bool want_default, char *err, size_t errlen);

/* guest_files_rootfs(cfg, false) and, when cfg has no kernel: the default guest's vmlinux, and its
 * initramfs.cpio.gz beside it unless cfg has an initrd or a rootfs (the
 * root is then the disk). 0, or -ENOENT with err set to one line. */
int guest_files_resolve(struct vm_config *cfg, char *err, size_t errlen);

/* Complete a config for a VM its agent drives (run, mcp, snapshot create,
 * serve): the default rootfs (agent.ext4 when built) and kernel, an
 * in-process vsock device, the console to stderr with -v (else
 * discarded). restoring: the VM comes from a snapshot, which records its
 * kernel and root image: only a root image named (agent, minimal) is
 * looked up, no default is needed. 0 or RUN_EXIT_MAYFLY after one line. */
int agent_vm_config(struct vm_config *vm, int verbose, bool restoring);

#endif
