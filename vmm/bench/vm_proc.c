/* vm_proc.c - a VM bench keeps running: started with mayfly boot --vsock, waited for through mayfly exec, ended by SIGTERM. */
#include "bench/vm_proc.h"
#include "bench/runner.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

int bench_workdir(char *dir, size_t len, const char *what, char *err, size_t errlen)
{
	const char *tmp = getenv("TMPDIR");

	if (!tmp || !*tmp)
		tmp = "/tmp";
	if ((size_t)snprintf(dir, len, "%s/mayfly-bench-%s.XXXXXX", tmp, what) >= len) {
		snprintf(err, errlen, "TMPDIR %.200s is too long a path", tmp);
		return -1;
	}
	if (!mkdtemp(dir)) {
		snprintf(err, errlen, "cannot make a directory in %.200s: %s", tmp, strerror(errno));
		return -1;
	}
	return 0;
}

int bench_vm_start(struct bench_vm *vm, const char *self, const char *dir, const char *name,
		   char *const vm_opts[], const char *log, char *err, size_t errlen)
{
	char *boot[8 + 64];
	size_t n = 0;
	int rc;

	vm->pid = 0;
	if ((size_t)snprintf(vm->sock_arg, sizeof(vm->sock_arg), "--vsock=%s/%s.sock", dir, name) >=
	    sizeof(vm->sock_arg)) {
		snprintf(err, errlen, "the directory %.200s is too long a path", dir);
		return -1;
	}
	boot[n++] = (char *)self;
	boot[n++] = "boot";
	boot[n++] = vm->sock_arg;
	for (size_t i = 0; vm_opts[i] && n < sizeof(boot) / sizeof(boot[0]) - 1; i++)
		boot[n++] = vm_opts[i];
	boot[n] = NULL;
	rc = bench_spawn(boot, log, &vm->pid);
	if (rc) {
		vm->pid = 0;
		snprintf(err, errlen, "cannot start mayfly boot: %s", strerror(-rc));
		return -1;
	}
	rc = bench_vm_exec(vm, self);
	if (rc) {
		snprintf(err, errlen, "its agent never answered (mayfly exec exited %d)", rc);
		return -1;
	}
	return 0;
}

int bench_vm_exec(const struct bench_vm *vm, const char *self)
{
	char *exec[] = { (char *)self, "exec", (char *)vm->sock_arg, "--", "true", NULL };

	return bench_spawn_wait(exec);
}

void bench_vm_stop(const struct bench_vm *vm)
{
	if (vm->pid > 0)
		kill(vm->pid, SIGTERM);
}

void bench_vm_reap(struct bench_vm *vm)
{
	while (vm->pid > 0 && waitpid(vm->pid, NULL, 0) < 0 && errno == EINTR)
		;
	vm->pid = 0;
}
