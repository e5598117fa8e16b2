/* map_guard.h - a clear last line when a file a VM has mapped (a snapshot's memory or overlay) is cut short under it. */
#ifndef MAYFLY_LIB_MAP_GUARD_H
#define MAYFLY_LIB_MAP_GUARD_H

#include <stddef.h>

/* At most this many mappings are guarded: guest RAM and a disk overlay. */
#define MAP_GUARD_MAX 4

/* A file mapped MAP_PRIVATE (a snapshot's memory as guest RAM, its
 * disk-vda as a copy-on-write overlay) that is truncated while the VM runs
 * loses every page past the new end, private copies too, and mayfly's next
 * touch of one raises SIGBUS. Guard [base, base + len): a SIGBUS inside it
 * writes `line` (one line, ending in '\n', kept by the caller for the
 * process's life) and ends the process with exit 7, as a vCPU's KVM_RUN
 * failing on guest RAM does; any other SIGBUS keeps its default action.
 * Process-wide (signal dispositions are): one VM per process. Call before
 * any thread that touches the mapping starts. 0 or -errno (-ENOSPC: full). */
int map_guard_add(const void *base, size_t len, const char *line);

#endif
