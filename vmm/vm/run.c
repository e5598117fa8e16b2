/* run.c - a built VM's lifetime: its threads, the main thread's wait for the end, pause and resume, stop. */
#include "vm/vm.h"
#include "lib/exitcode.h"
#include "lib/log.h"
#include "seccomp/seccomp.h"
#include "lib/thread.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

void vm_stop(struct vm *vm, int code, const char *fmt, ...)
{
	int running = -1;
	uint64_t one = 1;
	va_list ap;

	if (!atomic_compare_exchange_strong(&vm->exit_code, &running, -2))
		return;   /* someone else already ended the VM */
	va_start(ap, fmt);
	vsnprintf(vm->exit_reason, sizeof(vm->exit_reason), fmt, ap);
	va_end(ap);
	atomic_store(&vm->exit_code, code);
	vcpu_end(&vm->cpus);
	if (write(vm->stop_fd, &one, sizeof(one)) < 0)
		return;   /* counter full: the main thread is already awake */
}


int vm_pause(struct vm *vm)
{
	return vcpu_pause_all(&vm->cpus, vm->vcpus, vm->nr_vcpus);
}

void vm_resume(struct vm *vm)
{
	vcpu_resume_all(&vm->cpus);
}

int vm_quiesce(struct vm *vm)
{
	int rc = vm_pause(vm);

	if (!rc)
		event_loop_pause(&vm->io);
	return rc;
}

void vm_unquiesce(struct vm *vm)
{
	vm_resume(vm);
	event_loop_resume(&vm->io);
}

int vm_vsock_hold(struct vm *vm)
{
	return vm->vsock ? virtio_vsock_hold(vm->vsock) : -ENODEV;
}

void vm_vsock_release(struct vm *vm)
{
	if (vm->vsock)
		virtio_vsock_release(vm->vsock);
}

int vm_vsock_serve_port(struct vm *vm, uint32_t port, int (*accept)(void *opaque), void *opaque)
{
	if (!vm->vsock)
		return -ENODEV;
	virtio_vsock_serve_port(vm->vsock, port, accept, opaque);
	return 0;
}

struct event_loop *vm_io_loop(struct vm *vm)
{
	return &vm->io;
}

const char *vm_id(const struct vm *vm)
{
	return vm->cfg->id;
}

const char *vm_exit_reason(const struct vm *vm)
{
	return vm->exit_reason;
}

bool vm_restored(const struct vm *vm)
{
	return vm->snap != NULL;
}

void vm_set_signal_hook(struct vm *vm, bool (*hook)(void *opaque, int signo), void *opaque)
{
	vm->signal_hook = hook;
	vm->signal_hook_opaque = opaque;
}

uint64_t vm_guest_init_us(const struct vm *vm)
{
	return boot_timer_elapsed_us(&vm->boot_timer);
}

uint64_t vm_first_run_ns(const struct vm *vm)
{
	return atomic_load(&vm->cpus.first_run_ns);
}

int vm_connect_vsock(struct vm *vm)
{
	return vm->vsock ? virtio_vsock_connect_local(vm->vsock) : -ENODEV;
}

/* The main thread takes SIGINT/SIGTERM/SIGHUP through a signalfd, so no
 * thread is ever interrupted in the middle of device emulation. */
static int vm_block_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGHUP);
	signal(SIGPIPE, SIG_IGN);
	if (pthread_sigmask(SIG_BLOCK, set, NULL))
		return -1;
	return signalfd(-1, set, SFD_CLOEXEC | SFD_NONBLOCK);
}

/* The log writer's and the I/O thread's filters, each their first act. */
static void enter_log_role(void)
{
	seccomp_enter(SECCOMP_ROLE_LOG);
}

static void enter_io_role(void)
{
	seccomp_enter(SECCOMP_ROLE_IO);
}

int vm_run(struct vm *vm)
{
	sigset_t set;
	int sig_fd = vm_block_signals(&set);
	bool reset;
	int code;

	if (sig_fd < 0 || thread_init()) {
		log_error("cannot set up signal handling: %s", strerror(errno));
		return EXIT_INTERNAL;
	}
	/* From here until log_writer_stop no thread waits for stderr. */
	if (log_writer_start(enter_log_role)) {
		log_error("cannot start the log writer thread");
		close(sig_fd);
		return EXIT_INTERNAL;
	}
	if (console_start(&vm->console)) {
		log_error("cannot start the console thread");
		log_writer_stop();
		close(sig_fd);
		return EXIT_INTERNAL;
	}
	if ((vm->nr_blks || vm->vsock) && event_loop_start(&vm->io, enter_io_role)) {
		log_error("cannot start the I/O thread");
		console_stop(&vm->console);
		log_writer_stop();
		close(sig_fd);
		return EXIT_INTERNAL;
	}
	for (unsigned i = 0; i < vm->nr_vcpus; i++) {
		if (vcpu_start(&vm->vcpus[i])) {
			vm_stop(vm, EXIT_INTERNAL, "cannot start vcpu%u thread", i);
			break;
		}
	}
	/* Every thread is started (each took its own filter): this one needs
	 * no new thread, file or VM from here on. Then the guest may run. */
	seccomp_enter(SECCOMP_ROLE_MAIN);
	vcpu_release(&vm->cpus);
	/* The guest runs already; a stop or signal meanwhile waits for it. */
	vm_populate_workingset(vm);
	/* The build's frames are dead: a forked child's copies of them need
	 * not stay (this thread only waits from here). */
	thread_drop_dead_stack();
	while (atomic_load(&vm->exit_code) < 0) {
		struct pollfd fds[2] = { { .fd = vm->stop_fd, .events = POLLIN },
					 { .fd = sig_fd, .events = POLLIN } };
		struct signalfd_siginfo si;

		if (poll(fds, 2, -1) < 0 && errno != EINTR)
			break;
		if (!(fds[1].revents & POLLIN) || read(sig_fd, &si, sizeof(si)) != sizeof(si))
			continue;
		/* mayfly run passes a first SIGINT/SIGTERM on to the command. */
		if (vm->signal_hook && vm->signal_hook(vm->signal_hook_opaque, (int)si.ssi_signo))
			continue;
		vm_stop(vm, 128 + (int)si.ssi_signo, "stopped by signal %s",
			strsignal((int)si.ssi_signo));
	}
	/* Wait for vm_stop to finish writing the reason (code goes -2 -> final). */
	while ((code = atomic_load(&vm->exit_code)) < 0)
		sched_yield();
	for (unsigned i = 0; i < vm->nr_vcpus; i++)
		vcpu_kick(&vm->vcpus[i]);
	for (unsigned i = 0; i < vm->nr_vcpus; i++)
		vcpu_join(&vm->vcpus[i]);
	event_loop_stop(&vm->io);
	vcpu_exit_totals(vm->vcpus, vm->nr_vcpus, vm->exits);
	vcpu_log_exit_stats(vm->vcpus, vm->nr_vcpus);
	for (unsigned i = 0; i < vm->nr_blks; i++)
		virtio_blk_log_stats(&vm->blks[i]);
	if (vm->vsock)
		virtio_vsock_log_stats(vm->vsock);
	console_stop(&vm->console);
	close(sig_fd);
	/* All output has passed the console watch now: a reset after the
	 * panic banner is a panic, one after init's status line its status. */
	reset = code == EXIT_GUEST_RESET;
	code = console_exit_code(&vm->console, code, vm->exit_reason, sizeof(vm->exit_reason));
	if (reset && code != EXIT_GUEST_PANIC)
		log_info("vm stopped: %s (exit %d)", vm->exit_reason, code);
	else
		log_error("vm stopped: %s (exit %d)", vm->exit_reason, code);
	log_writer_stop();
	return code;
}

