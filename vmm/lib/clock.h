/* clock.h - monotonic time in nanoseconds, for timings in logs; wall-clock deadlines for timed waits. */
#ifndef MAYFLY_LIB_CLOCK_H
#define MAYFLY_LIB_CLOCK_H

#include <stdint.h>
#include <time.h>

#define NS_PER_S 1000000000ULL

static inline uint64_t clock_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* CLOCK_REALTIME ms from now: the deadline pthread_cond_timedwait and
 * pthread_timedjoin_np take. */
static inline struct timespec clock_realtime_after_ms(unsigned ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

#endif
