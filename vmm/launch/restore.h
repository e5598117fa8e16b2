/* restore.h - a snapshot named on the command line: loaded, held against the flags the user gave, turned into the config to restore. */
#ifndef MAYFLY_LAUNCH_RESTORE_H
#define MAYFLY_LAUNCH_RESTORE_H

#include <stdbool.h>

#include "vm/config.h"
#include "vm/snapshot.h"

/* Which fields of the given config the user set on the command line. */
struct restore_given {
	bool mem, cpus, kernel, rootfs, spare_disks;
};

/* Load the snapshot in dir into snap and make *out the config vm_build
 * restores it with: the snapshot's own, plus what is each run's (id, log
 * level, console, KVM device, the vsock socket path) from given. Refused,
 * before any guest code runs, each with one line in *why:
 *   -EINVAL     --mem, --cpus or --spare-disks given and not the
 *               snapshot's (usage)
 *   -ESTALE     --kernel given and another kernel than the snapshot's; or
 *               the root image (the snapshot's, or --rootfs) with other
 *               content than the one snapshotted
 *   -ENOTSUP    another format version; -EBADMSG a corrupt or truncated
 *               state file, or a memory or overlay file that changed;
 *   -ENOENT     no snapshot there, or the root image is gone.
 * On success the caller frees snap with snapshot_free after vm_destroy,
 * and out with config_free; on failure neither holds anything. */
int restore_prepare(struct snapshot *snap, const char *dir, const struct vm_config *given,
		    const struct restore_given *set, struct vm_config *out, const char **why)
	__attribute__((warn_unused_result));

#endif
