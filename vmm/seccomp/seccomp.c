/* seccomp.c - installing the generated per-role filters, and the SIGSYS handler that names the thread role and system call. */
#include "seccomp/seccomp.h"
#include "seccomp/filters.h"
#include "lib/exitcode.h"
#include "lib/log.h"

#include <errno.h>
#include <jansson.h>
#include <linux/audit.h>
#include <malloc.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#define X32_SYSCALL_BIT 0x40000000

/* The architecture the filters were made for, and where a trapped ioctl's
 * request (argument 1) is in the signal's saved registers. */
#if defined(__x86_64__)
#define SECCOMP_AUDIT_ARCH AUDIT_ARCH_X86_64
#define IOCTL_REQUEST(uc) ((unsigned long)(uc)->uc_mcontext.gregs[REG_RSI])
#elif defined(__aarch64__)
#define SECCOMP_AUDIT_ARCH AUDIT_ARCH_AARCH64
#define IOCTL_REQUEST(uc) ((unsigned long)(uc)->uc_mcontext.regs[1])
#else
#error "mayfly's seccomp filters are made for x86-64 and aarch64"
#endif

static atomic_bool enabled;
static atomic_int selftest_role = -1;
static _Thread_local int my_role = -1;   /* read by the handler: TLS is signal-safe */

static pthread_once_t handler_once = PTHREAD_ONCE_INIT;
static int handler_installed;            /* 1, or -errno */

void seccomp_enable(bool on)
{
	atomic_store(&enabled, on);
}

bool seccomp_enabled(void)
{
	return atomic_load(&enabled);
}

const char *seccomp_role_name(int role)
{
	return role >= 0 && role < SECCOMP_ROLE_COUNT ? seccomp_rules[role].name : NULL;
}

void seccomp_selftest(int role)
{
	atomic_store(&selftest_role, role);
}

/* ---- the SIGSYS line, built without anything that is not async-signal-safe ---- */

struct line {
	char buf[200];
	size_t len;
};

static void put_str(struct line *l, const char *s)
{
	while (*s && l->len < sizeof(l->buf) - 1)
		l->buf[l->len++] = *s++;
}

static void put_num(struct line *l, unsigned long v, unsigned base)
{
	char digits[24];
	int n = 0;

	do {
		digits[n++] = "0123456789abcdef"[v % base];
		v /= base;
	} while (v && n < (int)sizeof(digits));
	while (n && l->len < sizeof(l->buf) - 1)
		l->buf[l->len++] = digits[--n];
}

static void on_sigsys(int sig, siginfo_t *si, void *uctx)
{
	const char *role = seccomp_role_name(my_role);
	const ucontext_t *uc = uctx;
	int nr = si->si_syscall;
	struct line l = { .len = 0 };

	(void)sig;
	put_str(&l, "mayfly: seccomp: the ");
	put_str(&l, role ? role : "unknown");
	put_str(&l, " thread made a forbidden system call ");
	if (si->si_arch != SECCOMP_AUDIT_ARCH) {
		put_num(&l, (unsigned)nr, 10);
		put_str(&l, " of another architecture (0x");
		put_num(&l, si->si_arch, 16);
		put_str(&l, ")");
	} else if (SECCOMP_AUDIT_ARCH == AUDIT_ARCH_X86_64 && (nr & X32_SYSCALL_BIT)) {
		put_num(&l, (unsigned)nr & ~X32_SYSCALL_BIT, 10);
		put_str(&l, " (x32 ABI)");
	} else {
		put_num(&l, (unsigned)nr, 10);
		if (nr >= 0 && nr < SECCOMP_NAMES && seccomp_syscall_names[nr]) {
			put_str(&l, " (");
			put_str(&l, seccomp_syscall_names[nr]);
			/* Which ioctl: the request is argument 1. */
			if (nr == SYS_ioctl) {
				put_str(&l, ", request 0x");
				put_num(&l, IOCTL_REQUEST(uc), 16);
			}
			put_str(&l, ")");
		}
	}
	put_str(&l, "; ending the process (exit ");
	put_num(&l, EXIT_SECCOMP, 10);
	put_str(&l, ")\n");
	if (write(STDERR_FILENO, l.buf, l.len) < 0)
		l.len = 0;   /* nothing better to do: the exit code says it too */
	/* Not _exit: a sanitizer intercepts it to run its leak check here. */
	syscall(SYS_exit_group, EXIT_SECCOMP);
}

static void handler_install(void)
{
	struct sigaction sa = { .sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO };

	sigfillset(&sa.sa_mask);
	handler_installed = sigaction(SIGSYS, &sa, NULL) < 0 ? -errno : 1;
}

int seccomp_available(void)
{
	/* PR_GET_SECCOMP answers EINVAL on a kernel built without seccomp. */
	if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0)
		return -errno;
	return 0;
}

/* What the libraries do once per process, from whichever thread first
 * needs it, with calls only some roles have (openat, read, close): done
 * here, before any thread starts. A sanitizer build hid both, its filters
 * allowing those calls to every role and its allocator having no arenas:
 * the release binary died of them (docs/security.md). */
static void settle_libraries(void)
{
	/* glibc's malloc opens /sys/devices/system/cpu/online (the arena
	 * limit, when a ninth thread arena is due) and, when a thread's heap
	 * first shrinks, /proc/sys/vm/overcommit_memory. One arena, the main
	 * one (threads share it; it grows and shrinks with brk), has neither
	 * path. */
	mallopt(M_ARENA_MAX, 1);
	/* jansson seeds its hash tables from /dev/urandom at the first JSON
	 * object: boot --audit's I/O thread made the first one (a connection
	 * record). */
	json_object_seed(0);
}

int seccomp_setup(bool off)
{
	int rc;

	if (off) {
		log_warn("--no-seccomp: every thread runs without its seccomp filter "
			 "(for debugging only; a guest exploit gets every system call)");
		seccomp_enable(false);
		return 0;
	}
	rc = seccomp_available();
	if (rc) {
		log_say("this kernel cannot filter system calls (seccomp: %s); "
			"--no-seccomp runs without", strerror(-rc));
		return rc;
	}
	settle_libraries();
	seccomp_enable(true);
	return 0;
}

int seccomp_install(enum seccomp_role role)
{
	const struct seccomp_filter_prog *f;
	struct sock_fprog prog;
	sigset_t sys;

	if ((int)role < 0 || role >= SECCOMP_ROLE_COUNT)
		return -EINVAL;
	pthread_once(&handler_once, handler_install);
	if (handler_installed < 0)
		return handler_installed;
	/* A blocked SIGSYS would make the kernel kill the process silently
	 * (and reset the handler): every filtered thread takes it. */
	sigemptyset(&sys);
	sigaddset(&sys, SIGSYS);
	pthread_sigmask(SIG_UNBLOCK, &sys, NULL);
	/* Unprivileged filters need no_new_privs; it is per thread, inherited,
	 * and the jail sets it for the whole process anyway. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	f = &seccomp_filters[role];
	prog = (struct sock_fprog){ .len = f->len, .filter = (struct sock_filter *)f->insns };
	my_role = (int)role;
	/* No TSYNC: this thread only; the others take their own. */
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0) {
		my_role = -1;
		return -errno;
	}
	return 0;
}

void seccomp_enter(enum seccomp_role role)
{
	int rc;

	if (!seccomp_enabled())
		return;
	rc = seccomp_install(role);
	if (rc) {
		struct line l = { .len = 0 };

		put_str(&l, "mayfly: cannot confine the ");
		put_str(&l, seccomp_role_name((int)role) ? seccomp_role_name((int)role) : "?");
		put_str(&l, " thread with seccomp: ");
		put_str(&l, strerror(-rc));
		put_str(&l, " (--no-seccomp runs without)\n");
		if (write(STDERR_FILENO, l.buf, l.len) < 0)
			l.len = 0;
		syscall(SYS_exit_group, EXIT_INTERNAL);
	}
	if (atomic_load(&selftest_role) == (int)role)
		syscall(SYS_syslog, 10 /* SYSLOG_ACTION_SIZE_BUFFER: harmless */, NULL, 0);
}
