/* arch.c - arm64 behind the VM core's contract (vm/arch.h): the Image, the device tree, PSCI vCPUs, the GICv3, a 16550 on MMIO. */
#include "vm/arch.h"
#include "vm/bus.h"
#include "vm/config.h"
#include "vm/vcpu.h"
#include "devices/boot_timer.h"
#include "devices/serial.h"
#include "lib/errmsg.h"
#include "arm64/cpu.h"
#include "arm64/fdt.h"
#include "arm64/image.h"
#include "arm64/state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <unistd.h>

/* Below RAM (arm64/cpu.h has the GIC and the UART): the boot timer, then
 * the virtio-mmio windows, each with an SPI. */
#define ARM64_BOOT_TIMER      0x09010000ULL
#define ARM64_BOOT_TIMER_SIZE 0x1000ULL
#define ARM64_VIRTIO_MMIO     0x0a000000ULL
#define ARM64_UART_INTID      33          /* SPI 1 */
#define ARM64_VIRTIO_INTID    48          /* SPI 16 onwards, one a device */
#define ARM64_FDT_ROOM        (2ULL << 20)   /* RAM's last 2 MiB: the device tree */

_Static_assert(VM_MAX_VIRTIO <= ARM64_FDT_MAX_DEVICES, "every device in the tree");
_Static_assert(CONFIG_CMDLINE_MAX <= ARM64_FDT_MAX_CMDLINE, "the command line fits /chosen");

/* What a snapshot holds of the VM beyond its vCPUs. */
struct arch_snapshot {
	struct arm64_vm_state vm;
};

struct arch_vm {
	struct arm64_image kernel;
	uint64_t initrd_gpa, initrd_size;
	uint64_t fdt_gpa;
	int vm_fd, gic_fd;
	unsigned nr_vcpus;
	const struct arch_snapshot *snap;   /* restoring: what arch_cpus_prepare was given */
};

const struct mem_layout *arch_ram_layout(void)
{
	static const struct mem_layout ram = { 1, { { ARM64_RAM_BASE, 0 } } };

	return &ram;
}

struct arch_vm *arch_vm_new(void)
{
	struct arch_vm *a = calloc(1, sizeof(*a));

	if (a)
		a->vm_fd = a->gic_fd = -1;
	return a;
}

void arch_vm_free(struct arch_vm *a)
{
	if (a && a->gic_fd >= 0)
		close(a->gic_fd);
	free(a);
}

/* RAM as one region from ARM64_RAM_BASE (arch_ram_layout). */
static uint64_t ram_size(const struct guest_mem *mem)
{
	return mem->nr_regions == 1 ? mem->regions[0].size : 0;
}

int arch_load_kernel(struct arch_vm *a, const struct guest_mem *mem, const uint8_t *data,
		     size_t size, const char **why)
{
	uint64_t ram = ram_size(mem);
	int rc;

	if (ram <= ARM64_FDT_ROOM)
		return errmsg_why(why, -ENOSPC, "guest RAM is too small for an arm64 kernel");
	rc = arm64_image_place(data, size, ARM64_RAM_BASE, ram - ARM64_FDT_ROOM, &a->kernel, why);
	if (!rc && mem_write(mem, a->kernel.entry, data, size))
		rc = errmsg_why(why, -EFAULT, "the kernel does not fit in guest RAM");
	return rc;
}

/* Page-aligned, as high as it goes below the device tree's room. */
int arch_load_initrd(struct arch_vm *a, const struct guest_mem *mem, const uint8_t *data,
		     size_t size, uint64_t *gpa, const char **why)
{
	uint64_t top = ARM64_RAM_BASE + ram_size(mem) - ARM64_FDT_ROOM, at;

	if (size > top - a->kernel.end)
		return errmsg_why(why, -ENOSPC, "the initrd does not fit in guest RAM after the kernel");
	at = (top - size) & ~0xfffULL;
	if (at < a->kernel.end || mem_write(mem, at, data, size))
		return errmsg_why(why, -ENOSPC, "the initrd does not fit in guest RAM after the kernel");
	a->initrd_gpa = *gpa = at;
	a->initrd_size = size;
	return 0;
}

void arch_describe_kernel(const struct arch_vm *a, char *out, size_t len)
{
	snprintf(out, len, "arm64 Image, entry 0x%llx, text offset 0x%llx, up to 0x%llx",
		 (unsigned long long)a->kernel.entry, (unsigned long long)a->kernel.text_offset,
		 (unsigned long long)a->kernel.end);
}

uint64_t arch_virtio_addr(unsigned slot)
{
	return ARM64_VIRTIO_MMIO + (uint64_t)slot * ARCH_VIRTIO_WINDOW;
}

/* KVM_IRQFD's gsi on arm64 is the SPI's index: its interrupt ID - 32. */
unsigned arch_virtio_irq(unsigned slot)
{
	return ARM64_VIRTIO_INTID - ARM64_SPI_FIRST + slot;
}

bool arch_virtio_on_cmdline(void)
{
	return false;   /* in the device tree: a bare number is no GIC interrupt */
}

/* KVM's reset value of MPIDR_EL1 for vCPU i (its affinity levels from the
 * index, bit 31 RES1): the device tree lists what the vCPUs will report. */
static uint64_t mpidr_of(unsigned i)
{
	return 0x80000000ULL | (i & 0xfULL) | ((i >> 4 & 0xffULL) << 8) | ((i >> 12 & 0xffULL) << 16);
}

/* The device tree in RAM's last 2 MiB, x0 for the boot CPU. */
int arch_write_boot(struct arch_vm *a, const struct guest_mem *mem, const char *cmdline,
		    uint64_t initrd_gpa, uint64_t initrd_size, unsigned nr_vcpus,
		    unsigned nr_virtio, const char **why)
{
	static __thread char fdt_why[160];
	struct arm64_fdt_layout *l = calloc(1, sizeof(*l));
	uint8_t seed[32];
	void *blob;
	int rc;

	if (!l)
		return errmsg_why(why, -ENOMEM, "out of memory");
	if (nr_vcpus > ARM64_MAX_VCPUS) {
		free(l);
		return errmsg_why(why, -EINVAL, "more than %llu vCPUs on arm64",
				  (unsigned long long)ARM64_MAX_VCPUS);
	}
	a->fdt_gpa = ARM64_RAM_BASE + ram_size(mem) - ARM64_FDT_ROOM;
	blob = mem_gpa_to_hva(mem, a->fdt_gpa, ARM64_FDT_MAX_SIZE);
	*l = (struct arm64_fdt_layout){
		.mem_base = ARM64_RAM_BASE, .mem_size = ram_size(mem), .ncpus = nr_vcpus,
		.gic_dist_base = ARM64_GIC_DIST, .gic_dist_size = ARM64_GIC_DIST_SIZE,
		.gic_redist_base = ARM64_GIC_REDIST,
		.gic_redist_size = nr_vcpus * ARM64_GIC_REDIST_SIZE,
		.uart = { ARM64_UART, 0x1000, ARM64_UART_INTID },
		.ndev = nr_virtio, .cmdline = cmdline,
		.initrd_start = initrd_gpa, .initrd_size = initrd_size,
		.seed = seed, .seed_len = sizeof(seed),
	};
	for (unsigned i = 0; i < nr_vcpus; i++)
		l->mpidr[i] = mpidr_of(i);
	for (unsigned i = 0; i < nr_virtio; i++)
		l->dev[i] = (struct arm64_mmio){ arch_virtio_addr(i), ARCH_VIRTIO_WINDOW,
						 ARM64_VIRTIO_INTID + i };
	/* A fresh seed for the guest's RNG, every boot. */
	rc = getrandom(seed, sizeof(seed), 0) == (ssize_t)sizeof(seed) ? 0 : -EIO;
	if (rc)
		rc = errmsg_why(why, rc, "no random seed for the guest");
	else if (!blob)
		rc = errmsg_why(why, -ENOSPC, "guest RAM is too small for the device tree");
	else if ((rc = arm64_fdt_build(l, blob, ARM64_FDT_MAX_SIZE, fdt_why, sizeof(fdt_why))) < 0)
		*why = fdt_why;
	free(l);
	return rc < 0 ? rc : 0;
}

const struct kvm_cap_need arch_kvm_caps[] = {
	{ KVM_CAP_ARM_PSCI_0_2, "KVM_CAP_ARM_PSCI_0_2" },
	{ KVM_CAP_ONE_REG, "KVM_CAP_ONE_REG" },
	{ KVM_CAP_DEVICE_CTRL, "KVM_CAP_DEVICE_CTRL" },
};
const size_t arch_nr_kvm_caps = sizeof(arch_kvm_caps) / sizeof(arch_kvm_caps[0]);

/* The GICv3 needs the number of vCPUs: arch_cpus_prepare makes it. */
int arch_vm_create(int vm_fd, const char **why)
{
	(void)vm_fd;
	(void)why;
	return 0;
}

/* The 16550 and the boot timer on MMIO; no reset device (PSCI resets). */
int arch_add_devices(struct arch_vm *a, const struct arch_platform *p)
{
	(void)a;
	if (bus_register(p->mmio, ARM64_UART, 8, serial_io, p->serial, "uart") ||
	    bus_register(p->mmio, ARM64_BOOT_TIMER, ARM64_BOOT_TIMER_SIZE, boot_timer_io,
			 p->boot_timer, "boot-timer"))
		return -EEXIST;
	return 0;
}

/* KVM_IRQ_LINE on arm64: the type in bits 24-27, an SPI by its interrupt ID. */
unsigned arch_serial_irq(void)
{
	return (KVM_ARM_IRQ_TYPE_SPI << KVM_ARM_IRQ_TYPE_SHIFT) | ARM64_UART_INTID;
}

int arch_cpus_prepare(struct arch_vm *a, int kvm_sys_fd, int vm_fd, unsigned nr_vcpus,
		      const struct arch_snapshot *s, const char **why)
{
	(void)kvm_sys_fd;
	a->snap = s;
	a->vm_fd = vm_fd;
	a->nr_vcpus = nr_vcpus;
	a->gic_fd = arm64_gic_create(vm_fd, nr_vcpus, why);
	return a->gic_fd < 0 ? a->gic_fd : 0;
}

/* The last vCPU made, the GIC is initialised: before any KVM_RUN. */
int arch_vcpu_init(struct arch_vm *a, int vcpu_fd, unsigned index, unsigned nr_vcpus, bool boot)
{
	const char *why = "";
	int rc = arm64_vcpu_init(a->vm_fd, vcpu_fd, index, &why);

	if (!rc && boot && index == 0)
		rc = arm64_vcpu_set_entry(vcpu_fd, a->kernel.entry, a->fdt_gpa);
	if (!rc && index == nr_vcpus - 1)
		rc = arm64_gic_init(a->gic_fd, &why);
	return rc;
}

uint64_t arch_vcpu_pc(int vcpu_fd)
{
	uint64_t pc = 0;

	return arm64_core_reg_get(vcpu_fd, offsetof(struct kvm_regs, regs.pc), &pc) ? 0 : pc;
}

/* ---- snapshots: SNAP_SEC_ARM64 (the CPU target, the GICv3's registers),
 * a SNAP_SEC_VCPU each (every listed register, the power state) ---- */

int arch_snapshot_save(struct arch_vm *a, int kvm_sys_fd, int vm_fd, const struct vcpu *vcpus,
		       unsigned n, struct snap_writer *w, const char **why)
{
	int fds[ARM64_MAX_VCPUS];
	struct arm64_vm_state vs;
	struct snap_out o;
	int rc = 0;

	(void)kvm_sys_fd;
	if (n > ARM64_MAX_VCPUS)
		return errmsg_why(why, -EINVAL, "%u vCPUs", n);
	for (unsigned i = 0; !rc && i < n; i++) {
		struct arm64_vcpu_state cs;

		fds[i] = vcpus[i].fd;
		rc = arm64_vcpu_state_save(vcpus[i].fd, &cs, why);
		if (rc)
			break;
		snap_out_init(&o);
		arm64_vcpu_state_encode(&cs, &o);
		arm64_vcpu_state_free(&cs);
		rc = snap_writer_add_out(w, SNAP_SEC_VCPU(i), &o, why);
	}
	if (!rc)
		rc = arm64_vm_state_save(vm_fd, a->gic_fd, fds, n, &vs, why);
	if (rc)
		return rc;
	snap_out_init(&o);
	arm64_vm_state_encode(&vs, &o);
	arm64_vm_state_free(&vs);
	return snap_writer_add_out(w, SNAP_SEC_ARM64, &o, why);
}

/* arm64 has no devices of its own: the UART and the boot timer are the core's. */
int arch_devices_save(const struct arch_vm *a, struct snap_writer *w, const char **why)
{
	(void)a, (void)w, (void)why;
	return 0;
}

int arch_snapshot_load(const struct snap_file *f, unsigned nr_vcpus, struct arch_snapshot **out,
		       const char **why)
{
	const struct snap_section *sec = snap_find(f, SNAP_SEC_ARM64);
	struct arch_snapshot *s;
	int rc;

	*out = NULL;
	if (!sec && snap_find(f, SNAP_SEC_CPUID))
		return errmsg_why(why, -ENOTSUP, "this is a snapshot of an x86-64 VM; this mayfly "
				  "runs arm64 VMs");
	if (!sec)
		return errmsg_why(why, -EBADMSG, "snapshot state has no arm64 VM section");
	if (nr_vcpus > ARM64_MAX_VCPUS)
		return errmsg_why(why, -EBADMSG, "%u vCPUs on arm64", nr_vcpus);
	for (unsigned i = 0; i < nr_vcpus; i++)
		if (!snap_find(f, SNAP_SEC_VCPU(i)))
			return errmsg_why(why, -EBADMSG, "snapshot state has no section for vcpu %u", i);
	s = calloc(1, sizeof(*s));
	if (!s)
		return errmsg_why(why, -ENOMEM, "out of memory");
	rc = arm64_vm_state_decode(&s->vm, sec->data, sec->len, why);
	if (rc) {
		free(s);
		return rc;
	}
	*out = s;
	return 0;
}

void arch_snapshot_free(struct arch_snapshot *s)
{
	if (s)
		arm64_vm_state_free(&s->vm);
	free(s);
}

int arch_snapshot_check_host(const struct arch_snapshot *s, int kvm_sys_fd, int vm_fd,
			     const char **why)
{
	static __thread char target_why[96];
	uint32_t target;

	(void)kvm_sys_fd;
	if (arm64_preferred_target(vm_fd, &target) == 0 && target != s->vm.target) {
		snprintf(target_why, sizeof(target_why), "the snapshot was taken on another CPU "
			 "(KVM target %u; this host's is %u)", s->vm.target, target);
		*why = target_why;
		return -ENOTSUP;
	}
	return 0;
}

int arch_devices_restore(struct arch_vm *a, const struct snap_file *f, const char **why)
{
	(void)a, (void)f, (void)why;
	return 0;
}

/* Each vCPU's registers, then the GIC (its redistributors are found by
 * the MPIDRs just restored). */
int arch_snapshot_restore(struct arch_vm *a, const struct snap_file *f, int vm_fd,
			  const struct vcpu *vcpus, unsigned n, const char **why)
{
	int rc = 0;

	(void)vm_fd;
	for (unsigned i = 0; !rc && i < n; i++) {
		const struct snap_section *sec = snap_find(f, SNAP_SEC_VCPU(i));
		struct arm64_vcpu_state cs;

		rc = arm64_vcpu_state_decode(&cs, sec->data, sec->len, why);
		if (rc)
			break;
		rc = arm64_vcpu_state_restore(vcpus[i].fd, &cs, why);
		arm64_vcpu_state_free(&cs);
	}
	return rc ? rc : arm64_vm_state_restore(a->gic_fd, &a->snap->vm, why);
}
