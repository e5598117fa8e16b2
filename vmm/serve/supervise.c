/* supervise.c - mayfly serve's VM processes: spawned from the service's main thread (their PDEATHSIG follows it), in process groups of their own, stopped and reaped. */
#include "serve/supervise.h"
#include "clock.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
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

/* In the child, between fork and exec: async-signal-safe calls only. */
static void __attribute__((noreturn)) child(const struct spawn_req *r, pid_t parent, int log_fd,
					    int null_fd)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	sigset_t none;

	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
		_exit(127);   /* the service already went: so does its VM */
	setpgid(0, 0);
	for (int sig = 1; sig < NSIG; sig++)
		sigaction(sig, &dfl, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (dup2(null_fd, STDIN_FILENO) < 0 || dup2(null_fd, STDOUT_FILENO) < 0 ||
	    dup2(log_fd, STDERR_FILENO) < 0)
		_exit(127);
	syscall(SYS_close_range, 3, ~0U, 0);
	execv(r->argv[0], r->argv);
	_exit(127);
}

static pid_t spawn_one(const struct spawn_req *r)
{
	int log_fd = open(r->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	pid_t parent = getpid(), pid = -EIO;

	if (log_fd < 0 || null_fd < 0) {
		pid = -errno;
		goto out_close;
	}
	pid = fork();
	if (pid == 0)
		child(r, parent, log_fd, null_fd);
	if (pid < 0)
		pid = -errno;
	else
		setpgid(pid, pid);   /* also here: no window where a group kill misses it */
out_close:
	if (log_fd >= 0)
		close(log_fd);
	if (null_fd >= 0)
		close(null_fd);
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
		r->result = s->closed ? -ESHUTDOWN : spawn_one(r);
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
