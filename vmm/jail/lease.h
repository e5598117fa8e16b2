/* lease.h - each jail directory and cgroup belongs to a live supervisor holding a lock; whatever a killed one left is removed by the next mayfly. */
#ifndef MAYFLY_JAIL_LEASE_H
#define MAYFLY_JAIL_LEASE_H

#include <stdbool.h>
#include <stddef.h>

#include "vm/config.h"

#define LEASE_SUFFIX ".lock"

/* One jail's lease: BASE/PREFIXID-XXXXXX.lock, flock'ed by its owner for
 * as long as it lives, beside the jail directory BASE/PREFIXID-XXXXXX; the
 * VM's cgroup is CGROUP_DIR/vm-ID-XXXXXX. */
struct lease {
	int fd;                       /* the locked file; -1: none */
	char lock[CONFIG_PATH_MAX];
	char dir[CONFIG_PATH_MAX];    /* the jail directory (made, empty) */
	char cgroup_name[CONFIG_PATH_MAX];   /* "vm-ID-XXXXXX", for cgroup_create */
};

/* Reserve a new unique name under base (which must exist), lock it and
 * make the jail directory (mode 0755). The lock fd is O_CLOEXEC; a
 * process that forks keeps the lock while any copy of it is open. 0 or
 * -errno (nothing left behind). */
int lease_take(struct lease *l, const char *base, const char *prefix, const char *id)
	__attribute__((warn_unused_result));

/* The owner, once the jail directory and the cgroup are gone: remove the
 * lock file (removed: true), or only close it, which leaves both to the
 * next lease_sweep (when they could not be removed). Safe on a lease
 * never taken. */
void lease_release(struct lease *l, bool removed);

/* Close the lock without touching anything: the forked VM process, which
 * must hold no host file. */
void lease_drop(struct lease *l);

/* Remove what dead owners left under base: for each PREFIX*.lock whose
 * lock is free, its jail directory (an empty one only), its cgroup under
 * cgroup_dir (NULL: none; an empty one only: a cgroup that still holds a
 * process is retried next time) and then the lock file. Cheap: one
 * directory listing and a non-blocking flock per entry. Returns how many
 * leases it removed (0 when base does not exist). */
int lease_sweep(const char *base, const char *prefix, const char *cgroup_dir);

#endif
