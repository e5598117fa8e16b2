/* restore.c - a snapshot named on the command line: loaded, held against the flags the user gave, turned into the config to restore. */
#include "launch/restore.h"
#include "lib/errmsg.h"
#include "snapshot/codec.h"

#include <errno.h>
#include <string.h>

/* The root image: the one snapshotted, or the user's --rootfs, with the
 * same content either way (the snapshot's overlay only holds the blocks
 * the guest wrote; every other read comes from this file). */
static int check_rootfs(const struct snapshot *snap, const char *path, const char **why)
{
	int rc = image_id_check(path, &snap->files.rootfs, why);

	if (rc == -ESTALE)
		return errmsg_why(why, rc, "the root image '%s' is not the one this snapshot was "
				"made from (its content differs)", path);
	return rc;
}

int restore_prepare(struct snapshot *snap, const char *dir, const struct vm_config *given,
		    const struct restore_given *set, struct vm_config *out, const char **why)
{
	int rc = snapshot_load(snap, dir, why);

	if (rc)
		return rc;
	rc = config_copy(out, &snap->cfg);
	if (rc) {
		snapshot_free(snap);
		return errmsg_why(why, rc, "out of memory");
	}
	if (set->mem && given->mem_mib != snap->cfg.mem_mib)
		rc = errmsg_why(why, -EINVAL, "--mem %llu differs from the snapshot's %llu MiB",
			      (unsigned long long)given->mem_mib,
			      (unsigned long long)snap->cfg.mem_mib);
	else if (set->cpus && given->cpus != snap->cfg.cpus)
		rc = errmsg_why(why, -EINVAL, "--cpus %u differs from the snapshot's %u", given->cpus,
			      snap->cfg.cpus);
	else if (set->spare_disks && given->spare_disks != snap->cfg.spare_disks)
		rc = errmsg_why(why, -EINVAL, "--spare-disks %u differs from the snapshot's %u",
			      given->spare_disks, snap->cfg.spare_disks);
	else if (set->rootfs && !snap->cfg.rootfs[0])
		rc = errmsg_why(why, -EINVAL, "the snapshot has no root image to replace");
	if (!rc && set->kernel) {
		rc = image_id_check(given->kernel, &snap->files.kernel, why);
		if (rc == -ESTALE)
			rc = errmsg_why(why, rc, "the kernel '%s' is not the one this snapshot booted",
				      given->kernel);
	}
	if (!rc && set->rootfs && CONFIG_SET_PATH(out->rootfs, given->rootfs))
		rc = errmsg_why(why, -ENOMEM, "out of memory");
	if (!rc && out->rootfs[0])
		rc = check_rootfs(snap, out->rootfs, why);
	/* Each run's own. */
	if (!rc && CONFIG_SET_PATH(out->kvm_device, given->kvm_device))
		rc = errmsg_why(why, -ENOMEM, "out of memory");
	memcpy(out->id, given->id, sizeof(out->id));
	out->log_level = given->log_level;
	out->console = given->console;
	out->console_out = given->console_out;
	memcpy(out->vsock_path, given->vsock_path, sizeof(out->vsock_path));
	out->disk_quota = given->disk_quota;
	if (!rc && given->vsock_path[0] && !out->vsock)
		rc = errmsg_why(why, -EINVAL, "--vsock: the snapshot's VM has no vsock device");
	if (rc) {
		config_free(out);
		snapshot_free(snap);
	}
	return rc;
}
