/* snapedit.c - rewrite a snapshot's state file the way a newer CPU would have made it, for the e2e suite's refusal case. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snapshot/codec.h"
#include "snapshot/format.h"
#include "x86/cpu.h"

/* usage: snapedit STATE LEAF SUBLEAF REG BIT
 * Sets bit BIT of register REG (eax, ebx, ecx, edx) of CPUID leaf
 * LEAF.SUBLEAF in the snapshot's cpuid section and writes the file back
 * with valid crcs: a snapshot whose guest had a feature this host lacks. */
int main(int argc, char **argv)
{
	static struct snap_file f;
	struct snap_writer w;
	struct kvm_cpuid2 *cpuid;
	struct kvm_cpuid_entry2 *e;
	struct snap_out o;
	const char *why = "";
	struct stat st;
	uint8_t *buf;
	uint32_t *reg;
	int fd, bit;

	if (argc != 6)
		return fprintf(stderr, "usage: snapedit STATE LEAF SUBLEAF REG BIT\n"), 2;
	fd = open(argv[1], O_RDONLY);
	if (fd < 0 || fstat(fd, &st) < 0 || !(buf = malloc((size_t)st.st_size)) ||
	    read(fd, buf, (size_t)st.st_size) != st.st_size)
		return perror(argv[1]), 1;
	close(fd);
	if (snap_parse(&f, buf, (size_t)st.st_size, NULL, 0, &why) ||
	    cpuid_decode(snap_find(&f, SNAP_SEC_CPUID)->data, snap_find(&f, SNAP_SEC_CPUID)->len,
			 &cpuid, &why))
		return fprintf(stderr, "snapedit: %s\n", why), 1;
	e = cpuid_find(cpuid, (uint32_t)strtoul(argv[2], NULL, 0), (uint32_t)strtoul(argv[3], NULL, 0));
	if (!e)
		return fprintf(stderr, "snapedit: no such leaf\n"), 1;
	reg = !strcmp(argv[4], "eax") ? &e->eax : !strcmp(argv[4], "ebx") ? &e->ebx :
	      !strcmp(argv[4], "ecx") ? &e->ecx : &e->edx;
	bit = atoi(argv[5]);
	*reg |= 1u << bit;
	snap_out_init(&o);
	cpuid_encode(cpuid, &o);
	snap_writer_init(&w);
	for (unsigned i = 0; i < f.nr; i++) {
		const struct snap_section *s = &f.sec[i];

		int rc = s->type == SNAP_SEC_CPUID ? snap_writer_add(&w, s->type, o.data, o.len) :
			 snap_writer_add(&w, s->type, s->data, s->len);

		if (rc)
			return fprintf(stderr, "snapedit: %s\n", strerror(-rc)), 1;
	}
	if (snap_writer_save(&w, argv[1], &why))
		return fprintf(stderr, "snapedit: %s\n", why), 1;
	snap_writer_free(&w);
	snap_out_free(&o);
	free(cpuid);
	free(buf);
	return 0;
}
