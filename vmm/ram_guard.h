/* ram_guard.h - a clear last line when a restored VM's memory file is cut short under it. */
#ifndef MAYFLY_RAM_GUARD_H
#define MAYFLY_RAM_GUARD_H

#include <stddef.h>

/* Guest RAM mapped MAP_PRIVATE from a snapshot's memory file
 * (mem_restore): if that file is truncated while the VM runs, the kernel
 * takes away every page past the new end, the guest's private copies
 * too, and mayfly's next touch of one (a virtqueue, a buffer) raises
 * SIGBUS. Install a handler that, for a fault inside [base, base + len),
 * writes one line naming the cause and ends the process with exit 7, as
 * a vCPU's KVM_RUN failing on the same pages does; any other SIGBUS
 * keeps its default action. Process-wide (signal dispositions are): one
 * VM per process. 0 or -errno. */
int ram_guard_install(const void *base, size_t len);

#endif
