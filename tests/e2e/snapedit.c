/* snapedit.c - rewrite a snapshot's state file the way another CPU would have made it, for the snapshot suite's refusal case. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snapshot/codec.h"
#include "snapshot/format.h"
#if defined(__x86_64__)
#include "x86/cpu.h"
#define USAGE "usage: snapedit STATE LEAF SUBLEAF REG BIT\n"
#define NARGS 6
#define SECTION SNAP_SEC_CPUID
#elif defined(__aarch64__)
#include "arm64/state_codec.h"
#define USAGE "usage: snapedit STATE TARGET\n"
#define NARGS 3
#define SECTION SNAP_SEC_ARM64
#endif

#if defined(__x86_64__)
/* snapedit STATE LEAF SUBLEAF REG BIT sets bit BIT of register REG (eax,
 * ebx, ecx, edx) of CPUID leaf LEAF.SUBLEAF in the cpuid section: a
 * snapshot whose guest had a feature this host lacks. */
static int edit(const struct snap_section *s, char **argv, struct snap_out *o, const char **why)
{
	struct kvm_cpuid2 *cpuid;
	struct kvm_cpuid_entry2 *e;
	uint32_t *reg;

	if (cpuid_decode(s->data, s->len, &cpuid, why))
		return -1;
	e = cpuid_find(cpuid, (uint32_t)strtoul(argv[2], NULL, 0), (uint32_t)strtoul(argv[3], NULL, 0));
	if (!e) {
		free(cpuid);
		*why = "no such leaf";
		return -1;
	}
	reg = !strcmp(argv[4], "eax") ? &e->eax : !strcmp(argv[4], "ebx") ? &e->ebx :
	      !strcmp(argv[4], "ecx") ? &e->ecx : &e->edx;
	*reg |= 1u << atoi(argv[5]);
	cpuid_encode(cpuid, o);
	free(cpuid);
	return 0;
}
#elif defined(__aarch64__)
/* snapedit STATE TARGET sets the arm64 section's KVM CPU target: a
 * snapshot taken on another kind of CPU. */
static int edit(const struct snap_section *s, char **argv, struct snap_out *o, const char **why)
{
	struct arm64_vm_state vm;

	if (arm64_vm_state_decode(&vm, s->data, s->len, why))
		return -1;
	vm.target = (uint32_t)strtoul(argv[2], NULL, 0);
	arm64_vm_state_encode(&vm, o);
	arm64_vm_state_free(&vm);
	return 0;
}
#endif

/* The file is written back with valid crcs, every other section as it was. */
int main(int argc, char **argv)
{
	static struct snap_file f;
	struct snap_writer w;
	const struct snap_section *sec;
	struct snap_out o;
	const char *why = "";
	struct stat st;
	uint8_t *buf;
	int fd;

	if (argc != NARGS)
		return fputs(USAGE, stderr), 2;
	fd = open(argv[1], O_RDONLY);
	if (fd < 0 || fstat(fd, &st) < 0 || !(buf = malloc((size_t)st.st_size)) ||
	    read(fd, buf, (size_t)st.st_size) != st.st_size)
		return perror(argv[1]), 1;
	close(fd);
	snap_out_init(&o);
	if (snap_parse(&f, buf, (size_t)st.st_size, NULL, 0, &why) ||
	    !(sec = snap_find(&f, SECTION)) || edit(sec, argv, &o, &why))
		return fprintf(stderr, "snapedit: %s\n", *why ? why : "no such section"), 1;
	snap_writer_init(&w);
	for (unsigned i = 0; i < f.nr; i++) {
		const struct snap_section *s = &f.sec[i];
		int rc = s->type == SECTION ? snap_writer_add(&w, s->type, o.data, o.len) :
			 snap_writer_add(&w, s->type, s->data, s->len);

		if (rc)
			return fprintf(stderr, "snapedit: %s\n", strerror(-rc)), 1;
	}
	if (snap_writer_save(&w, argv[1], &why))
		return fprintf(stderr, "snapedit: %s\n", why), 1;
	snap_writer_free(&w);
	snap_out_free(&o);
	free(buf);
	return 0;
}
