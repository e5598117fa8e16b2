/* fs_tree.c - removing a directory tree we made: a sandbox's state, a fork's snapshot, an evicted cached snapshot. */
#include "lib/fs_tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int remove_at(int dirfd, const char *name, dev_t dev)
{
	struct stat st;
	int rc = 0;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (S_ISDIR(st.st_mode)) {
		int fd;
		DIR *d;
		struct dirent *e;

		if (st.st_dev != dev)
			return -EXDEV;   /* a mount: never into it */
		fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		d = fdopendir(fd);
		if (!d) {
			close(fd);
			return -errno;
		}
		while ((e = readdir(d))) {
			int r;

			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			r = remove_at(fd, e->d_name, dev);
			rc = rc ? rc : r;
		}
		closedir(d);
		if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
			rc = rc ? rc : -errno;
		return rc;
	}
	if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

int fs_remove_tree(const char *dir)
{
	struct stat st;

	if (lstat(dir, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	return remove_at(AT_FDCWD, dir, st.st_dev);
}
