/* arm64-guests.c - the arm64 KVM suite: tiny guests (guests.S), then a Linux kernel, built through the port's side of vm/arch.h on a real /dev/kvm.
 *
 * Each case builds a VM in vm_build's order with arm64/arch.c behind the
 * contract: guest RAM laid out by arch_ram_layout, the guest loaded as an
 * Image (arch_load_kernel, arch_load_initrd), the device tree written
 * (arch_write_boot), KVM opened and the VM made by vm/kvm.c, the GICv3
 * made for the vCPUs (arch_cpus_prepare) and initialised with the last of them
 * (arch_vcpu_init), mayfly's 16550 and boot timer on the MMIO bus
 * (arch_add_devices) with the UART's SPI raised through KVM_IRQ_LINE. It
 * runs a thread per vCPU dispatching MMIO exits to the bus, as vm/vcpu.c
 * does, collects the console and the PSCI event that ended the VM, and
 * prints TAP. (mayfly's own vm_build, with its vCPU threads, jail and
 * seccomp, runs on arm64 in tests/e2e/run-arm64-tests.sh; this runner
 * checks the port's pieces one by one, with guests that say each.)
 * usage: arm64-guests [KERNEL INITRD]
 * Runs inside tools/harness/run-arm64 (an emulated Arm host with EL2), or
 * on any arm64 host with KVM.
 */
#include "vm/arch.h"
#include "vm/bus.h"
#include "vm/kvm.h"
#include "arm64/cpu.h"
#include "devices/boot_timer.h"
#include "devices/serial.h"
#include "mem/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_VCPUS 2
#define OUT_MAX (1u << 20)

extern const uint8_t guest_hello[], guest_hello_end[];
extern const uint8_t guest_reset[], guest_reset_end[];
extern const uint8_t guest_smp[], guest_smp_end[];

struct vm {
	int sys_fd, vm_fd;
	struct guest_mem mem;
	struct arch_vm *arch;
	struct bus mmio, pio;
	unsigned nr_vcpus;
	int vcpu_fd[MAX_VCPUS];
	struct kvm_run *run[MAX_VCPUS];
	pthread_t thread[MAX_VCPUS];
	struct serial uart;
	struct boot_timer boot_timer;
	pthread_mutex_t lock;          /* out, error */
	char *out;
	size_t out_len;
	_Atomic int ended;             /* a KVM_SYSTEM_EVENT_* type + 1, or -1 on an error */
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

/* The UART's line, as the port gives it (arch_serial_irq). */
static void uart_irq(void *opaque, int level)
{
	struct vm *vm = opaque;
	struct kvm_irq_level line = { .irq = arch_serial_irq(), .level = (uint32_t)level };

	if (ioctl(vm->vm_fd, KVM_IRQ_LINE, &line) < 0)
		vm_fail(vm, "KVM_IRQ_LINE", errno);
}

static void uart_drain(struct vm *vm)
{
	uint8_t buf[256];
	size_t n;

	pthread_mutex_lock(&vm->lock);
	while ((n = serial_take_output(&vm->uart, buf, sizeof(buf))) > 0) {
		if (n > OUT_MAX - 1 - vm->out_len)
			n = OUT_MAX - 1 - vm->out_len;
		memcpy(vm->out + vm->out_len, buf, n);
		vm->out_len += n;
	}
	vm->out[vm->out_len] = '\0';
	pthread_mutex_unlock(&vm->lock);
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
			if (!bus_dispatch(&vm->mmio, run->mmio.phys_addr, run->mmio.data, run->mmio.len,
					  run->mmio.is_write) && !run->mmio.is_write)
				memset(run->mmio.data, 0xff, sizeof(run->mmio.data));
			if (run->mmio.is_write)
				uart_drain(vm);
			break;
		case KVM_EXIT_SYSTEM_EVENT:
			atomic_store(&vm->ended, (int)run->system_event.type + 1);
			break;
		default:
			fprintf(stderr, "# vcpu%u: exit reason %u\n", a->index, run->exit_reason);
			vm_fail(vm, "unexpected exit", EPROTO);
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
	int run_size = ioctl(vm->sys_fd, KVM_GET_VCPU_MMAP_SIZE, 0);

	for (unsigned i = 0; i < vm->nr_vcpus; i++) {
		if (vm->run[i])
			munmap(vm->run[i], (size_t)run_size);
		if (vm->vcpu_fd[i] >= 0)
			close(vm->vcpu_fd[i]);
	}
	arch_vm_free(vm->arch);
	if (vm->vm_fd >= 0)
		close(vm->vm_fd);
	mem_free(&vm->mem);
	bus_destroy(&vm->mmio);
	bus_destroy(&vm->pio);
	serial_destroy(&vm->uart);
	free(vm->out);
	pthread_mutex_destroy(&vm->lock);
}

static uint8_t *read_file(const char *path, size_t *size)
{
	struct stat st;
	uint8_t *data = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size > 0 &&
	    (data = malloc((size_t)st.st_size))) {
		for (size_t done = 0; done < (size_t)st.st_size;) {
			ssize_t n = read(fd, data + done, (size_t)st.st_size - done);

			if (n <= 0) {
				free(data);
				data = NULL;
				break;
			}
			done += (size_t)n;
		}
	}
	if (fd >= 0)
		close(fd);
	*size = data ? (size_t)st.st_size : 0;
	return data;
}

/* vm_build's recipe through the contract: RAM, the Image (and initrd),
 * the device tree, KVM, the devices, the vCPUs. */
static bool vm_build(struct vm *vm, int sys_fd, uint64_t ram_bytes, unsigned nr_vcpus,
		     const uint8_t *image, size_t image_size, const uint8_t *initrd,
		     size_t initrd_size, const char *cmdline)
{
	const struct arch_platform platform = {
		.pio = &vm->pio, .mmio = &vm->mmio, .serial = &vm->uart,
		.boot_timer = &vm->boot_timer, .reset = NULL, .opaque = vm,
	};
	struct kvm kvm = { .sys_fd = sys_fd, .vm_fd = -1 };
	const char *why = "";
	uint64_t initrd_gpa = 0;
	int rc, run_size = ioctl(sys_fd, KVM_GET_VCPU_MMAP_SIZE, 0);

	memset(vm, 0, sizeof(*vm));
	pthread_mutex_init(&vm->lock, NULL);
	bus_init(&vm->mmio, "mmio");
	bus_init(&vm->pio, "pio");
	serial_init(&vm->uart, uart_irq, NULL, vm);
	boot_timer_init(&vm->boot_timer, 0);
	vm->sys_fd = sys_fd;
	vm->vm_fd = -1;
	vm->nr_vcpus = nr_vcpus;
	for (unsigned i = 0; i < MAX_VCPUS; i++)
		vm->vcpu_fd[i] = -1;
	vm->out = calloc(1, OUT_MAX);
	vm->arch = arch_vm_new();
	if (!vm->out || !vm->arch)
		return vm_fail(vm, "calloc", ENOMEM), false;

	rc = mem_init(&vm->mem, ram_bytes, arch_ram_layout());
	if (rc)
		return vm_fail(vm, "guest RAM", -rc), false;
	rc = arch_load_kernel(vm->arch, &vm->mem, image, image_size, &why);
	if (!rc && initrd)
		rc = arch_load_initrd(vm->arch, &vm->mem, initrd, initrd_size, &initrd_gpa, &why);
	if (!rc)
		rc = arch_write_boot(vm->arch, &vm->mem, cmdline, initrd_gpa, initrd_size, nr_vcpus,
				     0, &why);
	if (rc)
		return vm_fail(vm, why, -rc), false;

	/* vm/kvm.c's: KVM_CREATE_VM, arch_vm_create, RAM as memory slots. */
	rc = kvm_create_vm(&kvm, &vm->mem, &why);
	if (rc)
		return vm_fail(vm, why, -rc), false;
	vm->vm_fd = kvm.vm_fd;
	if (arch_add_devices(vm->arch, &platform))
		return vm_fail(vm, "the platform's devices on the bus", EEXIST), false;
	rc = arch_cpus_prepare(vm->arch, sys_fd, vm->vm_fd, nr_vcpus, NULL, &why);
	if (rc)
		return vm_fail(vm, why, -rc), false;
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
		rc = arch_vcpu_init(vm->arch, vm->vcpu_fd[i], i, nr_vcpus, true);
		if (rc)
			return vm_fail(vm, "arch_vcpu_init", -rc), false;
	}
	return true;
}

/* A thread per vCPU until a PSCI event, an error or timeout_s. True when
 * a PSCI event ended it. */
static bool vm_run(struct vm *vm, int timeout_s)
{
	struct vcpu_arg args[MAX_VCPUS];
	time_t deadline = time(NULL) + timeout_s;

	for (unsigned i = 0; i < vm->nr_vcpus; i++) {
		args[i] = (struct vcpu_arg){ vm, i };
		if (pthread_create(&vm->thread[i], NULL, vcpu_thread, &args[i]))
			return vm_fail(vm, "pthread_create", EAGAIN), false;
	}
	while (!atomic_load(&vm->ended) && time(NULL) < deadline)
		usleep(20000);
	if (!atomic_load(&vm->ended))
		vm_fail(vm, "timed out", ETIMEDOUT);
	/* vCPUs still in KVM_RUN (a running one, or one that is off) leave. */
	for (unsigned i = 0; i < vm->nr_vcpus; i++) {
		vm->run[i]->immediate_exit = 1;
		pthread_kill(vm->thread[i], SIGUSR1);
		pthread_join(vm->thread[i], NULL);
	}
	uart_drain(vm);
	return atomic_load(&vm->ended) > 0;
}

static bool run_tiny(struct vm *vm, int sys_fd, const uint8_t *code, size_t len, unsigned ncpus)
{
	return vm_build(vm, sys_fd, 4u << 20, ncpus, code, len, NULL, 0, "") && vm_run(vm, 60);
}

static void tiny_cases(int sys_fd)
{
	struct vm vm;
	uint64_t pc = 0, mpidr = 0;
	bool ok;

	ok = run_tiny(&vm, sys_fd, guest_hello, (size_t)(guest_hello_end - guest_hello), 1);
	tap(ok && strcmp(vm.out, "hello from arm64\n") == 0,
	    "a guest loaded as an Image prints through mayfly's 16550 on the MMIO bus (%s)",
	    vm.error[0] ? vm.error : "output as sent");
	tap(ok && atomic_load(&vm.ended) == KVM_SYSTEM_EVENT_SHUTDOWN + 1,
	    "PSCI SYSTEM_OFF ends the VM as a shutdown");
	ok = ok && !arm64_core_reg_get(vm.vcpu_fd[0], offsetof(struct kvm_regs, regs.pc), &pc);
	tap(ok && pc > ARM64_RAM_BASE && pc < ARM64_RAM_BASE + (guest_hello_end - guest_hello),
	    "the boot CPU's pc read back by ONE_REG is inside the guest's code (0x%llx)",
	    (unsigned long long)pc);
	vm_destroy(&vm);

	ok = run_tiny(&vm, sys_fd, guest_reset, (size_t)(guest_reset_end - guest_reset), 1);
	tap(ok && atomic_load(&vm.ended) == KVM_SYSTEM_EVENT_RESET + 1,
	    "PSCI SYSTEM_RESET ends the VM as a reset%s%s", vm.error[0] ? ": " : "", vm.error);
	vm_destroy(&vm);

	ok = run_tiny(&vm, sys_fd, guest_smp, (size_t)(guest_smp_end - guest_smp), 2);
	ok = ok && strcmp(vm.out, "cpu1 up\n") == 0;
	tap(ok, "PSCI CPU_ON starts the second vCPU, off until then, at the guest's entry (%s)",
	    vm.error[0] ? vm.error : ok ? "it ran" : vm.out_len ? vm.out : "no output");
	ok = !arm64_vcpu_mpidr(vm.vcpu_fd[1], &mpidr);
	tap(ok && mpidr == 0x80000001, "the second vCPU's MPIDR_EL1 is the one the device tree "
	    "lists for it (0x%llx)",
	    (unsigned long long)mpidr);
	vm_destroy(&vm);
}

/* ---- a Linux kernel ---- */

#define LINUX_RAM    (256ULL << 20)
#define LINUX_MARKER "mayfly-arm64-init: up"

static void linux_cases(int sys_fd, const char *kernel, const char *initrd)
{
	struct vm vm;
	struct timespec t0, t1;
	size_t ksize, isize;
	uint8_t *k = read_file(kernel, &ksize), *i = read_file(initrd, &isize);
	bool ok = k && i && vm_build(&vm, sys_fd, LINUX_RAM, 2, k, ksize, i, isize,
				     "console=ttyS0 panic=-1 rdinit=/init");

	free(k);
	free(i);
	if (!k || !i) {
		printf("Bail out! cannot read %s or %s\n", kernel, initrd);
		exit(1);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ok = ok && vm_run(&vm, 240);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("# Linux: entry to poweroff in %.2f s, %zu bytes of console\n",
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9, vm.out_len);
	tap(strstr(vm.out, "Linux version") != NULL,
	    "an arm64 Linux Image boots on the port's device tree and prints on the 16550%s%s",
	    vm.error[0] ? ": " : "", vm.error);
	tap(strstr(vm.out, "smp: Brought up 1 node, 2 CPUs") != NULL,
	    "Linux brings up both vCPUs through PSCI");
	tap(strstr(vm.out, LINUX_MARKER) != NULL,
	    "the kernel finds the initrd through /chosen and runs its /init, whose output "
	    "reaches the console through the UART's interrupt");
	tap(ok && atomic_load(&vm.ended) == KVM_SYSTEM_EVENT_SHUTDOWN + 1,
	    "the guest's poweroff ends the VM by PSCI SYSTEM_OFF");
	if (tests_failed) {
		/* The console's last lines say where it stopped. */
		const char *tail = vm.out_len > 2000 ? vm.out + vm.out_len - 2000 : vm.out;

		for (const char *line = tail; *line;) {
			const char *nl = strchr(line, '\n');
			int n = nl ? (int)(nl - line) : (int)strlen(line);

			printf("# %.*s\n", n, line);
			line += n + (nl != NULL);
		}
	}
	vm_destroy(&vm);
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_kick };
	struct kvm kvm;
	const char *why = "";
	int sys_fd;

	if (argc != 1 && argc != 3) {
		fprintf(stderr, "usage: arm64-guests [KERNEL INITRD]\n");
		return 2;
	}
	sigaction(SIGUSR1, &sa, NULL);   /* no SA_RESTART: KVM_RUN returns EINTR */
	/* vm/kvm.c's: the API version, the core's and arm64's capabilities. */
	if (kvm_open(&kvm, "/dev/kvm", &why)) {
		printf("Bail out! /dev/kvm: %s\n", why);
		return 1;
	}
	sys_fd = kvm.sys_fd;
	tiny_cases(sys_fd);
	if (argc == 3)
		linux_cases(sys_fd, argv[1], argv[2]);
	printf("1..%d\n", tests_run);
	close(sys_fd);
	return tests_failed ? 1 : 0;
}
