/* tripwire.h - a hook before every access the code under test makes to chosen pages of fake guest RAM: a racing vCPU, deterministically. */
#ifndef MAYFLY_TEST_TRIPWIRE_H
#define MAYFLY_TEST_TRIPWIRE_H

#include <stdbool.h>
#include <stddef.h>

/* Called before the access at byte `offset` of the watched range (`write`:
 * a store). It may read and change the watched memory (it is accessible
 * while the hook runs): what it writes is what the access then sees. Runs
 * in a signal handler on the accessing thread. */
typedef void (*tripwire_fn)(void *opaque, size_t offset, bool write);

/* Watch [start, start + len) (page-aligned, whole pages): from now on every
 * load or store there first calls fn. x86-64 Linux: the pages are made
 * inaccessible, the fault runs fn, opens them and single-steps the
 * instruction (EFLAGS.TF), and the trap closes them again. A fault outside
 * the range is not ours: the default action (a crash) follows. */
void tripwire_arm(void *start, size_t len, tripwire_fn fn, void *opaque);

/* Stop watching; the pages are accessible again. */
void tripwire_disarm(void);

#endif
