/* cpu.c - arm64 vCPUs (KVM_ARM_VCPU_INIT with PSCI 0.2, registers by ONE_REG) and the in-kernel GICv3. */
#include "arm64/cpu.h"

#include <errno.h>
#include <stddef.h>
#include <linux/kvm.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* A core register's id: its offset in struct kvm_regs, in 32-bit words. */
static uint64_t core_reg_id(uint64_t offset)
{
	return KVM_REG_ARM64 | KVM_REG_SIZE_U64 | KVM_REG_ARM_CORE | (offset / sizeof(uint32_t));
}

int arm64_core_reg_get(int vcpu_fd, uint64_t offset, uint64_t *value)
{
	struct kvm_one_reg reg = { .id = core_reg_id(offset), .addr = (uint64_t)(uintptr_t)value };

	return ioctl(vcpu_fd, KVM_GET_ONE_REG, &reg) < 0 ? -errno : 0;
}

int arm64_core_reg_set(int vcpu_fd, uint64_t offset, uint64_t value)
{
	struct kvm_one_reg reg = { .id = core_reg_id(offset), .addr = (uint64_t)(uintptr_t)&value };

	return ioctl(vcpu_fd, KVM_SET_ONE_REG, &reg) < 0 ? -errno : 0;
}

int arm64_vcpu_init(int vm_fd, int vcpu_fd, unsigned index, const char **why)
{
	struct kvm_vcpu_init init = { 0 };

	if (ioctl(vm_fd, KVM_ARM_PREFERRED_TARGET, &init) < 0)
		return *why = "KVM_ARM_PREFERRED_TARGET", -errno;
	init.features[0] |= 1u << KVM_ARM_VCPU_PSCI_0_2;
	/* Secondary CPUs wait, off, for the guest's PSCI CPU_ON. */
	if (index > 0)
		init.features[0] |= 1u << KVM_ARM_VCPU_POWER_OFF;
	if (ioctl(vcpu_fd, KVM_ARM_VCPU_INIT, &init) < 0)
		return *why = "KVM_ARM_VCPU_INIT", -errno;
	return 0;
}

int arm64_vcpu_set_entry(int vcpu_fd, uint64_t pc, uint64_t x0)
{
	int rc = arm64_core_reg_set(vcpu_fd, offsetof(struct kvm_regs, regs.pc), pc);

	if (!rc)
		rc = arm64_core_reg_set(vcpu_fd, offsetof(struct kvm_regs, regs.regs[0]), x0);
	for (unsigned i = 1; !rc && i <= 3; i++)
		rc = arm64_core_reg_set(vcpu_fd, offsetof(struct kvm_regs, regs.regs[i]), 0);
	return rc;
}

int arm64_vcpu_mpidr(int vcpu_fd, uint64_t *mpidr)
{
	/* MPIDR_EL1: op0 3, op1 0, CRn 0, CRm 0, op2 5. */
	struct kvm_one_reg reg = { .id = ARM64_SYS_REG(3, 0, 0, 0, 5),
				   .addr = (uint64_t)(uintptr_t)mpidr };

	return ioctl(vcpu_fd, KVM_GET_ONE_REG, &reg) < 0 ? -errno : 0;
}

static int gic_attr(int gic_fd, uint32_t group, uint64_t attr, const void *value)
{
	struct kvm_device_attr a = { .group = group, .attr = attr,
				     .addr = (uint64_t)(uintptr_t)value };

	return ioctl(gic_fd, KVM_SET_DEVICE_ATTR, &a) < 0 ? -errno : 0;
}

int arm64_gic_create(int vm_fd, unsigned nr_vcpus, const char **why)
{
	struct kvm_create_device dev = { .type = KVM_DEV_TYPE_ARM_VGIC_V3 };
	uint64_t dist = ARM64_GIC_DIST, redist = ARM64_GIC_REDIST;
	int rc;

	if (nr_vcpus == 0 || nr_vcpus > ARM64_MAX_VCPUS)
		return *why = "too many vCPUs for the redistributor region", -EINVAL;
	if (ioctl(vm_fd, KVM_CREATE_DEVICE, &dev) < 0)
		return *why = "KVM_CREATE_DEVICE (GICv3)", -errno;
	rc = gic_attr((int)dev.fd, KVM_DEV_ARM_VGIC_GRP_ADDR, KVM_VGIC_V3_ADDR_TYPE_DIST, &dist);
	if (rc)
		*why = "the GICv3 distributor's address";
	if (!rc) {
		rc = gic_attr((int)dev.fd, KVM_DEV_ARM_VGIC_GRP_ADDR, KVM_VGIC_V3_ADDR_TYPE_REDIST,
			      &redist);
		if (rc)
			*why = "the GICv3 redistributors' address";
	}
	if (rc) {
		close((int)dev.fd);
		return rc;
	}
	return (int)dev.fd;
}

int arm64_gic_init(int gic_fd, const char **why)
{
	int rc = gic_attr(gic_fd, KVM_DEV_ARM_VGIC_GRP_CTRL, KVM_DEV_ARM_VGIC_CTRL_INIT, NULL);

	if (rc)
		*why = "KVM_DEV_ARM_VGIC_CTRL_INIT";
	return rc;
}
