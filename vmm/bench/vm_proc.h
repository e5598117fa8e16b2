/* vm_proc.h - a VM bench keeps running (bench fork's parent, bench density's VMs): mayfly boot --vsock in a directory of bench's, waited for until its agent answers, ended by SIGTERM. */
#ifndef MAYFLY_BENCH_VM_PROC_H
#define MAYFLY_BENCH_VM_PROC_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

struct bench_vm {
	pid_t pid;                     /* its boot process (the jail's supervisor); 0: none */
	char sock_arg[PATH_MAX + 16];  /* --vsock=DIR/NAME.sock */
};

/* A fresh directory $TMPDIR/mayfly-bench-WHAT.XXXXXX (/tmp without
 * TMPDIR) into dir. 0, or -1 with one line in err. */
int bench_workdir(char *dir, size_t len, const char *what, char *err, size_t errlen);

/* Start `self boot --vsock DIR/NAME.sock` with vm_opts (NULL-terminated;
 * its stderr to log, or ours when NULL) and wait until its agent answers
 * (`self exec -- true`, which waits 60 s at most). 0, or -1 with one line
 * in err; vm->pid is set once it started, even then. */
int bench_vm_start(struct bench_vm *vm, const char *self, const char *dir, const char *name,
		   char *const vm_opts[], const char *log, char *err, size_t errlen);

/* `self exec -- true` in it: the exit code (0: it answered). */
int bench_vm_exec(const struct bench_vm *vm, const char *self);

/* Ask it to end (SIGTERM); reap it. Many VMs end faster signalled all
 * first, then reaped. Both harmless on a VM that never started. */
void bench_vm_stop(const struct bench_vm *vm);
void bench_vm_reap(struct bench_vm *vm);

#endif
