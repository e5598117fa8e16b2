/* bare-kvm.c - the floor for tools/bench-startup: the least a program must do to
 * run a PVH ELF guest on KVM (create VM, map RAM, load segments, enter 32-bit
 * protected mode, run). No checks beyond what keeps it from crashing; not a VMM. */
#include <elf.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define RAM_SIZE (64u << 20)

static uint32_t pvh_entry(const uint8_t *f, size_t size, const Elf32_Phdr *ph, int phnum)
{
	for (int i = 0; i < phnum; i++) {
		size_t off = ph[i].p_offset, end = off + ph[i].p_filesz;

		if (ph[i].p_type != PT_NOTE || end > size)
			continue;
		while (off + 12 <= end) {
			const uint32_t *n = (const uint32_t *)(f + off);
			size_t name = (n[0] + 3) & ~3u, desc = (n[1] + 3) & ~3u;

			if (n[2] == 18 && off + 12 + name + 4 <= end)
				return *(const uint32_t *)(f + off + 12 + name);
			off += 12 + name + desc;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct kvm_sregs sregs;
	struct kvm_regs regs = { .rflags = 2 };
	struct kvm_pit_config pit = { .flags = 0 };
	struct stat st;
	uint8_t *ram, *f;
	int kvm, vm, cpu, fd;
	struct kvm_run *run;

	if (argc != 2) {
		fprintf(stderr, "usage: bare-kvm PVH-ELF32\n");
		return 2;
	}
	fd = open(argv[1], O_RDONLY);
	if (fd < 0 || fstat(fd, &st) < 0)
		return perror(argv[1]), 3;
	f = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (f == MAP_FAILED || kvm < 0)
		return perror("open"), 4;
	vm = ioctl(kvm, KVM_CREATE_VM, 0);
	ioctl(vm, KVM_SET_TSS_ADDR, 0xfffbd000ul);
	ioctl(vm, KVM_CREATE_IRQCHIP, 0);
	ioctl(vm, KVM_CREATE_PIT2, &pit);
	ram = mmap(NULL, RAM_SIZE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	struct kvm_userspace_memory_region region = {
		.memory_size = RAM_SIZE, .userspace_addr = (uintptr_t)ram };
	ioctl(vm, KVM_SET_USER_MEMORY_REGION, &region);

	const Elf32_Ehdr *eh = (const Elf32_Ehdr *)f;
	const Elf32_Phdr *ph = (const Elf32_Phdr *)(f + eh->e_phoff);
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS32)
		return fprintf(stderr, "bare-kvm: not an ELF32\n"), 3;
	for (int i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_LOAD && ph[i].p_paddr + ph[i].p_memsz <= RAM_SIZE &&
		    ph[i].p_offset + ph[i].p_filesz <= (size_t)st.st_size)
			memcpy(ram + ph[i].p_paddr, f + ph[i].p_offset, ph[i].p_filesz);
	regs.rip = pvh_entry(f, (size_t)st.st_size, ph, eh->e_phnum);

	cpu = ioctl(vm, KVM_CREATE_VCPU, 0);
	run = mmap(NULL, (size_t)ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0), PROT_READ | PROT_WRITE,
		   MAP_SHARED, cpu, 0);
	ioctl(cpu, KVM_GET_SREGS, &sregs);
	struct kvm_segment code = { .limit = 0xffffffff, .selector = 8, .type = 11, .present = 1,
				    .db = 1, .s = 1, .g = 1 };
	struct kvm_segment data = code;
	data.selector = 0x10;
	data.type = 3;
	sregs.cs = code;
	sregs.ds = sregs.es = sregs.fs = sregs.gs = sregs.ss = data;
	sregs.cr0 |= 1;
	ioctl(cpu, KVM_SET_SREGS, &sregs);
	ioctl(cpu, KVM_SET_REGS, &regs);

	for (;;) {
		if (ioctl(cpu, KVM_RUN, 0) < 0)
			return perror("KVM_RUN"), 7;
		if (run->exit_reason == KVM_EXIT_IO && run->io.direction == KVM_EXIT_IO_OUT) {
			uint8_t *d = (uint8_t *)run + run->io.data_offset;

			if (run->io.port == 0x3f8 && write(1, d, 1) < 0)
				return 1;
			if (run->io.port == 0x64 && *d == 0xfe)
				return 0;
		} else if (run->exit_reason == KVM_EXIT_IO) {
			uint8_t *d = (uint8_t *)run + run->io.data_offset;

			*d = run->io.port == 0x3fd ? 0x60 : 0xff;   /* LSR: THR empty */
		} else if (run->exit_reason == KVM_EXIT_SHUTDOWN) {
			return 6;
		} else if (run->exit_reason != KVM_EXIT_MMIO) {
			fprintf(stderr, "bare-kvm: exit %u\n", run->exit_reason);
			return 7;
		}
	}
}
