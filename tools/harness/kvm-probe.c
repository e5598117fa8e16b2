/* kvm-probe: proves /dev/kvm runs guest code (the nested harness's smoke check). */

/*
 * A real-mode guest of four instructions writes 'K' to port 0x3f8 and halts; the
 * probe checks every step (API version, VM, memory, vCPU, the I/O exit, the halt) and
 * says which one failed. Exit 0 when all passed, 1 otherwise.
 * Build: gcc -O2 -Wall -o kvm-probe tools/harness/kvm-probe.c
 */

#define _GNU_SOURCE /* O_CLOEXEC and MAP_ANONYMOUS also under -std=c11 */

#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#define GUEST_BASE 0x1000u /* guest-physical address of the code page */
#define GUEST_SIZE 0x1000u
#define COM1 0x3f8u

static int fail(const char *what)
{
	fprintf(stderr, "kvm-probe: FAIL: %s: %s\n", what, errno ? strerror(errno) : "unexpected");
	return 1;
}

static const uint8_t guest_code[] = {
	0xba, 0xf8, 0x03, /* mov $0x3f8, %dx */
	0xb0, 'K',	  /* mov $'K', %al */
	0xee,		  /* out %al, (%dx) */
	0xf4,		  /* hlt */
};

int main(void)
{
	struct kvm_userspace_memory_region region;
	struct kvm_sregs sregs;
	struct kvm_regs regs;
	struct kvm_run *run;
	int kvm, vm, vcpu, api, run_size;
	uint8_t *mem;
	char byte;

	kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0)
		return fail("open /dev/kvm");
	errno = 0;
	api = ioctl(kvm, KVM_GET_API_VERSION, 0);
	if (api != KVM_API_VERSION) {
		fprintf(stderr, "kvm-probe: FAIL: KVM_GET_API_VERSION is %d, want %d\n", api,
			KVM_API_VERSION);
		return 1;
	}
	vm = ioctl(kvm, KVM_CREATE_VM, 0);
	if (vm < 0)
		return fail("KVM_CREATE_VM");

	mem = mmap(NULL, GUEST_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		return fail("mmap guest memory");
	memcpy(mem, guest_code, sizeof(guest_code));
	region = (struct kvm_userspace_memory_region){
		.slot = 0,
		.guest_phys_addr = GUEST_BASE,
		.memory_size = GUEST_SIZE,
		.userspace_addr = (uintptr_t)mem,
	};
	if (ioctl(vm, KVM_SET_USER_MEMORY_REGION, &region) < 0)
		return fail("KVM_SET_USER_MEMORY_REGION");

	vcpu = ioctl(vm, KVM_CREATE_VCPU, 0);
	if (vcpu < 0)
		return fail("KVM_CREATE_VCPU");
	run_size = ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (run_size < (int)sizeof(*run))
		return fail("KVM_GET_VCPU_MMAP_SIZE");
	run = mmap(NULL, run_size, PROT_READ | PROT_WRITE, MAP_SHARED, vcpu, 0);
	if (run == MAP_FAILED)
		return fail("mmap kvm_run");

	/* Real mode at CS:IP = 0:GUEST_BASE; the reset state has CS based at 0xffff0000. */
	if (ioctl(vcpu, KVM_GET_SREGS, &sregs) < 0)
		return fail("KVM_GET_SREGS");
	sregs.cs.base = 0;
	sregs.cs.selector = 0;
	if (ioctl(vcpu, KVM_SET_SREGS, &sregs) < 0)
		return fail("KVM_SET_SREGS");
	regs = (struct kvm_regs){ .rip = GUEST_BASE, .rflags = 0x2 };
	if (ioctl(vcpu, KVM_SET_REGS, &regs) < 0)
		return fail("KVM_SET_REGS");

	if (ioctl(vcpu, KVM_RUN, 0) < 0)
		return fail("KVM_RUN");
	if (run->exit_reason != KVM_EXIT_IO || run->io.direction != KVM_EXIT_IO_OUT ||
	    run->io.port != COM1 || run->io.size != 1 || run->io.count != 1) {
		fprintf(stderr,
			"kvm-probe: FAIL: want KVM_EXIT_IO out of 1 byte to 0x3f8, got exit %u"
			" (io dir %u port 0x%x size %u count %u)\n",
			run->exit_reason, run->io.direction, run->io.port, run->io.size,
			run->io.count);
		return 1;
	}
	byte = *((char *)run + run->io.data_offset);
	if (byte != 'K') {
		fprintf(stderr, "kvm-probe: FAIL: guest wrote 0x%02x, want 'K'\n", (uint8_t)byte);
		return 1;
	}

	if (ioctl(vcpu, KVM_RUN, 0) < 0)
		return fail("KVM_RUN after the I/O exit");
	if (run->exit_reason != KVM_EXIT_HLT) {
		fprintf(stderr, "kvm-probe: FAIL: want KVM_EXIT_HLT, got exit %u\n",
			run->exit_reason);
		return 1;
	}

	printf("kvm-probe: ok, got %c via port 0x%x\n", byte, COM1);
	return 0;
}
