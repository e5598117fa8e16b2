/* jsoncheck.c - every line on stdin must be one strict JSON object (RFC 8259, strict UTF-8) with an "event": the e2e suite's reader of --json output; with --bench KIND, mayfly bench's lines and their phases' order. */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* mayfly bench's points in the order docs/bench.md gives them; the ones a
 * restore never has (it loads no kernel, its init ran before the save). */
static const char *const points[] = {
	"forked", "main", "cgroup_made", "vm_forked", "jail_started", "memory_mapped", "guest_loaded", "vm_created", "devices_ready",
	"jail_entered", "first_kvm_run", "guest_init", "agent_ready", "command_started",
	"first_output", "command_ended", "exit",
};
#define NPOINTS (sizeof(points) / sizeof(points[0]))

/* Does a run of this kind reach point p? A cold boot loads a kernel and
 * runs its init; only a fork's run has its parent forked first. */
static bool reached(const char *kind, const char *p)
{
	if (!strcmp(p, "guest_loaded") || !strcmp(p, "guest_init"))
		return !strcmp(kind, "boot");
	return strcmp(p, "forked") || !strcmp(kind, "fork");
}

/* One "run" line of KIND: every point there, in order, none missing. */
static const char *bench_run_bad(json_t *run, const char *kind)
{
	static char why[160];
	json_t *at = json_object_get(run, "at_ms");
	bool cold = !strcmp(kind, "boot");
	size_t want = 0;
	double prev = 0;

	if (json_integer_value(json_object_get(run, "exit_code")) != 0 ||
	    json_is_true(json_object_get(run, "restored")) == cold)
		return "exit_code is not 0, or restored does not fit the kind";
	for (size_t i = 0; i < NPOINTS; i++)
		want += reached(kind, points[i]);
	if (json_object_size(at) != want)
		return "at_ms has other points than the kind's";
	for (size_t i = 0; i < NPOINTS; i++) {
		json_t *v = json_object_get(at, points[i]);

		if (!reached(kind, points[i]))
			continue;
		if (!json_is_number(v)) {
			snprintf(why, sizeof(why), "no %s", points[i]);
			return why;
		}
		if (json_number_value(v) < prev) {
			snprintf(why, sizeof(why), "%s at %.3f ms comes before the point before it (%.3f)",
				 points[i], json_number_value(v), prev);
			return why;
		}
		prev = json_number_value(v);
	}
	return NULL;
}

/* --bench KIND: the header first, then runs and summaries; prints the
 * measured runs' count. */
static int bench(const char *kind)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	long lines = 0, runs = 0;

	while ((n = getline(&line, &cap, stdin)) > 0) {
		json_t *j = json_loadb(line, (size_t)n, JSON_REJECT_DUPLICATES, NULL);
		const char *type = json_string_value(json_object_get(j, "type")), *bad = NULL;

		lines++;
		if (!type)
			bad = "not a JSON object with a \"type\"";
		else if (lines == 1 && (strcmp(type, "bench") ||
					strcmp(json_string_value(json_object_get(j, "kind")) ?: "", kind)))
			bad = "not the header of this kind";
		else if (!strcmp(type, "run") && !json_is_true(json_object_get(j, "warmup"))) {
			bad = bench_run_bad(j, kind);
			runs++;
		}
		json_decref(j);
		if (bad) {
			fprintf(stderr, "jsoncheck: line %ld: %s\n", lines, bad);
			return 1;
		}
	}
	free(line);
	printf("%ld\n", runs);
	return runs ? 0 : 1;
}

/* Exit 0 when every line passes (and there was one), 1 naming the first
 * that does not. JSON_ALLOW_NUL: \u0000 is valid JSON, only jansson's C
 * strings need the flag. */
int main(int argc, char **argv)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	long lines = 0;

	if (argc == 3 && !strcmp(argv[1], "--bench"))
		return bench(argv[2]);
	while ((n = getline(&line, &cap, stdin)) > 0) {
		json_error_t err;
		json_t *j;

		if (line[n - 1] != '\n') {
			fprintf(stderr, "jsoncheck: line %ld has no newline\n", lines + 1);
			return 1;
		}
		line[n - 1] = '\0';
		j = json_loadb(line, (size_t)n - 1, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &err);
		if (!j || !json_is_object(j) || !json_is_string(json_object_get(j, "event"))) {
			fprintf(stderr, "jsoncheck: line %ld is not a JSON event: %s\n", lines + 1,
				j ? "no \"event\"" : err.text);
			return 1;
		}
		json_decref(j);
		lines++;
	}
	free(line);
	printf("%ld\n", lines);
	return lines ? 0 : 1;
}
