/* supervise.c - mayfly serve's VM processes: spawned from the service's main thread, in process groups of their own, stopped and reaped; a previous service's adopted through pidfds. */
#include "serve/supervise.h"
#include "lib/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct spawn_req {
	char *const *argv;
	const char *log_path;
	pid_t result;              /* 0 while waiting */
	struct spawn_req *next;
};

int supervise_init(struct supervisor *s)
{
	memset(s, 0, sizeof(*s));
	s->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->efd < 0)
		return -errno;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->done, NULL);
	return 0;
}

void supervise_destroy(struct supervisor *s)
{
	if (s->efd >= 0)
		close(s->efd);
	s->efd = -1;
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->done);
}

pid_t supervise_spawn(struct supervisor *s, char *const argv[], const char *log_path)
{
	struct spawn_req req = { argv, log_path, 0, NULL };
	uint64_t one = 1;
	pid_t pid;

	pthread_mutex_lock(&s->lock);
	if (s->closed) {
		pthread_mutex_unlock(&s->lock);
		return -ESHUTDOWN;
	}
	req.next = s->queue;
	s->queue = &req;
	if (write(s->efd, &one, sizeof(one)) < 0 && errno != EAGAIN) {
		s->queue = req.next;
		pthread_mutex_unlock(&s->lock);
		return -errno;
	}
	while (!req.result)
		pthread_cond_wait(&s->done, &s->lock);
	pid = req.result;
	pthread_mutex_unlock(&s->lock);
	return pid;
}

extern char **environ;

/* The child's stack while it runs in the service's memory, until its exec. */
#define CHILD_STACK (64 << 10)

struct child_args {
	const struct spawn_req *r;
	pid_t parent;
	int log_fd, null_fd;
	bool outlive;
};

/* The kernel's struct sigaction, for a raw rt_sigaction. */
struct kernel_sigaction {
	void *handler;
	unsigned long flags;
	void *restorer;
	uint64_t mask;
};

/* In the child, until its exec: it shares the service's memory (CLONE_VM,
 * the service's thread stopped meanwhile), so raw system calls only (no
 * errno, no interceptor, no sanitizer state: its shadow is the service's).
 * It starts with every signal blocked; each handler goes back to the
 * default before the mask is cleared. */
__attribute__((no_sanitize("address", "undefined"), noreturn))
static int child(void *arg)
{
	const struct child_args *a = arg;
	struct kernel_sigaction dfl = { .handler = SIG_DFL };
	uint64_t none = 0;
	int oom;

	if ((!a->outlive && syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0) ||
	    syscall(SYS_getppid) != a->parent)
		syscall(SYS_exit_group, 127);   /* the service already went: nobody has its record */
	syscall(SYS_setpgid, 0, 0);
	/* Under memory pressure the kernel's OOM killer takes a VM, never
	 * the service that holds every other sandbox (best effort). */
	oom = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (oom >= 0) {
		syscall(SYS_write, oom, SUPERVISE_VM_OOM_ADJ, sizeof(SUPERVISE_VM_OOM_ADJ) - 1);
		syscall(SYS_close, oom);
	}
	for (int sig = 1; sig <= 64; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof(dfl.mask));
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, sizeof(none));
	if (syscall(SYS_dup3, a->null_fd, STDIN_FILENO, 0) < 0 ||
	    syscall(SYS_dup3, a->null_fd, STDOUT_FILENO, 0) < 0 ||
	    syscall(SYS_dup3, a->log_fd, STDERR_FILENO, 0) < 0)
		syscall(SYS_exit_group, 127);
	syscall(SYS_close_range, 3, ~0U, 0);
	syscall(SYS_execve, a->r->argv[0], a->r->argv, environ);
	syscall(SYS_exit_group, 127);
	__builtin_unreachable();
}

/* A vfork-like clone, not fork(): the service (many threads, a large and
 * busy heap) never has its page tables copied, nor takes a copy-on-write
 * fault on every page it writes until the child's exec. */
static pid_t spawn_one(const struct spawn_req *r, bool outlive)
{
	struct child_args a = { r, getpid(), -1, -1, outlive };
	void *stack = MAP_FAILED;
	sigset_t all, old;
	pid_t pid = -EIO;

	a.log_fd = open(r->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	a.null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (a.log_fd >= 0 && a.null_fd >= 0)
		stack = mmap(NULL, CHILD_STACK, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED) {
		pid = -errno;
		goto out_close;
	}
	/* No handler of ours may run in the child before it resets them. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid = clone(child, (char *)stack + CHILD_STACK, CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
	if (pid < 0)
		pid = -errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	/* The child has exec'd or ended (CLONE_VFORK): its group was made
	 * before, so no group kill misses it, and its stack is free. */
	munmap(stack, CHILD_STACK);
out_close:
	if (a.log_fd >= 0)
		close(a.log_fd);
	if (a.null_fd >= 0)
		close(a.null_fd);
	return pid;
}

void supervise_pending(struct supervisor *s)
{
	uint64_t n;

	if (read(s->efd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		return;
	pthread_mutex_lock(&s->lock);
	while (s->queue) {
		struct spawn_req *r = s->queue;

		s->queue = r->next;
		r->result = s->closed ? -ESHUTDOWN : spawn_one(r, s->outlive);
	}
	pthread_cond_broadcast(&s->done);
	pthread_mutex_unlock(&s->lock);
}

void supervise_close(struct supervisor *s)
{
	pthread_mutex_lock(&s->lock);
	s->closed = true;
	while (s->queue) {
		s->queue->result = -ESHUTDOWN;
		s->queue = s->queue->next;
	}
	pthread_cond_broadcast(&s->done);
	pthread_mutex_unlock(&s->lock);
}

int supervise_poll(pid_t pid, int *status)
{
	pid_t r = waitpid(pid, status, WNOHANG);

	if (r < 0)
		return -errno;
	return r == pid;
}

/* Up to grace_ms for pid (our child) to end; reaped then: true. Woken
 * by its pidfd the moment it ends (a delete waits for nothing more);
 * without pidfds (Linux < 5.3), polled every millisecond. */
static bool wait_end(pid_t pid, unsigned grace_ms, int *status)
{
	struct timespec ms = { 0, 1000000 };
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);

	if (fd >= 0) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint64_t until = clock_now_ns() + grace_ms * 1000000ULL, now;

		while ((now = clock_now_ns()) < until &&
		       poll(&p, 1, (int)((until - now) / 1000000 + 1)) < 0 && errno == EINTR)
			;
		close(fd);
		return supervise_poll(pid, status) != 0;
	}
	for (unsigned i = 0; i < grace_ms; i++) {
		if (supervise_poll(pid, status) != 0)
			return true;
		nanosleep(&ms, NULL);
	}
	return false;
}

void supervise_stop(pid_t pid, unsigned grace_ms, int *status)
{
	*status = 0;
	if (pid <= 0)
		return;
	if (kill(pid, SIGTERM) == 0 && wait_end(pid, grace_ms, status))
		return;
	kill(-pid, SIGKILL);
	kill(pid, SIGKILL);
	while (waitpid(pid, status, 0) < 0 && errno == EINTR)
		;
}

int supervise_pidfd(pid_t pid)
{
	int fd = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;

	return fd >= 0 ? fd : pid > 0 ? -errno : -ESRCH;
}

int supervise_poll_fd(int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };

	return poll(&p, 1, 0) == 1;
}

/* Up to ms for the process behind pidfd to end: true once it has. */
static bool wait_fd(int pidfd, unsigned ms)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	uint64_t until = clock_now_ns() + ms * 1000000ULL, now;
	int n;

	while ((n = poll(&p, 1, 0)) == 0 && (now = clock_now_ns()) < until)
		if (poll(&p, 1, (int)((until - now) / 1000000 + 1)) < 0 && errno != EINTR)
			return false;
	return n == 1 || supervise_poll_fd(pidfd);
}

/* A SIGKILLed process ends unless stuck in the kernel; not waited for
 * longer than this. */
#define ADOPTED_KILL_WAIT_MS 10000

void supervise_stop_fd(pid_t pid, int pidfd, unsigned grace_ms)
{
	if (pidfd < 0)
		return;
	if (syscall(SYS_pidfd_send_signal, pidfd, SIGTERM, NULL, 0) == 0 && wait_fd(pidfd, grace_ms))
		return;
	/* Its group: pid leads it (spawned with setpgid), and it is not
	 * reused while the leader lives, which the pidfd's poll says. */
	if (!supervise_poll_fd(pidfd))
		kill(-pid, SIGKILL);
	syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
	wait_fd(pidfd, ADOPTED_KILL_WAIT_MS);
}
