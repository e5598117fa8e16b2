/* clock.h - monotonic time in nanoseconds, for timings in logs. */
#ifndef MAYFLY_LIB_CLOCK_H
#define MAYFLY_LIB_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t clock_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

#endif
