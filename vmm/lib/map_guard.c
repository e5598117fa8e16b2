/* map_guard.c - a SIGBUS inside a guarded file mapping: one line and exit 7, not a bare crash. */
#include "lib/map_guard.h"
#include "lib/exitcode.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct guard {
	uintptr_t lo, hi;
	const char *line;
	size_t len;
};

/* Read by the handler: an entry is whole before the count that covers it. */
static struct guard guards[MAP_GUARD_MAX];
static atomic_int nr_guards;

static void on_sigbus(int sig, siginfo_t *si, void *uctx)
{
	uintptr_t a = (uintptr_t)si->si_addr;
	int n = atomic_load(&nr_guards);

	(void)sig;
	(void)uctx;
	for (int i = 0; i < n; i++) {
		if (a < guards[i].lo || a >= guards[i].hi)
			continue;
		if (write(STDERR_FILENO, guards[i].line, guards[i].len) < 0)
			a = 0;   /* nothing better to do: the exit code says it too */
		/* Not _exit: a sanitizer intercepts it to run its leak check here. */
		syscall(SYS_exit_group, EXIT_KVM_ERROR);
	}
	/* Not ours: SA_RESETHAND put the default action back, so the
	 * faulting access runs again and gets it (a core, a sanitizer's
	 * report), without a system call a thread's filter may forbid. */
}

int map_guard_add(const void *base, size_t len, const char *line)
{
	struct sigaction sa = { .sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO | SA_RESETHAND };
	int n = atomic_load(&nr_guards);

	if (n >= MAP_GUARD_MAX)
		return -ENOSPC;
	guards[n] = (struct guard){ (uintptr_t)base, (uintptr_t)base + len, line, strlen(line) };
	atomic_store(&nr_guards, n + 1);
	sigfillset(&sa.sa_mask);
	return sigaction(SIGBUS, &sa, NULL) < 0 ? -errno : 0;
}
