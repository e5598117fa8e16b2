/* arm64-guests.c - the arm64 KVM suite: tiny guests (guests.S), then a Linux kernel, run through vmm/arm64/ on a real /dev/kvm.
 *
 * Each case builds a VM as the arm64 port does: RAM at ARM64_RAM_BASE, the
 * vCPUs with PSCI 0.2, the in-kernel GICv3 created after them and
 * initialised before the first KVM_RUN, mayfly's 16550 (devices/serial.c)
 * at ARM64_UART with its SPI raised through KVM_IRQ_LINE. It runs a thread
 * per vCPU, collects the console and the PSCI event that ended the VM, and
 * prints TAP. With KERNEL and INITRD it also boots that arm64 Image with
 * the device tree vmm/arm64/fdt.c builds (libfdt) and checks Linux reached
 * its init and powered off.
 * usage: arm64-guests [KERNEL INITRD]
 * Runs inside tools/harness/run-arm64 (an emulated Arm host with EL2), or
 * on any arm64 host with KVM.
 */
#include "arm64/cpu.h"
#include "arm64/fdt.h"
#include "arm64/image.h"
#include "devices/serial.h"

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
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_VCPUS 2
#define OUT_MAX (1u << 20)
#define UART_SPI 33            /* the console's interrupt ID (SPI 1) */

extern const uint8_t guest_hello[], guest_hello_end[];
extern const uint8_t guest_reset[], guest_reset_end[];
extern const uint8_t guest_smp[], guest_smp_end[];

struct vm {
	int sys_fd, vm_fd, gic_fd;
	uint8_t *ram;
	uint64_t ram_size;
	unsigned nr_vcpus;
	int vcpu_fd[MAX_VCPUS];
	struct kvm_run *run[MAX_VCPUS];
	pthread_t thread[MAX_VCPUS];
	struct serial uart;
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

/* The UART's line, as the port raises it: an SPI by its interrupt ID. */
static void uart_irq(void *opaque, int level)
{
	struct vm *vm = opaque;
	struct kvm_irq_level line = {
		.irq = (KVM_ARM_IRQ_TYPE_SPI << KVM_ARM_IRQ_TYPE_SHIFT) | UART_SPI,
		.level = (uint32_t)level,
	};

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
			if (run->mmio.phys_addr >= ARM64_UART && run->mmio.phys_addr < ARM64_UART + 8) {
				serial_io(&vm->uart, run->mmio.phys_addr - ARM64_UART, run->mmio.data,
					  run->mmio.len, run->mmio.is_write);
				if (run->mmio.is_write)
					uart_drain(vm);
			} else if (!run->mmio.is_write) {
				memset(run->mmio.data, 0xff, sizeof(run->mmio.data));
			}
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
	if (vm->gic_fd >= 0)
		close(vm->gic_fd);
	if (vm->vm_fd >= 0)
		close(vm->vm_fd);
	if (vm->ram)
		munmap(vm->ram, vm->ram_size);
	serial_destroy(&vm->uart);
	free(vm->out);
	pthread_mutex_destroy(&vm->lock);
}

/* RAM, vCPUs and the GIC; the caller loads the guest into vm->ram. */
static bool vm_create(struct vm *vm, int sys_fd, uint64_t ram_size, unsigned nr_vcpus)
{
	const char *why = "";
	int rc, run_size = ioctl(sys_fd, KVM_GET_VCPU_MMAP_SIZE, 0);

	memset(vm, 0, sizeof(*vm));
	pthread_mutex_init(&vm->lock, NULL);
	serial_init(&vm->uart, uart_irq, NULL, vm);
	vm->sys_fd = sys_fd;
	vm->gic_fd = vm->vm_fd = -1;
	vm->nr_vcpus = nr_vcpus;
	vm->ram_size = ram_size;
	for (unsigned i = 0; i < MAX_VCPUS; i++)
		vm->vcpu_fd[i] = -1;
	vm->out = calloc(1, OUT_MAX);
	if (!vm->out)
		return vm_fail(vm, "calloc", ENOMEM), false;
	vm->vm_fd = ioctl(sys_fd, KVM_CREATE_VM, 0);
	if (vm->vm_fd < 0)
		return vm_fail(vm, "KVM_CREATE_VM", errno), false;
	vm->ram = mmap(NULL, ram_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (vm->ram == MAP_FAILED) {
		vm->ram = NULL;
		return vm_fail(vm, "mmap", errno), false;
	}
	struct kvm_userspace_memory_region region = {
		.slot = 0, .guest_phys_addr = ARM64_RAM_BASE, .memory_size = ram_size,
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
	return true;
}

/* Enter at pc with x0, a thread per vCPU, until a PSCI event, an error or
 * timeout_s. True when a PSCI event ended it. */
static bool vm_run(struct vm *vm, uint64_t pc, uint64_t x0, int timeout_s)
{
	struct vcpu_arg args[MAX_VCPUS];
	time_t deadline = time(NULL) + timeout_s;
	int rc = arm64_vcpu_set_entry(vm->vcpu_fd[0], pc, x0);

	if (rc)
		return vm_fail(vm, "the boot CPU's entry registers", -rc), false;
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
	if (!vm_create(vm, sys_fd, 2u << 20, ncpus))
		return false;
	memcpy(vm->ram, code, len);
	return vm_run(vm, ARM64_RAM_BASE, 0, 60);
}

static void tiny_cases(int sys_fd)
{
	struct vm vm;
	uint64_t pc = 0, mpidr = 0;
	bool ok;

	ok = run_tiny(&vm, sys_fd, guest_hello, (size_t)(guest_hello_end - guest_hello), 1);
	tap(ok && strcmp(vm.out, "hello from arm64\n") == 0,
	    "a guest's byte stores reach mayfly's 16550 as MMIO exits (%s)",
	    vm.error[0] ? vm.error : "output as sent");
	tap(ok && atomic_load(&vm.ended) == KVM_SYSTEM_EVENT_SHUTDOWN + 1,
	    "PSCI SYSTEM_OFF ends the VM as a shutdown");
	ok = ok && !arm64_core_reg_get(vm.vcpu_fd[0], offsetof(struct kvm_regs, regs.pc), &pc);
	tap(ok && pc > ARM64_RAM_BASE && pc < ARM64_RAM_BASE + vm.ram_size,
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
	tap(ok && (mpidr & 0xff) == 1, "the second vCPU's MPIDR_EL1 has affinity 1 (0x%llx)",
	    (unsigned long long)mpidr);
	vm_destroy(&vm);
}

/* ---- a Linux kernel, with the port's device tree ---- */

#define LINUX_RAM   (256ULL << 20)
#define LINUX_INITRD_AT (128ULL << 20)         /* offset in RAM, past any kernel image */
#define LINUX_FDT_AT    (LINUX_RAM - (2ULL << 20))   /* the last 2 MiB, as kvmtool does */
#define LINUX_MARKER "mayfly-arm64-init: up"

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

/* Kernel and initrd into RAM, the device tree after them; false with why. */
static bool load_linux(struct vm *vm, const char *kernel, const char *initrd, uint64_t *entry,
		       const char **why)
{
	static struct arm64_fdt_layout l;
	static char fdt_why[160];
	size_t ksize, isize;
	uint8_t *k = read_file(kernel, &ksize), *i = read_file(initrd, &isize), seed[32];
	struct arm64_image img;
	int rc;

	if (!k || !i || isize > LINUX_FDT_AT - LINUX_INITRD_AT) {
		free(k);
		free(i);
		return *why = "cannot read the kernel or the initrd", false;
	}
	rc = arm64_image_place(k, ksize, ARM64_RAM_BASE, LINUX_INITRD_AT, &img, why);
	if (!rc) {
		memcpy(vm->ram + (img.entry - ARM64_RAM_BASE), k, ksize);
		memcpy(vm->ram + LINUX_INITRD_AT, i, isize);
	}
	free(k);
	free(i);
	if (rc)
		return false;
	*entry = img.entry;

	memset(&l, 0, sizeof(l));
	l.mem_base = ARM64_RAM_BASE;
	l.mem_size = LINUX_RAM;
	l.ncpus = vm->nr_vcpus;
	for (unsigned c = 0; c < vm->nr_vcpus; c++)
		if (arm64_vcpu_mpidr(vm->vcpu_fd[c], &l.mpidr[c]))
			return *why = "MPIDR_EL1", false;
	l.gic_dist_base = ARM64_GIC_DIST;
	l.gic_dist_size = ARM64_GIC_DIST_SIZE;
	l.gic_redist_base = ARM64_GIC_REDIST;
	l.gic_redist_size = vm->nr_vcpus * ARM64_GIC_REDIST_SIZE;
	l.uart = (struct arm64_mmio){ ARM64_UART, 0x1000, UART_SPI };
	l.cmdline = "console=ttyS0 panic=-1 rdinit=/init";
	l.initrd_start = ARM64_RAM_BASE + LINUX_INITRD_AT;
	l.initrd_size = isize;
	if (getrandom(seed, sizeof(seed), 0) != (ssize_t)sizeof(seed))
		return *why = "getrandom", false;
	l.seed = seed;
	l.seed_len = sizeof(seed);
	rc = arm64_fdt_build(&l, vm->ram + LINUX_FDT_AT, ARM64_FDT_MAX_SIZE, fdt_why,
			     sizeof(fdt_why));
	if (rc < 0)
		return *why = fdt_why, false;
	return true;
}

static void linux_cases(int sys_fd, const char *kernel, const char *initrd)
{
	struct vm vm;
	const char *why = "";
	uint64_t entry = 0;
	struct timespec t0, t1;
	bool ok = vm_create(&vm, sys_fd, LINUX_RAM, 2) &&
		  load_linux(&vm, kernel, initrd, &entry, &why);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	ok = ok && vm_run(&vm, entry, ARM64_RAM_BASE + LINUX_FDT_AT, 240);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("# Linux: entry to poweroff in %.2f s, %zu bytes of console\n",
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9, vm.out_len);
	tap(strstr(vm.out, "Linux version") != NULL,
	    "an arm64 Linux Image boots on the port's device tree and prints on the 16550%s%s",
	    why[0] || vm.error[0] ? ": " : "", why[0] ? why : vm.error);
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
	int sys_fd;

	if (argc != 1 && argc != 3) {
		fprintf(stderr, "usage: arm64-guests [KERNEL INITRD]\n");
		return 2;
	}
	sigaction(SIGUSR1, &sa, NULL);   /* no SA_RESTART: KVM_RUN returns EINTR */
	sys_fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (sys_fd < 0) {
		printf("Bail out! /dev/kvm: %s\n", strerror(errno));
		return 1;
	}
	tiny_cases(sys_fd);
	if (argc == 3)
		linux_cases(sys_fd, argv[1], argv[2]);
	printf("1..%d\n", tests_run);
	close(sys_fd);
	return tests_failed ? 1 : 0;
}
