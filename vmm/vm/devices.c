/* devices.c - a VM's devices in a snapshot: one section each, the root's overlay as a file, a quiet vsock before saving. */
#include "vm/devices.h"
#include "lib/errmsg.h"
#include "vm/arch.h"
#include "vm/vm.h"
#include "vm/snapshot.h"
#include "snapshot/codec.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Sections: format.h. A virtio device's slot follows from the builder's
 * order, which a restore repeats from the same config. */
_Static_assert(VM_MAX_VIRTIO <= SNAP_SEC_VIRTIO_MAX, "a section per virtio slot");

static int save_disks(struct vm *vm, int overlay_fd, struct snap_writer *w,
		      struct snapshot_files *files, uint64_t *overlay_bytes, const char **why)
{
	for (unsigned i = 0; i < vm->nr_blks; i++) {
		const struct disk *d = &vm->blks[i].disk;
		struct snap_out o;
		struct stat st;
		int rc;

		/* An empty slot has nothing to save; an inserted disk's device
		 * refuses the save (virtio_blk's own part). */
		if (!disk_is_open(d) || vm->blks[i].inserted)
			continue;
		rc = disk_check_snapshot(d, why);
		if (rc)
			return rc;
		if (!disk_is_cow(d))
			continue;
		/* Only the root (vda) is copy-on-write: one overlay file. */
		if (i != 0 || files->has_overlay)
			return errmsg_why(why, -ENOTSUP, "a copy-on-write disk other than the root");
		snap_out_init(&o);
		rc = disk_cow_save_fd(d, overlay_fd, &o, why);
		if (!rc)
			rc = snap_writer_add_out(w, SNAP_SEC_OVERLAY(i), &o, why);
		else
			snap_out_free(&o);
		if (rc)
			return rc;
		files->has_overlay = true;
		if (fstat(overlay_fd, &st) == 0)
			*overlay_bytes += (uint64_t)st.st_blocks * 512;
	}
	return 0;
}

int vm_devices_save(struct vm *vm, int overlay_fd, struct snap_writer *w,
		    struct snapshot_files *files, uint64_t *overlay_bytes, const char **why)
{
	struct snap_out o;
	int rc = save_disks(vm, overlay_fd, w, files, overlay_bytes, why);

	for (unsigned i = 0; !rc && i < vm->nr_virtio; i++) {
		snap_out_init(&o);
		rc = virtio_mmio_save(vm->virtio[i], &o, why);
		if (!rc)
			rc = snap_writer_add_out(w, SNAP_SEC_VIRTIO(i), &o, why);
		else
			snap_out_free(&o);
	}
	if (rc)
		return rc;
	snap_out_init(&o);
	serial_save(&vm->serial, &o);
	rc = snap_writer_add_out(w, SNAP_SEC_SERIAL, &o, why);
	if (!rc)
		rc = arch_devices_save(vm->arch, w, why);
	snap_out_init(&o);
	boot_timer_save(&vm->boot_timer, &o);
	if (!rc)
		rc = snap_writer_add_out(w, SNAP_SEC_BOOT_TIMER, &o, why);
	else
		snap_out_free(&o);
	return rc;
}

/* A section the restore needs. */
static const struct snap_section *need(const struct snapshot *s, uint32_t type, const char *what,
				       const char **why)
{
	const struct snap_section *sec = snap_find(s->file, type);

	if (!sec)
		errmsg_why(why, -EBADMSG, "snapshot state has no %s section", what);
	return sec;
}

int vm_devices_restore(struct vm *vm, const struct snapshot *s, const char **why)
{
	const struct snap_section *sec;
	int rc;

	for (unsigned i = 0; i < vm->nr_virtio; i++) {
		sec = need(s, SNAP_SEC_VIRTIO(i), vm->virtio[i]->name, why);
		if (!sec)
			return -EBADMSG;
		rc = virtio_mmio_restore(vm->virtio[i], sec->data, sec->len, why);
		if (rc)
			return rc;
	}
	if (snap_find(s->file, SNAP_SEC_VIRTIO(vm->nr_virtio)))
		return errmsg_why(why, -EBADMSG, "the snapshot's VM had more virtio devices");
	if (!(sec = need(s, SNAP_SEC_SERIAL, "serial", why)) ||
	    (rc = serial_restore(&vm->serial, sec->data, sec->len, why)))
		return sec ? rc : -EBADMSG;
	rc = arch_devices_restore(vm->arch, s->file, why);
	if (rc)
		return rc;
	if (!(sec = need(s, SNAP_SEC_BOOT_TIMER, "boot timer", why)) ||
	    (rc = boot_timer_restore(&vm->boot_timer, sec->data, sec->len, why)))
		return sec ? rc : -EBADMSG;
	return 0;
}

void vm_devices_resume(struct vm *vm)
{
	for (unsigned i = 0; i < vm->nr_virtio; i++)
		virtio_mmio_resume(vm->virtio[i]);
}

int vm_devices_open_cow(const struct snapshot *s, struct disk *disk, const char *base,
			const char *name, const char **why)
{
	const struct snap_section *sec = snap_find(s->file, SNAP_SEC_OVERLAY(0));
	char path[CONFIG_PATH_MAX + 64], file[32];

	if (!sec)
		return errmsg_why(why, -EBADMSG, "snapshot state has no overlay section for %s", name);
	snprintf(file, sizeof(file), SNAPSHOT_OVERLAY_FMT, name);
	if (snapshot_path(s->dir, file, path, sizeof(path)))
		return errmsg_why(why, -ENAMETOOLONG, "snapshot path too long");
	return disk_open_cow_restored(disk, base, path, sec->data, sec->len, why);
}

int vm_devices_insert_disk(struct vm *vm, unsigned slot, int fd, const char *id,
			   const char **why)
{
	unsigned spare = vm->cfg->spare_disks;
	struct virtio_blk *blk;
	struct disk disk;
	struct stat st;
	int rc;

	if (slot >= spare)
		rc = errmsg_why(why, -EINVAL, "no spare disk slot %u (the VM has %u)", slot, spare);
	else if (strlen(id) > DISK_ID_LEN)
		rc = errmsg_why(why, -EINVAL, "a disk id longer than %d bytes", DISK_ID_LEN);
	/* A regular file only: a block device's size needs an ioctl this
	 * (seccomp-filtered) thread may not make. */
	else if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		rc = errmsg_why(why, -EINVAL, "the image to insert is not a regular file");
	else
		rc = 0;
	if (rc) {
		close(fd);
		return rc;
	}
	blk = &vm->blks[vm->nr_blks - spare + slot];
	rc = disk_open_cow_fd(&disk, fd, why);
	if (rc)
		return rc;
	if (id[0])
		snprintf(disk.id, sizeof(disk.id), "%s", id);
	disk_cow_set_quota(&disk, vm->cfg->disk_quota);
	rc = virtio_blk_insert(blk, &disk, why);
	if (rc) {
		disk_close(&disk);
		return rc;
	}
	log_info("%s: disk inserted into spare slot %u, serial %s, %llu MiB (writes stay in this "
		 "VM's memory)", blk->mmio.name, slot, blk->disk.id,
		 (unsigned long long)(blk->disk.size >> 20));
	return 0;
}

bool vm_devices_disk_full(struct vm *vm, uint64_t *used)
{
	bool full = false;

	*used = 0;
	for (unsigned i = 0; i < vm->nr_blks; i++) {
		/* Spare slots are filled by the control thread, this one. */
		if (!disk_is_open(&vm->blks[i].disk))
			continue;
		*used += disk_cow_used(&vm->blks[i].disk);
		full |= disk_cow_full(&vm->blks[i].disk);
	}
	return full;
}

int vm_devices_wait_idle(struct vm *vm, int timeout_ms, const char **why)
{
	for (int waited = 0; vm->vsock && !virtio_vsock_quiet(vm->vsock); waited += 5) {
		if (waited >= timeout_ms)
			return errmsg_why(why, -EBUSY, "the vsock device still has connections after "
					"the agent closed them");
		poll(NULL, 0, 5);
	}
	return 0;
}
