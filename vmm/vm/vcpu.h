/* vcpu.h - one thread per vCPU: its registers set up, then KVM_RUN with each exit dispatched to a bus; parked for a pause. */
#ifndef MAYFLY_VM_VCPU_H
#define MAYFLY_VM_VCPU_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/kvm.h>

#include "vm/bus.h"

#define VCPU_EXIT_REASONS 64   /* KVM exit reasons are small numbers */

/* What the vCPUs of one VM share, and all they know of it: the VM owns
 * one, fills the first block before vcpu_init and keeps it until every
 * vCPU is destroyed. The rest is the gate they wait at: closed until
 * vcpu_release, shut while a pause holds them parked, open for good at
 * vcpu_end. */
struct vcpu_shared {
	int vm_fd;                 /* KVM_CREATE_VCPU */
	size_t run_size;           /* the size of each kvm_run mapping */
	struct bus *pio, *mmio;    /* where PIO and MMIO exits go */
	bool ram_file_backed;      /* guest RAM is a snapshot's memory file, mapped */
	/* Ends the VM with code and a one-line reason (first caller wins);
	 * any thread, never blocks. */
	void (*stop)(void *opaque, int code, const char *reason);
	void *stop_opaque;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool released;             /* under lock: vCPUs may enter KVM_RUN */
	unsigned parked;           /* under lock */
	_Atomic bool pausing;
	_Atomic bool ending;       /* the VM ends: every vCPU leaves */
	_Atomic uint64_t first_run_ns;   /* vcpu0 entered KVM_RUN the first time */
};

struct vcpu {
	struct vcpu_shared *sh;
	unsigned index;            /* also its APIC id */
	int fd;
	struct kvm_run *run;
	pthread_t thread;
	bool started;
	uint64_t exits[VCPU_EXIT_REASONS];   /* by KVM exit reason; read after join */
};

/* The gate's lock and condition, once; the first block is the caller's. */
void vcpu_shared_init(struct vcpu_shared *sh);

/* Create vCPU `index` and map its kvm_run; its registers are the
 * architecture's (arch_vcpu_init). 0 or -errno. */
int vcpu_init(struct vcpu *vcpu, struct vcpu_shared *sh, unsigned index)
	__attribute__((warn_unused_result));
/* Its thread, waiting at the gate until vcpu_release. 0 or -errno. */
int vcpu_start(struct vcpu *vcpu) __attribute__((warn_unused_result));
/* Make a running vCPU leave KVM_RUN promptly (thread_kick). */
void vcpu_kick(struct vcpu *vcpu);
void vcpu_join(struct vcpu *vcpu);
void vcpu_destroy(struct vcpu *vcpu);

/* Complete an exit that needs user space's answer (a PIO or MMIO read whose
 * data was filled in: it reaches its register on the next KVM_RUN) without
 * running guest code: KVM_RUN with immediate_exit, on every architecture.
 * Call it on a paused vCPU before its state is saved, or the instruction in
 * flight is lost. 0 or -errno. */
int vcpu_settle(int vcpu_fd, struct kvm_run *run) __attribute__((warn_unused_result));

/* Let the started vCPUs enter KVM_RUN: once every thread is confined. */
void vcpu_release(struct vcpu_shared *sh);
/* The VM ends: waiting and parked vCPUs leave, running ones at their
 * next exit (vcpu_kick them). Any thread, never blocks for long. */
void vcpu_end(struct vcpu_shared *sh);
/* Kick the n vCPUs out of KVM_RUN, their in-flight PIO/MMIO completed,
 * and wait until all are parked: 0, or -ECANCELED when the VM ended
 * first. Any thread but a vCPU's, while they run. */
int vcpu_pause_all(struct vcpu_shared *sh, struct vcpu *vcpus, unsigned n);
/* Let parked vCPUs run again. */
void vcpu_resume_all(struct vcpu_shared *sh);

/* The VM exits of the n (joined) vCPUs added up by reason. */
void vcpu_exit_totals(const struct vcpu *vcpus, unsigned n, uint64_t totals[VCPU_EXIT_REASONS]);
/* A reason's short name: io, mmio, intr, shutdown, system-event,
 * internal-error, fail-entry, or "other" for the rest. */
const char *vcpu_exit_name(int reason);

/* Log the VM exits of the n (joined) vCPUs by reason, then by device. */
void vcpu_log_exit_stats(const struct vcpu *vcpus, unsigned n);

#endif
