/* test_seccomp.c - every generated filter, rule by rule, in a forked child: each listed call passes, a changed argument or any other call ends the process with its one line. */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/exitcode.h"
#include "seccomp/filters.h"
#include "seccomp/seccomp.h"

#define X32_SYSCALL_BIT 0x40000000

struct call {
	long nr;
	unsigned long a[6];
	bool i386;          /* through int 0x80, with i386 numbers */
};

struct outcome {
	int exited;         /* exit code, or -signal */
	char err[512];      /* what the child wrote to stderr */
};

static const struct timespec zero_ts;

/* In a child: take role's filter (by seccomp_enter when via_enter), make
 * the call, end with 0. The parent collects the exit and stderr. */
static struct outcome run_child(enum seccomp_role role, const struct call *c, bool via_enter)
{
	struct outcome o = { 0 };
	int p[2], status;
	size_t got = 0;
	ssize_t n;
	pid_t pid;

	cr_assert_eq(pipe(p), 0);
	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);

		dup2(null, STDIN_FILENO);
		dup2(p[1], STDERR_FILENO);
		if (via_enter) {
			seccomp_enable(true);
			seccomp_selftest((int)role);
			seccomp_enter(role);
		} else if (seccomp_install(role)) {
			syscall(SYS_exit_group, 100);
		}
		if (c->i386) {
			long ret;

			__asm__ volatile("int $0x80" : "=a"(ret) : "a"(c->nr) : "memory");
			(void)ret;
		} else {
			syscall(c->nr, c->a[0], c->a[1], c->a[2], c->a[3], c->a[4], c->a[5]);
		}
		syscall(SYS_exit_group, 0);
	}
	close(p[1]);
	while (got < sizeof(o.err) - 1 && (n = read(p[0], o.err + got, sizeof(o.err) - 1 - got)) > 0)
		got += (size_t)n;
	close(p[0]);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	o.exited = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
	return o;
}

/* Arguments that make each call fail fast and harmlessly: fd -1, NULL
 * pointers, zero lengths; the rule's own value where it has one. */
static struct call harmless(const struct seccomp_rule *r, bool keep_rule)
{
	struct call c = { .nr = r->nr, .a = { (unsigned long)-1 } };

	if (r->nr == SYS_exit || r->nr == SYS_exit_group)
		c.a[0] = 0;
	if (r->nr == SYS_ppoll)
		c.a[2] = (unsigned long)&zero_ts;   /* NULL would wait for ever */
	if (keep_rule && r->cond == SECCOMP_ARG_EQ)
		c.a[r->arg] = r->value;
	if (r->cond == SECCOMP_ARG_CLEAR)
		c.a[r->arg] = keep_rule ? 0 : r->value;
	return c;
}

/* Calls the test cannot make in a child with any arguments: returning
 * from a signal frame that is not there, or a fork by clone(0). */
static bool unsafe_to_call(long nr)
{
	return nr == SYS_rt_sigreturn || nr == SYS_clone;
}

/* Every rule a role's filter holds, the sanitizer group included when built in. */
static size_t role_rules(enum seccomp_role role, const struct seccomp_rule **out, size_t max)
{
	size_t n = 0;

	for (size_t g = 0; g < SECCOMP_MAX_GROUPS && seccomp_rules[role].groups[g]; g++)
		for (size_t i = 0; i < seccomp_rules[role].groups[g]->n && n < max; i++)
			out[n++] = &seccomp_rules[role].groups[g]->rules[i];
	if (seccomp_filters_sanitizer)
		for (size_t i = 0; i < seccomp_sanitizer_group.n && n < max; i++)
			out[n++] = &seccomp_sanitizer_group.rules[i];
	return n;
}

/* Would the filter pass call c? (From the tables: the expectation.) */
static bool tables_allow(const struct seccomp_rule *const *rules, size_t n, const struct call *c)
{
	for (size_t i = 0; i < n; i++) {
		const struct seccomp_rule *r = rules[i];

		if (r->nr != c->nr)
			continue;
		if (r->cond == SECCOMP_ANY ||
		    (r->cond == SECCOMP_ARG_EQ && c->a[r->arg] == r->value) ||
		    (r->cond == SECCOMP_ARG_CLEAR && !(c->a[r->arg] & r->value)))
			return true;
	}
	return false;
}

static void expect_line(const struct outcome *o, const char *role, const struct call *c,
			const char *name)
{
	long nr = c->nr & ~X32_SYSCALL_BIT;
	char want[200], req[40] = "";

	if (c->nr == SYS_ioctl)
		snprintf(req, sizeof(req), ", request 0x%lx", c->a[1]);
	if (name)
		snprintf(want, sizeof(want), "mayfly: seccomp: the %s thread made a forbidden system call "
			 "%ld (%s%s); ending the process (exit %d)\n", role, nr, name, req, EXIT_SECCOMP);
	else
		snprintf(want, sizeof(want), "mayfly: seccomp: the %s thread made a forbidden system call "
			 "%ld (x32 ABI); ending the process (exit %d)\n", role, nr, EXIT_SECCOMP);
	cr_expect_eq(o->exited, EXIT_SECCOMP, "%s: %s: exit %d", role, want, o->exited);
	cr_expect_str_eq(o->err, want);
}

Test(seccomp, every_listed_call_passes)
{
	const struct seccomp_rule *rules[256];

	for (int role = 0; role < SECCOMP_ROLE_COUNT; role++) {
		size_t n = role_rules(role, rules, 256);

		for (size_t i = 0; i < n; i++) {
			struct call c;
			struct outcome o;

			if (unsafe_to_call(rules[i]->nr))
				continue;
			c = harmless(rules[i], true);
			o = run_child(role, &c, false);
			cr_expect_eq(o.exited, 0, "role %s: %s (%s) was refused: exit %d, %s",
				     seccomp_role_name(role), rules[i]->name,
				     rules[i]->value_name ? rules[i]->value_name : "any", o.exited, o.err);
		}
	}
}

/* Firecracker's rule-by-rule check: the same call with its argument
 * changed (another ioctl request, PROT_EXEC set) ends the process. */
Test(seccomp, a_changed_argument_is_killed)
{
	const struct seccomp_rule *rules[256];
	int checked = 0;

	for (int role = 0; role < SECCOMP_ROLE_COUNT; role++) {
		size_t n = role_rules(role, rules, 256);

		for (size_t i = 0; i < n; i++) {
			struct call c;
			struct outcome o;

			if (rules[i]->cond == SECCOMP_ANY)
				continue;
			c = harmless(rules[i], false);
			/* Another request number the role does not allow. */
			for (unsigned bit = 0; rules[i]->cond == SECCOMP_ARG_EQ && bit < 64; bit++) {
				c.a[rules[i]->arg] = rules[i]->value ^ (1ull << bit);
				if (!tables_allow(rules, n, &c))
					break;
			}
			if (tables_allow(rules, n, &c))
				continue;   /* a sanitizer build allows the call whole */
			o = run_child(role, &c, false);
			expect_line(&o, seccomp_role_name(role), &c, rules[i]->name);
			checked++;
		}
	}
	cr_expect_gt(checked, 30, "only %d conditional rules checked", checked);
}

Test(seccomp, a_call_outside_the_role_is_killed_with_one_line)
{
	struct call c = { .nr = SYS_syslog, .a = { 10 } };

	for (int role = 0; role < SECCOMP_ROLE_COUNT; role++) {
		struct outcome o = run_child(role, &c, false);

		expect_line(&o, seccomp_role_name(role), &c, "syslog");
	}
}

/* The vCPU role is the one a guest reaches first: it may not open a file,
 * make a process or a socket, or map executable memory. */
Test(seccomp, the_vcpu_role_cannot_open_fork_connect_or_exec_memory)
{
	static const struct call calls[] = {
		{ .nr = SYS_openat, .a = { (unsigned long)-100, 0, 0 } },
		{ .nr = SYS_execve, .a = { 0 } },
		{ .nr = SYS_socket, .a = { 1, 1, 0 } },
		{ .nr = SYS_ioctl, .a = { (unsigned long)-1, 0xae01 /* KVM_CREATE_VM */ } },
		{ .nr = SYS_mmap, .a = { 0, 4096, 4 /* PROT_EXEC */, 0x22, (unsigned long)-1, 0 } },
		{ .nr = SYS_mprotect, .a = { 0, 0, 5 } },
	};

	const struct seccomp_rule *rules[256];
	size_t n = role_rules(SECCOMP_ROLE_VCPU, rules, 256);

	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
		struct outcome o;

		/* A sanitizer build lets every thread open /proc/self/maps. */
		if (seccomp_filters_sanitizer && tables_allow(rules, n, &calls[i]))
			continue;
		o = run_child(SECCOMP_ROLE_VCPU, &calls[i], false);
		expect_line(&o, "vcpu", &calls[i], seccomp_syscall_names[calls[i].nr]);
	}
}

Test(seccomp, the_x32_abi_is_killed)
{
	struct call c = { .nr = X32_SYSCALL_BIT | SYS_getpid };
	struct outcome o = run_child(SECCOMP_ROLE_MAIN, &c, false);

	expect_line(&o, "main", &c, NULL);
}

/* Whether this kernel takes 32-bit system calls (int $0x80) at all: built
 * without IA32 emulation, booted with ia32_emulation=false, or in some
 * guests (a Firecracker VM with kvm_pvm here), the instruction faults
 * (SIGSEGV) before any filter sees it, and no i386 call can be made. */
static bool i386_calls_work(void)
{
	int status;
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		long ret;

		dup2(null, STDERR_FILENO);   /* a sanitizer's report of the fault */
		__asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory");   /* getpid */
		syscall(SYS_exit_group, ret > 0 ? 0 : 1);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* i386's getpid is 20, x86-64's 20 is writev: the architecture check
 * comes before any number is looked at. */
Test(seccomp, another_architecture_is_killed)
{
	struct call c = { .nr = 20, .i386 = true };
	struct outcome o;

	if (!i386_calls_work())
		cr_skip_test("this kernel refuses int $0x80 before any filter (no IA32 emulation)");
	o = run_child(SECCOMP_ROLE_IO, &c, false);

	cr_expect_eq(o.exited, EXIT_SECCOMP);
	cr_expect_str_eq(o.err, "mayfly: seccomp: the io thread made a forbidden system call 20 of "
			 "another architecture (0x40000003); ending the process (exit 159)\n");
}

/* seccomp_enter as the threads call it, with the selftest hook
 * mayfly-selftest uses: the forbidden call comes from inside. */
Test(seccomp, enter_with_the_selftest_hook_dies_on_its_own_call)
{
	struct call c = { .nr = SYS_getpid }, syslog_call = { .nr = SYS_syslog };

	for (int role = 0; role < SECCOMP_ROLE_COUNT; role++) {
		struct outcome o = run_child(role, &c, true);

		expect_line(&o, seccomp_role_name(role), &syslog_call, "syslog");
	}
}

/* Runs a helper program (argv[0]) in a child, its stderr in out, with an
 * alarm that turns a hang into SIGALRM; its wait status. */
static int run_helper(char *const argv[], char *out, size_t size)
{
	int p[2], status;
	size_t got = 0;
	ssize_t n;
	pid_t pid;

	out[0] = '\0';
	cr_assert_eq(pipe(p), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		dup2(p[1], STDERR_FILENO);
		alarm(20);
		execv(argv[0], argv);
		_exit(101);
	}
	close(p[1]);
	while (got < size - 1 && (n = read(p[0], out + got, size - 1 - got)) > 0)
		got += (size_t)n;
	out[got] = '\0';
	close(p[0]);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	return status;
}

/* A sanitizer build's runtime works under every filter: the leak check at
 * exit (LeakSanitizer clones a helper that ptraces the threads; a call it
 * may not make used to leave the process spinning for ever) and its
 * report. The alarm turns such a hang into a failure. */
Test(seccomp, the_sanitizer_runtime_runs_under_every_filter)
{
	char *helper = getenv("SECCOMP_EXIT_HELPER");

	cr_assert(helper, "SECCOMP_EXIT_HELPER is not set (meson sets it)");
	for (int role = 0; role < SECCOMP_ROLE_COUNT; role++) {
		for (int leak = 0; leak < 2; leak++) {
			char arg[8];
			char out[4096];
			char *argv[] = { helper, arg, leak ? "leak" : NULL, NULL };
			int status;

			snprintf(arg, sizeof(arg), "%d", role);
			status = run_helper(argv, out, sizeof(out));
			cr_expect(WIFEXITED(status), "role %s%s: killed by signal %d (a hang ends by SIGALRM)",
				  seccomp_role_name(role), leak ? ", leaking" : "", WTERMSIG(status));
			if (!WIFEXITED(status))
				continue;
			cr_expect_eq(WEXITSTATUS(status), leak && seccomp_filters_sanitizer ? 1 : 0,
				     "role %s%s: exit %d: %s", seccomp_role_name(role),
				     leak ? ", leaking" : "", WEXITSTATUS(status), out);
			if (leak && seccomp_filters_sanitizer)
				cr_expect(strstr(out, "LeakSanitizer: detected memory leaks"),
					  "role %s: no leak report: %s", seccomp_role_name(role), out);
		}
	}
}

/* The release binary's libraries under every role's release filter (no
 * sanitizer group, whatever this build is): after seccomp_setup, a
 * filtered thread's first JSON object, small and large blocks, a trimmed
 * heap and a ninth thread allocating make no call its role lacks (jansson
 * would otherwise open /dev/urandom, glibc's malloc
 * /sys/devices/system/cpu/online and /proc/sys/vm/overcommit_memory, from
 * that thread). */
Test(seccomp, glibc_malloc_and_jansson_run_under_every_release_filter)
{
	char *helper = getenv("SECCOMP_LIBS_HELPER");

	cr_assert(helper, "SECCOMP_LIBS_HELPER is not set (meson sets it)");
	for (int role = 0; role < SECCOMP_ROLE_COUNT; role++) {
		for (int busy = 0; busy <= 8; busy += 8) {
			char arg[8], nbusy[8];
			char out[1024];
			char *argv[] = { helper, arg, nbusy, NULL };
			int status;

			snprintf(arg, sizeof(arg), "%d", role);
			snprintf(nbusy, sizeof(nbusy), "%d", busy);
			status = run_helper(argv, out, sizeof(out));
			cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
				  "role %s, %d threads before: %s %d: %s", seccomp_role_name(role), busy,
				  WIFEXITED(status) ? "exit" : "signal",
				  WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), out);
		}
	}
}

Test(seccomp, off_by_default_enter_does_nothing)
{
	cr_assert(!seccomp_enabled());
	seccomp_enter(SECCOMP_ROLE_VCPU);   /* would end this test process if it filtered */
	cr_assert_eq(syscall(SYS_syslog, 10, NULL, 0) >= 0 || errno == EPERM, true);
}
