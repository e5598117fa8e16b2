/* sample.c - the names of a benchmark run's points. */
#include "bench/sample.h"

#include <string.h>

const char *bench_point_name(int point)
{
	if (point == BENCH_MAIN)
		return "main";
	if (point == BENCH_EXIT)
		return "exit";
	if (point > BENCH_MAIN && point < BENCH_EXIT)
		return phase_name(point - BENCH_PHASE0);
	return "unknown";
}

int bench_point_by_name(const char *name)
{
	for (int p = 0; p < BENCH_POINTS; p++)
		if (!strcmp(bench_point_name(p), name))
			return p;
	return -1;
}
