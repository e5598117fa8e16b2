/* fsops.c - one-shot file system requests: STAT (lstat), MKDIR (with parents), REMOVE (recursive, never across symlinks or mounts). */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Deeper trees than this are refused (ELOOP): each level holds one fd. */
#define RM_MAX_DEPTH 256

int stat_request(struct conn *c, const struct proto_frame *f)
{
	char path[PROTO_MAX_PATH];
	struct proto_reader r;
	struct proto_writer w;
	struct proto_stat ps;
	struct stat st;

	proto_reader_init(&r, f);
	if (!proto_get_str(&r, path, sizeof(path)) || !proto_done(&r))
		return -EPROTO;
	if (lstat(path, &st) < 0) {
		conn_send_error(c, f->id, errno, "lstat %s: %s", path, strerror(errno));
		return 0;
	}
	ps = (struct proto_stat){
		.type = file_type_of(st.st_mode),
		.mode = st.st_mode & 07777,
		.size = (uint64_t)st.st_size,
		.mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec,
	};
	conn_begin(c, &w, PROTO_STAT_RESULT, f->id);
	proto_stat_encode(&w, f->id, &ps);
	conn_end(c, &w);
	return 0;
}

static bool is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* mkdir -p: missing parents get 0755, the last component `mode`; an existing
 * directory is success. path is modified in place and restored. */
static int mkdir_parents(char *path, mode_t mode)
{
	for (char *s = path + 1; *s; s++) {
		if (*s != '/' || s[-1] == '/')
			continue;
		*s = '\0';
		if (mkdir(path, 0755) < 0 && errno != EEXIST) {
			int err = errno;

			*s = '/';
			return -err;
		}
		*s = '/';
	}
	if (mkdir(path, mode) < 0 && !(errno == EEXIST && is_dir(path)))
		return -errno;
	return 0;
}

int mkdir_request(struct conn *c, const struct proto_frame *f)
{
	char path[PROTO_MAX_PATH];
	struct proto_reader r;
	uint32_t mode, parents;
	size_t n;
	int rc;

	proto_reader_init(&r, f);
	if (!proto_get_str(&r, path, sizeof(path)) || !proto_get_u32(&r, &mode) ||
	    !proto_get_u32(&r, &parents) || !proto_done(&r))
		return -EPROTO;
	/* "a/b/" names a/b: its mode must not go to a parent. */
	for (n = strlen(path); n > 1 && path[n - 1] == '/'; n--)
		path[n - 1] = '\0';
	/* The agent's umask is 0: the directory gets exactly `mode`. */
	if (parents)
		rc = mkdir_parents(path, mode & 07777);
	else
		rc = mkdir(path, mode & 07777) < 0 ? -errno : 0;
	if (rc < 0)
		conn_send_error(c, f->id, -rc, "mkdir %s: %s", path, strerror(-rc));
	else
		conn_send_empty(c, PROTO_OK, f->id);
	return 0;
}

/* Remove everything inside directory `name` of `parent` (not the directory).
 * Symlinks are unlinked, never followed (O_NOFOLLOW on every directory
 * opened); a directory on another file system is not entered (EXDEV). Goes on
 * past errors like rm -rf and returns the first one. */
static int rm_contents(int parent, const char *name, dev_t dev, int depth)
{
	struct dirent *de;
	struct stat st;
	int fd, rc, first = 0;
	DIR *d;

	if (depth > RM_MAX_DEPTH)
		return -ELOOP;
	fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		rc = -errno;
	else
		rc = st.st_dev != dev ? -EXDEV : 0;
	if (rc < 0) {
		close(fd);
		return rc;
	}
	d = fdopendir(fd);
	if (!d) {
		rc = -errno;
		close(fd);
		return rc;
	}
	while ((errno = 0, de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (unlinkat(fd, de->d_name, 0) == 0)
			continue;
		if (errno != EISDIR) {
			first = first ? first : -errno;
			continue;
		}
		rc = rm_contents(fd, de->d_name, dev, depth + 1);
		if (rc == 0 && unlinkat(fd, de->d_name, AT_REMOVEDIR) < 0)
			rc = -errno;
		first = first ? first : rc;
	}
	if (errno && !first)
		first = -errno;
	closedir(d);
	return first;
}

static int remove_path(const char *path, bool recursive)
{
	struct stat st;
	int rc;

	if (!recursive) {
		if (unlink(path) == 0)
			return 0;
		if (errno != EISDIR)
			return -errno;
		return rmdir(path) < 0 ? -errno : 0;
	}
	if (lstat(path, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return unlink(path) < 0 ? -errno : 0;
	rc = rm_contents(AT_FDCWD, path, st.st_dev, 0);
	if (rc == 0 && rmdir(path) < 0)
		rc = -errno;
	return rc;
}

int remove_request(struct conn *c, const struct proto_frame *f)
{
	char path[PROTO_MAX_PATH];
	struct proto_reader r;
	uint32_t recursive;
	int rc;

	proto_reader_init(&r, f);
	if (!proto_get_str(&r, path, sizeof(path)) || !proto_get_u32(&r, &recursive) ||
	    !proto_done(&r))
		return -EPROTO;
	rc = remove_path(path, recursive != 0);
	if (rc < 0)
		conn_send_error(c, f->id, -rc, "remove %s: %s", path, strerror(-rc));
	else
		conn_send_empty(c, PROTO_OK, f->id);
	return 0;
}

int rename_request(struct conn *c, const struct proto_frame *f)
{
	char from[PROTO_MAX_PATH], to[PROTO_MAX_PATH];
	struct proto_reader r;

	proto_reader_init(&r, f);
	if (!proto_get_str(&r, from, sizeof(from)) || !proto_get_str(&r, to, sizeof(to)) ||
	    !proto_done(&r))
		return -EPROTO;
	/* rename(2) itself: a symbolic link is moved, never followed; an
	 * existing target is replaced as rename replaces it. */
	if (rename(from, to) < 0)
		conn_send_error(c, f->id, errno, "rename %s to %s: %s", from, to, strerror(errno));
	else
		conn_send_empty(c, PROTO_OK, f->id);
	return 0;
}
