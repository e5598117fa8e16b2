/* defaults.c - an image's run defaults (rootfs/oci-import's /etc/mayfly/oci-config: ENV, WORKDIR, USER) for every EXEC. */
#include "agent.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULTS_MAX_BYTES 65536

/* The numeric id of `name` in an /etc/passwd or /etc/group style file (name:x:id:...),
 * or of `name` itself when it is a number. 0 with *id set, or -ENOENT. */
static int lookup_id(const char *file, const char *name, unsigned long *id)
{
	char line[1024], *end;
	FILE *f;
	size_t n = strlen(name);
	int rc = -ENOENT;

	errno = 0;
	*id = strtoul(name, &end, 10);
	if (name[0] >= '0' && name[0] <= '9' && !*end && !errno && *id < 0xffffffffUL)
		return 0;
	f = fopen(file, "re");
	if (!f)
		return -ENOENT;
	while (fgets(line, sizeof(line), f)) {
		char *p = line;

		if (strncmp(line, name, n) || line[n] != ':')
			continue;
		p = strchr(line + n + 1, ':');   /* past the password field */
		if (!p)
			break;
		errno = 0;
		*id = strtoul(p + 1, &end, 10);
		if (end != p + 1 && *end == ':' && !errno && *id < 0xffffffffUL)
			rc = 0;
		break;
	}
	fclose(f);
	return rc;
}

/* USER as OCI writes it: user, uid, user:group, uid:gid. Without a group, the
 * user's primary group from /etc/passwd (gid 0 for a bare uid not listed). */
static int parse_user(struct agent_defaults *d, char *v, const char *root)
{
	char passwd[PATH_MAX], group[PATH_MAX], line[1024];
	char *colon = strchr(v, ':');
	unsigned long uid, gid = 0;
	FILE *f;

	snprintf(passwd, sizeof(passwd), "%s/etc/passwd", root);
	snprintf(group, sizeof(group), "%s/etc/group", root);
	if (colon)
		*colon = '\0';
	if (lookup_id(passwd, v, &uid))
		return -ENOENT;
	if (colon) {
		if (lookup_id(group, colon + 1, &gid))
			return -ENOENT;
	} else if ((f = fopen(passwd, "re"))) {
		/* name:x:uid:gid:... whose uid matches */
		while (fgets(line, sizeof(line), f)) {
			unsigned long u, g;
			char *p = strchr(line, ':');

			if (p && (p = strchr(p + 1, ':')) && sscanf(p + 1, "%lu:%lu:", &u, &g) == 2 &&
			    u == uid) {
				gid = g;
				break;
			}
		}
		fclose(f);
	}
	d->uid = (uid_t)uid;
	d->gid = (gid_t)gid;
	d->has_user = true;
	return 0;
}

int defaults_load(struct agent_defaults *d, const char *path, const char *root)
{
	/* One agent, one defaults file, kept for its lifetime: no allocation to free. */
	static char buf[DEFAULTS_MAX_BYTES + 1];
	char *line, *save = NULL;
	size_t len;
	FILE *f;
	int rc = 0;

	memset(d, 0, sizeof(*d));
	f = fopen(path, "re");
	if (!f)
		return -errno;
	len = fread(buf, 1, DEFAULTS_MAX_BYTES + 1, f);
	fclose(f);
	if (len > DEFAULTS_MAX_BYTES)
		return -EFBIG;
	buf[len] = '\0';
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(line, "ENV ", 4) && strchr(line + 4, '=') && line[4] != '=') {
			if (d->nenv == AGENT_MAX_DEFAULT_ENV) {
				rc = -E2BIG;
				continue;
			}
			d->env[d->nenv++] = line + 4;
		} else if (!strncmp(line, "WORKDIR ", 8) && line[8] == '/') {
			d->workdir = line + 8;
		} else if (!strncmp(line, "USER ", 5) && line[5]) {
			if (parse_user(d, line + 5, root))
				rc = -EINVAL;   /* no such user or group */
		} else {
			rc = -EINVAL;
		}
	}
	return rc;
}
