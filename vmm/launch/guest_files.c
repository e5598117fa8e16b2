/* guest_files.c - where the default guest that tools/build-guest builds is found (the only file-system lookup of the front end). */
#include "launch/guest_files.h"
#include "lib/exitcode.h"
#include "lib/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Where tools/build-guest leaves the default guest, in search order. */
static const char *candidate(int i)
{
	switch (i) {
	case 0: return getenv("MAYFLY_GUEST_DIR");
#ifdef MAYFLY_DEV_GUEST_DIR
	case 1: return MAYFLY_DEV_GUEST_DIR;
#endif
#ifdef MAYFLY_INSTALLED_GUEST_DIR
	case 2: return MAYFLY_INSTALLED_GUEST_DIR;
#endif
	default: return NULL;
	}
}

int guest_files_find(const char *name, char *out, size_t len)
{
	const char *env = getenv("MAYFLY_GUEST_DIR");

	for (int i = 0; i < 3; i++) {
		const char *dir = candidate(i);
		int n;

		if (i > 0 && env && *env)
			break;   /* an explicit MAYFLY_GUEST_DIR is the only place looked at */
		if (!dir || !*dir)
			continue;
		n = snprintf(out, len, "%s/%s", dir, name);
		if (n > 0 && (size_t)n < len && access(out, R_OK) == 0)
			return 0;
	}
	return -ENOENT;
}

/* The named root images and their files in the default guest directory. */
static const struct {
	const char *name, *file, *build;
} images[] = {
	{ "agent", "agent.ext4", "tools/build-guest --agent" },
	{ "minimal", "rootfs.ext4", "tools/build-guest" },
};

/* Find `file` in the default guest into *field. 0, -ENOENT (field unset)
 * or -ENOMEM. */
static int find_into(const char **field, const char *file)
{
	char path[CONFIG_PATH_MAX];

	if (guest_files_find(file, path, sizeof(path)))
		return CONFIG_SET_PATH(*field, "") ? -ENOMEM : -ENOENT;
	return CONFIG_SET_PATH(*field, path) ? -ENOMEM : 0;
}

int guest_files_rootfs(struct vm_config *cfg, bool want_default, char *err, size_t errlen)
{
	int rc;

	for (size_t i = 0; i < sizeof(images) / sizeof(images[0]); i++) {
		if (strcmp(cfg->rootfs, images[i].name))
			continue;
		rc = find_into(&cfg->rootfs, images[i].file);
		if (rc == -ENOENT)
			snprintf(err, errlen, "--rootfs %s: no %s in the default guest (build it "
				 "with %s, or set MAYFLY_GUEST_DIR)", images[i].name, images[i].file,
				 images[i].build);
		else if (rc)
			snprintf(err, errlen, "out of memory");
		return rc;
	}
	if (cfg->rootfs[0] || !want_default)
		return 0;
	/* The default: the agent image once built, else the minimal one. */
	for (size_t i = 0; i < sizeof(images) / sizeof(images[0]); i++) {
		rc = find_into(&cfg->rootfs, images[i].file);
		if (rc != -ENOENT) {
			if (rc)
				snprintf(err, errlen, "out of memory");
			return rc;
		}
	}
	snprintf(err, errlen, "no --rootfs given and no default root image found "
		 "(build it with tools/build-guest, or set MAYFLY_GUEST_DIR)");
	return -ENOENT;
}

int guest_files_resolve(struct vm_config *cfg, char *err, size_t errlen)
{
	char initrd[CONFIG_PATH_MAX];
	const char *slash;
	int rc = guest_files_rootfs(cfg, false, err, errlen);

	if (rc || cfg->kernel[0])
		return rc;
	rc = find_into(&cfg->kernel, CONFIG_DEFAULT_KERNEL);
	if (rc) {
		snprintf(err, errlen, rc == -ENOENT ? "no --kernel given and no default guest "
			 "kernel found (build it with tools/build-guest, or set MAYFLY_GUEST_DIR)" :
			 "out of memory");
		return rc;
	}
	/* The initramfs of the same guest: beside the kernel found. */
	slash = strrchr(cfg->kernel, '/');
	snprintf(initrd, sizeof(initrd), "%.*s/initramfs.cpio.gz", (int)(slash - cfg->kernel),
		 cfg->kernel);
	if (!cfg->initrd[0] && !cfg->rootfs[0] && access(initrd, R_OK) == 0 &&
	    CONFIG_SET_PATH(cfg->initrd, initrd)) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

int agent_vm_config(struct vm_config *vm, int verbose, bool restoring)
{
	char err[256];

	if (guest_files_rootfs(vm, !restoring, err, sizeof(err))) {
		log_say("%s", err);
		return RUN_EXIT_MAYFLY;
	}
	vm->vsock = true;
	vm->vsock_path[0] = '\0';   /* inline, not a heap string */
	vm->console_out = verbose ? CONSOLE_OUT_STDERR : CONSOLE_OUT_DISCARD;
	if (!restoring && guest_files_resolve(vm, err, sizeof(err))) {
		log_say("%s", err);
		return RUN_EXIT_MAYFLY;
	}
	return 0;
}
