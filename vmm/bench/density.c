/* density.c - mayfly bench density: idle VMs restored one after another from one snapshot and kept, the host read from /proc at each tenth. */
#include "bench/density.h"
#include "bench/runner.h"
#include "lib/clock.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct vm {
	pid_t pid;                     /* its boot process: the jail's supervisor */
	char sock[PATH_MAX + 16];      /* --vsock=DIR/vmN.sock */
};

/* A "Key:  N kB" line of a /proc file; -1 without it. */
static int64_t proc_kib(const char *path, const char *key)
{
	FILE *f = fopen(path, "re");
	char line[256];
	size_t klen = strlen(key);
	int64_t v = -1;

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, klen) && line[klen] == ':') {
			v = strtoll(line + klen + 1, NULL, 10);
			break;
		}
	if (f)
		fclose(f);
	return v;
}

/* pid and its descendants, added into st: PSS, threads, open fds. */
static void add_tree(pid_t pid, struct density_step *st, int depth)
{
	char path[64], kids[4096];
	int64_t v;
	FILE *f;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
	if ((v = proc_kib(path, "Pss")) > 0)
		st->pss_kib += v;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if ((v = proc_kib(path, "Threads")) > 0)   /* no unit: the number itself */
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

static void measure(const struct vm *vms, unsigned n, struct density_step *st)
{
	st->n = n;
	st->pss_kib = 0;
	st->threads = st->fds = 0;
	for (unsigned i = 0; i < n; i++)
		add_tree(vms[i].pid, st, 0);
	st->mem_available_kib = proc_kib("/proc/meminfo", "MemAvailable");
	st->page_tables_kib = proc_kib("/proc/meminfo", "SecPageTables");
}

static int remove_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

/* Every VM ended (SIGTERM) and reaped, the directory removed. */
static void end_all(struct vm *vms, unsigned n, const char *dir)
{
	for (unsigned i = 0; i < n; i++)
		if (vms[i].pid > 0)
			kill(vms[i].pid, SIGTERM);
	for (unsigned i = 0; i < n; i++)
		while (vms[i].pid > 0 && waitpid(vms[i].pid, NULL, 0) < 0 && errno == EINTR)
			;
	nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
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
static int start_vm(const struct density_plan *p, const char *dir, struct vm *vm, unsigned i,
		    double *ms, char *err, size_t errlen)
{
	char *argv[8 + 64], *exec[] = { (char *)p->self, "exec", vm->sock, "--", "true", NULL };
	char log[PATH_MAX], why[200];
	size_t n = 0;
	uint64_t t0;
	int rc;

	if ((size_t)snprintf(vm->sock, sizeof(vm->sock), "--vsock=%s/vm%u.sock", dir, i) >=
	    sizeof(vm->sock)) {
		snprintf(err, errlen, "the directory %s is too long a path", dir);
		return -1;
	}
	argv[n++] = (char *)p->self;
	argv[n++] = "boot";
	argv[n++] = vm->sock;
	for (size_t k = 0; p->vm_opts[k] && n < sizeof(argv) / sizeof(argv[0]) - 1; k++)
		argv[n++] = p->vm_opts[k];
	argv[n] = NULL;
	/* Its log lines (a stop by SIGTERM says so, for each VM) go to a
	 * file of its own, read back when it fails. */
	if ((size_t)snprintf(log, sizeof(log), "%s/vm%u.err", dir, i) >= sizeof(log))
		log[0] = '\0';   /* cannot be: the socket's longer name fitted */
	t0 = clock_now_ns();
	rc = bench_spawn(argv, log[0] ? log : NULL, &vm->pid);
	if (rc) {
		vm->pid = 0;
		snprintf(err, errlen, "VM %u: cannot start mayfly boot: %s", i + 1, strerror(-rc));
		return -1;
	}
	rc = bench_spawn_wait(exec);   /* exec waits for the agent (60 s at most) */
	*ms = (double)(clock_now_ns() - t0) / 1e6;
	if (rc) {
		last_line(log, why, sizeof(why));
		snprintf(err, errlen, "VM %u never answered (mayfly exec exited %d)%s%.150s", i + 1,
			 rc, why[0] ? ": " : "", why);
		return -1;
	}
	return 0;
}

int bench_density(const struct density_plan *p, unsigned *answering, char *err, size_t errlen)
{
	const char *tmp = getenv("TMPDIR");
	struct density_step before = { 0 }, st = { 0 };
	unsigned started = 0, tenth = p->count >= 10 ? p->count / 10 : 1;
	char dir[PATH_MAX];
	struct vm *vms;
	int rc = 0;

	*answering = 0;
	if (!p->count || p->count > DENSITY_MAX_VMS) {
		snprintf(err, errlen, "from 1 to %d VMs", DENSITY_MAX_VMS);
		return -1;
	}
	vms = calloc(p->count, sizeof(*vms));
	snprintf(dir, sizeof(dir), "%s/mayfly-bench-density.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!vms || !mkdtemp(dir)) {
		snprintf(err, errlen, "%s", vms ? strerror(errno) : "out of memory");
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
	for (unsigned i = 0; !rc && i < p->count; i++) {
		char *exec[] = { (char *)p->self, "exec", vms[i].sock, "--", "true", NULL };

		*answering += bench_spawn_wait(exec) == 0;
	}
	end_all(vms, started, dir);
	free(vms);
	return rc ? -1 : 0;
}
