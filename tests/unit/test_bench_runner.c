/* test_bench_runner.c - mayfly bench's runner and its JSON lines, against a stand-in for mayfly run (bench_fake_run.c). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/record.h"
#include "bench/report.h"
#include "bench/runner.h"
#include "lib/clock.h"

static char *fake(void)
{
	char *p = getenv("BENCH_FAKE_RUN");

	cr_assert(p, "BENCH_FAKE_RUN names bench_fake_run (meson sets it)");
	return p;
}

struct seen {
	unsigned calls, last_ndone;
	bool in_order;
};

static void count_done(void *opaque, const struct bench_sample *s, unsigned ndone, unsigned total)
{
	struct seen *seen = opaque;

	(void)s;
	(void)total;
	seen->in_order &= ndone == seen->last_ndone + 1;
	seen->last_ndone = ndone;
	seen->calls++;
}

static int run(const char *what, unsigned runs, unsigned warmup, enum bench_mode mode,
	       unsigned arg, struct bench_sample *s, struct seen *seen, char *err)
{
	char *argv[] = { fake(), "run", "--json", "--", (char *)what, NULL, NULL, NULL };
	struct bench_plan p = { .argv = argv, .runs = runs, .warmup = warmup, .mode = mode,
				.stagger_ms = arg, .burst = arg, .done = count_done, .opaque = seen };

	return bench_run(&p, s, err, 300);
}

Test(bench_runner, every_run_is_timed_from_exec_to_exit_through_its_phases)
{
	struct bench_sample s[4];
	struct seen seen = { .in_order = true };
	char err[300] = "";

	cr_assert_eq(run("ok", 3, 1, BENCH_SEQUENTIAL, 0, s, &seen, err), 0, "%s", err);
	cr_assert_eq(seen.calls, 4);
	cr_assert(seen.in_order);
	for (unsigned i = 0; i < 4; i++) {
		double prev = 0;

		cr_assert_eq(s[i].index, i);
		cr_assert_eq(s[i].warmup, i == 0);
		cr_assert(s[i].restored);
		cr_assert_eq(s[i].exit_code, 0);
		cr_assert_geq(s[i].at[BENCH_MAIN], 0);
		/* The fake's phases are main + 0.5 ... main + 7 ms. */
		cr_assert_float_eq(s[i].at[BENCH_PHASE0 + PHASE_COMMAND_ENDED] - s[i].at[BENCH_MAIN], 7.0,
				   1e-6);
		cr_assert_lt(s[i].at[BENCH_PHASE0 + PHASE_GUEST_LOADED], 0, "a restore loads no kernel");
		cr_assert_lt(s[i].at[BENCH_PHASE0 + PHASE_GUEST_INIT], 0);
		for (int p = 0; p < BENCH_POINTS; p++) {
			if (s[i].at[p] < 0)
				continue;
			cr_assert_geq(s[i].at[p], prev, "run %u: %s before the point before it", i,
				      bench_point_name(p));
			prev = s[i].at[p];
		}
		cr_assert_float_eq(bench_exits_total(&s[i]), 13, 1e-9, "io 5 + mmio 7 + other 1");
		cr_assert_geq(s[i].user_ms + s[i].sys_ms, 0);
		cr_assert_gt(s[i].minflt, 0, "a process that ran faulted pages in");
	}
}

Test(bench_runner, a_failed_run_stops_the_benchmark_and_says_why)
{
	struct bench_sample s[6];
	struct seen seen = { .in_order = true };
	char err[300] = "";

	cr_assert_eq(run("fail", 5, 1, BENCH_SEQUENTIAL, 0, s, &seen, err), -1);
	cr_assert_str_eq(err, "run 1 exited 125: the VM broke");
	cr_assert_eq(seen.calls, 1, "no run starts after a failure");
}

Test(bench_runner, a_run_without_its_timings_event_fails)
{
	struct bench_sample s[2];
	struct seen seen = { .in_order = true };
	char err[300] = "";

	cr_assert_eq(run("silent", 2, 0, BENCH_BURST, 2, s, &seen, err), -1);
	cr_assert(strstr(err, "gave no timings event"), "%s", err);
	cr_assert_eq(seen.calls, 2, "the runs alive are ended and reaped");
}

Test(bench_runner, the_commands_long_lines_are_skipped_not_misread)
{
	struct bench_sample s[1];
	struct seen seen = { .in_order = true };
	char err[300] = "";

	cr_assert_eq(run("long-line", 1, 0, BENCH_SEQUENTIAL, 0, s, &seen, err), 0, "%s", err);
	cr_assert_geq(s[0].at[BENCH_PHASE0 + PHASE_AGENT_READY], 0);
}

Test(bench_runner, a_program_that_cannot_start_is_named)
{
	char *argv[] = { "/nonexistent/mayfly", "run", NULL };
	struct bench_sample s[1];
	struct bench_plan p = { .argv = argv, .runs = 1 };
	char err[300] = "";

	cr_assert_eq(bench_run(&p, s, err, sizeof(err)), -1);
	cr_assert(strstr(err, "cannot start /nonexistent/mayfly"), "%s", err);
}

/* A step before each run (bench fork's fork): its origin is where the
 * run's points count from, its points kept; its failure stops the rest. */
static int step_before(void *opaque, struct bench_sample *s, uint64_t *origin, char *err,
		       size_t errlen)
{
	unsigned *calls = opaque;

	if (++*calls == 3) {
		snprintf(err, errlen, "mayfly fork exited 5");
		return -1;
	}
	*origin = clock_now_ns() - 50000000ULL;   /* as if it took 50 ms */
	s->at[BENCH_FORKED] = 40;
	return 0;
}

Test(bench_runner, a_step_before_each_run_sets_its_origin_and_can_stop_the_rest)
{
	char *argv[] = { fake(), "run", "--json", "--", "ok", NULL };
	struct bench_sample s[4];
	unsigned calls = 0;
	struct bench_plan p = { .argv = argv, .runs = 4, .before = step_before, .opaque = &calls };
	char err[300] = "";

	cr_assert_eq(bench_run(&p, s, err, sizeof(err)), -1);
	cr_assert_str_eq(err, "run 3: mayfly fork exited 5");
	cr_assert_eq(calls, 3, "no step after the failed one");
	for (int i = 0; i < 2; i++) {
		cr_assert_float_eq(s[i].at[BENCH_FORKED], 40, 1e-9);
		cr_assert_geq(s[i].at[BENCH_MAIN], 50, "main counts from the step's origin");
		cr_assert_geq(s[i].at[BENCH_EXIT], s[i].at[BENCH_PHASE0 + PHASE_COMMAND_ENDED]);
	}
}

/* The runs meet at a barrier of 3 that each waits for (10 s at most): they
 * pass only if the mode starts 3 without waiting for any to end. */
static void meet(enum bench_mode mode, unsigned arg)
{
	char dir[] = "/tmp/bench-barrier-XXXXXX", cmd[64];
	char *argv[] = { fake(), "run", "--json", "--", "barrier", dir, "3", NULL };
	struct bench_sample s[3];
	struct bench_plan p = { .argv = argv, .runs = 3, .mode = mode, .stagger_ms = arg,
				.burst = arg };
	char err[300] = "";

	cr_assert(mkdtemp(dir));
	cr_assert_eq(bench_run(&p, s, err, sizeof(err)), 0, "%s", err);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

Test(bench_runner, a_burst_runs_its_vms_at_once)
{
	meet(BENCH_BURST, 3);
}

Test(bench_runner, staggered_starts_do_not_wait_for_the_last_run_to_end)
{
	meet(BENCH_STAGGERED, 20);
}

static char *written(void (*write)(FILE *f))
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	write(f);
	fclose(f);
	return buf;
}

static struct bench_sample sample(unsigned index, bool warmup, double exit_ms)
{
	struct bench_sample s = { .index = index, .warmup = warmup, .restored = true,
				  .user_ms = 1.5, .sys_ms = 2.5, .minflt = 100, .majflt = 0 };

	for (int p = 0; p < BENCH_POINTS; p++)
		s.at[p] = -1;
	s.at[BENCH_MAIN] = 0.25;
	s.at[BENCH_PHASE0 + PHASE_VM_CREATED] = 1.0;
	s.at[BENCH_EXIT] = exit_ms;
	bench_add_exits(&s, "io", 40);
	bench_add_exits(&s, "mmio", 2);
	bench_add_exits(&s, "io", 2);
	return s;
}

static char *const header_argv[] = { "run", "--json", "--", "true", NULL };

static void write_file(FILE *f)
{
	struct bench_sample w = sample(0, true, 50), m = sample(1, false, 10);
	struct stats_summary sum = { 1, 10, 10, 10, 10, 10, 10, 10 };

	cr_assert_eq(bench_write_header(f, &(struct bench_header){ "restore", "sequential", 1, 1,
								  header_argv, "0.1.0", "/dev/kvm" }), 0);
	cr_assert_eq(bench_write_sample(f, &w), 0);
	cr_assert_eq(bench_write_sample(f, &m), 0);
	cr_assert_eq(bench_write_summary(f, "exit", "ms", &sum), 0);
}

static char *to_file(const char *text)
{
	static char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/tmp/bench-record-%d.json", (int)getpid());
	f = fopen(path, "w");
	cr_assert(f);
	fputs(text, f);
	fclose(f);
	return path;
}

Test(bench_record, every_line_is_strict_json_and_the_host_is_recorded)
{
	char *text = written(write_file), *line = text, *nl;
	int lines = 0;

	while ((nl = strchr(line, '\n'))) {
		json_error_t e;
		json_t *o = json_loadb(line, (size_t)(nl - line), JSON_REJECT_DUPLICATES, &e);

		cr_assert(json_is_object(o), "line %d: %s", lines + 1, e.text);
		cr_assert(json_is_string(json_object_get(o, "type")));
		if (lines == 0) {
			json_t *host = json_object_get(o, "host");

			cr_assert_str_eq(json_string_value(json_object_get(o, "kind")), "restore");
			cr_assert_eq(json_integer_value(json_object_get(o, "format")), BENCH_FORMAT);
			cr_assert(json_is_string(json_object_get(host, "kernel")));
			cr_assert_gt(json_integer_value(json_object_get(host, "cpus")), 0);
			cr_assert(json_is_boolean(json_object_get(host, "virtualized")));
			cr_assert(json_is_string(json_object_get(host, "thp")));
			cr_assert_str_eq(json_string_value(json_object_get(json_object_get(host, "kvm"),
									   "device")), "/dev/kvm");
			cr_assert_eq(json_array_size(json_object_get(o, "args")), 4);
		}
		json_decref(o);
		lines++;
		line = nl + 1;
	}
	cr_assert_eq(lines, 4);
	free(text);
}

Test(bench_record, a_file_reads_back_without_its_warmup_runs)
{
	char *text = written(write_file), kind[32], err[300];
	char *path = to_file(text);
	struct bench_sample *s;
	size_t n;

	cr_assert_eq(bench_read(path, kind, sizeof(kind), &s, &n, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(kind, "restore");
	cr_assert_eq(n, 1);
	cr_assert_eq(s[0].index, 1);
	cr_assert_float_eq(s[0].at[BENCH_EXIT], 10, 1e-9);
	cr_assert_float_eq(s[0].at[BENCH_PHASE0 + PHASE_VM_CREATED], 1, 1e-9);
	cr_assert_lt(s[0].at[BENCH_PHASE0 + PHASE_AGENT_READY], 0);
	cr_assert_float_eq(s[0].sys_ms, 2.5, 1e-9);
	cr_assert_eq(s[0].minflt, 100);
	cr_assert_eq(s[0].nexits, 2);
	cr_assert_str_eq(s[0].exits[0].kind, "io");
	cr_assert_eq(s[0].exits[0].n, 42);
	cr_assert_float_eq(bench_exits_total(&s[0]), 44, 1e-9);
	free(s);
	free(text);
	unlink(path);
}

static void refused(const char *text, const char *why)
{
	char *path = to_file(text), kind[32], err[300];
	struct bench_sample *s = (void *)1;
	size_t n = 7;

	cr_assert_eq(bench_read(path, kind, sizeof(kind), &s, &n, err, sizeof(err)), -1);
	cr_assert(strstr(err, why), "'%s' does not say '%s'", err, why);
	cr_assert_null(s);
	cr_assert_eq(n, 0);
	unlink(path);
}

Test(bench_record, what_is_not_a_bench_file_is_refused_with_one_line)
{
	char err[300], kind[32];
	struct bench_sample *s;
	size_t n;

	cr_assert_eq(bench_read("/nonexistent.json", kind, sizeof(kind), &s, &n, err, sizeof(err)), -1);
	cr_assert(strstr(err, "cannot open /nonexistent.json"));
	refused("{\"event\":\"timings\"}\n", ":1: not a mayfly bench --json line");
	refused("{\"type\":\"bench\",\"format\":2,\"kind\":\"run\"}\n", ":1: not a mayfly bench");
	refused("{\"type\":\"bench\",\"format\":1,\"kind\":\"run\"}\n", "no measured runs");
	refused("{\"type\":\"bench\",\"format\":1,\"kind\":\"run\"}\n"
		"{\"type\":\"run\",\"at_ms\":{\"exit\":-3}}\n", ":2: not a mayfly bench");
	refused("{\"type\":\"bench\",\"format\":1,\"kind\":\"run\"}\nnot json\n", ":2:");
}

static void shifted(struct bench_sample *s, size_t n, double base)
{
	uint64_t seed = 7;

	for (size_t i = 0; i < n; i++)
		s[i] = sample((unsigned)i, false, base + (double)(stats_splitmix64(&seed) % 1000) / 1000);
}

Test(bench_record, exit_kinds_past_the_table_go_under_other)
{
	struct bench_sample s = { 0 };
	char kind[8];

	for (int i = 0; i < BENCH_EXIT_KINDS + 3; i++) {
		snprintf(kind, sizeof(kind), "k%d", i);
		bench_add_exits(&s, kind, 1);
	}
	bench_add_exits(&s, "a-name-longer-than-the-slot-holds", 1);
	cr_assert_eq(s.nexits, BENCH_EXIT_KINDS);
	cr_assert_str_eq(s.exits[BENCH_EXIT_KINDS - 1].kind, "other");
	cr_assert_float_eq(bench_exits_total(&s), BENCH_EXIT_KINDS + 4, 1e-9, "no exit lost");
	cr_assert_float_eq(bench_exits_total(&(struct bench_sample){ 0 }), -1, 1e-9);
}

Test(bench_report, compare_finds_a_shift_and_not_noise)
{
	struct bench_sample a[12], b[12];
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	shifted(a, 12, 100);
	cr_assert_eq(bench_compare(f, a, 12, a, 12), 0, "a run against itself");
	shifted(b, 12, 120);
	cr_assert_eq(bench_compare(f, a, 12, b, 12), 1, "only exit moved");
	fclose(f);
	cr_assert(strstr(buf, "no significant difference"));
	cr_assert(strstr(buf, "B slower by"), "%s", buf);
	free(buf);
}

Test(bench_report, the_table_has_each_point_reached_and_the_costs)
{
	struct bench_sample s[3] = { sample(0, false, 10), sample(1, false, 20), sample(2, false, 30) };
	char *buf = NULL, *jbuf = NULL;
	size_t len = 0, jlen = 0;
	FILE *f = open_memstream(&buf, &len), *j = open_memstream(&jbuf, &jlen);

	cr_assert_eq(bench_report(f, j, s, 3), 0);
	fclose(f);
	fclose(j);
	cr_assert(strstr(buf, "\nexit                 3     20.00"), "%s", buf);
	cr_assert(strstr(buf, "\nvm_created "));
	cr_assert_null(strstr(buf, "agent_ready"), "a point no run reached has no row");
	cr_assert(strstr(buf, "\ncpu_sys_ms "));
	cr_assert(strstr(buf, "\nvm_exits             3     44.00"), "%s", buf);
	cr_assert(strstr(jbuf, "{\"type\":\"summary\",\"of\":\"exit\",\"unit\":\"ms\",\"n\":3,"
			       "\"p50\":20.0,"), "%s", jbuf);
	free(buf);
	free(jbuf);
}
