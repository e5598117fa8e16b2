/* vm.h - one microVM: its KVM handles, memory, buses, devices and vCPUs, and how it ends. */
#ifndef MAYFLY_VM_VM_H
#define MAYFLY_VM_VM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <linux/kvm.h>

#include "vm/arch.h"
#include "vm/bus.h"
#include "vm/config.h"
#include "vm/console.h"
#include "lib/event.h"
#include "vm/kvm.h"
#include "mem/mem.h"
#include "vm/vcpu.h"
#include "devices/boot_timer.h"
#include "devices/serial.h"
#include "virtio/blk.h"
#include "virtio/vsock.h"

struct snapshot;

struct vm {
	const struct vm_config *cfg;
	const struct snapshot *snap;     /* restoring from it, or NULL (a cold boot) */
	uint64_t start_ns;               /* CLOCK_MONOTONIC at process start */
	/* CLOCK_MONOTONIC when vm_build's steps were done (0: not reached):
	 * guest RAM mapped, the kernel loaded (a cold boot), KVM_CREATE_VM. */
	uint64_t mapped_ns, loaded_ns, created_ns;
	uint64_t exits[VCPU_EXIT_REASONS];   /* every vCPU's, by reason, once vm_run returned */
	struct kvm kvm;
	struct arch_vm *arch;            /* the architecture's own part (vm/arch.h) */
	struct guest_mem mem;
	struct bus pio, mmio;
	struct serial serial;
	struct boot_timer boot_timer;
	struct console console;
	struct event_loop io;            /* the I/O thread: virtio queue work */
	struct virtio_blk *blks;         /* one per cfg->disks entry, vda first */
	unsigned nr_blks;
	struct virtio_vsock *vsock;      /* or NULL */
	struct virtio_mmio *virtio[VM_MAX_VIRTIO];   /* by slot: blks then vsock */
	unsigned nr_virtio;
	uint64_t initrd_gpa;             /* where the initrd was loaded, 0: none */
	size_t initrd_size;
	struct vcpu *vcpus;
	unsigned nr_vcpus;
	struct vcpu_shared cpus;         /* all the vCPUs know of the VM; their gate */
	bool logging_writes;             /* vm_workingset_begin: KVM logs RAM writes */
	int ws_warm;                     /* restored: enum ws_warm, how the working set is warmed */

	/* The first component to end the VM records why; the rest see it set. */
	_Atomic int exit_code;           /* -1 while running */
	char exit_reason[160];
	int stop_fd;                     /* eventfd the main thread waits on */

	/* See vm_set_signal_hook. */
	bool (*signal_hook)(void *opaque, int signo);
	void *signal_hook_opaque;
};

/* Called on the main thread for SIGINT, SIGTERM or SIGHUP while vm_run
 * runs; returning true means "handled, keep the VM running". Set after
 * vm_build, before vm_run. */
void vm_set_signal_hook(struct vm *vm, bool (*hook)(void *opaque, int signo), void *opaque);

/* Microseconds from process start to the guest's init writing the boot
 * timer, 0 while it has not. Any thread. */
uint64_t vm_guest_init_us(const struct vm *vm);

/* CLOCK_MONOTONIC when vcpu0 first entered KVM_RUN, 0 before. Any thread. */
uint64_t vm_first_run_ns(const struct vm *vm);

/* A new host connection to the guest's vsock device, without the file
 * system (as if a client had connected to the --vsock socket: it sends
 * "CONNECT <port>\n" first). Any thread. fd, or -ENODEV without vsock. */
int vm_connect_vsock(struct vm *vm);

/* Build the VM from cfg in one linear recipe: memory, kernel and initrd,
 * disks, vsock, boot structures, KVM, vCPUs, devices. With snap (loaded
 * by snapshot_load, cfg its config), restore instead: guest RAM mapped
 * from its memory file, no kernel, the host's CPU checked, and every
 * saved state put back before any guest code runs. Returns 0, or an exit
 * code from exitcode.h after logging one clear error line (a snapshot
 * this host cannot run: 5; one that does not fit its files: 3). */
int vm_build(struct vm *vm, const struct vm_config *cfg, const struct snapshot *snap,
	     uint64_t start_ns);

/* Restored on a KVM without KVM_PRE_FAULT_MEMORY (WS_WARM_ALONGSIDE;
 * with it, vm_build warmed the working set already): populate the
 * snapshot's working set (the pages its guest wrote first) writable, so
 * the guest finds private copies there instead of faulting each one in.
 * vm_run calls it once the vCPUs are released: the guest's own faults
 * race it, which is correct (a private mapping, both go through the
 * kernel's fault path: a page is copied once) and lets the first KVM_RUN
 * come before the copying. Stops early when the VM stops. Only a
 * speed-up: failures are logged at debug level. */
void vm_populate_workingset(struct vm *vm);

/* Start the vCPU and console threads, wait until the VM ends (guest reset,
 * fatal exit, or SIGINT/SIGTERM), stop everything. Returns the exit code. */
int vm_run(struct vm *vm);

/* Stop every vCPU out of KVM_RUN, its in-flight PIO/MMIO completed, and
 * wait until all are parked (or the VM ended: -ECANCELED). Any thread but
 * a vCPU's, while vm_run runs. 0 or -errno. */
int vm_pause(struct vm *vm);
/* Let parked vCPUs run again. */
void vm_resume(struct vm *vm);

/* vm_pause, then the I/O thread parked between two batches: no device
 * work in flight, as a live save needs. 0, or -ECANCELED (the VM ended;
 * nothing is parked). */
int vm_quiesce(struct vm *vm);
/* Undo vm_quiesce (harmless on a VM that is not quiesced). */
void vm_unquiesce(struct vm *vm);

/* Keep new host clients of the vsock device's Unix socket waiting in its
 * backlog (virtio_vsock_hold): -EBUSY while a connection is open, -ENODEV
 * without a vsock device. vm_vsock_release lets them in again. Any thread. */
int vm_vsock_hold(struct vm *vm);
void vm_vsock_release(struct vm *vm);

/* Guest connections to host vsock `port` go to accept(opaque), on the I/O
 * thread, which returns the host end's fd (or -errno: refused). After
 * vm_build, before vm_run. 0, or -ENODEV without a vsock device. */
int vm_vsock_serve_port(struct vm *vm, uint32_t port, int (*accept)(void *opaque), void *opaque);

/* The VM's I/O thread's loop, for host-side work that must run beside
 * the devices (the network proxy). */
struct event_loop *vm_io_loop(struct vm *vm);

/* The VM's id (for log lines and records). */
const char *vm_id(const struct vm *vm);

/* Why the VM ended, one line ("" while it runs); stays readable after
 * vm_destroy. */
const char *vm_exit_reason(const struct vm *vm);

/* Whether the VM was restored from a snapshot (else a cold boot). */
bool vm_restored(const struct vm *vm);

/* Release everything vm_build acquired. Safe after a partial build. */
void vm_destroy(struct vm *vm);

/* End the VM with `code` and a reason for the log (first caller wins);
 * callable from any thread, never blocks. */
void vm_stop(struct vm *vm, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
