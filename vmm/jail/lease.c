/* lease.c - a jail's directory and cgroup are owned by a live supervisor holding an flock; the next mayfly removes a dead owner's. */
#include "jail/lease.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define RETRIES 8   /* names a sweeper took from under us before we give up */

/* "BASE/PREFIXREST.lock" -> the jail directory "BASE/PREFIXREST" and the
 * cgroup name "vm-REST". */
static int names_for(struct lease *l, size_t prefix_len)
{
	size_t len = strlen(l->lock) - strlen(LEASE_SUFFIX);
	const char *base = strrchr(l->lock, '/') + 1;
	int n;

	if (len >= sizeof(l->dir))
		return -ENAMETOOLONG;
	memcpy(l->dir, l->lock, len);
	l->dir[len] = '\0';
	n = snprintf(l->cgroup_name, sizeof(l->cgroup_name), "vm-%.*s",
		     (int)(l->lock + len - (base + prefix_len)), base + prefix_len);
	return n >= (int)sizeof(l->cgroup_name) ? -ENAMETOOLONG : 0;
}

int lease_take(struct lease *l, const char *base, const char *prefix, const char *id)
{
	struct stat st;
	int rc = -EAGAIN;

	memset(l, 0, sizeof(*l));
	l->fd = -1;
	for (int i = 0; i < RETRIES; i++) {
		if (snprintf(l->lock, sizeof(l->lock), "%s/%s%s-XXXXXX" LEASE_SUFFIX, base, prefix,
			     id) >= (int)sizeof(l->lock))
			return -ENAMETOOLONG;
		l->fd = mkostemps(l->lock, strlen(LEASE_SUFFIX), O_CLOEXEC);
		if (l->fd < 0)
			return -errno;
		/* A sweeper may have taken the fresh, unlocked file for a dead
		 * owner's and unlinked it before our flock: then take another. */
		if (flock(l->fd, LOCK_EX) == 0 && fstat(l->fd, &st) == 0 && st.st_nlink > 0)
			break;
		close(l->fd);
		l->fd = -1;
	}
	if (l->fd < 0)
		return rc;
	fchmod(l->fd, 0644);
	rc = names_for(l, strlen(prefix));
	if (!rc && mkdir(l->dir, 0755) < 0)
		rc = -errno;
	if (rc) {
		l->dir[0] = '\0';
		lease_release(l, true);
		return rc;
	}
	/* The VM's uid must be able to look up the socket directory in it. */
	chmod(l->dir, 0755);
	return 0;
}

void lease_drop(struct lease *l)
{
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
}

void lease_release(struct lease *l, bool removed)
{
	if (l->fd >= 0 && removed)
		unlink(l->lock);
	lease_drop(l);
}

/* One lease whose owner is gone: its directory, its cgroup, then the lock.
 * True when all of it went. */
static bool remove_dead(int dfd, const char *name, size_t prefix_len, const char *cgroup_dir)
{
	char dir[NAME_MAX + 1], cg[CONFIG_PATH_MAX];
	size_t len = strlen(name) - strlen(LEASE_SUFFIX);

	memcpy(dir, name, len);
	dir[len] = '\0';
	if (unlinkat(dfd, dir, AT_REMOVEDIR) < 0 && errno != ENOENT)
		return false;
	if (cgroup_dir) {
		if (snprintf(cg, sizeof(cg), "%s/vm-%s", cgroup_dir, dir + prefix_len) >=
		    (int)sizeof(cg))
			return false;
		if (rmdir(cg) < 0 && errno != ENOENT)
			return false;
	}
	return unlinkat(dfd, name, 0) == 0 || errno == ENOENT;
}

int lease_sweep(const char *base, const char *prefix, const char *cgroup_dir)
{
	size_t plen = strlen(prefix), slen = strlen(LEASE_SUFFIX);
	DIR *d = opendir(base);
	struct dirent *e;
	int removed = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)) != NULL) {
		size_t len = strlen(e->d_name);
		int fd;

		if (len <= plen + slen || strncmp(e->d_name, prefix, plen) ||
		    strcmp(e->d_name + len - slen, LEASE_SUFFIX))
			continue;
		fd = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
		if (fd < 0)
			continue;
		/* Held: its owner lives (or a new owner is taking it). */
		if (flock(fd, LOCK_EX | LOCK_NB) == 0 && remove_dead(dirfd(d), e->d_name, plen, cgroup_dir))
			removed++;
		close(fd);
	}
	closedir(d);
	return removed;
}
