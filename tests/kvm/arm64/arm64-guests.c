/* arm64-guests.c - the arm64 KVM suite: tiny guests (guests.S) run through vmm/arm64/cpu.c on a real /dev/kvm.
 *
 * Each case builds a VM as the arm64 port does (RAM at ARM64_RAM_BASE, the
 * vCPUs with PSCI 0.2, the in-kernel GICv3 created after them and
 * initialised before the first KVM_RUN), runs it with a thread per vCPU,
 * collects the bytes stored to the UART and the PSCI event that ended it,
 * and prints TAP. Runs inside tools/harness/run-arm64 (an emulated Arm
 * host with EL2), or on any arm64 host with KVM.
 */
#include "arm64/cpu.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#define RAM_SIZE (2u << 20)
#define MAX_VCPUS 2
#define OUT_MAX 256

extern const uint8_t guest_hello[], guest_hello_end[];
extern const uint8_t guest_reset[], guest_reset_end[];
extern const uint8_t guest_smp[], guest_smp_end[];

struct vm {
	int sys_fd, vm_fd, gic_fd;
	uint8_t *ram;
	unsigned nr_vcpus;
	int vcpu_fd[MAX_VCPUS];
	struct kvm_run *run[MAX_VCPUS];
	pthread_t thread[MAX_VCPUS];
	pthread_mutex_t lock;
	char out[OUT_MAX];
	size_t out_len;
	_Atomic int ended;            /* a KVM_SYSTEM_EVENT_* type + 1, or -1 on an error */
	char error[160];
};

struct vcpu_arg {
	struct vm *vm;
	unsigned index;
};

static int tests_run, tests_failed;

static void tap(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tap(bool ok, const char *fmt, ...)
{
	va_list ap;

	printf("%sok %d - ", ok ? "" : "not ", ++tests_run);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	tests_failed += !ok;
}

static void vm_fail(struct vm *vm, const char *what, int err)
{
	pthread_mutex_lock(&vm->lock);
	if (!vm->error[0])
		snprintf(vm->error, sizeof(vm->error), "%s: %s", what, strerror(err));
	pthread_mutex_unlock(&vm->lock);
	atomic_store(&vm->ended, -1);
}

static void *vcpu_thread(void *p)
{
	struct vcpu_arg *a = p;
	struct vm *vm = a->vm;
	struct kvm_run *run = vm->run[a->index];

	while (!atomic_load(&vm->ended)) {
		if (ioctl(vm->vcpu_fd[a->index], KVM_RUN, 0) < 0) {
			if (errno == EINTR || errno == EAGAIN) {
				run->immediate_exit = 0;
				continue;
			}
			vm_fail(vm, "KVM_RUN", errno);
			break;
		}
		switch (run->exit_reason) {
		case KVM_EXIT_MMIO:
			if (run->mmio.is_write && run->mmio.phys_addr == ARM64_UART &&
			    run->mmio.len == 1) {
				pthread_mutex_lock(&vm->lock);
				if (vm->out_len < OUT_MAX - 1)
					vm->out[vm->out_len++] = (char)run->mmio.data[0];
				pthread_mutex_unlock(&vm->lock);
			} else if (!run->mmio.is_write) {
				memset(run->mmio.data, 0, sizeof(run->mmio.data));
			}
			break;
		case KVM_EXIT_SYSTEM_EVENT:
			atomic_store(&vm->ended, (int)run->system_event.type + 1);
			break;
		default:
			vm_fail(vm, "unexpected exit", EPROTO);
			fprintf(stderr, "# vcpu%u: exit reason %u\n", a->index, run->exit_reason);
			break;
		}
	}
	return NULL;
}

static void on_kick(int sig)
{
	(void)sig;
}

static void vm_destroy(struct vm *vm)
{
	for (unsigned i = 0; i < vm->nr_vcpus; i++) {
		if (vm->run[i])
			munmap(vm->run[i], (size_t)ioctl(vm->sys_fd, KVM_GET_VCPU_MMAP_SIZE, 0));
		if (vm->vcpu_fd[i] >= 0)
			close(vm->vcpu_fd[i]);
	}
	if (vm->gic_fd >= 0)
		close(vm->gic_fd);
	if (vm->vm_fd >= 0)
		close(vm->vm_fd);
	if (vm->ram)
		munmap(vm->ram, RAM_SIZE);
	pthread_mutex_destroy(&vm->lock);
}

/* Build and run one guest; false with vm->error when a step failed. */
static bool vm_run_guest(struct vm *vm, int sys_fd, const uint8_t *code, size_t len,
			 unsigned nr_vcpus)
{
	struct vcpu_arg args[MAX_VCPUS];
	const char *why = "";
	int rc, run_size = ioctl(sys_fd, KVM_GET_VCPU_MMAP_SIZE, 0);

	memset(vm, 0, sizeof(*vm));
	pthread_mutex_init(&vm->lock, NULL);
	vm->sys_fd = sys_fd;
	vm->gic_fd = vm->vm_fd = -1;
	vm->nr_vcpus = nr_vcpus;
	for (unsigned i = 0; i < MAX_VCPUS; i++)
		vm->vcpu_fd[i] = -1;
	vm->vm_fd = ioctl(sys_fd, KVM_CREATE_VM, 0);
	if (vm->vm_fd < 0)
		return vm_fail(vm, "KVM_CREATE_VM", errno), false;
	vm->ram = mmap(NULL, RAM_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (vm->ram == MAP_FAILED) {
		vm->ram = NULL;
		return vm_fail(vm, "mmap", errno), false;
	}
	memcpy(vm->ram, code, len);
	struct kvm_userspace_memory_region region = {
		.slot = 0, .guest_phys_addr = ARM64_RAM_BASE, .memory_size = RAM_SIZE,
		.userspace_addr = (uint64_t)(uintptr_t)vm->ram,
	};
	if (ioctl(vm->vm_fd, KVM_SET_USER_MEMORY_REGION, &region) < 0)
		return vm_fail(vm, "KVM_SET_USER_MEMORY_REGION", errno), false;
	for (unsigned i = 0; i < nr_vcpus; i++) {
		vm->vcpu_fd[i] = ioctl(vm->vm_fd, KVM_CREATE_VCPU, (unsigned long)i);
		if (vm->vcpu_fd[i] < 0)
			return vm_fail(vm, "KVM_CREATE_VCPU", errno), false;
		vm->run[i] = mmap(NULL, (size_t)run_size, PROT_READ | PROT_WRITE, MAP_SHARED,
				  vm->vcpu_fd[i], 0);
		if (vm->run[i] == MAP_FAILED) {
			vm->run[i] = NULL;
			return vm_fail(vm, "mmap kvm_run", errno), false;
		}
		rc = arm64_vcpu_init(vm->vm_fd, vm->vcpu_fd[i], i, &why);
		if (rc)
			return vm_fail(vm, why, -rc), false;
	}
	vm->gic_fd = arm64_gic_create(vm->vm_fd, nr_vcpus, &why);
	if (vm->gic_fd < 0)
		return vm_fail(vm, why, -vm->gic_fd), false;
	rc = arm64_gic_init(vm->gic_fd, &why);
	if (rc)
		return vm_fail(vm, why, -rc), false;
	rc = arm64_vcpu_set_entry(vm->vcpu_fd[0], ARM64_RAM_BASE, 0);
	if (rc)
		return vm_fail(vm, "the boot CPU's entry registers", -rc), false;

	for (unsigned i = 0; i < nr_vcpus; i++) {
		args[i] = (struct vcpu_arg){ vm, i };
		if (pthread_create(&vm->thread[i], NULL, vcpu_thread, &args[i]))
			return vm_fail(vm, "pthread_create", EAGAIN), false;
	}
	/* The first vCPU to see the end returns; others may sleep in KVM_RUN
	 * (a CPU that is off): kick them out. */
	pthread_join(vm->thread[0], NULL);
	if (!atomic_load(&vm->ended))
		atomic_store(&vm->ended, -1);
	for (unsigned i = 1; i < nr_vcpus; i++) {
		vm->run[i]->immediate_exit = 1;
		pthread_kill(vm->thread[i], SIGUSR1);
		pthread_join(vm->thread[i], NULL);
	}
	return atomic_load(&vm->ended) > 0;
}

static bool out_is(struct vm *vm, const char *want)
{
	vm->out[vm->out_len] = '\0';
	return strcmp(vm->out, want) == 0;
}

int main(void)
{
	struct sigaction sa = { .sa_handler = on_kick };
	struct vm vm;
	uint64_t pc = 0, mpidr = 0;
	int sys_fd;
	bool ok;

	sigaction(SIGUSR1, &sa, NULL);   /* no SA_RESTART: KVM_RUN returns EINTR */
	alarm(120);                      /* a hung guest fails the suite, never the harness */
	printf("1..6\n");
	sys_fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (sys_fd < 0) {
		printf("Bail out! /dev/kvm: %s\n", strerror(errno));
		return 1;
	}

	ok = vm_run_guest(&vm, sys_fd, guest_hello, (size_t)(guest_hello_end - guest_hello), 1);
	tap(ok && out_is(&vm, "hello from arm64\n"),
	    "a guest's byte stores to the UART reach the host as MMIO exits (%s)",
	    vm.error[0] ? vm.error : "output as sent");
	tap(ok && atomic_load(&vm.ended) == KVM_SYSTEM_EVENT_SHUTDOWN + 1,
	    "PSCI SYSTEM_OFF ends the VM as a shutdown");
	ok = ok && !arm64_core_reg_get(vm.vcpu_fd[0], offsetof(struct kvm_regs, regs.pc), &pc);
	tap(ok && pc > ARM64_RAM_BASE && pc < ARM64_RAM_BASE + RAM_SIZE,
	    "the boot CPU's pc read back by ONE_REG is inside the guest's code (0x%llx)",
	    (unsigned long long)pc);
	vm_destroy(&vm);

	ok = vm_run_guest(&vm, sys_fd, guest_reset, (size_t)(guest_reset_end - guest_reset), 1);
	tap(ok && atomic_load(&vm.ended) == KVM_SYSTEM_EVENT_RESET + 1,
	    "PSCI SYSTEM_RESET ends the VM as a reset%s%s", vm.error[0] ? ": " : "", vm.error);
	vm_destroy(&vm);

	ok = vm_run_guest(&vm, sys_fd, guest_smp, (size_t)(guest_smp_end - guest_smp), 2);
	tap(ok && out_is(&vm, "cpu1 up\n"),
	    "PSCI CPU_ON starts the second vCPU, off until then, at the guest's entry (%s)",
	    vm.error[0] ? vm.error : vm.out_len ? "see the output" : "no output");
	ok = !arm64_vcpu_mpidr(vm.vcpu_fd[1], &mpidr);
	tap(ok && (mpidr & 0xff) == 1, "the second vCPU's MPIDR_EL1 has affinity 1 (0x%llx)",
	    (unsigned long long)mpidr);
	if (vm.out_len)
		printf("# guest said: %s", vm.out);
	vm_destroy(&vm);
	close(sys_fd);
	return tests_failed ? 1 : 0;
}
