/* procfs.c - one field of a /proc file, read line by line. */
#include "lib/procfs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int procfs_field(const char *path, const char *key, char *out, size_t len)
{
	FILE *f = fopen(path, "re");
	size_t klen = strlen(key);
	char line[4096];   /* cpuinfo's flags line is over 1000 bytes */
	int rc = -1;

	out[0] = '\0';
	while (f && rc && fgets(line, sizeof(line), f)) {
		char *v = line + klen;

		if (strncmp(line, key, klen))
			continue;
		v += strspn(v, " \t");
		if (*v != ':')
			continue;
		v += 1 + strspn(v + 1, " \t");
		v[strcspn(v, "\n")] = '\0';
		snprintf(out, len, "%s", v);
		rc = 0;
	}
	if (f)
		fclose(f);
	return rc;
}

long long procfs_number(const char *path, const char *key)
{
	char value[64], *end;
	long long n;

	if (procfs_field(path, key, value, sizeof(value)))
		return -1;
	n = strtoll(value, &end, 10);
	return end == value ? -1 : n;
}
