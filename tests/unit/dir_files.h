/* dir_files.h - small text files in a test's scratch directory: write one, read one back (tests only). */
#ifndef MAYFLY_TESTS_DIR_FILES_H
#define MAYFLY_TESTS_DIR_FILES_H

#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

/* dir/name holds text (created or truncated); the test fails if it cannot. */
static inline void put(const char *dir, const char *name, const char *text)
{
	char path[PATH_MAX * 2];   /* dir and name, each up to a path */
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	fputs(text, f);
	fclose(f);
}

/* dir/name's first 255 bytes (a static buffer), or NULL when it cannot be read. */
static inline const char *get(const char *dir, const char *name)
{
	static char buf[256];
	char path[PATH_MAX * 2];   /* dir and name, each up to a path */
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "r");
	if (!f)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

#endif
