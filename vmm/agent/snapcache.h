/* snapcache.h - mayfly run's default snapshot: one per mayfly build, kernel, root image, memory and vCPUs, made on first use. */
#ifndef MAYFLY_AGENT_SNAPCACHE_H
#define MAYFLY_AGENT_SNAPCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "jail/jail.h"

/* The snapshot directory for cfg (a VM config ready to boot, as
 * snapshot_vm_config leaves it): <cache>/snapshots/<key>, the key a
 * sha256 of the content of mayfly itself, the kernel and the root image,
 * and of the memory size and vCPU count. Made now, with a progress line,
 * when it is not there yet (another mayfly making it at the same time is
 * waited for). 0 with dir filled, -1 when there is no cache directory at
 * all (boot cold; a warning says so), or an exit code after one line. */
/* The snapshot is made jailed as jc says, in a child process of ours:
 * this one stays unjailed and unfiltered, for the run's own VM. */
int snapcache_get(const struct vm_config *cfg, char *dir, size_t len, int verbose,
		  const struct jail_config *jc);

#endif
