/* snapcache.c - mayfly run's default snapshot: keyed by content, made once (under a lock), reused after. */
#include "launch/snapcache.h"
#include "agent_client/session.h"
#include "launch/snapshot_make.h"
#include "lib/clock.h"
#include "lib/fs_tree.h"
#include "lib/image_id.h"
#include "lib/log.h"
#include "lib/thread.h"
#include "vm/snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define KEY_CHARS 32   /* 128 bits of the sha256: names, not secrets */
#define EVICT_PREFIX ".evict-"
#define EVICT_MAX 256  /* entries looked at per eviction: a bounded scan */

static int cache_key(const struct vm_config *cfg, char key[KEY_CHARS + 1], const char **what,
		     const char **why)
{
	struct image_id self, kernel, rootfs, initrd = { 0 };
	uint8_t digest[IMAGE_HASH_LEN];
	char hex[2 * IMAGE_HASH_LEN + 1];
	uint64_t nums[4] = { SNAP_FORMAT_VERSION, cfg->mem_mib, cfg->cpus, cfg->spare_disks };
	SHA2_CTX ctx;
	int rc;

	*what = "mayfly itself";
	rc = image_id_get("/proc/self/exe", &self, why);
	if (!rc) {
		*what = "kernel";
		rc = image_id_get(cfg->kernel, &kernel, why);
	}
	if (!rc) {
		*what = "rootfs";
		rc = image_id_get(cfg->rootfs, &rootfs, why);
	}
	if (!rc && cfg->initrd[0]) {
		*what = "initrd";
		rc = image_id_get(cfg->initrd, &initrd, why);
	}
	if (rc)
		return rc;
	SHA256Init(&ctx);
	SHA256Update(&ctx, (const uint8_t *)"mayfly run default snapshot", 27);
	SHA256Update(&ctx, (const uint8_t *)nums, sizeof(nums));
	SHA256Update(&ctx, self.sha256, IMAGE_HASH_LEN);
	SHA256Update(&ctx, kernel.sha256, IMAGE_HASH_LEN);
	SHA256Update(&ctx, rootfs.sha256, IMAGE_HASH_LEN);
	/* What else makes the guest: its initramfs and its command line. */
	SHA256Update(&ctx, initrd.sha256, IMAGE_HASH_LEN);
	SHA256Update(&ctx, (const uint8_t *)cfg->cmdline, strlen(cfg->cmdline) + 1);
	SHA256Update(&ctx, (const uint8_t *)cfg->cmdline_append, strlen(cfg->cmdline_append) + 1);
	SHA256Update(&ctx, (const uint8_t *)cfg->init_cmd, strlen(cfg->init_cmd) + 1);
	SHA256Final(digest, &ctx);
	image_hash_hex(digest, hex);
	memcpy(key, hex, KEY_CHARS);
	key[KEY_CHARS] = '\0';
	return 0;
}

static bool present(const char *dir)
{
	char path[CONFIG_PATH_MAX + 64];

	return !snapshot_path(dir, SNAPSHOT_STATE, path, sizeof(path)) && access(path, R_OK) == 0;
}

static int mkdirs(const char *path)
{
	char buf[CONFIG_PATH_MAX + 64];

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0700) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return mkdir(buf, 0700) < 0 && errno != EEXIST ? -errno : 0;
}

static bool is_key(const char *name)
{
	size_t n = strspn(name, "0123456789abcdef");

	return n == KEY_CHARS && name[n] == '\0';
}

struct cached {
	char name[KEY_CHARS + 1];
	time_t used;
};

static int newest_first(const void *a, const void *b)
{
	time_t x = ((const struct cached *)a)->used, y = ((const struct cached *)b)->used;

	return x < y ? 1 : x > y ? -1 : 0;
}

int snapcache_hold(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_SH) < 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	return fd;
}

/* Rename snapdir/name out of the way, then remove it: 1 when removed, 0
 * when it is held (or gone already). The exclusive lock taken first is
 * kept until it is gone, so nobody takes a hold in between. */
static int evict_one(const char *snapdir, const char *name)
{
	char from[CONFIG_PATH_MAX + 64], to[CONFIG_PATH_MAX + 64];
	int fd, rc;

	if (!strncmp(name, EVICT_PREFIX, strlen(EVICT_PREFIX))) {
		snprintf(to, sizeof(to), "%s/%s", snapdir, name);
		return fs_remove_tree(to) ? -EIO : 1;
	}
	snprintf(from, sizeof(from), "%s/%s", snapdir, name);
	snprintf(to, sizeof(to), "%s/%s%s", snapdir, EVICT_PREFIX, name);
	fd = open(from, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0)
		rc = errno == EWOULDBLOCK ? 0 : -errno;
	else if (rename(from, to) < 0)
		rc = errno == ENOENT ? 0 : -errno;
	else
		rc = fs_remove_tree(to) ? -EIO : 1;
	close(fd);
	return rc;
}

int snapcache_evict(const char *snapdir, const char *spare, unsigned keep, time_t grace_s,
		    time_t now)
{
	struct cached *found;
	unsigned n = 0, removed = 0;
	struct dirent *e;
	struct stat st;
	int dfd, rc = 0;
	DIR *d;

	if (strlen(snapdir) > CONFIG_PATH_MAX)
		return -ENAMETOOLONG;
	found = calloc(EVICT_MAX, sizeof(*found));
	d = found ? opendir(snapdir) : NULL;
	if (!d) {
		rc = found ? -errno : -ENOMEM;
		free(found);
		return rc;
	}
	dfd = dirfd(d);
	while ((e = readdir(d)) && n < EVICT_MAX) {
		if (!strncmp(e->d_name, EVICT_PREFIX, strlen(EVICT_PREFIX)) &&
		    is_key(e->d_name + strlen(EVICT_PREFIX))) {
			removed += evict_one(snapdir, e->d_name) > 0;
			continue;
		}
		if (!is_key(e->d_name) || (spare && !strcmp(e->d_name, spare)) ||
		    fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
			continue;
		memcpy(found[n].name, e->d_name, KEY_CHARS + 1);
		found[n++].used = st.st_mtime;
	}
	closedir(d);
	/* The spared one counts as the newest. */
	if (spare && keep)
		keep--;
	qsort(found, n, sizeof(*found), newest_first);
	for (unsigned i = keep; i < n; i++) {
		if (found[i].used > now - grace_s)
			continue;
		rc = evict_one(snapdir, found[i].name);
		if (rc < 0)
			break;
		removed += (unsigned)rc;
	}
	free(found);
	return rc < 0 ? rc : (int)removed;
}

/* Wait for the child making the default snapshot. A stop signal sent to
 * us meanwhile (blocked here, see below) is passed on to it, whose jail's
 * supervisor hands it to the VM: an interrupted run ends now, with
 * 128 + the signal, instead of after the snapshot and its command. SIGCHLD
 * is blocked by our caller from before the fork, so no exit is missed. */
static int wait_maker(pid_t child)
{
	int status, stop = 0;
	sigset_t set;
	pid_t r;

	thread_stop_signals(&set);
	sigaddset(&set, SIGCHLD);
	while ((r = waitpid(child, &status, WNOHANG)) != child) {
		int sig;

		if (r < 0 && errno != EINTR)
			return RUN_EXIT_MAYFLY;
		sig = sigwaitinfo(&set, NULL);
		if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
			if (!stop)
				log_say("interrupted (%s): stopping the default snapshot", strsignal(sig));
			stop = stop ? stop : sig;
			kill(child, sig);
		}
	}
	if (stop)
		return 128 + stop;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The default snapshot is made by a child process (single-threaded, as
 * we are here): its jail's namespaces, its VM's seccomp filters (the
 * "main" role forbids a new file, VM or thread) and, unjailed, the VM
 * itself stay there, and this process, unconfined, builds the run's own
 * VM after it. SIGINT, SIGTERM and SIGHUP stay blocked here, for that
 * VM's signalfd; the ones that come while the snapshot is made stop it. */
static int make_in_child(const struct vm_config *cfg, const char *dir, uint64_t start_ns,
			 bool show_output, const struct jail_config *jc)
{
	pid_t parent = getpid(), child;
	sigset_t chld, old;
	int code;

	thread_block_stop_signals();
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &chld, &old);
	fflush(NULL);   /* nothing buffered is written twice */
	child = fork();
	if (child < 0) {
		log_say("cannot fork for the default snapshot: %s", strerror(errno));
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		return RUN_EXIT_MAYFLY;
	}
	if (child == 0) {
		code = RUN_EXIT_MAYFLY;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		/* Nothing of the run's (its audit log, the terminal, the cache's
		 * lock) goes into the snapshot's jail. */
		closefrom(STDERR_FILENO + 1);
		if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) == 0 && getppid() == parent)
			code = snapshot_make(cfg, NULL, 0, dir, start_ns, show_output, jc, NULL);
		fflush(NULL);
		_exit(code);
	}
	code = wait_maker(child);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return code;
}

int snapcache_get(const struct vm_config *cfg, char *dir, size_t len, int verbose,
		  const struct jail_config *jc)
{
	char cache[CONFIG_PATH_MAX], key[KEY_CHARS + 1], lock[CONFIG_PATH_MAX + 64];
	const char *why = "", *what = "";
	uint64_t t0;
	int fd, rc, code;

	if (image_cache_dir(cache, sizeof(cache))) {
		log_warn("no cache directory ($MAYFLY_CACHE, $XDG_CACHE_HOME and $HOME unset): "
			 "booting cold");
		return -1;
	}
	if (cache_key(cfg, key, &what, &why)) {
		log_say("%s: %s", what, why);
		return RUN_EXIT_MAYFLY;
	}
	if (snprintf(dir, len, "%s/snapshots/%s", cache, key) >= (int)len ||
	    snprintf(lock, sizeof(lock), "%s/snapshots/.lock", cache) >= (int)sizeof(lock)) {
		log_say("the cache directory's path is too long");
		return RUN_EXIT_MAYFLY;
	}
	if (present(dir)) {
		utimensat(AT_FDCWD, dir, NULL, 0);   /* used now: eviction keeps it */
		return 0;
	}
	snprintf(lock, sizeof(lock), "%s/snapshots", cache);
	rc = mkdirs(lock);
	snprintf(lock, sizeof(lock), "%s/snapshots/.lock", cache);
	fd = rc ? -1 : open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		log_say("cannot use the snapshot cache '%s/snapshots': %s", cache,
			strerror(rc ? -rc : errno));
		return RUN_EXIT_MAYFLY;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		log_say("waiting for another mayfly to finish the default snapshot");
		flock(fd, LOCK_EX);
	}
	code = 0;
	if (!present(dir)) {
		log_say("making the default snapshot for this kernel and root image, once "
			"(a cold boot; later runs restore it; --cold skips it)");
		t0 = clock_now_ns();
		code = make_in_child(cfg, dir, t0, verbose > 0, jc);
		if (!code)
			log_say("default snapshot ready in %.1f s: %s", (double)(clock_now_ns() - t0) / 1e9,
				dir);
		if (!code) {
			snprintf(lock, sizeof(lock), "%s/snapshots", cache);
			rc = snapcache_evict(lock, key, SNAPCACHE_KEEP, SNAPCACHE_GRACE_S, time(NULL));
			if (rc > 0)
				log_info("removed %d older default snapshot(s) from %s", rc, lock);
			else if (rc < 0)
				log_warn("cannot clear older default snapshots from %s: %s", lock,
					 strerror(-rc));
		}
	}
	close(fd);   /* the lock goes with it */
	if (code > 128 && code < 128 + NSIG)
		return code;   /* interrupted: the run ends as the signal says */
	return code ? RUN_EXIT_MAYFLY : 0;
}
