/* atomic_file.c - create a file so that it appears whole or not at all: temp file, fsync, rename. */
#include "lib/atomic_file.h"
#include "lib/errmsg.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void release(struct atomic_file *f)
{
	free(f->path);
	free(f->tmp_path);
	f->path = f->tmp_path = NULL;
	f->fd = -1;
}

int atomic_file_open(struct atomic_file *f, const char *path)
{
	int rc;

	f->fd = -1;
	f->tmp_path = NULL;
	f->path = strdup(path);
	if (!f->path || asprintf(&f->tmp_path, "%s.XXXXXX", path) < 0) {
		f->tmp_path = NULL;
		release(f);
		return -ENOMEM;
	}
	/* mkstemp: O_EXCL, mode 0600 (a snapshot holds the guest's memory). */
	f->fd = mkostemp(f->tmp_path, O_CLOEXEC);
	if (f->fd < 0) {
		rc = -errno;
		release(f);
		return rc;
	}
	return 0;
}

/* fsync the directory holding `path`, so that a rename into it is durable. */
static void sync_dir_of(const char *path)
{
	char *copy = strdup(path);
	int fd;

	if (!copy)
		return;
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
	free(copy);
}

int atomic_file_commit(struct atomic_file *f)
{
	int rc = 0;

	if (fsync(f->fd) < 0)
		rc = -errno;
	if (close(f->fd) < 0 && rc == 0)
		rc = -errno;
	f->fd = -1;
	if (rc == 0 && rename(f->tmp_path, f->path) < 0)
		rc = -errno;
	if (rc) {
		unlink(f->tmp_path);
		release(f);
		return rc;
	}
	/* The file is whole and in place. Syncing the directory only makes
	 * the new name survive a power cut; failing it is no reason to call
	 * the file missing (nor to remove it again). */
	sync_dir_of(f->path);
	release(f);
	return 0;
}

void atomic_file_abort(struct atomic_file *f)
{
	if (f->fd >= 0)
		close(f->fd);
	if (f->tmp_path)
		unlink(f->tmp_path);
	release(f);
}

int atomic_file_fill(const char *path, int (*fill)(int fd, void *opaque, const char **why),
		     void *opaque, const char **why)
{
	struct atomic_file f;
	int rc = atomic_file_open(&f, path);

	if (rc)
		return errmsg_why(why, rc, "cannot create %s: %s", path, strerror(-rc));
	rc = fill(f.fd, opaque, why);
	if (rc) {
		atomic_file_abort(&f);
		return rc;
	}
	rc = atomic_file_commit(&f);
	if (rc)
		return errmsg_why(why, rc, "cannot write %s: %s", path, strerror(-rc));
	return 0;
}

int atomic_file_write(const char *path, const void *data, size_t len)
{
	struct atomic_file f;
	size_t off = 0;
	int rc = atomic_file_open(&f, path);

	while (!rc && off < len) {
		ssize_t n = write(f.fd, (const char *)data + off, len - off);

		if (n < 0 && errno != EINTR)
			rc = -errno;
		else if (n > 0)
			off += (size_t)n;
	}
	if (rc) {
		atomic_file_abort(&f);
		return rc;
	}
	return atomic_file_commit(&f);
}
