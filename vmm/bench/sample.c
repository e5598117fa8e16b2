/* sample.c - the names of a benchmark run's points. */
#include "bench/sample.h"

#include <stdio.h>
#include <string.h>

const char *bench_point_name(int point)
{
	if (point == BENCH_FORKED)
		return "forked";
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

double bench_exits_total(const struct bench_sample *s)
{
	uint64_t total = 0;

	for (unsigned i = 0; i < s->nexits; i++)
		total += s->exits[i].n;
	return s->nexits ? (double)total : -1;
}

void bench_add_exits(struct bench_sample *s, const char *kind, uint64_t n)
{
	unsigned i;

	if (strlen(kind) >= sizeof(s->exits[0].kind))
		kind = "other";
	for (i = 0; i < s->nexits; i++)
		if (!strcmp(s->exits[i].kind, kind))
			break;
	if (i == s->nexits) {
		if (s->nexits == BENCH_EXIT_KINDS) {
			/* The table is full: the last slot becomes "other". */
			i = BENCH_EXIT_KINDS - 1;
			snprintf(s->exits[i].kind, sizeof(s->exits[i].kind), "other");
		} else {
			snprintf(s->exits[i].kind, sizeof(s->exits[i].kind), "%s", kind);
			s->exits[i].n = 0;
			s->nexits++;
		}
	}
	s->exits[i].n += n;
}
