/* state_codec.h - an arm64 snapshot's payloads, encoded and checked: each vCPU's registers and power state, the GICv3's registers. No KVM here: unit-tested on every host. */
#ifndef MAYFLY_ARM64_STATE_CODEC_H
#define MAYFLY_ARM64_STATE_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "snapshot/codec.h"

#define ARM64_REGS_MAX      2048u   /* KVM lists about 500 for a vCPU without SVE */
#define ARM64_REG_BYTES_MAX 16u     /* up to U128: the FP/SIMD V registers */
#define ARM64_EVENTS_SIZE   64u     /* struct kvm_vcpu_events on arm64 */
#define ARM64_GIC_REGS_MAX  65536u
#define ARM64_MP_STATE_MAX  16u     /* KVM_MP_STATE_* */
/* A register id's architecture byte on arm64 (KVM_REG_ARM64). */
#define ARM64_REG_ARCH      0x6000000000000000ULL
#define ARM64_REG_ARCH_MASK 0xff00000000000000ULL

/* The GICv3's register groups a snapshot holds (KVM_DEV_ARM_VGIC_GRP_*). */
enum arm64_gic_group {
	ARM64_GICREG_DIST = 1,       /* distributor registers, 32-bit */
	ARM64_GICREG_REDIST = 5,     /* a redistributor's, 32-bit */
	ARM64_GICREG_CPU = 6, /* a CPU interface's ICC_* registers, 64-bit */
	ARM64_GICREG_LEVEL = 7,      /* 32 input lines' levels, 32-bit */
};

/* KVM's size of a register from its id (KVM_REG_SIZE: 1 << bits 52-55). */
static inline size_t arm64_reg_size(uint64_t id)
{
	return (size_t)1 << ((id >> 52) & 0xf);
}

/* One register as KVM_GET_ONE_REG gave it: its id and its bytes. */
struct arm64_reg {
	uint64_t id;
	uint8_t value[ARM64_REG_BYTES_MAX];
};

/* One vCPU: every register KVM lists for it (core, system, FP/SIMD, the
 * timer's, firmware), its power state, its pending SError if KVM told. */
struct arm64_vcpu_state {
	uint32_t mp_state;
	uint32_t has_events;
	uint8_t events[ARM64_EVENTS_SIZE];
	uint32_t nregs;
	struct arm64_reg *regs;   /* malloc'd; arm64_vcpu_state_free */
};

/* One GICv3 register: KVM_{GET,SET}_DEVICE_ATTR's group, attr and value. */
struct arm64_gic_reg {
	uint32_t group;
	uint64_t attr;
	uint64_t value;
};

/* The VM-wide state: the host's CPU target it ran on, the GIC's number of
 * interrupts, and its registers in the order a restore writes them. */
struct arm64_vm_state {
	uint32_t target;
	uint32_t nr_irqs;
	uint32_t ngic;
	struct arm64_gic_reg *gic;   /* malloc'd; arm64_vm_state_free */
};

void arm64_vcpu_state_encode(const struct arm64_vcpu_state *s, struct snap_out *o);
/* Every field checked: a register of another architecture or larger than
 * 16 bytes, too many, an unknown power state, bytes left over or missing:
 * -EBADMSG with *why. On failure s holds nothing. */
int arm64_vcpu_state_decode(struct arm64_vcpu_state *s, const void *data, size_t len,
			    const char **why) __attribute__((warn_unused_result));
void arm64_vcpu_state_free(struct arm64_vcpu_state *s);

void arm64_vm_state_encode(const struct arm64_vm_state *s, struct snap_out *o);
/* The same: a group not listed above, a 32-bit register's value wider,
 * an interrupt count outside 64..1024 or not a multiple of 32. */
int arm64_vm_state_decode(struct arm64_vm_state *s, const void *data, size_t len,
			  const char **why) __attribute__((warn_unused_result));
void arm64_vm_state_free(struct arm64_vm_state *s);

#endif
