/* ram_guard.c - a SIGBUS inside file-backed guest RAM: one line and exit 7, not a bare crash. */
#include "ram_guard.h"
#include "exitcode.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Read by the handler only; set once before any thread that touches
 * guest RAM starts. */
static uintptr_t guard_lo, guard_hi;

static const char guard_line[] =
	"mayfly: guest RAM is gone: the snapshot's memory file was cut short while the VM ran; "
	"ending the process (exit 7)\n";

static void on_sigbus(int sig, siginfo_t *si, void *uctx)
{
	uintptr_t a = (uintptr_t)si->si_addr;

	(void)sig;
	(void)uctx;
	if (a >= guard_lo && a < guard_hi) {
		if (write(STDERR_FILENO, guard_line, sizeof(guard_line) - 1) < 0)
			a = 0;   /* nothing better to do: the exit code says it too */
		/* Not _exit: a sanitizer intercepts it to run its leak check here. */
		syscall(SYS_exit_group, EXIT_KVM_ERROR);
	}
	/* Not ours: SA_RESETHAND put the default action back, so the
	 * faulting access runs again and gets it (a core, a sanitizer's
	 * report), without a system call a thread's filter may forbid. */
}

int ram_guard_install(const void *base, size_t len)
{
	struct sigaction sa = { .sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO | SA_RESETHAND };

	guard_lo = (uintptr_t)base;
	guard_hi = guard_lo + len;
	sigfillset(&sa.sa_mask);
	return sigaction(SIGBUS, &sa, NULL) < 0 ? -errno : 0;
}
