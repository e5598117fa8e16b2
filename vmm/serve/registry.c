/* registry.c - mayfly serve's state on disk: one directory per sandbox with a JSON record, and the clean-up of what a previous service left. */
#include "serve/registry.h"
#include "lib/atomic_file.h"
#include "vm/config.h"
#include "lib/fs_tree.h"
#include "jail/cgroup.h"
#include "jail/lease.h"
#include "lib/clock.h"
#include "lib/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int registry_write(const char *dir, const struct registry_record *r)
{
	char path[CONFIG_PATH_MAX];
	json_t *o;
	char *text;
	int rc;

	if (snprintf(path, sizeof(path), "%s/" REGISTRY_RECORD, dir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	o = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
		      "id", r->id, "state", r->state, "template", r->template,
		      "pid", (json_int_t)r->pid, "pid_start", (json_int_t)r->pid_start,
		      "created", (json_int_t)r->created, "cpus", (json_int_t)r->cpus,
		      "mem", (json_int_t)r->mem_mib, "disk_quota", (json_int_t)r->disk_quota,
		      "ttl", (json_int_t)r->ttl_s, "idle_timeout", (json_int_t)r->idle_s);
	text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (!text)
		return -ENOMEM;
	rc = atomic_file_write(path, text, strlen(text));
	free(text);
	return rc;
}

static int get_uint(json_t *o, const char *key, uint64_t max, uint64_t *out)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_integer(v) || json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) > max)
		return -EINVAL;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static int get_str(json_t *o, const char *key, char *out, size_t cap)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_string(v) || json_string_length(v) >= cap)
		return -EINVAL;
	memcpy(out, json_string_value(v), json_string_length(v) + 1);
	return 0;
}

int registry_read(const char *dir, struct registry_record *r)
{
	char path[CONFIG_PATH_MAX];
	uint64_t pid, cpus, ttl, idle, created;
	json_t *o;
	int rc;

	memset(r, 0, sizeof(*r));
	if (snprintf(path, sizeof(path), "%s/" REGISTRY_RECORD, dir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	o = json_load_file(path, JSON_REJECT_DUPLICATES, NULL);
	if (!o)
		return access(path, R_OK) ? -errno : -EINVAL;
	rc = get_str(o, "id", r->id, sizeof(r->id)) || get_str(o, "state", r->state, sizeof(r->state)) ||
	     get_str(o, "template", r->template, sizeof(r->template)) ||
	     get_uint(o, "pid", 0x7fffffff, &pid) || get_uint(o, "pid_start", UINT64_MAX >> 1,
							      &r->pid_start) ||
	     get_uint(o, "created", INT64_MAX, &created) || get_uint(o, "cpus", CONFIG_MAX_CPUS, &cpus) ||
	     get_uint(o, "mem", CONFIG_MAX_MEM_MIB, &r->mem_mib) ||
	     get_uint(o, "disk_quota", 1ULL << 50, &r->disk_quota) ||
	     get_uint(o, "ttl", API_MAX_TTL_S, &ttl) || get_uint(o, "idle_timeout", API_MAX_TTL_S, &idle) ||
	     !config_id_valid(r->id) ? -EINVAL : 0;
	json_decref(o);
	if (rc)
		return rc;
	r->pid = (pid_t)pid;
	r->created = (int64_t)created;
	r->cpus = (unsigned)cpus;
	r->ttl_s = (unsigned)ttl;
	r->idle_s = (unsigned)idle;
	return 0;
}

/* /proc/PID/stat after the command's ")" (it may hold spaces and
 * parentheses): field 3 (state) onwards, in buf; NULL if pid is gone. */
static const char *stat_fields(pid_t pid, char *buf, size_t len)
{
	char path[64], *p;
	ssize_t n;
	int fd;

	if (pid <= 0)
		return NULL;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return NULL;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p + 2 : NULL;
}

uint64_t registry_pid_start(pid_t pid)
{
	unsigned long long start = 0;
	char buf[1024];
	const char *f = stat_fields(pid, buf, sizeof(buf));

	/* Start time is field 22. */
	if (!f || sscanf(f, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
			 "%*d %*d %*d %llu", &start) != 1)
		return 0;
	return start;
}

bool registry_pid_alive(pid_t pid)
{
	char buf[1024];
	const char *f = stat_fields(pid, buf, sizeof(buf));

	return f && *f != 'Z' && *f != 'X';
}

/* The jail's names under registry_paths.jail_bases[i]: as root, unprivileged. */
static const char *const jail_prefix[2] = { "jail-", "mayfly-jail-" };

/* In base, entries named prefix + "<id>-" + 6 characters (each jail's
 * mkdtemp suffix) and, when lock, + ".lock" after them. */
static bool jail_named(const char *name, const char *want, size_t wl, bool lock)
{
	size_t len = strlen(name);

	if (strncmp(name, want, wl))
		return false;
	return lock ? len == wl + 6 + 5 && !strcmp(name + wl + 6, ".lock") : len == wl + 6;
}

/* The jail directories of VM id under base, and their lease files (a
 * lease whose directory went is removed too: its supervisor is gone),
 * unless keep_leases: a cgroup of the VM lingers, and its lease is how
 * the next jail's sweep (lease.c) finds it should we not. */
static void remove_jail_dirs(const char *base, const char *prefix, const char *id,
			     bool keep_leases)
{
	char want[128], path[CONFIG_PATH_MAX];
	struct dirent *e;
	DIR *d = opendir(base);
	size_t wl;

	if (!d)
		return;
	snprintf(want, sizeof(want), "%s%s-", prefix, id);
	wl = strlen(want);
	while ((e = readdir(d))) {
		bool lock = jail_named(e->d_name, want, wl, true);

		if ((!lock && !jail_named(e->d_name, want, wl, false)) || (lock && keep_leases) ||
		    snprintf(path, sizeof(path), "%s/%s", base, e->d_name) >= (int)sizeof(path))
			continue;
		if (lock)
			unlink(path);
		else
			fs_remove_tree(path);
	}
	closedir(d);
}

/* Kill what is left in the cgroup at path and remove it, waiting up to
 * until (CLOCK_MONOTONIC ns) while it is busy. Whether it is gone. */
static bool remove_cgroup(const char *path, uint64_t until)
{
	/* A VM whose pid nobody recorded (its service killed as it spawned
	 * it) is still in its cgroup: killed there. */
	cgroup_kill_all(path);
	/* Empty once the VM's processes are gone; the kernel may take a while
	 * (a VM's KVM VM torn down in an emulated host, a sanitizer's exit). */
	while (rmdir(path) < 0 && errno == EBUSY && clock_now_ns() < until)
		usleep(10000);
	return access(path, F_OK) < 0;
}

/* Every cgroup of VM id (vm-<id>-XXXXXX, as the jail names it), found in
 * the cgroup tree itself: a supervisor killed, or out of time, after its
 * jail directory went but before its cgroup did leaves only the cgroup.
 * How many are still there; the first nbusy names go to busy. */
static int remove_vm_cgroups(const char *cgroup_root, const char *id, unsigned wait_ms,
			     char (*busy)[REGISTRY_CGROUP_NAME_MAX], int nbusy)
{
	char dir[CONFIG_PATH_MAX], want[64], path[CONFIG_PATH_MAX];
	uint64_t until = clock_now_ns() + wait_ms * 1000000ULL;
	struct dirent *e;
	int left = 0;
	size_t wl;
	DIR *d;

	if (snprintf(dir, sizeof(dir), "%s/" CGROUP_PARENT, cgroup_root) >= (int)sizeof(dir))
		return 0;
	d = opendir(dir);
	if (!d)
		return 0;
	snprintf(want, sizeof(want), "vm-%s-", id);
	wl = strlen(want);
	while ((e = readdir(d))) {
		if (!jail_named(e->d_name, want, wl, false) ||
		    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= (int)sizeof(path) ||
		    remove_cgroup(path, until))
			continue;
		/* jail_named matched: vm-<id>-XXXXXX, id at most API_ID_MAX. */
		if (left < nbusy) {
			size_t n = strlen(e->d_name);

			n = n < REGISTRY_CGROUP_NAME_MAX ? n : 0;
			memcpy(busy[left], e->d_name, n);
			busy[left][n] = '\0';
		}
		left++;
	}
	closedir(d);
	return left;
}

int registry_clean_vm(const struct registry_paths *p, const char *id, unsigned wait_ms,
		      char (*busy)[REGISTRY_CGROUP_NAME_MAX], int nbusy)
{
	int left = p->cgroup_root ? remove_vm_cgroups(p->cgroup_root, id, wait_ms, busy, nbusy) : 0;

	for (int i = 0; i < 2; i++)
		if (p->jail_bases[i])
			remove_jail_dirs(p->jail_bases[i], jail_prefix[i], id, left > 0);
	return left;
}

bool registry_retry_cgroup(const struct registry_paths *p, const char *name)
{
	char path[CONFIG_PATH_MAX];

	if (!p->cgroup_root || strncmp(name, "vm-", 3) || strchr(name, '/') ||
	    snprintf(path, sizeof(path), "%s/" CGROUP_PARENT "/%s", p->cgroup_root, name) >=
		    (int)sizeof(path))
		return true;   /* not one of ours: nothing to retry */
	if (!remove_cgroup(path, 0))
		return false;
	/* Its jail's leases, kept while it lingered: jail-ID-XXXXXX.lock. */
	for (int i = 0; i < 2; i++)
		if (p->jail_bases[i] &&
		    snprintf(path, sizeof(path), "%s/%s%s" LEASE_SUFFIX, p->jail_bases[i],
			     jail_prefix[i], name + 3) < (int)sizeof(path))
			unlink(path);
	return true;
}

/* Kill a stale VM process group and wait (it is not our child: poll).
 * Whether there was one. */
static bool kill_stale(const struct registry_record *r)
{
	if (!r->pid || !r->pid_start || registry_pid_start(r->pid) != r->pid_start)
		return false;
	kill(-r->pid, SIGKILL);
	kill(r->pid, SIGKILL);
	for (int i = 0; i < 500 && registry_pid_start(r->pid) == r->pid_start; i++) {
		waitpid(r->pid, NULL, WNOHANG);   /* ours after all (tests) */
		usleep(10000);
	}
	return true;
}

bool registry_remove(const char *dir, const char *name, const struct registry_paths *p)
{
	struct registry_record r;
	bool killed = false;

	if (!registry_read(dir, &r)) {
		killed = kill_stale(&r);
		registry_clean_vm(p, r.id, REGISTRY_CGROUP_WAIT_MS, NULL, 0);
	} else if (config_id_valid(name)) {
		registry_clean_vm(p, name, REGISTRY_CGROUP_WAIT_MS, NULL, 0);
	}
	if (fs_remove_tree(dir))
		log_warn("serve: cannot remove %s left by a previous run", dir);
	return killed;
}

void registry_remove_forks(const char *state)
{
	char dir[CONFIG_PATH_MAX];

	/* A fork's snapshot lives only until its children are restored. */
	if (snprintf(dir, sizeof(dir), "%s/forks", state) < (int)sizeof(dir))
		fs_remove_tree(dir);
}

int registry_cleanup(const char *state, const struct registry_paths *p, int *killed)
{
	char sbdir[CONFIG_PATH_MAX], dir[CONFIG_PATH_MAX];
	struct dirent *e;
	int cleaned = 0;
	DIR *d;

	*killed = 0;
	registry_remove_forks(state);
	snprintf(sbdir, sizeof(sbdir), "%s/sb", state);
	d = opendir(sbdir);
	if (!d)
		return 0;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' ||
		    snprintf(dir, sizeof(dir), "%s/%s", sbdir, e->d_name) >= (int)sizeof(dir))
			continue;
		*killed += registry_remove(dir, e->d_name, p);
		cleaned++;
	}
	closedir(d);
	return cleaned;
}

void registry_last_line(char *buf, size_t n, char *out, size_t len)
{
	char *end = buf + n, *start;

	out[0] = '\0';
	buf[n] = '\0';
	while (end > buf && (end[-1] == '\n' || end[-1] == '\r'))
		*--end = '\0';
	start = strrchr(buf, '\n');
	start = start ? start + 1 : buf;
	for (char *p = start; *p; p++)
		if (*p < 0x20 || *p > 0x7e)
			*p = '?';
	n = strlen(start);
	if (n >= len)
		n = len - 1;
	memcpy(out, start, n);
	out[n] = '\0';
}

void registry_log_tail(const char *dir, char *out, size_t len)
{
	char path[CONFIG_PATH_MAX + 8], buf[512];
	off_t size;
	ssize_t n;
	int fd;

	out[0] = '\0';
	snprintf(path, sizeof(path), "%s/log", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	size = lseek(fd, 0, SEEK_END);
	n = pread(fd, buf, sizeof(buf) - 1, size > (off_t)sizeof(buf) - 1 ?
		  size - (off_t)sizeof(buf) + 1 : 0);
	close(fd);
	if (n > 0)
		registry_last_line(buf, (size_t)n, out, len);
}
