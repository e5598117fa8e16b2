/* num.h - the one number parser of mayfly and its agent: decimal, bounded, no sign, no junk. */
#ifndef MAYFLY_NUM_H
#define MAYFLY_NUM_H

#include <stdint.h>

/* Parse s as a decimal whole number in [min, max]: digits only (no sign,
 * no spaces, no base prefix), at least one. 0, -EINVAL when s is not a
 * number, or -ERANGE when it is outside [min, max] (overflow included). */
int num_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/* Like num_parse_u64, for a byte count: digits with an optional binary
 * suffix K, M, G or T (KiB, MiB, GiB, TiB; upper or lower case), the
 * result in bytes and checked against [min, max]. */
int num_parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out);

#endif
