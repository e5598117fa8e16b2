/* atomic_file.h - create a file so that it appears whole or not at all: temp file, fsync, rename. */
#ifndef MAYFLY_LIB_ATOMIC_FILE_H
#define MAYFLY_LIB_ATOMIC_FILE_H

#include <stddef.h>

/* A file being written: `fd` is a fresh temporary file (mode 0600) in the
 * directory of `path`, which appears under `path` only on commit. */
struct atomic_file {
	int fd;
	char *path;
	char *tmp_path;
};

/* Create the temporary file beside `path` ("<path>.XXXXXX"). 0 or -errno
 * (the directory does not exist or is not writable, -ENAMETOOLONG, ...). */
int atomic_file_open(struct atomic_file *f, const char *path) __attribute__((warn_unused_result));

/* fsync the data, rename the temporary file over `path` (replacing an older
 * one: a process that has the old file open or mapped keeps the old inode),
 * then fsync the directory (best effort: the name's durability over a power
 * cut). Closes the file and frees `f` whatever happens; on failure nothing
 * is left behind and an existing `path` is untouched. 0 or -errno. */
int atomic_file_commit(struct atomic_file *f) __attribute__((warn_unused_result));

/* Close and remove the temporary file, free `f`. Safe on an `f` that was
 * already committed or aborted, or whose open failed. */
void atomic_file_abort(struct atomic_file *f);

/* Create `path` atomically with fill(fd, opaque, why) writing its content
 * into the temporary file. 0; fill's -errno (its *why; nothing left
 * behind); or -errno with *why "cannot create/write PATH: ...". */
int atomic_file_fill(const char *path, int (*fill)(int fd, void *opaque, const char **why),
		     void *opaque, const char **why) __attribute__((warn_unused_result));

/* Create `path` atomically holding data[0..len). 0 or -errno. */
int atomic_file_write(const char *path, const void *data, size_t len)
	__attribute__((warn_unused_result));

#endif
