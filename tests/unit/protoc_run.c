/* protoc_run.c - protoc run on a test's bytes through a temporary file and a pipe. */
#include "protoc_run.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

uint8_t *protoc_run(const char *mode, const char *type, const char *const *dirs_env,
		    const void *in, size_t len, size_t *outlen)
{
	const char *bin = getenv("PROTOC"), *first = getenv(dirs_env[0]);
	char path[] = "/tmp/mayfly-protoc.XXXXXX", cmd[4096];
	size_t cap = 65536, n = 0, got;
	uint8_t *out = malloc(cap);
	int fd, o;
	FILE *f;

	cr_assert(bin && first && out, "PROTOC or %s unset: run through meson test", dirs_env[0]);
	o = snprintf(cmd, sizeof(cmd), "'%s' --%s=%s", bin, mode, type);
	for (size_t i = 0; dirs_env[i]; i++) {
		const char *d = getenv(dirs_env[i]);

		cr_assert_not_null(d, "%s unset: run through meson test", dirs_env[i]);
		o += snprintf(cmd + o, sizeof(cmd) - (size_t)o, " --proto_path='%s'", d);
	}
	fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, in, len), (ssize_t)len);
	close(fd);
	snprintf(cmd + o, sizeof(cmd) - (size_t)o, " $(cd '%s' && echo *.proto) < '%s'", first, path);
	f = popen(cmd, "r");
	cr_assert_not_null(f);
	while ((got = fread(out + n, 1, cap - 1 - n, f)) > 0) {
		n += got;
		if (n == cap - 1)
			cr_assert_not_null(out = realloc(out, cap *= 2));
	}
	out[n] = '\0';
	cr_assert_eq(pclose(f), 0, "%s failed", cmd);
	unlink(path);
	*outlen = n;
	return out;
}
