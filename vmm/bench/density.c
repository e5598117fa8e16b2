/* density.c - mayfly bench density: idle VMs restored one after another from one snapshot and kept, the host read from /proc at each tenth. */
#include "bench/density.h"
#include "bench/vm_proc.h"
#include "lib/clock.h"
#include "lib/fs_tree.h"
#include "lib/procfs.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* pid and its descendants, added into st: PSS, threads, open fds. */
static void add_tree(pid_t pid, struct density_step *st, int depth)
{
	char path[64], kids[4096];
	long long v;
	FILE *f;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
	if ((v = procfs_number(path, "Pss")) > 0)
		st->pss_kib += v;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if ((v = procfs_number(path, "Threads")) > 0)   /* no unit: the number itself */
		st->threads += (unsigned)v;
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	while (d && readdir(d))
		st->fds++;
	if (d) {
		st->fds -= 2;   /* . and .. */
		closedir(d);
	}
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
	f = depth < 8 ? fopen(path, "re") : NULL;
	if (f && fgets(kids, sizeof(kids), f)) {
		char *save = NULL;

		for (char *t = strtok_r(kids, " \n", &save); t; t = strtok_r(NULL, " \n", &save))
			add_tree((pid_t)atoi(t), st, depth + 1);
	}
	if (f)
		fclose(f);
}

static void measure(const struct bench_vm *vms, unsigned n, struct density_step *st)
{
	st->n = n;
	st->pss_kib = 0;
	st->threads = st->fds = 0;
	for (unsigned i = 0; i < n; i++)
		add_tree(vms[i].pid, st, 0);
	st->mem_available_kib = procfs_number("/proc/meminfo", "MemAvailable");
	st->page_tables_kib = procfs_number("/proc/meminfo", "SecPageTables");
}

/* Every VM ended (SIGTERM to all, then each reaped), the directory removed. */
static void end_all(struct bench_vm *vms, unsigned n, const char *dir)
{
	for (unsigned i = 0; i < n; i++)
		bench_vm_stop(&vms[i]);
	for (unsigned i = 0; i < n; i++)
		bench_vm_reap(&vms[i]);
	fs_remove_tree(dir);
}

/* The last line of a VM's log, what it said when it failed ("" none). */
static void last_line(const char *path, char *out, size_t len)
{
	FILE *f = fopen(path, "re");
	char line[512];

	out[0] = '\0';
	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (line[0] && (size_t)snprintf(out, len, "%s", line) >= len)
			out[len - 1] = '\0';   /* cut: the start of it says enough */
	}
	if (f)
		fclose(f);
}

/* Start VM i and wait for its agent: 0, or -1 with err. */
static int start_vm(const struct density_plan *p, const char *dir, struct bench_vm *vm, unsigned i,
		    double *ms, char *err, size_t errlen)
{
	char name[16], log[PATH_MAX], why[200], fail[200];
	uint64_t t0 = clock_now_ns();
	int rc;

	snprintf(name, sizeof(name), "vm%u", i);
	/* Its log lines (a stop by SIGTERM says so, for each VM) go to a
	 * file of its own, read back when it fails. */
	if ((size_t)snprintf(log, sizeof(log), "%s/%s.err", dir, name) >= sizeof(log)) {
		snprintf(err, errlen, "the directory %.200s is too long a path", dir);
		return -1;
	}
	rc = bench_vm_start(vm, p->self, dir, name, p->vm_opts, log, fail, sizeof(fail));
	*ms = (double)(clock_now_ns() - t0) / 1e6;
	if (rc) {
		last_line(log, why, sizeof(why));
		snprintf(err, errlen, "VM %u: %s%s%.150s", i + 1, fail, why[0] ? ": " : "", why);
		return -1;
	}
	return 0;
}

int bench_density(const struct density_plan *p, unsigned *answering, char *err, size_t errlen)
{
	struct density_step before = { 0 }, st = { 0 };
	unsigned started = 0, tenth = p->count >= 10 ? p->count / 10 : 1;
	char dir[PATH_MAX];
	struct bench_vm *vms;
	int rc = 0;

	*answering = 0;
	if (!p->count || p->count > DENSITY_MAX_VMS) {
		snprintf(err, errlen, "from 1 to %d VMs", DENSITY_MAX_VMS);
		return -1;
	}
	vms = calloc(p->count, sizeof(*vms));
	if (!vms) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (bench_workdir(dir, sizeof(dir), "density", err, errlen)) {
		free(vms);
		return -1;
	}
	measure(vms, 0, &before);
	for (unsigned i = 0; i < p->count; i++) {
		double ms;

		rc = start_vm(p, dir, &vms[i], i, &ms, err, errlen);
		started = i + 1;
		if (rc)
			break;
		if (i == 0 || (i + 1) % tenth == 0 || i + 1 == p->count) {
			measure(vms, i + 1, &st);
			st.restore_ms = ms;
			if (p->step)
				p->step(p->opaque, &before, &st);
		}
	}
	/* Idle so long, each still answers. */
	for (unsigned i = 0; !rc && i < p->count; i++)
		*answering += bench_vm_exec(&vms[i], p->self) == 0;
	end_all(vms, started, dir);
	free(vms);
	return rc ? -1 : 0;
}
