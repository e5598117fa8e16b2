/* density.h - mayfly bench density: N idle VMs restored from one snapshot and kept alive at once, what each more one costs the host. */
#ifndef MAYFLY_BENCH_DENSITY_H
#define MAYFLY_BENCH_DENSITY_H

#include <stdint.h>
#include <stdio.h>

#define DENSITY_MAX_VMS 4096

/* The host as the n-th VM answered. -1 where the host has no such figure. */
struct density_step {
	unsigned n;                    /* VMs alive and answering */
	double restore_ms;             /* the n-th: its boot --snapshot's exec to its agent's answer */
	int64_t pss_kib;               /* every process of every VM, together */
	int64_t mem_available_kib;     /* the host's MemAvailable */
	int64_t page_tables_kib;       /* KVM's page tables (SecPageTables), -1 without it */
	unsigned threads, fds;         /* every process of every VM, together */
};

struct density_plan {
	const char *self;              /* our binary */
	char *const *vm_opts;          /* NULL-terminated: --snapshot=DIR first, then the rest */
	unsigned count;                /* 1 to DENSITY_MAX_VMS */
	/* Each step as it is taken: at the first VM, then at each tenth of
	 * count (before: the host with none). */
	void (*step)(void *opaque, const struct density_step *before, const struct density_step *st);
	void *opaque;
};

/* Start count VMs one after another (`self boot --snapshot DIR --vsock`,
 * in a directory of its own), each waited for (`self exec -- true`), the
 * host measured at each step; then an exec in every VM (*answering: how
 * many answered), then every VM ended and reaped, the directory removed.
 * 0, or -1 with one line in err (a VM that did not come up). */
int bench_density(const struct density_plan *p, unsigned *answering, char *err, size_t errlen);

#endif
