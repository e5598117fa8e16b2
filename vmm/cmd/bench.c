/* bench.c - mayfly bench: runs VMs through mayfly run --json, reports each phase's percentiles, writes JSON lines and an SVG; bench compare says whether B differs from A. */
#include "cmd/bench.h"
#include "bench/record.h"
#include "bench/report.h"
#include "bench/runner.h"
#include "lib/atomic_file.h"
#include "lib/exitcode.h"
#include "lib/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BENCH_EXIT_RUN_FAILED RUN_EXIT_MAYFLY

enum bench_kind { KIND_BOOT, KIND_RESTORE, KIND_RUN };
static const char *const kinds[] = { "boot", "restore", "run" };

static void free_run_argv(char **argv)
{
	/* The --NAME strings are between "--json" and the first "--" or "--cold". */
	for (size_t i = 3; argv && argv[i] && strcmp(argv[i], "--") && strcmp(argv[i], "--cold"); i++)
		free(argv[i]);
	free(argv);
}

/* Where the record goes: a temporary file that appears whole under its
 * name at the end (or stdout for "-"). */
struct sink {
	FILE *f;
	struct atomic_file af;
	bool atomic;
};

struct progress {
	unsigned warmup;
	bool tty;
	struct sink *json;
	int rc;                    /* the first failed write to json */
};

/* The runs' command line: our binary, run --json, the kind's own flag,
 * the forwarded VM options (--NAME=VALUE), --, CMD (true when none).
 * Each --NAME string is ours to free (from index 3 on, until the --). */
static char **run_argv(const struct cli *c, enum bench_kind kind)
{
	size_t n = 0, max = 8 + (size_t)c->bench.nforward + (size_t)c->run.argc;
	char **argv = calloc(max, sizeof(*argv));

	if (!argv)
		return NULL;
	argv[n++] = "/proc/self/exe";
	argv[n++] = "run";
	argv[n++] = "--json";
	for (int i = 0; i < c->bench.nforward; i++) {
		const char *name = c->bench.forward[i][0], *val = c->bench.forward[i][1];

		if (asprintf(&argv[n], val ? "--%s=%s" : "--%s", name, val) < 0) {
			argv[n] = NULL;
			free_run_argv(argv);
			return NULL;
		}
		n++;
	}
	argv[n++] = kind == KIND_BOOT ? "--cold" : "--";
	if (kind == KIND_BOOT)
		argv[n++] = "--";
	if (!c->run.argc)
		argv[n++] = "true";
	for (int i = 0; i < c->run.argc; i++)
		argv[n++] = c->run.argv[i];
	return argv;
}

static int sink_open(struct sink *s, const char *path)
{
	int rc, fd;

	if (!path)
		return 0;
	if (!strcmp(path, "-")) {
		s->f = stdout;
		return 0;
	}
	rc = atomic_file_open(&s->af, path);
	fd = rc ? -1 : dup(s->af.fd);
	s->f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!s->f) {
		rc = rc ? rc : -errno;
		if (fd >= 0)
			close(fd);
		if (!rc)
			atomic_file_abort(&s->af);
		log_say("cannot write --json %s: %s", path, strerror(-rc));
		return -1;
	}
	s->atomic = true;
	return 0;
}

/* ok: the file takes its name; else whatever was written goes. */
static int sink_close(struct sink *s, bool ok, const char *path)
{
	int rc = 0;

	if (!s->atomic)
		return s->f && fflush(s->f) ? -EIO : 0;
	if (fclose(s->f))
		ok = false, rc = -EIO;
	if (ok)
		rc = atomic_file_commit(&s->af);
	else
		atomic_file_abort(&s->af);
	if (rc)
		log_say("cannot write --json %s: %s", path, strerror(-rc));
	return rc;
}

/* Each run as it ends: its line in the record, and the progress line. */
static void on_done(void *opaque, const struct bench_sample *s, unsigned ndone, unsigned total)
{
	struct progress *p = opaque;
	unsigned step = total > 10 ? total / 10 : 1;

	if (p->json && p->json->f && !p->rc)
		p->rc = bench_write_sample(p->json->f, s);
	if (p->tty)
		fprintf(stderr, "\rbench: %u/%u runs%s, the last %.1f ms ", ndone, total,
			ndone <= p->warmup ? " (warm-up)" : "", s->at[BENCH_EXIT]);
	else if (ndone % step == 0 || ndone == total)
		fprintf(stderr, "bench: %u/%u runs, the last %.1f ms\n", ndone, total,
			s->at[BENCH_EXIT]);
	if (p->tty && ndone == total)
		fputc('\n', stderr);
}

static int run_plan(char **argv, unsigned runs, unsigned warmup, const struct cli *c,
		    struct progress *prog, struct bench_sample *samples)
{
	struct bench_plan plan = {
		.argv = argv, .runs = runs, .warmup = warmup, .mode = c->bench.mode,
		.stagger_ms = c->bench.mode_arg, .burst = c->bench.mode_arg, .done = on_done,
		.opaque = prog,
	};
	char err[300];

	if (bench_run(&plan, samples, err, sizeof(err))) {
		if (prog->tty)
			fputc('\n', stderr);
		log_say("%s", err);
		return BENCH_EXIT_RUN_FAILED;
	}
	return 0;
}

static void mode_name(const struct cli *c, char *out, size_t len)
{
	if (c->bench.mode == BENCH_STAGGERED)
		snprintf(out, len, "staggered:%u", c->bench.mode_arg);
	else if (c->bench.mode == BENCH_BURST)
		snprintf(out, len, "burst:%u", c->bench.mode_arg);
	else
		snprintf(out, len, "sequential");
}

static int bench_kind(struct cli *c, enum bench_kind kind, const char *version)
{
	unsigned total = c->bench.warmup + c->bench.runs;
	struct bench_sample *samples = calloc(total, sizeof(*samples));
	char **argv = run_argv(c, kind), mode[32], title[160], err[300];
	struct progress prog = { .warmup = c->bench.warmup, .tty = isatty(STDERR_FILENO) };
	struct sink json = { 0 };
	FILE *table = c->bench.json && !strcmp(c->bench.json, "-") ? stderr : stdout;
	const struct bench_sample *measured;
	int code = EXIT_INTERNAL;

	mode_name(c, mode, sizeof(mode));
	if (!samples || !argv) {
		log_say("out of memory");
		goto out;
	}
	/* The default snapshot is made by the first run that needs it: not
	 * a restore's cost. */
	if (kind == KIND_RESTORE && !c->snapshot) {
		struct progress quiet = { 0 };

		fprintf(stderr, "bench: one untimed run first (the default snapshot, made if missing)\n");
		code = run_plan(argv, 1, 0, c, &quiet, samples);
		if (code)
			goto out;
		code = EXIT_INTERNAL;
	}
	if (sink_open(&json, c->bench.json))
		goto out;
	prog.json = &json;
	if (json.f)
		prog.rc = bench_write_header(json.f, &(struct bench_header){
			kinds[kind], mode, c->bench.runs, c->bench.warmup, argv + 1, version,
			c->vm.kvm_device });
	code = run_plan(argv, c->bench.runs, c->bench.warmup, c, &prog, samples);
	if (code)
		goto out_json;
	measured = samples + c->bench.warmup;
	fprintf(table, "mayfly bench %s: %u runs (%s), %u warm-up\n", kinds[kind], c->bench.runs,
		mode, c->bench.warmup);
	if (!prog.rc)
		prog.rc = bench_report(table, json.f, measured, c->bench.runs);
	code = prog.rc ? EXIT_INTERNAL : 0;
	if (prog.rc)
		log_say("cannot write the report: %s", strerror(-prog.rc));
	snprintf(title, sizeof(title), "mayfly bench %s: %u runs (%s)", kinds[kind], c->bench.runs,
		 mode);
	if (!code && c->bench.svg &&
	    bench_plot(c->bench.svg, title, (const char *const[]){ kinds[kind] },
		       (const struct bench_sample *const[]){ measured },
		       (const size_t[]){ c->bench.runs }, 1, err, sizeof(err))) {
		log_say("%s", err);
		code = EXIT_INTERNAL;
	}
out_json:
	if (json.f && sink_close(&json, code == 0, c->bench.json) && !code)
		code = EXIT_INTERNAL;
out:
	free_run_argv(argv);
	free(samples);
	return code;
}

static int bench_ab(struct cli *c, int argc, char **argv)
{
	int code = cli_parse_or_exit(c, CLI_COMPARE, argc, argv, EXIT_USAGE);
	struct bench_sample *s[2] = { NULL, NULL };
	size_t n[2] = { 0, 0 };
	char kind[2][32], err[300];
	int differ;

	if (code >= 0)
		return code;
	for (int i = 0; i < 2; i++)
		if (bench_read(c->run.argv[i], kind[i], sizeof(kind[i]), &s[i], &n[i], err,
			       sizeof(err))) {
			log_say("%s", err);
			code = EXIT_USAGE;
			goto out;
		}
	printf("A: %s (%s, %zu runs)\nB: %s (%s, %zu runs)\n", c->run.argv[0], kind[0], n[0],
	       c->run.argv[1], kind[1], n[1]);
	if (strcmp(kind[0], kind[1]))
		log_warn("A times %s and B %s: their phases differ", kind[0], kind[1]);
	differ = bench_compare(stdout, s[0], n[0], s[1], n[1]);
	code = differ < 0 ? EXIT_INTERNAL : differ > 0 ? 1 : 0;
	if (c->bench.svg &&
	    bench_plot(c->bench.svg, "mayfly bench compare",
		       (const char *const[]){ c->run.argv[0], c->run.argv[1] },
		       (const struct bench_sample *const[]){ s[0], s[1] }, n, 2, err, sizeof(err))) {
		log_say("%s", err);
		code = EXIT_USAGE;
	}
out:
	free(s[0]);
	free(s[1]);
	return code;
}

int cmd_bench(struct cli *c, int argc, char **argv, const char *version)
{
	int code;

	if (argc >= 2 && !strcmp(argv[1], "compare"))
		return bench_ab(c, argc - 1, argv + 1);
	for (int k = KIND_BOOT; argc >= 2 && k <= KIND_RUN; k++) {
		if (strcmp(argv[1], kinds[k]))
			continue;
		code = cli_parse_or_exit(c, CLI_BENCH, argc - 1, argv + 1, EXIT_USAGE);
		if (code >= 0)
			return code;
		if (k == KIND_BOOT && c->snapshot) {
			log_say("bench boot boots cold: --snapshot goes with bench restore or run");
			return EXIT_USAGE;
		}
		log_init(c->vm.id, c->vm.log_level);
		return bench_kind(c, (enum bench_kind)k, version);
	}
	log_say("usage: mayfly bench boot|restore|run [options] [-- CMD] or mayfly bench compare "
		"A.json B.json (see mayfly bench run --help)");
	return EXIT_USAGE;
}
