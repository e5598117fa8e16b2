/* devices.h - the devices of a VM in a snapshot: their sections, the root's overlay file, and the wait for a quiet vsock. */
#ifndef MAYFLY_VM_DEVICES_H
#define MAYFLY_VM_DEVICES_H

#include <stdbool.h>
#include <stdint.h>

struct vm;
struct disk;
struct snapshot;
struct snapshot_files;
struct snap_writer;

/* With vCPUs parked and the I/O thread parked: each device's section
 * into w, the copy-on-write root's overlay into the empty file overlay_fd
 * (files->has_overlay set, its data bytes into *overlay_bytes). A writable raw disk
 * is refused: its file is the user's and goes on changing. 0 or -errno
 * with *why. */
int vm_devices_save(struct vm *vm, int overlay_fd, struct snap_writer *w,
		    struct snapshot_files *files, uint64_t *overlay_bytes, const char **why);

/* Devices created as at boot: put each saved state back. */
int vm_devices_restore(struct vm *vm, const struct snapshot *s, const char **why);

/* After every state is back (the interrupt controllers included): let
 * each live virtio device look at its queues once and re-raise a pending
 * interrupt (see virtio_mmio_resume). */
void vm_devices_resume(struct vm *vm);

/* Open the root image as a copy-on-write disk whose overlay comes back
 * from the snapshot (`name`: vda). 0 or -errno with *why. */
int vm_devices_open_cow(const struct snapshot *s, struct disk *disk, const char *base,
			const char *name, const char **why);

/* Put the image open at fd (read access; taken, closed on failure too)
 * into the VM's empty spare slot `slot` (0 .. --spare-disks - 1) as a
 * copy-on-write disk with serial `id` ("": the image's own), its writes in
 * this process's memory within --disk-quota. Any thread while the VM runs;
 * the guest sees the disk grow from empty (a config-change interrupt).
 * 0, or -errno with *why: -EINVAL no such slot, a bad id; -EBUSY the slot
 * is filled; a disk_open_cow error for the image. */
int vm_devices_insert_disk(struct vm *vm, unsigned slot, int fd, const char *id,
			   const char **why);

/* Whether a copy-on-write disk of the VM holds its whole --disk-quota
 * (the guest's writes to new blocks fail), and the bytes its disks'
 * overlays hold in all. Any thread while the VM runs. */
bool vm_devices_disk_full(struct vm *vm, uint64_t *used);

/* Wait up to timeout_ms until the vsock device holds no connection (the
 * agent closed them after QUIESCE). 0, or -EBUSY with *why. */
int vm_devices_wait_idle(struct vm *vm, int timeout_ms, const char **why);

#endif
