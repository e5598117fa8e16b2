/* vm.c - the VM builder (one linear recipe, as in Firecracker's builder) and its lifetime. */
#include "vm/vm.h"
#include "lib/clock.h"
#include "lib/exitcode.h"
#include "lib/log.h"
#include "lib/thread.h"
#include "vm/cmdline.h"
#include "vm/devices.h"
#include "vm/snapshot.h"
#include "snapshot/workingset.h"
#include "lib/map_guard.h"
#include "lib/sparse.h"

_Static_assert(CONFIG_MAX_DISKS + 1 <= VM_MAX_VIRTIO, "every disk and vsock get a slot");

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/virtio_mmio.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#define VM_MAX_IMAGE_BYTES (1ULL << 30)   /* a kernel or initrd larger than 1 GiB is a mistake */

/* Read a whole file (kernel, initrd). Returns 0 or an exit code after logging. */
static int read_image(const char *what, const char *path, uint8_t **data, size_t *size)
{
	struct stat st;
	size_t done = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);   /* a FIFO: refused */

	if (fd < 0) {
		log_error("cannot open %s '%s': %s", what, path, strerror(errno));
		return EXIT_BAD_IMAGE;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		log_error("%s '%s' is not a regular file", what, path);
		goto err_fd;
	}
	if (st.st_size == 0 || (uint64_t)st.st_size > VM_MAX_IMAGE_BYTES) {
		log_error("%s '%s' is %s", what, path, st.st_size ? "larger than 1 GiB" : "empty");
		goto err_fd;
	}
	*size = (size_t)st.st_size;
	*data = malloc(*size);
	if (!*data) {
		log_error("out of memory reading %s '%s'", what, path);
		close(fd);
		return EXIT_INTERNAL;
	}
	while (done < *size) {
		ssize_t n = read(fd, *data + done, *size - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			log_error("cannot read %s '%s': %s", what, path,
				  n ? strerror(errno) : "file shrank");
			free(*data);
			*data = NULL;
			goto err_fd;
		}
		done += (size_t)n;
	}
	close(fd);
	return 0;

err_fd:
	close(fd);
	return EXIT_BAD_IMAGE;
}

/* Load the kernel and initrd into guest RAM. Needs no KVM, so bad files
 * are reported the same way on any host. */
static int vm_load_guest(struct vm *vm)
{
	const struct vm_config *cfg = vm->cfg;
	size_t size = 0;
	uint8_t *data = NULL;
	const char *why = "";
	char what[128];
	int rc;

	rc = read_image("kernel", cfg->kernel, &data, &size);
	if (rc)
		return rc;
	rc = arch_load_kernel(vm->arch, &vm->mem, data, size, &why);
	free(data);
	if (rc) {
		log_error("kernel '%s': %s", cfg->kernel, why);
		return EXIT_BAD_IMAGE;
	}
	if (cfg->initrd[0]) {
		rc = read_image("initrd", cfg->initrd, &data, &vm->initrd_size);
		if (rc)
			return rc;
		rc = arch_load_initrd(vm->arch, &vm->mem, data, vm->initrd_size, &vm->initrd_gpa,
				      &why);
		free(data);
		if (rc) {
			log_error("initrd '%s': %s", cfg->initrd, why);
			return EXIT_BAD_IMAGE;
		}
	}
	arch_describe_kernel(vm->arch, what, sizeof(what));
	log_debug("kernel loaded: %s", what);
	return 0;
}

/* The guest's command line: the base, then each virtio-mmio device in slot
 * order where the architecture lists them there (x86), the agent and
 * root, then the user's additions, so their root= or device options win. */
static int vm_compose_cmdline(struct vm *vm, struct cmdline *cl)
{
	const struct vm_config *cfg = vm->cfg;

	cmdline_init(cl, cfg->cmdline);
	for (unsigned i = 0; arch_virtio_on_cmdline() && i < vm->nr_virtio; i++)
		cmdline_add(cl, "virtio_mmio.device=4K@0x%llx:%u",
			    (unsigned long long)arch_virtio_addr(i), arch_virtio_irq(i));
	/* With vsock, the guest's init starts its agent (guest-agent/). */
	if (vm->vsock)
		cmdline_add(cl, "mayfly.agent=1");
	if (cfg->rootfs[0])
		cmdline_add(cl, "root=/dev/vda rw");
	if (cfg->cmdline_append[0])
		cmdline_add(cl, "%s", cfg->cmdline_append);
	if (cfg->init_cmd[0])
		cmdline_add_base64(cl, "mayfly.cmd", cfg->init_cmd);
	if (cl->too_long) {
		log_error("the kernel command line is longer than %d bytes", CONFIG_CMDLINE_MAX - 1);
		return EXIT_USAGE;
	}
	return 0;
}

/* The boot structures, with the command line. */
static int vm_write_boot_params(struct vm *vm)
{
	struct cmdline cl;
	const char *why = "";
	int rc = vm_compose_cmdline(vm, &cl);

	if (rc)
		return rc;
	rc = arch_write_boot(vm->arch, &vm->mem, cl.buf, vm->initrd_gpa, vm->initrd_size,
			     vm->nr_vcpus, vm->nr_virtio, &why);
	if (rc) {
		log_error("boot setup: %s", why);
		return EXIT_USAGE;
	}
	log_debug("kernel command line: %s", cl.buf);
	return 0;
}

/* Give a virtio-mmio device the next slot: its window, its interrupt line
 * and its place on the command line all follow from the index. */
static int vm_add_virtio(struct vm *vm, struct virtio_mmio *m)
{
	if (vm->nr_virtio >= VM_MAX_VIRTIO) {
		log_error("more than %d virtio devices", VM_MAX_VIRTIO);
		return EXIT_USAGE;
	}
	vm->virtio[vm->nr_virtio++] = m;
	return 0;
}

/* Open one disk image and wrap it in the next virtio-blk device. */
static int vm_open_disk(struct vm *vm, const char *path, bool cow, bool read_only)
{
	struct virtio_blk *blk = &vm->blks[vm->nr_blks];
	struct disk disk = { .fd = -1 };
	const char *why = "";
	char name[8];
	int rc;

	snprintf(name, sizeof(name), "vd%c", 'a' + vm->nr_blks);
	/* Restored, the root's overlay comes back from the snapshot. */
	rc = cow && vm->snap ? vm_devices_open_cow(vm->snap, &disk, path, name, &why) :
	     cow ? disk_open_cow(&disk, path, &why) : disk_open_raw(&disk, path, read_only, &why);
	if (rc) {
		bool say_errno = rc == -ENOENT || rc == -EACCES || rc == -EPERM || rc == -EIO;

		log_error("%s '%s': %s%s%s", cow ? "rootfs" : "disk", path, why,
			  say_errno ? ": " : "", say_errno ? strerror(-rc) : "");
		return EXIT_BAD_IMAGE;
	}
	if (cow)
		disk_cow_set_quota(&disk, vm->cfg->disk_quota);
	rc = virtio_blk_init(blk, &disk, &vm->mem, name);
	if (rc) {
		disk_close(&disk);
		log_error("cannot set up virtio-blk %s: %s", name, strerror(-rc));
		return EXIT_INTERNAL;
	}
	vm->nr_blks++;
	log_info("%s: %s '%s', %llu MiB%s", name,
		 cow ? "copy-on-write root" : read_only ? "read-only disk" : "disk", path,
		 (unsigned long long)(blk->disk.size >> 20),
		 cow ? " (writes stay in this VM's memory)" : "");
	return vm_add_virtio(vm, &blk->mmio);
}

/* An empty slot (--spare-disks) for a disk inserted while the VM runs;
 * its serial "spare-K" until then. */
static int vm_add_spare_disk(struct vm *vm, unsigned k)
{
	struct virtio_blk *blk = &vm->blks[vm->nr_blks];
	char name[8], id[DISK_ID_LEN + 1];
	int rc;

	snprintf(name, sizeof(name), "vd%c", 'a' + vm->nr_blks);
	snprintf(id, sizeof(id), "spare-%u", k);
	rc = virtio_blk_init_empty(blk, &vm->mem, name, id);
	if (rc) {
		log_error("cannot set up virtio-blk %s: %s", name, strerror(-rc));
		return EXIT_INTERNAL;
	}
	vm->nr_blks++;
	log_info("%s: empty slot %u, for a disk inserted while the VM runs", name, k);
	return vm_add_virtio(vm, &blk->mmio);
}

/* The rootfs (vda), each --disk, then the spare slots. Like the kernel
 * and initrd, a bad image is reported before KVM is touched. */
static int vm_open_disks(struct vm *vm)
{
	const struct vm_config *cfg = vm->cfg;
	unsigned total = cfg->nr_disks + (cfg->rootfs[0] ? 1 : 0) + cfg->spare_disks;
	int rc = 0;

	if (!total)
		return 0;
	vm->blks = calloc(total, sizeof(*vm->blks));
	if (!vm->blks) {
		log_error("out of memory for %u disks", total);
		return EXIT_INTERNAL;
	}
	if (cfg->rootfs[0])
		rc = vm_open_disk(vm, cfg->rootfs, true, false);
	for (unsigned i = 0; !rc && i < cfg->nr_disks; i++)
		rc = vm_open_disk(vm, cfg->disks[i].path, false, cfg->disks[i].read_only);
	for (unsigned k = 0; !rc && k < cfg->spare_disks; k++)
		rc = vm_add_spare_disk(vm, k);
	return rc;
}

/* The virtio-vsock device when the config asks for one. With a path it
 * listens on that Unix socket from here on (clients wait in the backlog
 * until the I/O thread runs; a path that is taken is the user's mistake);
 * without one, only this process connects (vm_connect_vsock). */
static int vm_open_vsock(struct vm *vm)
{
	const char *path = vm->cfg->vsock_path[0] ? vm->cfg->vsock_path : NULL, *why = "";
	int rc;

	if (!vm->cfg->vsock)
		return 0;
	vm->vsock = calloc(1, sizeof(*vm->vsock));
	if (!vm->vsock) {
		log_error("out of memory for virtio-vsock");
		return EXIT_INTERNAL;
	}
	rc = virtio_vsock_init(vm->vsock, path, VSOCK_GUEST_CID, &vm->mem, &vm->io, &why);
	if (rc) {
		log_error("vsock '%s': %s: %s", path ? path : "(in-process)", why, strerror(-rc));
		free(vm->vsock);
		vm->vsock = NULL;
		return rc == -EEXIST || rc == -EADDRINUSE || rc == -ENAMETOOLONG || rc == -EACCES ||
		       rc == -ENOENT ? EXIT_USAGE : EXIT_INTERNAL;
	}
	log_info("vsock: guest CID %u, host socket %s%s%s", VSOCK_GUEST_CID, path ? "'" : "",
		 path ? path : "in this process only", path ? "'" : "");
	return vm_add_virtio(vm, &vm->vsock->mmio);
}

/* Put a virtio-mmio device on the bus: its registers, its kicks as
 * ioeventfds served by the I/O thread, its interrupt as an irqfd. */
static int vm_attach_virtio(struct vm *vm, struct virtio_mmio *m, unsigned slot)
{
	uint64_t base = arch_virtio_addr(slot);
	int rc = bus_register(&vm->mmio, base, ARCH_VIRTIO_WINDOW, virtio_mmio_io, m, m->name);

	if (rc)
		return rc;
	for (unsigned q = 0; q < m->ops->nr_queues; q++) {
		rc = kvm_add_ioeventfd(&vm->kvm, base + VIRTIO_MMIO_QUEUE_NOTIFY, 4, q, m->kick_fds[q]);
		if (!rc)
			rc = event_loop_add(&vm->io, m->kick_fds[q], EPOLLIN, virtio_mmio_kick_event,
					    &m->kickers[q]);
		if (rc)
			return rc;
	}
	return kvm_add_irqfd(&vm->kvm, arch_virtio_irq(slot), m->irq_fd);
}

/* The UART's two hooks share one opaque: the VM (its KVM fd, its console). */
static void serial_irq(void *opaque, int level)
{
	struct vm *vm = opaque;

	kvm_irq_line(&vm->kvm, arch_serial_irq(), level);
}

static void serial_notify(void *opaque)
{
	struct vm *vm = opaque;

	console_notify(&vm->console);
}

/* How the vCPUs and the console end the VM (vcpu.h, console.h). */
static void stop_hook(void *opaque, int code, const char *reason)
{
	vm_stop(opaque, code, "%s", reason);
}

static void guest_reset(void *opaque)
{
	vm_stop(opaque, EXIT_GUEST_RESET, "guest requested a reset");
}

static int vm_add_devices(struct vm *vm)
{
	const struct arch_platform platform = {
		.pio = &vm->pio, .mmio = &vm->mmio, .serial = &vm->serial,
		.boot_timer = &vm->boot_timer, .reset = guest_reset, .opaque = vm,
	};

	serial_init(&vm->serial, serial_irq, serial_notify, vm);
	boot_timer_init(&vm->boot_timer, vm->start_ns);
	if (arch_add_devices(vm->arch, &platform)) {
		log_error("cannot register the platform devices on the bus");
		return EXIT_INTERNAL;
	}
	for (unsigned i = 0; i < vm->nr_virtio; i++) {
		int rc = vm_attach_virtio(vm, vm->virtio[i], i);

		if (rc) {
			log_error("cannot attach virtio-%s %s: %s", vm->virtio[i]->ops->name,
				  vm->virtio[i]->name, strerror(-rc));
			return EXIT_INTERNAL;
		}
	}
	return 0;
}

static int vm_open_kvm(struct vm *vm)
{
	const char *why = "";
	int rc = kvm_open(&vm->kvm, vm->cfg->kvm_device, &why);

	if (rc == -ENOTSUP) {
		log_error("%s: unsupported KVM: %s", vm->cfg->kvm_device, why);
		return EXIT_KVM_UNSUPPORTED;
	}
	if (rc) {
		log_error("%s: %s (%s)", vm->cfg->kvm_device, why, strerror(-rc));
		return EXIT_NO_KVM;
	}
	if (vm->nr_vcpus > (unsigned)vm->kvm.max_vcpus) {
		log_error("--cpus %u is more than this host's KVM allows (%d)", vm->nr_vcpus,
			  vm->kvm.max_vcpus);
		return EXIT_USAGE;
	}
	rc = kvm_create_vm(&vm->kvm, &vm->mem, &why);
	if (rc) {
		log_error("cannot create the VM: %s failed: %s", why, strerror(-rc));
		return EXIT_INTERNAL;
	}
	return 0;
}

/* The vCPUs with the CPU description this host offers, or, restored,
 * the one the snapshot's guest had: their registers then come from the
 * snapshot. */
static int vm_create_vcpus(struct vm *vm)
{
	const char *why = "";
	int rc = arch_cpus_prepare(vm->arch, vm->kvm.sys_fd, vm->kvm.vm_fd, vm->nr_vcpus,
				   vm->snap ? vm->snap->arch : NULL, &why);

	if (rc) {
		log_error("%s", why);
		return EXIT_INTERNAL;
	}
	vm->cpus.vm_fd = vm->kvm.vm_fd;
	vm->cpus.run_size = (size_t)vm->kvm.run_size;
	vm->cpus.pio = &vm->pio;
	vm->cpus.mmio = &vm->mmio;
	vm->cpus.ram_file_backed = vm->mem.file_backed;
	vm->cpus.stop = stop_hook;
	vm->cpus.stop_opaque = vm;
	for (unsigned i = 0; i < vm->nr_vcpus; i++) {
		rc = vcpu_init(&vm->vcpus[i], &vm->cpus, i);
		if (!rc)
			rc = arch_vcpu_init(vm->arch, vm->vcpus[i].fd, i, vm->nr_vcpus, !vm->snap);
		if (rc) {
			log_error("cannot set up vcpu%u: %s", i, strerror(-rc));
			return EXIT_INTERNAL;
		}
	}
	return 0;
}

/* Before any guest code: this host must offer every CPU feature the
 * snapshot's guest was given. */
static int vm_check_host(struct vm *vm)
{
	const char *why = "";

	if (!vm->snap || !snapshot_check_host(vm->snap, vm->kvm.sys_fd, vm->kvm.vm_fd, &why))
		return 0;
	log_error("cannot restore this snapshot here: %s", why);
	return EXIT_KVM_UNSUPPORTED;
}

static int vm_restore(struct vm *vm)
{
	const char *why = "";

	if (!vm->snap || !vm_snapshot_restore(vm, vm->snap, &why))
		return 0;
	log_error("cannot restore the snapshot in '%s': %s", vm->snap->dir, why);
	return EXIT_BAD_IMAGE;
}

/* Guest RAM: fresh, or the snapshot's memory file mapped privately. */
static int vm_map_memory(struct vm *vm)
{
	const struct mem_layout *ram = arch_ram_layout();
	const char *why = "";
	char path[CONFIG_PATH_MAX + 64];
	int rc;

	if (!vm->snap) {
		rc = mem_init(&vm->mem, vm->cfg->mem_mib << 20, ram);
		if (rc)
			log_error("cannot map %llu MiB of guest RAM: %s",
				  (unsigned long long)vm->cfg->mem_mib, strerror(-rc));
		return rc ? EXIT_INTERNAL : 0;
	}
	rc = snapshot_path(vm->snap->dir, SNAPSHOT_MEMORY, path, sizeof(path));
	if (!rc)
		rc = mem_restore(&vm->mem, vm->cfg->mem_mib << 20, ram, path, &why);
	if (rc) {
		log_error("snapshot memory '%s': %s", path, why);
		return EXIT_BAD_IMAGE;
	}
	rc = map_guard_add(vm->mem.base, vm->mem.total,
			   "mayfly: guest RAM is gone: the snapshot's memory file was cut short "
			   "while the VM ran; ending the process (exit 7)\n");
	if (rc)
		log_warn("no SIGBUS handler for guest RAM: %s", strerror(-rc));
	return 0;
}

/* Every run of the working set populated writable, until the VM stops.
 * Only a speed-up: a kernel without MADV_POPULATE_WRITE runs the guest all
 * the same, faulting each page in as it goes. 0 or -errno. */
static int populate_workingset(struct vm *vm, uint64_t *pages)
{
	*pages = 0;
	for (size_t i = 0; i < vm->snap->nr_ws && atomic_load(&vm->exit_code) < 0; i++) {
		int rc = mem_populate_write(&vm->mem, vm->snap->ws[i].first,
					    vm->snap->ws[i].count);

		if (rc) {
			log_debug("working set not populated: %s", strerror(-rc));
			return rc;
		}
		*pages += vm->snap->ws[i].count;
	}
	return 0;
}

/* A run of pages of the memory file (the regions one after the other)
 * into KVM's page tables, a piece per region it overlaps. */
static int pre_fault_run(struct vm *vm, const struct ws_range *run)
{
	uint64_t start = run->first * MEM_PAGE_SIZE, end = start + run->count * MEM_PAGE_SIZE;

	for (int r = 0; r < vm->mem.nr_regions; r++) {
		const struct mem_region *reg = &vm->mem.regions[r];
		uint64_t off = (uint64_t)(reg->hva - vm->mem.base);
		uint64_t s = start > off ? start : off;
		uint64_t e = end < off + reg->size ? end : off + reg->size;
		int rc;

		if (s >= e)
			continue;
		rc = kvm_pre_fault(vm->vcpus[0].fd, reg->gpa + (s - off), e - s);
		if (rc)
			return rc;
	}
	return 0;
}

/* Restored, state set, no vCPU started: where KVM can map pages ahead of
 * the guest, populate the working set and map it now (WS_WARM_PRE_FAULT);
 * else vm_populate_workingset does it once the guest runs. */
static void vm_pre_fault_workingset(struct vm *vm)
{
	uint64_t t0 = clock_now_ns(), pages;
	int rc;

	vm->ws_warm = workingset_warm_mode(vm->snap->nr_ws, kvm_can_pre_fault(&vm->kvm));
	if (vm->ws_warm != WS_WARM_PRE_FAULT || populate_workingset(vm, &pages))
		return;
	for (size_t i = 0; i < vm->snap->nr_ws; i++) {
		rc = pre_fault_run(vm, &vm->snap->ws[i]);
		if (rc) {
			/* Populated still: the guest faults KVM's mappings in. */
			log_debug("working set not pre-faulted: %s", strerror(-rc));
			return;
		}
	}
	log_debug("working set: %llu pages populated and pre-faulted in %llu us",
		  (unsigned long long)pages, (unsigned long long)(clock_now_ns() - t0) / 1000);
}

void vm_populate_workingset(struct vm *vm)
{
	uint64_t t0 = clock_now_ns(), pages;

	if (!vm->snap || vm->ws_warm != WS_WARM_ALONGSIDE || populate_workingset(vm, &pages))
		return;
	log_debug("working set: %llu pages populated in %llu us, alongside the guest (at %llu us)",
		  (unsigned long long)pages, (unsigned long long)(clock_now_ns() - t0) / 1000,
		  (unsigned long long)(clock_now_ns() - vm->start_ns) / 1000);
}

static void vm_log_phase(const struct vm *vm, const char *phase)
{
	log_debug("%s at %llu us", phase,
		  (unsigned long long)(clock_now_ns() - vm->start_ns) / 1000);
}

int vm_build(struct vm *vm, const struct vm_config *cfg, const struct snapshot *snap,
	     uint64_t start_ns)
{
	int rc;

	/* Most of it (the serial port's output ring) stays zero while the
	 * guest is quiet: from calloc, those pages are never written. */
	sparse_zero(vm, sizeof(*vm));
	vm->cfg = cfg;
	vm->snap = snap;
	vm->start_ns = start_ns;
	vm->kvm.sys_fd = vm->kvm.vm_fd = -1;
	vm->stop_fd = vm->console.wake_fd = -1;
	vm->io.epoll_fd = vm->io.stop_fd = -1;
	atomic_store(&vm->exit_code, -1);
	bus_init(&vm->pio, "pio");
	bus_init(&vm->mmio, "mmio");
	vm->nr_vcpus = cfg->cpus;
	vm->vcpus = calloc(vm->nr_vcpus, sizeof(*vm->vcpus));
	vm->arch = arch_vm_new();
	vcpu_shared_init(&vm->cpus);
	vm->console = (struct console){ .serial = &vm->serial, .out = cfg->console_out,
					.interactive = cfg->console,
					.init_cmd = cfg->init_cmd[0] != '\0',
					.stop = stop_hook, .stop_opaque = vm, .wake_fd = -1 };
	vm->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	vm->console.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!vm->vcpus || !vm->arch || vm->stop_fd < 0 || vm->console.wake_fd < 0) {
		log_error("out of memory or file descriptors");
		return EXIT_INTERNAL;
	}
	for (unsigned i = 0; i < vm->nr_vcpus; i++)
		vm->vcpus[i].fd = -1;

	rc = vm_map_memory(vm);
	vm->mapped_ns = rc ? 0 : clock_now_ns();
	/* Restored, the kernel and its boot structures are in guest RAM already. */
	if (!rc && !snap) {
		rc = vm_load_guest(vm);
		vm->loaded_ns = rc ? 0 : clock_now_ns();
	}
	if (!rc)
		rc = vm_open_disks(vm);
	vm_log_phase(vm, "guest loaded");
	if (!rc && event_loop_init(&vm->io)) {
		log_error("cannot create the I/O thread's epoll: %s", strerror(errno));
		rc = EXIT_INTERNAL;
	}
	if (!rc)
		rc = vm_open_vsock(vm);
	if (!rc && !snap)
		rc = vm_write_boot_params(vm);
	if (!rc)
		rc = vm_open_kvm(vm);
	vm->created_ns = rc ? 0 : clock_now_ns();
	if (!rc)
		rc = vm_check_host(vm);
	vm_log_phase(vm, "kvm vm created");
	/* The vCPUs first: an arm64 GIC takes interrupt routes (irqfd) only
	 * once it is initialised, with its last vCPU. */
	if (!rc)
		rc = vm_create_vcpus(vm);
	if (!rc)
		rc = vm_add_devices(vm);
	if (!rc)
		rc = vm_restore(vm);
	if (!rc && snap)
		vm_pre_fault_workingset(vm);
	vm_log_phase(vm, "vcpus created");
	if (!rc)
		log_info("vm %s: %u vcpu(s), %llu MiB, setup took %llu us",
			 snap ? "restored" : "built", vm->nr_vcpus, (unsigned long long)cfg->mem_mib,
			 (unsigned long long)(clock_now_ns() - start_ns) / 1000);
	return rc;
}

void vm_destroy(struct vm *vm)
{
	if (vm->vcpus) {
		for (unsigned i = 0; i < vm->nr_vcpus; i++)
			vcpu_destroy(&vm->vcpus[i]);
		free(vm->vcpus);
		vm->vcpus = NULL;
	}
	if (vm->serial.set_irq)
		serial_destroy(&vm->serial);
	event_loop_destroy(&vm->io);
	for (unsigned i = 0; i < vm->nr_blks; i++)
		virtio_blk_destroy(&vm->blks[i]);
	free(vm->blks);
	vm->blks = NULL;
	vm->nr_blks = 0;
	if (vm->vsock) {
		/* After the I/O thread: closes the connections, removes the socket file. */
		virtio_vsock_destroy(vm->vsock);
		free(vm->vsock);
		vm->vsock = NULL;
	}
	kvm_close(&vm->kvm);
	mem_free(&vm->mem);
	bus_destroy(&vm->pio);
	bus_destroy(&vm->mmio);
	arch_vm_free(vm->arch);
	vm->arch = NULL;
	if (vm->stop_fd >= 0)
		close(vm->stop_fd);
	if (vm->console.wake_fd >= 0)
		close(vm->console.wake_fd);
	vm->stop_fd = vm->console.wake_fd = -1;
}
