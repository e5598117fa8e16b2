/* snapcache.h - mayfly run's default snapshot: one per mayfly build, kernel, root image, memory and vCPUs, made on first use. */
#ifndef MAYFLY_LAUNCH_SNAPCACHE_H
#define MAYFLY_LAUNCH_SNAPCACHE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "vm/config.h"
#include "jail/jail.h"

/* The snapshot directory for cfg (a VM config ready to boot, as
 * agent_vm_config leaves it): <cache>/snapshots/<key>, the key a sha256
 * of the content of mayfly itself, the kernel, the root image and the
 * initrd (if any), of the kernel command line's parts, and of the memory
 * size and vCPU count. Made now, with a progress line,
 * when it is not there yet (another mayfly making it at the same time is
 * waited for). 0 with dir filled, -1 when there is no cache directory at
 * all (boot cold; a warning says so), or an exit code after one line. */
/* The snapshot is made jailed as jc says, in a child process of ours:
 * this one stays unjailed and unfiltered, for the run's own VM. */
int snapcache_get(const struct vm_config *cfg, char *dir, size_t len, int verbose,
		  const struct jail_config *jc);

/* The cache keeps this many default snapshots, the most recently used; one
 * used in the last SNAPCACHE_GRACE_S seconds is never removed (a run may be
 * between finding it and opening its files). Each is tens to hundreds of
 * MiB, and every new mayfly build, kernel or image makes a new one. */
#define SNAPCACHE_KEEP    4
#define SNAPCACHE_GRACE_S 600

/* Keep the snapshot at dir from being removed by an eviction while the
 * returned descriptor stays open (a shared lock on the directory): for a
 * service that restores from it for as long as it runs. The descriptor
 * (close-on-exec), or -errno. */
int snapcache_hold(const char *dir);

/* Remove from snapdir (<cache>/snapshots) the snapshot directories beyond
 * the `keep` most recently used (directory mtime, which a use touches),
 * sparing `spare` (a key, or NULL), any used after now - grace_s, any
 * held (snapcache_hold), and
 * whatever an interrupted eviction left (".evict-*"). Only names shaped
 * like a key are considered. Each is renamed away before it is removed, so
 * a reader sees a whole snapshot or none. The number removed, or -errno. */
int snapcache_evict(const char *snapdir, const char *spare, unsigned keep, time_t grace_s,
		    time_t now);

#endif
