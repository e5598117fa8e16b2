/* guest_files.h - where the default guest (kernel, initramfs, root image) that tools/build-guest builds is found. */
#ifndef MAYFLY_GUEST_FILES_H
#define MAYFLY_GUEST_FILES_H

#include <stddef.h>

#include "config.h"

/* Find `name` (e.g. "rootfs.ext4") in the default guest directories:
 * $MAYFLY_GUEST_DIR when set (and then nothing else), else the source
 * tree's .cache/guest (a development build), then the installed data dir.
 * 0 with out filled, or -ENOENT. */
int guest_files_find(const char *name, char *out, size_t len);

/* When cfg has no kernel: the default guest's vmlinux, and its
 * initramfs.cpio.gz beside it unless cfg has an initrd or a rootfs (the
 * root is then the disk). 0, or -ENOENT with err set to one line. */
int guest_files_resolve(struct vm_config *cfg, char *err, size_t errlen);

#endif
