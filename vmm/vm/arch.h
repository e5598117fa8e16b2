/* arch.h - what the VM core asks of an architecture: the one contract x86/ implements (arm64/ next).
 *
 * The core (vm/) owns the sequence: memory, guest files, disks, KVM, devices,
 * vCPUs, run, save, restore. At each step that differs between machines it
 * calls one function here; the architecture's state for one VM stays opaque
 * (struct arch_vm), as does what a snapshot holds of it (struct
 * arch_snapshot). Nothing here is x86 or Arm: an architecture includes this
 * header, never the other way round (docs/architecture.md).
 */
#ifndef MAYFLY_VM_ARCH_H
#define MAYFLY_VM_ARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/kvm.h>

#include "mem/mem.h"
#include "snapshot/format.h"

struct arch_vm;
struct arch_snapshot;
struct bus;
struct serial;
struct boot_timer;
struct vcpu;

/* Where guest RAM goes: the regions mem_init and mem_restore lay it in. */
const struct mem_layout *arch_ram_layout(void);

/* An architecture's state for one VM (the kernel as loaded, the CPU
 * table every vCPU gets, its own legacy devices). NULL: out of memory. */
struct arch_vm *arch_vm_new(void);
void arch_vm_free(struct arch_vm *a);

/* The kernel image (data, size) into guest RAM, its format checked; then
 * an initrd where that kernel accepts one (*gpa: where). Touch no KVM.
 * 0 or -errno with *why. */
int arch_load_kernel(struct arch_vm *a, const struct guest_mem *mem, const uint8_t *data,
		     size_t size, const char **why) __attribute__((warn_unused_result));
int arch_load_initrd(struct arch_vm *a, const struct guest_mem *mem, const uint8_t *data,
		     size_t size, uint64_t *gpa, const char **why)
	__attribute__((warn_unused_result));
/* One line for the debug log: the loaded kernel's format and entry. */
void arch_describe_kernel(const struct arch_vm *a, char *out, size_t len);

/* Virtio-mmio slot i (below VM_MAX_VIRTIO): its 4 KiB register window
 * and its interrupt line. */
#define VM_MAX_VIRTIO      10      /* every architecture has a window and a line for each */
#define ARCH_VIRTIO_WINDOW 0x1000u
uint64_t arch_virtio_addr(unsigned slot);
/* Its line: the gsi KVM_IRQFD takes (x86: the ISA line; arm64: the SPI's index). */
unsigned arch_virtio_irq(unsigned slot);
/* Whether the guest learns of the devices from its command line
 * (virtio_mmio.device=, x86) rather than from its device tree (arm64). */
bool arch_virtio_on_cmdline(void);

/* The boot structures (boot parameters or a device tree with the command
 * line, what the CPUs and nr_virtio devices are found by) for nr_vcpus,
 * after arch_load_kernel. 0 or -errno. */
int arch_write_boot(struct arch_vm *a, const struct guest_mem *mem, const char *cmdline,
		    uint64_t initrd_gpa, uint64_t initrd_size, unsigned nr_vcpus,
		    unsigned nr_virtio, const char **why) __attribute__((warn_unused_result));

/* The KVM capabilities this architecture needs besides the core's:
 * kvm_open checks both tables the same way and names one a host lacks. */
struct kvm_cap_need {
	int cap;
	const char *name;
};
extern const struct kvm_cap_need arch_kvm_caps[];
extern const size_t arch_nr_kvm_caps;
/* Right after KVM_CREATE_VM, before memory slots: the in-kernel interrupt
 * controller and timers, the addresses KVM keeps for itself. 0 or -errno
 * with *why the ioctl that failed. */
int arch_vm_create(int vm_fd, const char **why) __attribute__((warn_unused_result));

/* The platform's own devices: the console UART (its bus, its interrupt
 * line), the boot timer's window, and whatever else this machine has
 * (x86: the i8042, whose reset ends the VM through reset(opaque)). The
 * devices are initialised by the caller but for the architecture's own. */
struct arch_platform {
	struct bus *pio, *mmio;
	struct serial *serial;
	struct boot_timer *boot_timer;
	void (*reset)(void *opaque);
	void *opaque;
};
int arch_add_devices(struct arch_vm *a, const struct arch_platform *p)
	__attribute__((warn_unused_result));
/* The interrupt line the console UART raises (kvm_irq_line). */
unsigned arch_serial_irq(void);

/* Before the vCPUs of VM vm_fd: the CPU description they get, this
 * host's (s NULL) or the snapshot's, and what needs their number (arm64:
 * the GICv3). 0 or -errno with *why. */
int arch_cpus_prepare(struct arch_vm *a, int kvm_sys_fd, int vm_fd, unsigned nr_vcpus,
		      const struct arch_snapshot *s, const char **why)
	__attribute__((warn_unused_result));
/* vCPU index of nr_vcpus, created (in index order): its CPU description,
 * and with boot its registers for the kernel's entry (the boot CPU) or for
 * waiting to be started (the others). Restored (boot false), the registers
 * come later from arch_snapshot_restore. 0 or -errno. */
int arch_vcpu_init(struct arch_vm *a, int vcpu_fd, unsigned index, unsigned nr_vcpus, bool boot)
	__attribute__((warn_unused_result));
/* The guest's program counter, for a fatal exit's log line (0 unknown). */
uint64_t arch_vcpu_pc(int vcpu_fd);

/* Save: the VM-wide state (interrupt controller, timers, clock), each of
 * the n parked vCPUs, and the CPU description, as snapshot sections. */
int arch_snapshot_save(struct arch_vm *a, int kvm_sys_fd, int vm_fd, const struct vcpu *vcpus,
		       unsigned n, struct snap_writer *w, const char **why)
	__attribute__((warn_unused_result));
/* The architecture's own devices (x86: the i8042), as sections. */
int arch_devices_save(const struct arch_vm *a, struct snap_writer *w, const char **why)
	__attribute__((warn_unused_result));

/* Load: what the state file holds for this architecture, checked, for a
 * VM of nr_vcpus (every section present and well formed). Touches no
 * KVM. 0 or -errno with *why (-EBADMSG a bad or missing section). */
int arch_snapshot_load(const struct snap_file *f, unsigned nr_vcpus, struct arch_snapshot **out,
		       const char **why) __attribute__((warn_unused_result));
void arch_snapshot_free(struct arch_snapshot *s);
/* Whether this host can run the snapshot's guest (x86: every CPU feature
 * it was given; arm64: KVM's CPU target, which KVM names per VM: vm_fd is
 * the VM, made but empty). 0, or -ENOTSUP with *why naming what differs. */
int arch_snapshot_check_host(const struct arch_snapshot *s, int kvm_sys_fd, int vm_fd,
			     const char **why)
	__attribute__((warn_unused_result));
/* Restore: the architecture's devices, then the VM-wide state, then each
 * vCPU's, before any guest code runs. 0 or -errno with *why. */
int arch_devices_restore(struct arch_vm *a, const struct snap_file *f, const char **why)
	__attribute__((warn_unused_result));
int arch_snapshot_restore(struct arch_vm *a, const struct snap_file *f, int vm_fd,
			  const struct vcpu *vcpus, unsigned n, const char **why)
	__attribute__((warn_unused_result));

#endif
