/* tripwire.c - hook every access to watched pages (see tripwire.h): PROT_NONE, SIGSEGV runs the hook and single-steps, SIGTRAP re-arms. */
#include "tripwire.h"

#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#define EFLAGS_TF 0x100ull
#define PF_WRITE  0x2ull     /* page-fault error code: the access was a store */

static uint8_t *wire_start;
static size_t wire_len;
static tripwire_fn wire_fn;
static void *wire_opaque;
static struct sigaction old_segv, old_trap;

static void on_segv(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	uint8_t *addr = si->si_addr;

	if (!wire_start || addr < wire_start || addr >= wire_start + wire_len) {
		/* Not ours: let the next fault crash as it would have. */
		sigaction(SIGSEGV, &old_segv, NULL);
		(void)sig;
		return;
	}
	mprotect(wire_start, wire_len, PROT_READ | PROT_WRITE);
	wire_fn(wire_opaque, (size_t)(addr - wire_start),
		uc->uc_mcontext.gregs[REG_ERR] & PF_WRITE);
	/* Run the one instruction, then trap back into on_trap. */
	uc->uc_mcontext.gregs[REG_EFL] |= EFLAGS_TF;
}

static void on_trap(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;

	(void)sig;
	(void)si;
	uc->uc_mcontext.gregs[REG_EFL] &= ~EFLAGS_TF;
	if (wire_start)
		mprotect(wire_start, wire_len, PROT_NONE);
}

void tripwire_arm(void *start, size_t len, tripwire_fn fn, void *opaque)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sa.sa_sigaction = on_segv;
	sigaction(SIGSEGV, &sa, &old_segv);
	sa.sa_sigaction = on_trap;
	sigaction(SIGTRAP, &sa, &old_trap);
	wire_start = start;
	wire_len = len;
	wire_fn = fn;
	wire_opaque = opaque;
	mprotect(wire_start, wire_len, PROT_NONE);
}

void tripwire_disarm(void)
{
	if (wire_start)
		mprotect(wire_start, wire_len, PROT_READ | PROT_WRITE);
	wire_start = NULL;
	sigaction(SIGSEGV, &old_segv, NULL);
	sigaction(SIGTRAP, &old_trap, NULL);
}
