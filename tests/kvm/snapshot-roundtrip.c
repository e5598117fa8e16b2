/* snapshot-roundtrip.c - KVM proof of the snapshot modules: a counting guest saved mid-run, restored twice from the files.
 *
 * usage: snapshot-roundtrip save DIR      run the guest, pause it mid-count, write DIR/state and DIR/memory
 *        snapshot-roundtrip restore DIR   restore two VMs from them, run both to different limits, check
 *
 * Raw KVM (like tools/bare-kvm.c) plus vmm/snapshot, vcpu_state, vm_state,
 * mem and cpuid: what the VM builder will call, without the builder. The
 * guest (32-bit protected mode, below) sets state in every part a snapshot
 * carries (an SSE register, an MSR, the LAPIC, the PIC, the PIT, the
 * IOAPIC), then counts in ECX and in memory until the counter reaches the
 * limit the host put in memory, and reports that state back on port 0xf0.
 *
 * Exit status: 0 all checks passed (one line per check on stdout); 1 a check
 * failed; 2 the snapshot was refused (corrupt, truncated); 3 the host CPU
 * lacks a feature; 4 KVM or the system failed; 64 usage. Failures: one line
 * on stderr.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "mem/mem.h"
#include "x86/layout.h"
#include "snapshot/format.h"
#include "x86/cpu.h"
#include "x86/vcpu_state.h"
#include "x86/vm_state.h"
#include "vm/vcpu.h"

#define RAM_SIZE     (2u << 20)

static const struct mem_layout ram_layout = LAYOUT_RAM_SLOTS;
#define GUEST_ENTRY  0x1000u
#define COUNTER      0x8000u      /* the guest's count, mirrored from ECX */
#define ITER         0x8004u      /* iterations run: the host zeroes it in each clone */
#define LIMIT        0x8008u      /* stop counting here */
#define PORT_REPORT  0xf0
#define PORT_DONE    0xf1
#define PAUSE_AT     100000u      /* pause the first VM once it counted this far */
#define CLOCK_START  1000000000000ull   /* 1000 s: the first VM looks long-running */
#define RUN_LIMIT_S  60

/* Values the guest sets before it counts and reports at the end. */
#define XMM1_VALUE   0x1234abcdu
#define SYSENTER_CS  0x5a5au
#define LAPIC_SVR    0x1ffu       /* APIC software-enabled, spurious vector 0xff */
#define PIC_IMR      0xfbu        /* every line masked but the cascade */
#define PIT_COUNT    0x4321u      /* channel 0, mode 2 */
#define IOAPIC_PIN1  0x10031u     /* vector 0x31, masked */

enum { EXIT_CHECK = 1, EXIT_REFUSED = 2, EXIT_CPU = 3, EXIT_SYSTEM = 4, EXIT_USAGE = 64 };

/* The guest, assembled with the host code: 32-bit flat protected mode at
 * GUEST_ENTRY, interrupts off. Only instructions KVM's emulator knows
 * (movdqu, not movd): under the nested harness KVM now and then emulates
 * an instruction that touches no MMIO (seen twice at a movd, as an
 * emulation-failure exit), and then it must succeed. */
__asm__(
	".pushsection .rodata\n"
	"guest_code:\n"
	".code32\n"
	"	movl $0x1234abcd, 0x8010\n"
	"	movdqu 0x8010, %xmm1\n"          /* FPU/SSE state */
	"	mov $0x174, %ecx\n"
	"	mov $0x5a5a, %eax\n"
	"	xor %edx, %edx\n"
	"	wrmsr\n"                         /* SYSENTER_CS */
	"	movl $0x1ff, 0xfee000f0\n"       /* LAPIC spurious vector register */
	"	mov $0xfb, %al\n"
	"	out %al, $0x21\n"                /* PIC master mask */
	"	mov $0x34, %al\n"
	"	out %al, $0x43\n"                /* PIT channel 0: lo/hi byte, mode 2 */
	"	mov $0x21, %al\n"
	"	out %al, $0x40\n"
	"	mov $0x43, %al\n"
	"	out %al, $0x40\n"
	"	movl $0x12, 0xfec00000\n"        /* IOAPIC: redirection entry 1, low half */
	"	movl $0x10031, 0xfec00010\n"
	"	xor %ecx, %ecx\n"
	"1:	inc %ecx\n"
	"	incl 0x8004\n"
	"	mov %ecx, 0x8000\n"
	"	cmp 0x8008, %ecx\n"
	"	jne 1b\n"
	"	movdqu %xmm1, 0x8020\n"
	"	mov 0x8020, %eax\n"
	"	mov $0xf0, %dx\n"
	"	out %eax, %dx\n"
	"	mov $0x174, %ecx\n"
	"	rdmsr\n"                         /* sets EDX too */
	"	mov $0xf0, %dx\n"
	"	out %eax, %dx\n"
	"	mov 0xfee000f0, %eax\n"
	"	out %eax, %dx\n"
	"	in $0x21, %al\n"
	"	movzbl %al, %eax\n"
	"	out %eax, %dx\n"
	"	mov $0xf1, %dx\n"
	"	out %al, %dx\n"
	"2:	jmp 2b\n"
	".code64\n"
	"guest_code_end:\n"
	".popsection\n");
extern const uint8_t guest_code[], guest_code_end[];

struct vm {
	int sys_fd, vm_fd, vcpu_fd;
	struct kvm_run *run;
	size_t run_size;
	struct guest_mem mem;
	uint32_t reports[4];
	unsigned nr_reports;
};

static struct kvm_run *volatile kicked_run;

static void die(int code, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));

static void die(int code, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "snapshot-roundtrip: %s", code == EXIT_CHECK ? "FAIL: " : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	/* _exit: a failure is reported as itself, not as the leak report of
	 * whatever it left allocated (the success path is leak-checked). */
	fflush(stdout);
	_exit(code);
}

#define CHECK(cond, ...) do { if (!(cond)) die(EXIT_CHECK, __VA_ARGS__); } while (0)

static void xioctl(int fd, unsigned long req, void *arg, const char *name)
{
	if (ioctl(fd, req, arg) < 0)
		die(EXIT_SYSTEM, "%s: %s", name, strerror(errno));
}

static volatile uint32_t *guest_u32(struct vm *v, uint32_t gpa)
{
	return mem_gpa_to_hva(&v->mem, gpa, 4);
}

/* The signal only ends KVM_RUN: immediate_exit also covers a signal that
 * lands just before the vCPU enters the guest. */
static void on_alarm(int sig)
{
	(void)sig;
	if (kicked_run)
		kicked_run->immediate_exit = 1;
}

static void start_kicks(struct vm *v)
{
	struct sigaction sa = { .sa_handler = on_alarm };   /* no SA_RESTART */
	struct itimerval it = { { 0, 20000 }, { 0, 20000 } };

	kicked_run = v->run;
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
}

static void stop_kicks(void)
{
	struct itimerval off = { { 0, 0 }, { 0, 0 } };

	setitimer(ITIMER_REAL, &off, NULL);
	kicked_run = NULL;
}

/* A VM with the in-kernel irqchip and PIT and one vCPU, its RAM in `mem`. */
static void create_vm(struct vm *v)
{
	struct kvm_pit_config pit = { .flags = KVM_PIT_SPEAKER_DUMMY };

	v->sys_fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (v->sys_fd < 0)
		die(EXIT_SYSTEM, "/dev/kvm: %s", strerror(errno));
	v->vm_fd = ioctl(v->sys_fd, KVM_CREATE_VM, 0);
	if (v->vm_fd < 0)
		die(EXIT_SYSTEM, "KVM_CREATE_VM: %s", strerror(errno));
	xioctl(v->vm_fd, KVM_SET_TSS_ADDR, (void *)0xfffbd000ul, "KVM_SET_TSS_ADDR");
	xioctl(v->vm_fd, KVM_CREATE_IRQCHIP, NULL, "KVM_CREATE_IRQCHIP");
	xioctl(v->vm_fd, KVM_CREATE_PIT2, &pit, "KVM_CREATE_PIT2");
	struct kvm_userspace_memory_region region = {
		.memory_size = v->mem.total, .userspace_addr = (uintptr_t)v->mem.base };
	xioctl(v->vm_fd, KVM_SET_USER_MEMORY_REGION, &region, "KVM_SET_USER_MEMORY_REGION");
	v->vcpu_fd = ioctl(v->vm_fd, KVM_CREATE_VCPU, 0);
	if (v->vcpu_fd < 0)
		die(EXIT_SYSTEM, "KVM_CREATE_VCPU: %s", strerror(errno));
	v->run_size = (size_t)ioctl(v->sys_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	v->run = mmap(NULL, v->run_size, PROT_READ | PROT_WRITE, MAP_SHARED, v->vcpu_fd, 0);
	if (v->run == MAP_FAILED)
		die(EXIT_SYSTEM, "mmap kvm_run: %s", strerror(errno));
}

static void destroy_vm(struct vm *v)
{
	munmap(v->run, v->run_size);
	close(v->vcpu_fd);
	close(v->vm_fd);
	close(v->sys_fd);
	mem_free(&v->mem);
}

static void internal_error(struct vm *v, const char *name)
{
	struct kvm_regs regs = { 0 };
	char data[128] = "";
	size_t used = 0;

	ioctl(v->vcpu_fd, KVM_GET_REGS, &regs);
	for (uint32_t i = 0; i < v->run->internal.ndata && i < 4; i++)
		used += (size_t)snprintf(data + used, sizeof(data) - used, " %#llx",
					 (unsigned long long)v->run->internal.data[i]);
	die(EXIT_SYSTEM, "%s: KVM internal error, suberror %u, data%s, RIP %#llx, counter %u", name,
	    v->run->internal.suberror, data, (unsigned long long)regs.rip, *guest_u32(v, COUNTER));
}

/* Run until the guest reports done, or, with `pause_at`, until its counter
 * reaches pause_at (then the vCPU is left paused between instructions). */
static void run_vm(struct vm *v, const char *name, uint32_t pause_at)
{
	time_t deadline = time(NULL) + RUN_LIMIT_S;

	start_kicks(v);
	for (;;) {
		int rc = ioctl(v->vcpu_fd, KVM_RUN, 0);

		if (rc < 0 && errno == EINTR) {
			v->run->immediate_exit = 0;
			if (pause_at && *guest_u32(v, COUNTER) >= pause_at)
				break;
			if (time(NULL) > deadline)
				die(EXIT_CHECK, "%s: guest still running after %d s (counter %u)",
				    name, RUN_LIMIT_S, *guest_u32(v, COUNTER));
			continue;
		}
		if (rc < 0)
			die(EXIT_SYSTEM, "%s: KVM_RUN: %s", name, strerror(errno));
		if (v->run->exit_reason == KVM_EXIT_INTERNAL_ERROR)
			internal_error(v, name);
		if (v->run->exit_reason != KVM_EXIT_IO || v->run->io.direction != KVM_EXIT_IO_OUT)
			die(EXIT_CHECK, "%s: unexpected exit %u", name, v->run->exit_reason);
		if (v->run->io.port == PORT_DONE)
			break;
		CHECK(v->run->io.port == PORT_REPORT && v->run->io.size == 4 && v->nr_reports < 4,
		      "%s: unexpected write to port %#x", name, v->run->io.port);
		memcpy(&v->reports[v->nr_reports++], (uint8_t *)v->run + v->run->io.data_offset, 4);
	}
	stop_kicks();
}

static void write_guest_setup(struct vm *v)
{
	struct kvm_sregs sregs;
	struct kvm_regs regs = { .rip = GUEST_ENTRY, .rflags = 2 };
	struct kvm_segment code = { .limit = 0xffffffff, .selector = 8, .type = 11, .present = 1,
				    .db = 1, .s = 1, .g = 1 };
	struct kvm_segment data = code;
	struct kvm_clock_data clock = { .clock = CLOCK_START };

	memcpy(mem_gpa_to_hva(&v->mem, GUEST_ENTRY, 1), guest_code,
	       (size_t)(guest_code_end - guest_code));
	*guest_u32(v, LIMIT) = UINT32_MAX;
	xioctl(v->vcpu_fd, KVM_GET_SREGS, &sregs, "KVM_GET_SREGS");
	data.selector = 0x10;
	data.type = 3;
	sregs.cs = code;
	sregs.ds = sregs.es = sregs.fs = sregs.gs = sregs.ss = data;
	sregs.cr0 = (sregs.cr0 & ~((1ull << 29) | (1ull << 30))) | 1;   /* PE; caches on */
	sregs.cr4 |= (1u << 9) | (1u << 10);                            /* OSFXSR, OSXMMEXCPT */
	xioctl(v->vcpu_fd, KVM_SET_SREGS, &sregs, "KVM_SET_SREGS");
	xioctl(v->vcpu_fd, KVM_SET_REGS, &regs, "KVM_SET_REGS");
	xioctl(v->vm_fd, KVM_SET_CLOCK, &clock, "KVM_SET_CLOCK");
}

static void join(char *out, size_t size, const char *dir, const char *name)
{
	if ((size_t)snprintf(out, size, "%s/%s", dir, name) >= size)
		die(EXIT_USAGE, "directory name too long: %s", dir);
}

static int do_save(const char *dir)
{
	struct kvm_cpuid2 *base, *cpuid;
	struct vcpu_msr_list msrs;
	static struct vcpu_state state;
	struct vcpu_state *vs = &state;
	struct vm_state vms;
	struct mem_save_stats st;
	struct snap_writer w;
	struct snap_out out;
	struct vm v = { 0 };
	const char *why = NULL;
	char path[4096];
	size_t bytes;
	int rc;

	if (mem_init(&v.mem, RAM_SIZE, &ram_layout))
		die(EXIT_SYSTEM, "cannot map guest RAM");
	create_vm(&v);
	/* The base table is what the snapshot records; each vCPU gets it
	 * patched for its index, at boot and again at restore. */
	if (cpuid_get_supported(v.sys_fd, &base))
		die(EXIT_SYSTEM, "KVM_GET_SUPPORTED_CPUID failed");
	bytes = sizeof(*base) + base->nent * sizeof(base->entries[0]);
	cpuid = malloc(bytes);
	memcpy(cpuid, base, bytes);
	cpuid_patch(cpuid, 0, 1);
	xioctl(v.vcpu_fd, KVM_SET_CPUID2, cpuid, "KVM_SET_CPUID2");
	write_guest_setup(&v);

	run_vm(&v, "first VM", PAUSE_AT);
	if (vcpu_settle(v.vcpu_fd, v.run))
		die(EXIT_SYSTEM, "could not settle the vCPU");
	if (vcpu_state_msr_list(v.sys_fd, &msrs, &why) || vm_state_save(v.vm_fd, &vms, &why) ||
	    vcpu_state_save(v.vm_fd, v.vcpu_fd, &msrs, vs, &why))
		die(EXIT_SYSTEM, "save: %s", why);
	CHECK(vs->regs.rcx == *guest_u32(&v, COUNTER) || vs->regs.rcx == *guest_u32(&v, COUNTER) + 1,
	      "ECX %llu and the counter in memory %u disagree", (unsigned long long)vs->regs.rcx,
	      *guest_u32(&v, COUNTER));

	join(path, sizeof(path), dir, "memory");
	if (mem_save(&v.mem, path, &st, &why))
		die(EXIT_SYSTEM, "%s", why);
	snap_writer_init(&w);
	snap_out_init(&out);
	cpuid_encode(base, &out);
	rc = out.err ? out.err : snap_writer_add(&w, SNAP_SEC_CPUID, out.data, out.len);
	out.len = 0;
	vm_state_encode(&vms, &out);
	rc = rc ? rc : out.err ? out.err : snap_writer_add(&w, SNAP_SEC_VM, out.data, out.len);
	out.len = 0;
	vcpu_state_encode(vs, &out);
	rc = rc ? rc : out.err ? out.err : snap_writer_add(&w, SNAP_SEC_VCPU(0), out.data, out.len);
	if (rc)
		die(EXIT_SYSTEM, "building the state: %s", strerror(-rc));
	join(path, sizeof(path), dir, "state");
	if (snap_writer_save(&w, path, &why))
		die(EXIT_SYSTEM, "%s", why);
	printf("saved mid-run: ECX %llu, counter %u, RIP %#llx; %u MSRs, %u bytes of XSAVE state; memory: %llu bytes of data in a %u-byte file\n",
	       (unsigned long long)vs->regs.rcx, *guest_u32(&v, COUNTER),
	       (unsigned long long)vs->regs.rip, vs->nr_msrs, vs->xsave_size,
	       (unsigned long long)st.data_bytes, RAM_SIZE);
	snap_writer_free(&w);
	snap_out_free(&out);
	vcpu_state_free(vs);
	free(base);
	free(cpuid);
	destroy_vm(&v);
	return 0;
}

/* The whole state file, read into memory. */
static uint8_t *read_whole(const char *path, size_t *len)
{
	struct stat st;
	uint8_t *buf;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st) < 0)
		die(EXIT_REFUSED, "cannot read %s: %s", path, strerror(errno));
	buf = malloc((size_t)st.st_size + 1);
	if (!buf || read(fd, buf, (size_t)st.st_size) != st.st_size)
		die(EXIT_SYSTEM, "cannot read %s", path);
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

/* What the restore step needs from the state file, decoded and checked. */
struct saved {
	struct kvm_cpuid2 *cpuid;
	struct vm_state vm;
	struct vcpu_state vcpu;
};

static void load_state(const char *dir, struct saved *s)
{
	static const uint32_t required[] = { SNAP_SEC_CPUID, SNAP_SEC_VM, SNAP_SEC_VCPU(0) };
	struct snap_file *f = malloc(sizeof(*f));
	const struct snap_section *sec;
	struct kvm_cpuid2 *host;
	const char *why = NULL;
	char path[4096];
	uint8_t *buf;
	size_t len;
	int sys_fd, rc;

	join(path, sizeof(path), dir, "state");
	buf = read_whole(path, &len);
	rc = snap_parse(f, buf, len, required, 3, &why);
	if (rc)
		die(EXIT_REFUSED, "%s: %s", path, why);
	sec = snap_find(f, SNAP_SEC_CPUID);
	if (cpuid_decode(sec->data, sec->len, &s->cpuid, &why))
		die(EXIT_REFUSED, "%s", why);
	sec = snap_find(f, SNAP_SEC_VM);
	if (vm_state_decode(&s->vm, sec->data, sec->len, &why))
		die(EXIT_REFUSED, "%s", why);
	sec = snap_find(f, SNAP_SEC_VCPU(0));
	if (vcpu_state_decode(&s->vcpu, sec->data, sec->len, &why))
		die(EXIT_REFUSED, "%s", why);
	/* Before any guest code runs: can this host run that guest? */
	sys_fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (sys_fd < 0 || cpuid_get_supported(sys_fd, &host))
		die(EXIT_SYSTEM, "/dev/kvm: cannot read the supported CPUID");
	if (cpuid_check_host(s->cpuid, host, ioctl(sys_fd, KVM_CHECK_EXTENSION,
						   KVM_CAP_TSC_DEADLINE_TIMER) > 0, &why))
		die(EXIT_CPU, "%s", why);
	close(sys_fd);
	free(host);
	free(buf);
	free(f);
}

/* A fresh VM restored from DIR: RAM mapped from the memory file, VM state,
 * then the vCPU with the saved CPUID patched for vCPU 0. */
static void restore_vm(struct vm *v, const char *dir, const struct saved *s, const char *name)
{
	size_t bytes = sizeof(*s->cpuid) + s->cpuid->nent * sizeof(s->cpuid->entries[0]);
	struct kvm_cpuid2 *cpuid = malloc(bytes);
	const char *why = NULL;
	char path[4096];

	join(path, sizeof(path), dir, "memory");
	if (mem_restore(&v->mem, RAM_SIZE, &ram_layout, path, &why))
		die(EXIT_REFUSED, "%s", why);
	create_vm(v);
	memcpy(cpuid, s->cpuid, bytes);
	cpuid_patch(cpuid, 0, 1);
	if (vm_state_restore(v->vm_fd, &s->vm, &why) ||
	    vcpu_state_restore(v->vm_fd, v->vcpu_fd, cpuid, &s->vcpu, &why))
		die(EXIT_SYSTEM, "%s: %s", name, why);
	free(cpuid);
}

/* What KVM holds for a restored VM before it runs: the saved registers, the
 * guest's counter, the irqchip, PIT and LAPIC as the guest programmed
 * them, and a clock that goes on from the saved one. */
static void check_restored(struct vm *v, const struct saved *s, const char *name, uint32_t counter)
{
	struct kvm_regs regs;
	struct kvm_lapic_state lapic;
	struct kvm_pit_state2 pit;
	struct kvm_irqchip pic = { .chip_id = KVM_IRQCHIP_PIC_MASTER };
	struct kvm_irqchip ioapic = { .chip_id = KVM_IRQCHIP_IOAPIC };
	struct kvm_clock_data clock;
	uint32_t svr;

	xioctl(v->vcpu_fd, KVM_GET_REGS, &regs, "KVM_GET_REGS");
	CHECK(regs.rcx == s->vcpu.regs.rcx && regs.rip == s->vcpu.regs.rip,
	      "%s: ECX/RIP %llu/%#llx, saved %llu/%#llx", name, (unsigned long long)regs.rcx,
	      (unsigned long long)regs.rip, (unsigned long long)s->vcpu.regs.rcx,
	      (unsigned long long)s->vcpu.regs.rip);
	CHECK(*guest_u32(v, COUNTER) == counter, "%s: counter in memory %u, saved %u", name,
	      *guest_u32(v, COUNTER), counter);
	xioctl(v->vcpu_fd, KVM_GET_LAPIC, &lapic, "KVM_GET_LAPIC");
	memcpy(&svr, &lapic.regs[0xf0], 4);
	xioctl(v->vm_fd, KVM_GET_PIT2, &pit, "KVM_GET_PIT2");
	xioctl(v->vm_fd, KVM_GET_IRQCHIP, &pic, "KVM_GET_IRQCHIP");
	xioctl(v->vm_fd, KVM_GET_IRQCHIP, &ioapic, "KVM_GET_IRQCHIP");
	xioctl(v->vm_fd, KVM_GET_CLOCK, &clock, "KVM_GET_CLOCK");
	CHECK(svr == LAPIC_SVR, "%s: LAPIC SVR %#x", name, svr);
	CHECK(pit.channels[0].count == PIT_COUNT && pit.channels[0].mode == 2,
	      "%s: PIT channel 0 count %#x mode %u", name, pit.channels[0].count,
	      pit.channels[0].mode);
	CHECK(pic.chip.pic.imr == PIC_IMR, "%s: PIC IMR %#x", name, pic.chip.pic.imr);
	CHECK((uint32_t)ioapic.chip.ioapic.redirtbl[1].bits == IOAPIC_PIN1,
	      "%s: IOAPIC pin 1 %#llx", name, (unsigned long long)ioapic.chip.ioapic.redirtbl[1].bits);
	CHECK(clock.clock >= s->vm.clock.clock && clock.clock - s->vm.clock.clock < 60000000000ull,
	      "%s: KVM clock %llu ns, saved %llu ns", name, (unsigned long long)clock.clock,
	      (unsigned long long)s->vm.clock.clock);
}

/* Run a restored VM to `limit`: it must count on from the saved ECX (the
 * host zeroed ITER: LIMIT - saved iterations, one more when it was paused
 * between the two increments), and report the state it set before. */
static void run_clone(struct vm *v, const char *name, uint32_t from, uint32_t limit)
{
	const uint32_t want[4] = { XMM1_VALUE, SYSENTER_CS, LAPIC_SVR, PIC_IMR };
	uint32_t iter;

	run_vm(v, name, 0);
	iter = *guest_u32(v, ITER);
	CHECK(*guest_u32(v, COUNTER) == limit, "%s: counter %u, want %u", name,
	      *guest_u32(v, COUNTER), limit);
	CHECK(iter == limit - from || iter == limit - from + 1,
	      "%s: %u iterations from %u to %u: it did not continue from the saved point",
	      name, iter, from, limit);
	CHECK(v->nr_reports == 4, "%s: %u reports", name, v->nr_reports);
	for (int i = 0; i < 4; i++)
		CHECK(v->reports[i] == want[i], "%s: report %d is %#x, want %#x", name, i,
		      v->reports[i], want[i]);
	printf("%s: continued from %u to %u in %u iterations (not from 0)\n", name, from, limit, iter);
}

static int do_restore(const char *dir)
{
	static struct saved saved;
	struct saved *s = &saved;
	struct vm a = { 0 }, b = { 0 };
	uint32_t from, counter, file_counter;
	char path[4096];
	int fd;

	load_state(dir, s);
	from = (uint32_t)s->vcpu.regs.rcx;
	restore_vm(&a, dir, s, "clone 1");
	restore_vm(&b, dir, s, "clone 2");
	counter = *guest_u32(&a, COUNTER);
	check_restored(&a, s, "clone 1", counter);
	check_restored(&b, s, "clone 2", counter);
	printf("restored twice: ECX %u, counter %u, RIP %#llx, LAPIC, PIT, PIC, IOAPIC and a clock that goes on\n",
	       from, counter, (unsigned long long)s->vcpu.regs.rip);

	/* Different limits: the two copies must diverge. */
	*guest_u32(&a, ITER) = *guest_u32(&b, ITER) = 0;
	*guest_u32(&a, LIMIT) = from + 1000;
	*guest_u32(&b, LIMIT) = from + 3000;
	run_clone(&a, "clone 1", from, from + 1000);
	CHECK(*guest_u32(&b, COUNTER) == counter && *guest_u32(&b, ITER) == 0,
	      "clone 2 sees clone 1's writes (counter %u)", *guest_u32(&b, COUNTER));
	run_clone(&b, "clone 2", from, from + 3000);
	CHECK(*guest_u32(&a, COUNTER) == from + 1000, "clone 1 sees clone 2's writes");
	printf("clones independent: clone 1 stopped at %u, clone 2 at %u, neither saw the other's writes\n",
	       *guest_u32(&a, COUNTER), *guest_u32(&b, COUNTER));
	printf("guest state restored: xmm1 %#x, SYSENTER_CS %#x, LAPIC SVR %#x, PIC IMR %#x\n",
	       a.reports[0], a.reports[1], a.reports[2], a.reports[3]);

	join(path, sizeof(path), dir, "memory");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || pread(fd, &file_counter, 4, COUNTER) != 4)
		die(EXIT_SYSTEM, "cannot read %s", path);
	close(fd);
	CHECK(file_counter == counter, "the memory file's counter is %u, saved %u", file_counter, counter);
	printf("memory file untouched: its counter is still %u\n", file_counter);
	destroy_vm(&a);
	destroy_vm(&b);
	vcpu_state_free(&s->vcpu);
	free(s->cpuid);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && !strcmp(argv[1], "save"))
		return do_save(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "restore"))
		return do_restore(argv[2]);
	fprintf(stderr, "usage: snapshot-roundtrip save|restore DIR\n");
	return EXIT_USAGE;
}
