/* bare-restore.c - the floor for tools/bench-restore: the least a program must do to resume a mayfly snapshot on KVM.
 *
 * usage: bare-restore DIR
 *
 * Reads DIR/state (every section's crc checked: snap_parse), decodes the
 * CPUID table, the VM state and each vCPU's state with mayfly's own
 * decoders, creates the VM as mayfly does (TSS, identity map, irqchip,
 * PIT), maps DIR/memory MAP_PRIVATE as guest RAM, creates the vCPUs, puts
 * the saved state back (vm_state_restore, then vcpu_state_restore with the
 * CPUID patched per vCPU) and enters vCPU 0 with KVM_RUN. Nothing else: no
 * devices (no UART, virtio, disk overlay or I/O thread), no check of the
 * host's CPU or of the files' identities, no other vCPU run, no agent.
 *
 * Prints on stdout "first KVM_RUN at N us": from the start of main() to
 * just before vCPU 0's first KVM_RUN, the clock mayfly's first_run_ms uses
 * (its main() to the same point), and "phases: ..." (when each step ended,
 * to set beside mayfly -vv's own). Then lets the guest run until its first
 * exit to user space, or 100 ms, and prints it ("first exit: ..."): a
 * restore that went wrong shows as a shutdown (triple fault), an entry
 * failure or an internal error right away (exit 5). Exit 2 usage, 3 the
 * snapshot refused, 4 KVM or the system failed. Not a VMM: it trusts the
 * snapshot (mayfly made it) beyond what the decoders check. */
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "snapshot/format.h"
#include "x86/cpu.h"
#include "x86/layout.h"
#include "x86/vcpu_state.h"
#include "x86/vm_state.h"

#define RUN_LIMIT_US 100000   /* how long the guest may run before its first exit */

enum { EXIT_USAGE = 2, EXIT_REFUSED = 3, EXIT_SYSTEM = 4, EXIT_GUEST = 5 };

static struct kvm_run *run0;

static void __attribute__((noreturn, format(printf, 2, 3))) die(int code, const char *fmt, ...)
{
	va_list ap;

	fputs("bare-restore: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}

static void xioctl(int fd, unsigned long req, const void *arg, const char *name)
{
	if (ioctl(fd, req, arg) < 0)
		die(EXIT_SYSTEM, "%s: %s", name, strerror(errno));
}

/* The run limit: ends KVM_RUN (immediate_exit also covers a signal that
 * lands just before the vCPU enters the guest). */
static void on_alarm(int sig)
{
	(void)sig;
	run0->immediate_exit = 1;
}

static uint8_t *read_state(const char *dir, size_t *len)
{
	char path[4096];
	struct stat st;
	uint8_t *buf;
	size_t done = 0;
	int fd;

	if ((size_t)snprintf(path, sizeof(path), "%s/state", dir) >= sizeof(path))
		die(EXIT_USAGE, "directory name too long");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_size <= 0)
		die(EXIT_REFUSED, "cannot read %s: %s", path, strerror(errno));
	buf = malloc((size_t)st.st_size);
	if (!buf)
		die(EXIT_SYSTEM, "out of memory");
	while (done < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + done, (size_t)st.st_size - done);

		if (n <= 0)
			die(EXIT_REFUSED, "cannot read %s", path);
		done += (size_t)n;
	}
	close(fd);
	*len = done;
	return buf;
}

/* Guest RAM: the memory file, privately (the guest's writes are this
 * process's pages; the file is never written). Returns its size. */
static uint8_t *map_memory(const char *dir, uint64_t *bytes)
{
	char path[4096];
	struct stat st;
	void *p;
	int fd;

	if ((size_t)snprintf(path, sizeof(path), "%s/memory", dir) >= sizeof(path))
		die(EXIT_USAGE, "directory name too long");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0)
		die(EXIT_REFUSED, "cannot open %s: %s", path, strerror(errno));
	if (st.st_size <= 0 || st.st_size % LAYOUT_PAGE_SIZE)
		die(EXIT_REFUSED, "%s is not a whole number of pages", path);
	p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, fd, 0);
	if (p == MAP_FAILED)
		die(EXIT_SYSTEM, "cannot map %s: %s", path, strerror(errno));
	close(fd);
	*bytes = (uint64_t)st.st_size;
	return p;
}

/* RAM below the 32-bit MMIO hole, and the rest from 4 GiB (mayfly's layout). */
static void add_memory(int vm_fd, uint8_t *ram, uint64_t bytes)
{
	uint64_t low = bytes < LAYOUT_MMIO_HOLE_START ? bytes : LAYOUT_MMIO_HOLE_START;
	struct kvm_userspace_memory_region region = {
		.slot = 0, .memory_size = low, .userspace_addr = (uintptr_t)ram };

	xioctl(vm_fd, KVM_SET_USER_MEMORY_REGION, &region, "KVM_SET_USER_MEMORY_REGION");
	if (bytes > low) {
		region = (struct kvm_userspace_memory_region){
			.slot = 1, .guest_phys_addr = LAYOUT_HIGH_RAM_START,
			.memory_size = bytes - low, .userspace_addr = (uintptr_t)(ram + low) };
		xioctl(vm_fd, KVM_SET_USER_MEMORY_REGION, &region, "KVM_SET_USER_MEMORY_REGION");
	}
}

static int create_vm(int sys_fd, uint8_t *ram, uint64_t bytes)
{
	struct kvm_pit_config pit = { .flags = KVM_PIT_SPEAKER_DUMMY };
	uint64_t identity = LAYOUT_KVM_IDENTITY_MAP;
	int vm_fd = ioctl(sys_fd, KVM_CREATE_VM, 0);

	if (vm_fd < 0)
		die(EXIT_SYSTEM, "KVM_CREATE_VM: %s", strerror(errno));
	if (ioctl(vm_fd, KVM_SET_TSS_ADDR, (unsigned long)LAYOUT_KVM_TSS) < 0)
		die(EXIT_SYSTEM, "KVM_SET_TSS_ADDR: %s", strerror(errno));
	xioctl(vm_fd, KVM_SET_IDENTITY_MAP_ADDR, &identity, "KVM_SET_IDENTITY_MAP_ADDR");
	xioctl(vm_fd, KVM_CREATE_IRQCHIP, NULL, "KVM_CREATE_IRQCHIP");
	xioctl(vm_fd, KVM_CREATE_PIT2, &pit, "KVM_CREATE_PIT2");
	add_memory(vm_fd, ram, bytes);
	return vm_fd;
}

/* vCPU i's saved state, with the snapshot's CPUID patched for it. */
static void restore_vcpu(int vm_fd, int vcpu_fd, const struct snap_file *f,
			 const struct kvm_cpuid2 *cpuid, unsigned i, unsigned n)
{
	size_t size = sizeof(*cpuid) + cpuid->nent * sizeof(cpuid->entries[0]);
	const struct snap_section *sec = snap_find(f, SNAP_SEC_VCPU(i));
	struct kvm_cpuid2 *mine = malloc(size);
	static struct vcpu_state cs;   /* large: 256 MSRs */
	const char *why = "";

	if (!mine)
		die(EXIT_SYSTEM, "out of memory");
	if (vcpu_state_decode(&cs, sec->data, sec->len, &why))
		die(EXIT_REFUSED, "vcpu %u: %s", i, why);
	memcpy(mine, cpuid, size);
	cpuid_patch(mine, i, n);
	if (vcpu_state_restore(vm_fd, vcpu_fd, mine, &cs, &why))
		die(EXIT_SYSTEM, "vcpu %u: %s", i, why);
	vcpu_state_free(&cs);
	free(mine);
}

static void first_exit(int vcpu_fd, uint64_t entered_ns)
{
	struct sigaction sa = { .sa_handler = on_alarm };   /* no SA_RESTART */
	struct itimerval limit = { .it_value = { 0, RUN_LIMIT_US } };
	int rc;

	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &limit, NULL);
	do
		rc = ioctl(vcpu_fd, KVM_RUN, 0);
	while (rc < 0 && errno == EAGAIN);
	if (rc < 0 && errno != EINTR)
		die(EXIT_SYSTEM, "KVM_RUN: %s", strerror(errno));
	if (rc < 0) {
		printf("first exit: none in %d ms (the guest ran or idled in the kernel)\n",
		       RUN_LIMIT_US / 1000);
		return;
	}
	switch (run0->exit_reason) {
	case KVM_EXIT_SHUTDOWN:
	case KVM_EXIT_FAIL_ENTRY:
	case KVM_EXIT_INTERNAL_ERROR:
		die(EXIT_GUEST, "the restored guest failed at once: exit reason %u",
		    run0->exit_reason);
	case KVM_EXIT_IO:
		printf("first exit: port 0x%x after %llu us\n", run0->io.port,
		       (unsigned long long)(clock_now_ns() - entered_ns) / 1000);
		break;
	case KVM_EXIT_MMIO:
		printf("first exit: MMIO 0x%llx after %llu us\n",
		       (unsigned long long)run0->mmio.phys_addr,
		       (unsigned long long)(clock_now_ns() - entered_ns) / 1000);
		break;
	default:
		printf("first exit: reason %u after %llu us\n", run0->exit_reason,
		       (unsigned long long)(clock_now_ns() - entered_ns) / 1000);
	}
}

int main(int argc, char **argv)
{
	static const uint32_t required[] = { SNAP_SEC_CPUID, SNAP_SEC_VM, SNAP_SEC_VCPU(0) };
	uint64_t start_ns = clock_now_ns(), entered_ns, bytes, t[4];
	static struct snap_file file;   /* large: the section table */
	const struct snap_section *sec;
	struct kvm_cpuid2 *cpuid;
	struct vm_state vms;
	const char *why = "";
	int sys_fd, vm_fd, vcpu_fd[SNAP_SEC_VCPU_MAX];
	unsigned n = 0;
	uint8_t *state, *ram;
	size_t state_len;
	int run_size;

	if (argc != 2)
		die(EXIT_USAGE, "usage: bare-restore SNAPSHOT-DIR");
	state = read_state(argv[1], &state_len);
	if (snap_parse(&file, state, state_len, required, 3, &why))
		die(EXIT_REFUSED, "%s/state: %s", argv[1], why);
	sec = snap_find(&file, SNAP_SEC_CPUID);
	if (cpuid_decode(sec->data, sec->len, &cpuid, &why))
		die(EXIT_REFUSED, "%s", why);
	sec = snap_find(&file, SNAP_SEC_VM);
	if (vm_state_decode(&vms, sec->data, sec->len, &why))
		die(EXIT_REFUSED, "%s", why);
	while (n < SNAP_SEC_VCPU_MAX && snap_find(&file, SNAP_SEC_VCPU(n)))
		n++;
	t[0] = clock_now_ns();

	ram = map_memory(argv[1], &bytes);
	t[1] = clock_now_ns();
	sys_fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (sys_fd < 0)
		die(EXIT_SYSTEM, "/dev/kvm: %s", strerror(errno));
	vm_fd = create_vm(sys_fd, ram, bytes);
	t[2] = clock_now_ns();
	for (unsigned i = 0; i < n; i++) {
		vcpu_fd[i] = ioctl(vm_fd, KVM_CREATE_VCPU, (unsigned long)i);
		if (vcpu_fd[i] < 0)
			die(EXIT_SYSTEM, "KVM_CREATE_VCPU: %s", strerror(errno));
	}
	run_size = ioctl(sys_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	run0 = run_size > 0 ? mmap(NULL, (size_t)run_size, PROT_READ | PROT_WRITE, MAP_SHARED,
				   vcpu_fd[0], 0) : MAP_FAILED;
	if (run0 == MAP_FAILED)
		die(EXIT_SYSTEM, "cannot map vcpu 0's kvm_run");
	t[3] = clock_now_ns();
	/* KVM's order: the VM's state once the vCPUs exist, then each vCPU's. */
	if (vm_state_restore(vm_fd, &vms, &why))
		die(EXIT_SYSTEM, "%s", why);
	for (unsigned i = 0; i < n; i++)
		restore_vcpu(vm_fd, vcpu_fd[i], &file, cpuid, i, n);

	entered_ns = clock_now_ns();
	first_exit(vcpu_fd[0], entered_ns);
	printf("phases: state read and decoded at %llu us, memory mapped at %llu us, VM created "
	       "at %llu us, vcpus created at %llu us, state set at %llu us\n",
	       (unsigned long long)(t[0] - start_ns) / 1000, (unsigned long long)(t[1] - start_ns) / 1000,
	       (unsigned long long)(t[2] - start_ns) / 1000, (unsigned long long)(t[3] - start_ns) / 1000,
	       (unsigned long long)(entered_ns - start_ns) / 1000);
	printf("first KVM_RUN at %llu us\n", (unsigned long long)(entered_ns - start_ns) / 1000);
	return 0;
}
