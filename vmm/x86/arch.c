/* arch.c - x86-64 behind the VM core's contract (vm/arch.h): loaders, boot tables, CPUID, PIT, i8042 and their snapshot sections. */
#include "vm/arch.h"
#include "vm/bus.h"
#include "vm/config.h"
#include "vm/vcpu.h"
#include "devices/boot_timer.h"
#include "devices/i8042.h"
#include "devices/serial.h"
#include "lib/errmsg.h"
#include "x86/boot.h"
#include "x86/cpu.h"
#include "x86/layout.h"
#include "x86/vcpu_state.h"
#include "x86/vm_state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

_Static_assert(CONFIG_MAX_MEM_MIB <= LAYOUT_MEM_MAX_MIB, "--mem limit fits the layout");
_Static_assert(CONFIG_CMDLINE_MAX == LAYOUT_CMDLINE_MAX, "one command-line limit");
_Static_assert(VM_MAX_VIRTIO <= LAYOUT_VIRTIO_MAX_DEVICES, "a window and a line per device");
_Static_assert(ARCH_VIRTIO_WINDOW == LAYOUT_VIRTIO_MMIO_SIZE, "one window size");

struct arch_vm {
	struct kernel_image kernel;
	struct kvm_cpuid2 *cpuid;   /* the table every vCPU got (before its patch) */
	struct i8042 i8042;
};

struct arch_snapshot {
	struct kvm_cpuid2 *cpuid;   /* the table the guest was given */
};

const struct mem_layout *arch_ram_layout(void)
{
	static const struct mem_layout ram = LAYOUT_RAM_SLOTS;

	return &ram;
}

struct arch_vm *arch_vm_new(void)
{
	return calloc(1, sizeof(struct arch_vm));
}

void arch_vm_free(struct arch_vm *a)
{
	if (a)
		free(a->cpuid);
	free(a);
}

int arch_load_kernel(struct arch_vm *a, const struct guest_mem *mem, const uint8_t *data,
		     size_t size, const char **why)
{
	return boot_load_kernel(mem, data, size, &a->kernel, why);
}

int arch_load_initrd(struct arch_vm *a, const struct guest_mem *mem, const uint8_t *data,
		     size_t size, uint64_t *gpa, const char **why)
{
	return boot_load_initrd(mem, &a->kernel, data, size, gpa, why);
}

void arch_describe_kernel(const struct arch_vm *a, char *out, size_t len)
{
	static const char *const formats[] = {
		[KERNEL_ELF64] = "ELF", [KERNEL_BZIMAGE] = "bzImage", [KERNEL_PVH] = "ELF (PVH)",
	};

	snprintf(out, len, "%s, entry 0x%llx, [0x%llx, 0x%llx)", formats[a->kernel.format],
		 (unsigned long long)a->kernel.entry, (unsigned long long)a->kernel.load_start,
		 (unsigned long long)a->kernel.load_end);
}

uint64_t arch_virtio_addr(unsigned slot)
{
	return LAYOUT_VIRTIO_ADDR(slot);
}

unsigned arch_virtio_irq(unsigned slot)
{
	return LAYOUT_VIRTIO_IRQ(slot);
}

bool arch_virtio_on_cmdline(void)
{
	return true;   /* CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES: no ACPI or device tree needed */
}

/* The zero page or PVH start info with the command line, page tables, MP table. */
int arch_write_boot(struct arch_vm *a, const struct guest_mem *mem, const char *cmdline,
		    uint64_t initrd_gpa, uint64_t initrd_size, unsigned nr_vcpus,
		    unsigned nr_virtio, const char **why)
{
	int rc = boot_write_params(mem, &a->kernel, cmdline, initrd_gpa, initrd_size, why);

	(void)nr_virtio;   /* on the command line */
	if (rc)
		return rc;
	/* PVH enters with paging off: it needs the GDT but no page tables. */
	if (regs_write_boot_tables(mem, a->kernel.format != KERNEL_PVH))
		return errmsg_why(why, -EFAULT, "guest RAM too small for the boot page tables");
	if (mptable_write(mem, nr_vcpus))
		return errmsg_why(why, -EFAULT, "cannot write the MP table");
	return 0;
}

const struct kvm_cap_need arch_kvm_caps[] = {
	{ KVM_CAP_IRQCHIP, "KVM_CAP_IRQCHIP" },
	{ KVM_CAP_PIT2, "KVM_CAP_PIT2" },
	{ KVM_CAP_SET_TSS_ADDR, "KVM_CAP_SET_TSS_ADDR" },
	{ KVM_CAP_SET_IDENTITY_MAP_ADDR, "KVM_CAP_SET_IDENTITY_MAP_ADDR" },
	{ KVM_CAP_EXT_CPUID, "KVM_CAP_EXT_CPUID" },
	{ KVM_CAP_MP_STATE, "KVM_CAP_MP_STATE" },
	{ KVM_CAP_VCPU_EVENTS, "KVM_CAP_VCPU_EVENTS" },
};
const size_t arch_nr_kvm_caps = sizeof(arch_kvm_caps) / sizeof(arch_kvm_caps[0]);

/* The in-kernel irqchip (PIC, IOAPIC, LAPICs) and PIT, and the pages
 * Intel VMX needs for real mode, in the MMIO hole. */
int arch_vm_create(int vm_fd, const char **why)
{
	struct kvm_pit_config pit = { .flags = KVM_PIT_SPEAKER_DUMMY };
	uint64_t identity = LAYOUT_KVM_IDENTITY_MAP;

	if (ioctl(vm_fd, KVM_SET_TSS_ADDR, (unsigned long)LAYOUT_KVM_TSS) < 0)
		return *why = "KVM_SET_TSS_ADDR", -errno;
	if (ioctl(vm_fd, KVM_SET_IDENTITY_MAP_ADDR, &identity) < 0)
		return *why = "KVM_SET_IDENTITY_MAP_ADDR", -errno;
	if (ioctl(vm_fd, KVM_CREATE_IRQCHIP, 0) < 0)
		return *why = "KVM_CREATE_IRQCHIP", -errno;
	if (ioctl(vm_fd, KVM_CREATE_PIT2, &pit) < 0)
		return *why = "KVM_CREATE_PIT2", -errno;
	return 0;
}

/* COM1 and the i8042 on ports, the boot timer in the MMIO hole. */
int arch_add_devices(struct arch_vm *a, const struct arch_platform *p)
{
	i8042_init(&a->i8042, p->reset, p->opaque);
	if (bus_register(p->pio, LAYOUT_COM1_PORT, 8, serial_io, p->serial, "com1") ||
	    bus_register(p->pio, LAYOUT_I8042_PORT, 1, i8042_data_io, &a->i8042, "i8042") ||
	    bus_register(p->pio, LAYOUT_I8042_CMD_PORT, 1, i8042_cmd_io, &a->i8042, "i8042") ||
	    bus_register(p->mmio, LAYOUT_BOOT_TIMER, LAYOUT_BOOT_TIMER_SIZE, boot_timer_io,
			 p->boot_timer, "boot-timer"))
		return -EEXIST;
	return 0;
}

unsigned arch_serial_irq(void)
{
	return LAYOUT_COM1_IRQ;
}

static struct kvm_cpuid2 *cpuid_copy(const struct kvm_cpuid2 *c)
{
	size_t size = sizeof(*c) + c->nent * sizeof(c->entries[0]);
	struct kvm_cpuid2 *copy = malloc(size);

	if (copy)
		memcpy(copy, c, size);
	return copy;
}

/* The CPUID table KVM offers (and the TSC-deadline timer it emulates),
 * or, restored, the table the snapshot's guest had. */
int arch_cpus_prepare(struct arch_vm *a, int kvm_sys_fd, int vm_fd, unsigned nr_vcpus,
		      const struct arch_snapshot *s, const char **why)
{
	int rc = 0;

	(void)vm_fd, (void)nr_vcpus;   /* each vCPU patches its own APIC id in */

	if (s) {
		a->cpuid = cpuid_copy(s->cpuid);
		rc = a->cpuid ? 0 : -ENOMEM;
	} else {
		rc = cpuid_get_supported(kvm_sys_fd, &a->cpuid);
		if (!rc && ioctl(kvm_sys_fd, KVM_CHECK_EXTENSION, KVM_CAP_TSC_DEADLINE_TIMER) > 0)
			cpuid_enable_tsc_deadline(a->cpuid);
	}
	return rc ? errmsg_why(why, rc, "cannot get the CPUID table: %s", strerror(-rc)) : 0;
}

/* Each vCPU sees its own APIC id in CPUID, so each gets its own copy. */
static int set_cpuid(const struct kvm_cpuid2 *cpuid, int vcpu_fd, unsigned index,
		     unsigned nr_vcpus)
{
	struct kvm_cpuid2 *mine = cpuid_copy(cpuid);
	int rc;

	if (!mine)
		return -ENOMEM;
	cpuid_patch(mine, index, nr_vcpus);
	rc = ioctl(vcpu_fd, KVM_SET_CPUID2, mine) < 0 ? -errno : 0;
	free(mine);
	return rc;
}

int arch_vcpu_init(struct arch_vm *a, int vcpu_fd, unsigned index, unsigned nr_vcpus, bool boot)
{
	int rc = set_cpuid(a->cpuid, vcpu_fd, index, nr_vcpus);

	if (rc || !boot)
		return rc;
	rc = regs_setup_msrs(vcpu_fd);
	if (!rc)
		rc = regs_setup_lapic(vcpu_fd);
	/* Other vCPUs wait in the LAPIC for INIT-SIPI, as on real hardware. */
	if (!rc && index == 0)
		rc = regs_setup_boot_cpu(vcpu_fd, a->kernel.format, a->kernel.entry);
	return rc;
}

uint64_t arch_vcpu_pc(int vcpu_fd)
{
	struct kvm_regs regs;

	return ioctl(vcpu_fd, KVM_GET_REGS, &regs) == 0 ? regs.rip : 0;
}

/* ---- snapshots: SNAP_SEC_VM (irqchip, PIT, clock), a SNAP_SEC_VCPU
 * each, SNAP_SEC_CPUID, SNAP_SEC_I8042 ---- */

int arch_snapshot_save(struct arch_vm *a, int kvm_sys_fd, int vm_fd, const struct vcpu *vcpus,
		       unsigned n, struct snap_writer *w, const char **why)
{
	struct vcpu_msr_list msrs;
	struct vm_state vs;
	struct snap_out o;
	int rc = vcpu_state_msr_list(kvm_sys_fd, &msrs, why);

	if (!rc)
		rc = vm_state_save(vm_fd, &vs, why);
	if (rc)
		return rc;
	snap_out_init(&o);
	vm_state_encode(&vs, &o);
	rc = snap_writer_add_out(w, SNAP_SEC_VM, &o, why);
	for (unsigned i = 0; !rc && i < n; i++) {
		struct vcpu_state cs;

		rc = vcpu_state_save(vm_fd, vcpus[i].fd, &msrs, &cs, why);
		if (rc)
			break;
		snap_out_init(&o);
		vcpu_state_encode(&cs, &o);
		vcpu_state_free(&cs);
		rc = snap_writer_add_out(w, SNAP_SEC_VCPU(i), &o, why);
	}
	if (rc)
		return rc;
	snap_out_init(&o);
	cpuid_encode(a->cpuid, &o);
	return snap_writer_add_out(w, SNAP_SEC_CPUID, &o, why);
}

int arch_devices_save(const struct arch_vm *a, struct snap_writer *w, const char **why)
{
	struct snap_out o;

	snap_out_init(&o);
	i8042_save(&a->i8042, &o);
	return snap_writer_add_out(w, SNAP_SEC_I8042, &o, why);
}

/* A section the restore needs. */
static const struct snap_section *need(const struct snap_file *f, uint32_t type, const char *what,
				       const char **why)
{
	const struct snap_section *sec = snap_find(f, type);

	if (!sec)
		errmsg_why(why, -EBADMSG, "snapshot state has no %s section", what);
	return sec;
}

int arch_snapshot_load(const struct snap_file *f, unsigned nr_vcpus, struct arch_snapshot **out,
		       const char **why)
{
	const struct snap_section *sec = need(f, SNAP_SEC_CPUID, "CPUID", why);
	struct arch_snapshot *s;
	int rc;

	*out = NULL;
	if (snap_find(f, SNAP_SEC_ARM64))
		return errmsg_why(why, -ENOTSUP, "this is a snapshot of an arm64 VM; this mayfly "
				  "runs x86-64 VMs");
	if (!sec || !need(f, SNAP_SEC_VM, "VM", why))
		return -EBADMSG;
	for (unsigned i = 0; i < nr_vcpus; i++)
		if (!snap_find(f, SNAP_SEC_VCPU(i)))
			return errmsg_why(why, -EBADMSG, "snapshot state has no section for vcpu %u", i);
	s = calloc(1, sizeof(*s));
	if (!s)
		return errmsg_why(why, -ENOMEM, "out of memory");
	rc = cpuid_decode(sec->data, sec->len, &s->cpuid, why);
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
		free(s->cpuid);
	free(s);
}

int arch_snapshot_check_host(const struct arch_snapshot *s, int kvm_sys_fd, int vm_fd,
			     const char **why)
{
	struct kvm_cpuid2 *host = NULL;
	bool deadline = ioctl(kvm_sys_fd, KVM_CHECK_EXTENSION, KVM_CAP_TSC_DEADLINE_TIMER) > 0;
	int rc = cpuid_get_supported(kvm_sys_fd, &host);

	(void)vm_fd;   /* x86's CPU description is /dev/kvm's, not the VM's */
	if (rc)
		return errmsg_why(why, rc, "KVM_GET_SUPPORTED_CPUID: %s", strerror(-rc));
	rc = cpuid_check_host(s->cpuid, host, deadline, why);
	free(host);
	return rc;
}

int arch_devices_restore(struct arch_vm *a, const struct snap_file *f, const char **why)
{
	const struct snap_section *sec = need(f, SNAP_SEC_I8042, "i8042", why);

	return sec ? i8042_restore(&a->i8042, sec->data, sec->len, why) : -EBADMSG;
}

/* After the devices: the irqchip, PIT and clock, then each vCPU with the
 * snapshot's CPUID (arch_cpus_prepare took it) and its own APIC id. */
int arch_snapshot_restore(struct arch_vm *a, const struct snap_file *f, int vm_fd,
			  const struct vcpu *vcpus, unsigned n, const char **why)
{
	const struct snap_section *sec = snap_find(f, SNAP_SEC_VM);
	struct vm_state vs;
	int rc = vm_state_decode(&vs, sec->data, sec->len, why);

	if (!rc)
		rc = vm_state_restore(vm_fd, &vs, why);
	for (unsigned i = 0; !rc && i < n; i++) {
		struct kvm_cpuid2 *mine = cpuid_copy(a->cpuid);
		struct vcpu_state cs;

		sec = snap_find(f, SNAP_SEC_VCPU(i));
		rc = vcpu_state_decode(&cs, sec->data, sec->len, why);
		if (!rc && !mine) {
			vcpu_state_free(&cs);
			rc = errmsg_why(why, -ENOMEM, "out of memory");
		}
		if (rc) {
			free(mine);
			return rc;
		}
		cpuid_patch(mine, i, n);
		rc = vcpu_state_restore(vm_fd, vcpus[i].fd, mine, &cs, why);
		free(mine);
		vcpu_state_free(&cs);
	}
	return rc;
}
