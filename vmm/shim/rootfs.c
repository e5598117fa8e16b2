/* rootfs.c - a container's root file system: containerd's mounts put in place in the bundle, and the ext4 image the VM boots it from, built once per content and cached. */
#include "shim/rootfs.h"
#include "lib/errmsg.h"
#include "lib/image_id.h"
#include "lib/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sha2.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define IMAGE_DIR       "shim-images"
#define IMAGE_MIN_BYTES (64ULL << 20)
#define IMAGE_KEEP      8            /* images kept, the most recently used */
#define ENTRY_MAX       (4096 + 256)

extern char **environ;

/* ---- mounts ---- */

/* Append opt to data ("a,b,..."). */
static int add_data(char *data, size_t cap, const char *opt)
{
	size_t n = strlen(data);

	return (size_t)snprintf(data + n, cap - n, "%s%s", n ? "," : "", opt) < cap - n ? 0 : -E2BIG;
}

/* One mount at target. */
static int mount_one(const struct rootfs_mount *m, const char *target, char *err, size_t errlen)
{
	static const struct { const char *name; unsigned long set; } flags[] = {
		{ "ro", MS_RDONLY }, { "nosuid", MS_NOSUID }, { "nodev", MS_NODEV },
		{ "noexec", MS_NOEXEC }, { "bind", MS_BIND }, { "rbind", MS_BIND | MS_REC },
	};
	unsigned long mflags = 0;
	bool overlay = !strcmp(m->type, "overlay"), bind = !strcmp(m->type, "bind");
	char *data;
	int rc = 0;

	if (!overlay && !bind)
		return errmsg_invalid(err, errlen, "rootfs mount of type '%.40s': only overlay and bind "
				      "(the overlayfs and native snapshotters) are supported", m->type);
	if (m->noptions > ROOTFS_MAX_OPTIONS)
		return errmsg_invalid(err, errlen, "rootfs mount with %d options", m->noptions);
	data = calloc(1, ROOTFS_OPTION_MAX * 2);
	if (!data)
		return errmsg_invalid(err, errlen, "out of memory");
	for (int i = 0; i < m->noptions && !rc; i++) {
		const char *o = m->options[i];
		bool flag = false;

		if (strlen(o) >= ROOTFS_OPTION_MAX || (overlay && strchr(o, ','))) {
			rc = errmsg_invalid(err, errlen, "a malformed rootfs mount option");
			break;
		}
		for (size_t k = 0; k < sizeof(flags) / sizeof(flags[0]); k++)
			if (!strcmp(o, flags[k].name)) {
				mflags |= flags[k].set;
				flag = true;
			}
		if (flag || !strcmp(o, "rw"))
			continue;
		if (bind) {
			rc = errmsg_invalid(err, errlen, "bind mount option '%.60s' is not supported", o);
			break;
		}
		if (add_data(data, ROOTFS_OPTION_MAX * 2, o))
			rc = errmsg_invalid(err, errlen, "rootfs overlay options too long");
	}
	if (!rc && bind) {
		if (mount(m->source, target, NULL, mflags | MS_BIND, NULL) < 0 ||
		    ((mflags & MS_RDONLY) &&
		     mount(NULL, target, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) < 0)) {
			rc = -errno;
			snprintf(err, errlen, "cannot bind-mount '%.200s' as the rootfs: %s", m->source,
				 strerror(-rc));
			umount2(target, MNT_DETACH);
		}
	} else if (!rc && mount("overlay", target, "overlay", mflags & ~(MS_BIND | MS_REC), data) < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot mount the rootfs overlay: %s", strerror(-rc));
	}
	free(data);
	return rc;
}

int rootfs_mount(const struct rootfs_mount *ms, int n, const char *target, char *err,
		 size_t errlen)
{
	if (n < 1 || n > ROOTFS_MAX_MOUNTS)
		return errmsg_invalid(err, errlen, "%d rootfs mounts: want 1 to %d (no rootfs given?)", n,
				      ROOTFS_MAX_MOUNTS);
	if (mkdir(target, 0711) < 0 && errno != EEXIST) {
		int rc = -errno;

		snprintf(err, errlen, "cannot create '%.200s': %s", target, strerror(errno));
		return rc;
	}
	for (int i = 0; i < n; i++) {
		int rc = mount_one(&ms[i], target, err, errlen);

		if (rc) {
			rootfs_unmount(target);
			return rc;
		}
	}
	return 0;
}

int rootfs_unmount(const char *target)
{
	int rc = 0;

	/* Stacked mounts: until none is left. */
	for (int i = 0; i < ROOTFS_MAX_MOUNTS + 1; i++) {
		if (umount2(target, 0) == 0)
			continue;
		if (errno == EBUSY && umount2(target, MNT_DETACH) == 0)
			continue;
		rc = errno == EINVAL || errno == ENOENT ? 0 : -errno;
		break;
	}
	return rc;
}

/* ---- the tree's listing ---- */

struct listing {
	char **entries;
	size_t n, cap;
	uint64_t bytes;            /* file content and symlink targets */
	bool by_content;           /* each regular file's sha256 in its entry */
	char *err;
	size_t errlen;
};

/* The sha256 (hex) of the regular file name in dfd, or "" if unreadable. */
static void content_hash(int dfd, const char *name, char hex[65])
{
	uint8_t buf[65536], digest[SHA256_DIGEST_LENGTH];
	SHA2_CTX ctx;
	ssize_t n;
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);

	hex[0] = '\0';
	if (fd < 0)
		return;
	SHA256Init(&ctx);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		SHA256Update(&ctx, buf, (size_t)n);
	close(fd);
	if (n == 0) {
		SHA256Final(digest, &ctx);
		image_hash_hex(digest, hex);
	}
}

static int add_entry(struct listing *l, const char *path, const struct stat *st, const char *link,
		     const char *content)
{
	char buf[ENTRY_MAX];
	int n;

	if (l->n >= ROOTFS_MAX_FILES)
		return errmsg_invalid(l->err, l->errlen, "the rootfs has more than %u entries",
				      ROOTFS_MAX_FILES);
	/* By content, times are left out: a copy of the same files (made
	 * with other times) is the same image. */
	n = snprintf(buf, sizeof(buf), "%s\t%o\t%u:%u\t%lld\t%lld.%09ld\t%s\t%s", path,
		     st->st_mode, (unsigned)st->st_uid, (unsigned)st->st_gid, (long long)st->st_size,
		     l->by_content ? 0LL : (long long)st->st_mtim.tv_sec,
		     l->by_content ? 0L : st->st_mtim.tv_nsec, link ? link : "",
		     content ? content : "");
	if (n < 0 || (size_t)n >= sizeof(buf))
		return errmsg_invalid(l->err, l->errlen, "a rootfs path is too long");
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 1024;
		char **e = realloc(l->entries, cap * sizeof(*e));

		if (!e)
			return errmsg_invalid(l->err, l->errlen, "out of memory");
		l->entries = e;
		l->cap = cap;
	}
	l->entries[l->n] = strdup(buf);
	if (!l->entries[l->n])
		return errmsg_invalid(l->err, l->errlen, "out of memory");
	l->n++;
	if (S_ISREG(st->st_mode) || S_ISLNK(st->st_mode))
		l->bytes += (uint64_t)st->st_size;
	return 0;
}

/* Walk the directory open at dfd (path rel for the listing): every entry,
 * no symbolic link followed, no mount crossed, depth bounded. */
static int walk(struct listing *l, int dfd, const char *rel, dev_t dev, int depth)
{
	DIR *d;
	struct dirent *e;
	int rc = 0;

	if (depth > ROOTFS_MAX_DEPTH) {
		close(dfd);
		return errmsg_invalid(l->err, l->errlen, "the rootfs is more than %d directories deep",
				      ROOTFS_MAX_DEPTH);
	}
	d = fdopendir(dfd);
	if (!d) {
		rc = -errno;
		close(dfd);
		return errmsg_invalid(l->err, l->errlen, "cannot read the rootfs: %s", strerror(-rc));
	}
	while (!rc && (e = readdir(d)) != NULL) {
		char path[ENTRY_MAX], link[4096], hex[65];
		struct stat st;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", rel, e->d_name) >= 4096) {
			rc = errmsg_invalid(l->err, l->errlen, "a rootfs path is too long");
			break;
		}
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			rc = errmsg_invalid(l->err, l->errlen, "cannot look at '%.200s': %s", path,
					    strerror(errno));
			break;
		}
		if (S_ISLNK(st.st_mode)) {
			ssize_t n = readlinkat(dirfd(d), e->d_name, link, sizeof(link) - 1);

			link[n > 0 ? n : 0] = '\0';
		}
		if (l->by_content && S_ISREG(st.st_mode))
			content_hash(dirfd(d), e->d_name, hex);
		rc = add_entry(l, path, &st, S_ISLNK(st.st_mode) ? link : NULL,
			       l->by_content && S_ISREG(st.st_mode) ? hex : NULL);
		if (!rc && S_ISDIR(st.st_mode) && st.st_dev == dev) {
			int sub = openat(dirfd(d), e->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			rc = sub < 0 ? errmsg_invalid(l->err, l->errlen, "cannot open '%.200s'", path) :
			     walk(l, sub, path, dev, depth + 1);
		}
	}
	closedir(d);
	return rc;
}

static int cmp_entries(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The tree's key: sha256 of origin and its sorted listing. */
static int tree_key(const char *root, const char *origin, bool by_content, char key[65],
		    uint64_t *bytes, uint64_t *entries, char *err, size_t errlen)
{
	struct listing l = { .by_content = by_content, .err = err, .errlen = errlen };
	uint8_t digest[SHA256_DIGEST_LENGTH];
	struct stat st;
	SHA2_CTX ctx;
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), rc;

	if (fd < 0 || fstat(fd, &st) < 0) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
		snprintf(err, errlen, "cannot open the rootfs '%.200s': %s", root, strerror(-rc));
		return rc;
	}
	/* The root's own times are left out: in an overlay they are its
	 * upper directory's, made fresh for each container. */
	st.st_mtim = (struct timespec){ 0 };
	rc = add_entry(&l, ".", &st, NULL, NULL);
	if (!rc)
		rc = walk(&l, fd, ".", st.st_dev, 0);
	else
		close(fd);
	if (!rc) {
		qsort(l.entries, l.n, sizeof(*l.entries), cmp_entries);
		SHA256Init(&ctx);
		SHA256Update(&ctx, (const uint8_t *)origin, strlen(origin) + 1);
		for (size_t i = 0; i < l.n; i++)
			SHA256Update(&ctx, (const uint8_t *)l.entries[i], strlen(l.entries[i]) + 1);
		SHA256Final(digest, &ctx);
		image_hash_hex(digest, key);
		*bytes = l.bytes;
		*entries = l.n;
	}
	for (size_t i = 0; i < l.n; i++)
		free(l.entries[i]);
	free(l.entries);
	return rc;
}

/* ---- the image ---- */

/* mke2fs -d: the tree into a new ext4 image of `bytes` at path. */
static int mkfs(const char *tree, const char *path, uint64_t bytes, char *err, size_t errlen)
{
	char size[32];
	char *argv[] = { "mke2fs", "-q", "-F", "-t", "ext4", "-O", "^has_journal", "-E",
			 "root_owner=0:0", "-d", (char *)tree, (char *)path, size, NULL };
	posix_spawn_file_actions_t fa;
	int status = 0, rc;
	pid_t pid;

	snprintf(size, sizeof(size), "%lluk", (unsigned long long)(bytes >> 10));
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO, STDOUT_FILENO);
	rc = posix_spawnp(&pid, "mke2fs", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc)
		return errmsg_invalid(err, errlen, "cannot run mke2fs (e2fsprogs): %s", strerror(rc));
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		return errmsg_invalid(err, errlen, "mke2fs could not build the rootfs image (status %d)",
				      status);
	return 0;
}

/* Keep the IMAGE_KEEP most recently used images in dir (by mtime, which
 * each use touches); a failure only leaves more behind. */
static void evict(const char *dir)
{
	struct { char name[80]; time_t t; } old[64];
	struct dirent *e;
	int n = 0;
	DIR *d = opendir(dir);

	if (!d)
		return;
	while ((e = readdir(d)) != NULL && n < 64) {
		struct stat st;
		size_t len = strlen(e->d_name);

		if (len != 64 + 5 || strcmp(e->d_name + 64, ".ext4") ||
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		snprintf(old[n].name, sizeof(old[n].name), "%s", e->d_name);
		old[n++].t = st.st_mtime;
	}
	while (n > IMAGE_KEEP) {
		int oldest = 0;

		for (int i = 1; i < n; i++)
			if (old[i].t < old[oldest].t)
				oldest = i;
		unlinkat(dirfd(d), old[oldest].name, 0);
		old[oldest] = old[--n];
	}
	closedir(d);
}

bool rootfs_origin(const struct rootfs_mount *ms, int n, char *out, size_t len)
{
	bool by_content = false;
	size_t used = 0;

	out[0] = '\0';
	for (int i = 0; i < n && used < len; i++) {
		if (strcmp(ms[i].type, "overlay")) {
			by_content = true;   /* a bind: the directory is the container's own */
			continue;
		}
		for (int k = 0; k < ms[i].noptions && used < len; k++)
			if (!strncmp(ms[i].options[k], "lowerdir=", 9))
				used += (size_t)snprintf(out + used, len - used, "%s\n", ms[i].options[k]);
	}
	return by_content;
}

int rootfs_image(const char *root, const char *origin, bool by_content, char *out, size_t len,
		 bool *built, char *err, size_t errlen)
{
	char cache[4096], dir[4200], key[65], tmp[4400], lockpath[4300];
	uint64_t bytes = 0, entries = 0, size;
	int lock, rc;

	*built = false;
	if (image_cache_dir(cache, sizeof(cache)))
		snprintf(cache, sizeof(cache), "/var/cache/mayfly");
	snprintf(dir, sizeof(dir), "%s/%s", cache, IMAGE_DIR);
	if (mkdir(cache, 0700) < 0 && errno != EEXIST)
		return errmsg_invalid(err, errlen, "cannot create '%.200s': %s", cache, strerror(errno));
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return errmsg_invalid(err, errlen, "cannot create '%.200s': %s", dir, strerror(errno));
	rc = tree_key(root, origin, by_content, key, &bytes, &entries, err, errlen);
	if (rc)
		return rc;
	if ((size_t)snprintf(out, len, "%s/%s.ext4", dir, key) >= len)
		return errmsg_invalid(err, errlen, "the image cache's path is too long");
	snprintf(lockpath, sizeof(lockpath), "%s/.lock", dir);
	lock = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lock < 0 || flock(lock, LOCK_EX) < 0) {
		rc = -errno;
		if (lock >= 0)
			close(lock);
		snprintf(err, errlen, "cannot lock the image cache: %s", strerror(-rc));
		return rc;
	}
	if (access(out, R_OK) == 0) {
		utimensat(AT_FDCWD, out, NULL, 0);   /* used now: kept by the eviction */
		close(lock);
		return 0;
	}
	/* Content, an inode and a block per entry, then a fifth more. */
	size = bytes + entries * 8192;
	size += size / 5;
	size = size < IMAGE_MIN_BYTES ? IMAGE_MIN_BYTES : (size + 0xfffff) & ~0xfffffULL;
	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, key);
	unlink(tmp);
	/* There already: mke2fs builds into it without a word. */
	rc = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (rc < 0) {
		rc = -errno;
		close(lock);
		snprintf(err, errlen, "cannot create the rootfs image: %s", strerror(-rc));
		return rc;
	}
	close(rc);
	log_info("building the rootfs image %s (%llu entries, %llu MiB)", key,
		 (unsigned long long)entries, (unsigned long long)(size >> 20));
	rc = mkfs(root, tmp, size, err, errlen);
	if (!rc && rename(tmp, out) < 0)
		rc = errmsg_invalid(err, errlen, "cannot put the rootfs image in place: %s",
				    strerror(errno));
	if (rc)
		unlink(tmp);
	else
		evict(dir);
	*built = rc == 0;
	close(lock);
	return rc;
}
