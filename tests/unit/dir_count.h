/* dir_count.h - what a test counts in a directory: entries by prefix, this process's open descriptors (tests only). */
#ifndef MAYFLY_TESTS_DIR_COUNT_H
#define MAYFLY_TESTS_DIR_COUNT_H

#include <dirent.h>
#include <string.h>

/* Entries of path whose name starts with prefix ("": all but . and ..),
 * or -1 when path cannot be opened. */
static inline int dir_count(const char *path, const char *prefix)
{
	DIR *dp = opendir(path);
	struct dirent *e;
	int n = 0;

	if (!dp)
		return -1;
	while ((e = readdir(dp)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		     !strncmp(e->d_name, prefix, strlen(prefix));
	closedir(dp);
	return n;
}

/* This process's open descriptors (the one counting them included: the
 * same in every count, so two counts compare). */
static inline int open_fds(void)
{
	return dir_count("/proc/self/fd", "");
}

#endif
