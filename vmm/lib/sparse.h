/* sparse.h - zeroing that writes only the pages whose bytes change. */
#ifndef MAYFLY_LIB_SPARSE_H
#define MAYFLY_LIB_SPARSE_H

#include <stddef.h>

/* Why: a large struct (the VM's device state with the serial port's ring,
 * a jail's paths, the command line's network tables) that a plain memset
 * writes in full costs every page of it in
 * every VMM process, though most of it stays zero; a fork's children are
 * many, and each pays again. Fresh memory (calloc, mmap, the untouched
 * part of a stack) reads as the kernel's one zero page and takes a page of
 * its own only when written. */

/* Zero len bytes at p, writing only the pieces (p's 4 KiB pages, cut to
 * [p, p + len)) that hold a nonzero byte. The number of pieces written. */
size_t sparse_zero(void *p, size_t len);

#endif
