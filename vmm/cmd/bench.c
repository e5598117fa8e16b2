/* bench.c - mayfly bench: runs VMs through mayfly run --json, reports each phase's percentiles, writes JSON lines and an SVG; bench compare says whether B differs from A. */
#include "cmd/bench.h"
#include "bench/density.h"
#include "bench/fork.h"
#include "bench/record.h"
#include "bench/report.h"
#include "bench/runner.h"
#include "launch/guest_files.h"
#include "launch/snapcache.h"
#include "lib/atomic_file.h"
#include "lib/exitcode.h"
#include "lib/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BENCH_EXIT_RUN_FAILED RUN_EXIT_MAYFLY

enum bench_kind { KIND_BOOT, KIND_RESTORE, KIND_RUN, KIND_FORK, KIND_DENSITY };
static const char *const kinds[] = { "boot", "restore", "run", "fork", "density" };

#define SELF "/proc/self/exe"

/* A run's command line, and the parent's for bench fork: the forwarded
 * options as "--NAME=VALUE" strings of ours. */
struct cmdline {
	char *argv[8 + CLI_MAX_FORWARD + 256];
	char *parent[CLI_MAX_FORWARD + 2];   /* fork's parent, density's VMs: for boot */
	char *owned[CLI_MAX_FORWARD];
	int nowned;
};

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
	struct bench_fork *fork;   /* bench fork's parent, else NULL */
};

static void cmdline_free(struct cmdline *cl)
{
	for (int i = 0; cl && i < cl->nowned; i++)
		free(cl->owned[i]);
	free(cl);
}

/* The runs' command line: our binary, run --json, the kind's own flag
 * (boot: --cold; fork: --snapshot=, rewritten by each fork), the
 * forwarded VM options (fork: --snapshot goes to the parent alone), --,
 * CMD (true when none). */
static struct cmdline *cmdline_make(const struct cli *c, enum bench_kind kind,
				    struct bench_fork *fork)
{
	struct cmdline *cl = calloc(1, sizeof(*cl));
	size_t n = 0, np = 0;

	if (!cl || c->run.argc > 256)
		return free(cl), NULL;
	cl->argv[n++] = SELF;
	cl->argv[n++] = "run";
	cl->argv[n++] = "--json";
	if (kind == KIND_BOOT)
		cl->argv[n++] = "--cold";
	if (kind == KIND_FORK)
		cl->argv[n++] = fork->snap_arg;
	for (int i = 0; i < c->bench.nforward; i++) {
		const char *name = c->bench.forward[i][0], *val = c->bench.forward[i][1];
		char *opt;

		if (asprintf(&opt, val ? "--%s=%s" : "--%s", name, val) < 0) {
			cmdline_free(cl);
			return NULL;
		}
		cl->owned[cl->nowned++] = opt;
		/* fork's parent takes every option; density's VMs all but
		 * --snapshot, which goes first (parent[0], left for it). */
		if (kind == KIND_FORK || (kind == KIND_DENSITY && strcmp(name, "snapshot")))
			cl->parent[kind == KIND_DENSITY ? ++np : np++] = opt;
		if (kind != KIND_FORK || strcmp(name, "snapshot"))
			cl->argv[n++] = opt;
	}
	cl->argv[n++] = "--";
	if (!c->run.argc)
		cl->argv[n++] = "true";
	for (int i = 0; i < c->run.argc; i++)
		cl->argv[n++] = c->run.argv[i];
	return cl;
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
		if (!rc) {   /* opened, but no stream on it: the file goes */
			rc = -errno;
			if (fd >= 0)
				close(fd);
			atomic_file_abort(&s->af);
		}
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

/* bench fork: each run's fork, before its child's run. */
static int fork_first(void *opaque, struct bench_sample *s, uint64_t *origin, char *err,
		      size_t errlen)
{
	struct progress *p = opaque;

	return bench_fork_before(p->fork, SELF, s, origin, err, errlen);
}

static int run_plan(char **argv, unsigned runs, unsigned warmup, const struct cli *c,
		    struct progress *prog, struct bench_sample *samples)
{
	struct bench_plan plan = {
		.argv = argv, .runs = runs, .warmup = warmup, .mode = c->bench.mode,
		.stagger_ms = c->bench.mode_arg, .burst = c->bench.mode_arg, .done = on_done,
		.before = prog->fork ? fork_first : NULL, .opaque = prog,
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
	struct bench_fork fork;
	struct cmdline *cl = cmdline_make(c, kind, &fork);
	char **argv = cl ? cl->argv : NULL, mode[32], title[160], err[300];
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
	if (kind == KIND_FORK) {
		fprintf(stderr, "bench: starting the parent VM (mayfly boot --vsock)\n");
		if (bench_fork_start(&fork, SELF, cl->parent)) {
			code = BENCH_EXIT_RUN_FAILED;
			goto out;
		}
		prog.fork = &fork;
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
	if (prog.fork)
		bench_fork_stop(prog.fork);
	cmdline_free(cl);
	free(samples);
	return code;
}

struct density_out {
	FILE *table;
	struct sink *json;
	int rc;                    /* the first failed write to json */
	struct density_step last;  /* the step before: what the marginal VM adds to */
};

static void density_step(void *opaque, const struct density_step *before,
			 const struct density_step *st)
{
	struct density_out *o = opaque;
	double n = st->n, drop = (double)(before->mem_available_kib - st->mem_available_kib);
	double tables = st->page_tables_kib >= 0 && before->page_tables_kib >= 0 ?
			(double)(st->page_tables_kib - before->page_tables_kib) / n : -1;

	double marginal = (double)(st->pss_kib - o->last.pss_kib) / (st->n - o->last.n) / 1024;

	fprintf(o->table, "%6u %10.1f %12.2f %12.2f %12.2f %10.1f %8.1f %8.1f\n", st->n,
		st->restore_ms, (double)st->pss_kib / n / 1024, marginal, drop / n / 1024, tables,
		st->threads / n, st->fds / n);
	fflush(o->table);
	o->last = *st;
	if (o->json && o->json->f && !o->rc)
		o->rc = bench_write_density(o->json->f, before, st);
}

/* bench density: the snapshot (--snapshot, or the default one, made
 * now when missing and held), then the VMs. */
static int bench_dense(struct cli *c, const char *version)
{
	struct cmdline *cl = cmdline_make(c, KIND_DENSITY, NULL);
	char dir[CONFIG_PATH_MAX], snap_arg[CONFIG_PATH_MAX + 16], err[300];
	struct density_out o = { .table = stdout };
	struct sink json = { 0 };
	unsigned answering = 0;
	int code, hold = -1;

	if (!cl) {
		log_say("out of memory");
		return EXIT_INTERNAL;
	}
	if (c->snapshot) {
		snprintf(dir, sizeof(dir), "%s", c->snapshot);
	} else {
		fprintf(stderr, "bench: the default snapshot (made now if missing)\n");
		code = agent_vm_config(&c->vm, c->verbose, false);
		if (!code)
			code = snapcache_get(&c->vm, dir, sizeof(dir), c->verbose, &c->jail);
		if (code) {
			if (code < 0)
				log_say("no default snapshot (no cache directory): give --snapshot DIR");
			cmdline_free(cl);
			return code < 0 ? EXIT_USAGE : code;
		}
		hold = snapcache_hold(dir);
	}
	snprintf(snap_arg, sizeof(snap_arg), "--snapshot=%s", dir);
	cl->parent[0] = snap_arg;   /* first, then the VM options (cmdline_make left room) */
	code = EXIT_INTERNAL;
	if (sink_open(&json, c->bench.json))
		goto out;
	o.json = &json;
	if (json.f)
		o.rc = bench_write_header(json.f, &(struct bench_header){
			"density", "sequential", c->bench.count, 0, cl->parent, version,
			c->vm.kvm_device });
	if (json.f && !strcmp(c->bench.json, "-"))
		o.table = stderr;
	fprintf(o.table, "mayfly bench density: %u idle VMs restored from %s, kept alive\n"
		"%6s %10s %12s %12s %12s %10s %8s %8s\n", c->bench.count, dir, "VMs", "restore ms",
		"PSS MiB/VM", "marginal MiB", "avail MiB/VM", "PT KiB/VM", "thr/VM", "fds/VM");
	if (bench_density(&(struct density_plan){ SELF, cl->parent, c->bench.count, density_step,
						  &o }, &answering, err, sizeof(err))) {
		log_say("%s", err);
		code = BENCH_EXIT_RUN_FAILED;
		goto out_json;
	}
	fprintf(o.table, "%u of %u VMs answered an exec after the last was up\n", answering,
		c->bench.count);
	if (json.f && !o.rc)
		o.rc = bench_write_answering(json.f, c->bench.count, answering);
	code = o.rc ? EXIT_INTERNAL : answering == c->bench.count ? 0 : BENCH_EXIT_RUN_FAILED;
	if (o.rc)
		log_say("cannot write the record: %s", strerror(-o.rc));
	else if (code)
		log_say("%u of %u idle VMs did not answer an exec", c->bench.count - answering,
			c->bench.count);
out_json:
	if (json.f && sink_close(&json, code == 0, c->bench.json) && !code)
		code = EXIT_INTERNAL;
out:
	if (hold >= 0)
		close(hold);
	cmdline_free(cl);
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
	for (int k = KIND_BOOT; argc >= 2 && k <= KIND_DENSITY; k++) {
		if (strcmp(argv[1], kinds[k]))
			continue;
		code = cli_parse_or_exit(c, CLI_BENCH, argc - 1, argv + 1, EXIT_USAGE);
		if (code >= 0)
			return code;
		if (k == KIND_BOOT && c->snapshot) {
			log_say("bench boot boots cold: --snapshot goes with bench restore or run");
			return EXIT_USAGE;
		}
		if (k == KIND_FORK && c->bench.mode != BENCH_SEQUENTIAL) {
			log_say("bench fork forks one parent: --mode sequential only");
			return EXIT_USAGE;
		}
		log_init(c->vm.id, c->vm.log_level);
		if (k == KIND_DENSITY)
			return bench_dense(c, version);
		return bench_kind(c, (enum bench_kind)k, version);
	}
	log_say("usage: mayfly bench boot|restore|run|fork|density [options] [-- CMD] or mayfly bench compare "
		"A.json B.json (see mayfly bench run --help)");
	return EXIT_USAGE;
}
