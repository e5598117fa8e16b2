/* thread.c - starting, kicking and surely joining the VMM's helper threads. */
#include "lib/thread.h"
#include "lib/clock.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

static pthread_once_t kick_once = PTHREAD_ONCE_INIT;
static int kick_installed;   /* 1 once the handler is in place, else -errno */

static void kick_handler(int sig)
{
	(void)sig;
}

static void kick_install(void)
{
	/* No SA_RESTART: a restarted write() would block again. */
	struct sigaction sa = { .sa_handler = kick_handler };

	sigemptyset(&sa.sa_mask);
	kick_installed = sigaction(THREAD_KICK_SIGNAL, &sa, NULL) < 0 ? -errno : 1;
}

int thread_init(void)
{
	pthread_once(&kick_once, kick_install);
	return kick_installed < 0 ? kick_installed : 0;
}

int thread_create(pthread_t *thread, void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	int rc = pthread_attr_init(&attr);

	if (rc)
		return -rc;
	rc = pthread_attr_setstacksize(&attr, THREAD_STACK_SIZE);
	if (!rc)
		rc = pthread_create(thread, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return -rc;
}

void thread_crew_init(struct thread_crew *c)
{
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->ended, NULL);
	c->n = 0;
}

int thread_crew_start(struct thread_crew *c, unsigned max, void *(*fn)(void *), void *arg)
{
	pthread_t t;
	int rc = -EAGAIN;

	pthread_mutex_lock(&c->lock);
	if (c->n < max) {
		rc = thread_create(&t, fn, arg);
		if (!rc) {
			pthread_detach(t);
			c->n++;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

void thread_crew_done(struct thread_crew *c)
{
	pthread_mutex_lock(&c->lock);
	c->n--;
	pthread_cond_broadcast(&c->ended);
	pthread_mutex_unlock(&c->lock);
}

void thread_crew_wait(struct thread_crew *c)
{
	pthread_mutex_lock(&c->lock);
	while (c->n)
		pthread_cond_wait(&c->ended, &c->lock);
	pthread_mutex_unlock(&c->lock);
}

void thread_crew_destroy(struct thread_crew *c)
{
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->ended);
}

int thread_start(pthread_t *thread, void *(*fn)(void *), void *arg)
{
	static const int deliverable[] = {
		THREAD_KICK_SIGNAL, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS,
	};
	sigset_t all, old;
	int rc = thread_init();

	if (rc)
		return rc;
	/* The new thread inherits the mask in force at pthread_create. A
	 * fault's signal stays deliverable: blocked, it would kill the
	 * process without a word (or a sanitizer's report). */
	sigfillset(&all);
	for (size_t i = 0; i < sizeof(deliverable) / sizeof(deliverable[0]); i++)
		sigdelset(&all, deliverable[i]);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = thread_create(thread, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

void thread_stop_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGHUP);
}

void thread_block_stop_signals(void)
{
	sigset_t set;

	thread_stop_signals(&set);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
}

void thread_set_name(const char *role)
{
	char name[16];   /* TASK_COMM_LEN */

	snprintf(name, sizeof(name), "mayfly-%s", role);
	prctl(PR_SET_NAME, name, 0, 0, 0);
}

void thread_kick(pthread_t thread)
{
	/* Without the handler the signal's default action ends the process. */
	if (thread_init() == 0)
		pthread_kill(thread, THREAD_KICK_SIGNAL);
}

bool thread_stop(pthread_t thread, unsigned grace_ms, atomic_bool *give_up)
{
	struct timespec deadline = clock_realtime_after_ms(grace_ms);
	int rc = pthread_timedjoin_np(thread, NULL, &deadline);

	if (rc != ETIMEDOUT)
		return true;   /* joined (or not joinable at all: a caller's bug) */
	atomic_store(give_up, true);
	do {
		thread_kick(thread);
		deadline = clock_realtime_after_ms(THREAD_KICK_INTERVAL_MS);
		rc = pthread_timedjoin_np(thread, NULL, &deadline);
	} while (rc == ETIMEDOUT);
	return false;
}

int thread_write_all(int fd, const void *buf, size_t len, const atomic_bool *give_up)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n;

		if (atomic_load(give_up))
			return -ECANCELED;
		n = write(fd, p, len);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			/* Someone made fd non-blocking: wait the way write would have. */
			struct pollfd pfd = { .fd = fd, .events = POLLOUT };

			poll(&pfd, 1, -1);
		} else if (n < 0 && errno != EINTR) {
			return -errno;
		} else if (n == 0) {
			return -EIO;
		}
	}
	return 0;
}

/* noinline: its own frame is the current one, and madvise's call is
 * within the two pages spared below it. */
__attribute__((noinline)) void thread_drop_dead_stack(void)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t top = ((uintptr_t)__builtin_frame_address(0) & ~(page - 1)) - 2 * page;

	for (uintptr_t p = top; top - p < THREAD_DEAD_STACK_MAX && p >= page; p -= page)
		if (madvise((void *)p, page, MADV_DONTNEED) < 0)
			break;
}

