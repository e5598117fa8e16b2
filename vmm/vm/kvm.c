/* kvm.c - open /dev/kvm, check capabilities, create the VM with its interrupt controller and memory. */
#include "vm/kvm.h"
#include "vm/arch.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* Linux 6.10's; older headers (Debian 12's) lack it. */
#ifndef KVM_CAP_PRE_FAULT_MEMORY
#define KVM_CAP_PRE_FAULT_MEMORY 236
struct kvm_pre_fault_memory {
	__u64 gpa;
	__u64 size;
	__u64 flags;
	__u64 padding[5];
};
#define KVM_PRE_FAULT_MEMORY _IOWR(KVMIO, 0xd5, struct kvm_pre_fault_memory)
#endif

/* Every capability mayfly relies on, checked up front so a host that lacks
 * one fails at start with its name rather than later with an odd errno;
 * then the architecture's own (arch_kvm_caps). */
static const struct kvm_cap_need caps_needed[] = {
	{ KVM_CAP_USER_MEMORY, "KVM_CAP_USER_MEMORY" },
	{ KVM_CAP_IMMEDIATE_EXIT, "KVM_CAP_IMMEDIATE_EXIT" },
	{ KVM_CAP_IOEVENTFD, "KVM_CAP_IOEVENTFD" },
	{ KVM_CAP_IRQFD, "KVM_CAP_IRQFD" },
};

/* The name of the first capability of caps[0, n) the host lacks, or NULL. */
static const char *missing_cap(int sys_fd, const struct kvm_cap_need *caps, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (ioctl(sys_fd, KVM_CHECK_EXTENSION, caps[i].cap) <= 0)
			return caps[i].name;
	return NULL;
}

int kvm_open(struct kvm *kvm, const char *device, const char **why)
{
	int rc;

	memset(kvm, 0, sizeof(*kvm));
	kvm->vm_fd = -1;
	kvm->sys_fd = open(device, O_RDWR | O_CLOEXEC);
	if (kvm->sys_fd < 0) {
		rc = -errno;
		*why = rc == -ENOENT ? "KVM device not found (is the kvm module loaded?)" :
		       (rc == -EACCES || rc == -EPERM) ?
		       "no permission to open the KVM device (add yourself to group kvm)" :
		       "cannot open the KVM device";
		return rc;
	}
	if (ioctl(kvm->sys_fd, KVM_GET_API_VERSION, 0) != KVM_API_VERSION) {
		*why = "KVM API version is not 12";
		rc = -ENOTSUP;
		goto err_sys_fd;
	}
	if ((*why = missing_cap(kvm->sys_fd, caps_needed,
				sizeof(caps_needed) / sizeof(caps_needed[0]))) ||
	    (*why = missing_cap(kvm->sys_fd, arch_kvm_caps, arch_nr_kvm_caps))) {
		rc = -ENOTSUP;
		goto err_sys_fd;
	}
	kvm->run_size = ioctl(kvm->sys_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (kvm->run_size < (int)sizeof(struct kvm_run)) {
		*why = "KVM_GET_VCPU_MMAP_SIZE";
		rc = -ENOTSUP;
		goto err_sys_fd;
	}
	kvm->max_vcpus = ioctl(kvm->sys_fd, KVM_CHECK_EXTENSION, KVM_CAP_MAX_VCPUS);
	if (kvm->max_vcpus <= 0)
		kvm->max_vcpus = ioctl(kvm->sys_fd, KVM_CHECK_EXTENSION, KVM_CAP_NR_VCPUS);
	if (kvm->max_vcpus <= 0)
		kvm->max_vcpus = 4;   /* the documented floor when neither cap answers */
	return 0;

err_sys_fd:
	close(kvm->sys_fd);
	kvm->sys_fd = -1;
	return rc;
}

/* Guest RAM as one memory slot per region, with `flags`. -1 with errno. */
static int set_memory_slots(struct kvm *kvm, const struct guest_mem *mem, uint32_t flags)
{
	for (int i = 0; i < mem->nr_regions; i++) {
		struct kvm_userspace_memory_region region = {
			.slot = (uint32_t)i,
			.flags = flags,
			.guest_phys_addr = mem->regions[i].gpa,
			.memory_size = mem->regions[i].size,
			.userspace_addr = (uint64_t)(uintptr_t)mem->regions[i].hva,
		};

		if (ioctl(kvm->vm_fd, KVM_SET_USER_MEMORY_REGION, &region) < 0)
			return -1;
	}
	return 0;
}

int kvm_create_vm(struct kvm *kvm, const struct guest_mem *mem, const char **why)
{
	int rc;

	kvm->vm_fd = ioctl(kvm->sys_fd, KVM_CREATE_VM, 0);
	if (kvm->vm_fd < 0) {
		*why = "KVM_CREATE_VM";
		return -errno;
	}
	rc = arch_vm_create(kvm->vm_fd, why);
	if (!rc && set_memory_slots(kvm, mem, 0) < 0) {
		*why = "KVM_SET_USER_MEMORY_REGION";
		rc = -errno;
	}
	if (!rc)
		return 0;
	close(kvm->vm_fd);
	kvm->vm_fd = -1;
	return rc;
}

int kvm_dirty_log_start(struct kvm *kvm, const struct guest_mem *mem)
{
	return set_memory_slots(kvm, mem, KVM_MEM_LOG_DIRTY_PAGES) < 0 ? -errno : 0;
}

int kvm_dirty_log_get(struct kvm *kvm, const struct guest_mem *mem, uint8_t *bitmap)
{
	uint64_t base = 0;

	for (int i = 0; i < mem->nr_regions; i++) {
		uint64_t pages = mem->regions[i].size / MEM_PAGE_SIZE;
		/* KVM writes whole 64-bit words. */
		uint64_t *slot = calloc((size_t)((pages + 63) / 64), sizeof(uint64_t));
		struct kvm_dirty_log log = { .slot = (uint32_t)i, .dirty_bitmap = slot };

		if (!slot)
			return -ENOMEM;
		if (ioctl(kvm->vm_fd, KVM_GET_DIRTY_LOG, &log) < 0) {
			int rc = -errno;

			free(slot);
			return rc;
		}
		for (uint64_t p = 0; p < pages; p++)
			if (slot[p / 64] & (1ULL << (p % 64)))
				bitmap[(base + p) / 8] |= (uint8_t)(1u << ((base + p) % 8));
		free(slot);
		base += pages;
	}
	return 0;
}

int kvm_irq_line(struct kvm *kvm, unsigned irq, int level)
{
	struct kvm_irq_level line = { .irq = irq, .level = (uint32_t)!!level };

	return ioctl(kvm->vm_fd, KVM_IRQ_LINE, &line) < 0 ? -errno : 0;
}

int kvm_add_ioeventfd(struct kvm *kvm, uint64_t addr, uint32_t len, uint64_t datamatch, int fd)
{
	struct kvm_ioeventfd ioev = {
		.datamatch = datamatch, .addr = addr, .len = len, .fd = fd,
		.flags = KVM_IOEVENTFD_FLAG_DATAMATCH,
	};

	return ioctl(kvm->vm_fd, KVM_IOEVENTFD, &ioev) < 0 ? -errno : 0;
}

int kvm_add_irqfd(struct kvm *kvm, unsigned gsi, int fd)
{
	struct kvm_irqfd irqfd = { .fd = (uint32_t)fd, .gsi = gsi };

	return ioctl(kvm->vm_fd, KVM_IRQFD, &irqfd) < 0 ? -errno : 0;
}

bool kvm_can_pre_fault(const struct kvm *kvm)
{
	return ioctl(kvm->vm_fd, KVM_CHECK_EXTENSION, KVM_CAP_PRE_FAULT_MEMORY) > 0;
}

int kvm_pre_fault(int vcpu_fd, uint64_t gpa, uint64_t size)
{
	struct kvm_pre_fault_memory range = { .gpa = gpa, .size = size };

	/* Interrupted, KVM returns what is left in range: go on from there. */
	while (range.size) {
		if (ioctl(vcpu_fd, KVM_PRE_FAULT_MEMORY, &range) == 0)
			return 0;
		if (errno != EINTR && errno != EAGAIN)
			return -errno;
	}
	return 0;
}

void kvm_close(struct kvm *kvm)
{
	if (kvm->vm_fd >= 0)
		close(kvm->vm_fd);
	if (kvm->sys_fd >= 0)
		close(kvm->sys_fd);
	kvm->vm_fd = kvm->sys_fd = -1;
}
