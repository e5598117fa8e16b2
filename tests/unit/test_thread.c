/* test_thread.c - helper threads start with the right signals, and a stop ends them even mid-write. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/thread.h"

static atomic_bool stop, give_up;

struct writer {
	int fd;
	int rc;
	size_t len;
};

/* Write 1 MiB to w->fd through thread_write_all. */
static void *write_mib(void *arg)
{
	static char buf[1 << 20];
	struct writer *w = arg;

	memset(buf, 'x', sizeof(buf));
	w->rc = thread_write_all(w->fd, buf, sizeof(buf), &give_up);
	return NULL;
}

Test(thread, stop_ends_a_thread_blocked_in_write, .timeout = 30)
{
	struct writer w = { 0 };
	pthread_t t;
	uint64_t start;
	int p[2];

	cr_assert_eq(pipe(p), 0);
	w.fd = p[1];
	cr_assert_eq(thread_start(&t, write_mib, &w), 0);
	start = clock_now_ns();
	/* Nobody reads the pipe: the writer blocks for good after 64 KiB. */
	cr_assert_not(thread_stop(t, 100, &give_up), "the thread ended within its grace?");
	cr_assert_lt(clock_now_ns() - start, 10000000000ULL, "thread_stop took over 10 s");
	cr_assert(atomic_load(&give_up));
	cr_assert_eq(w.rc, -ECANCELED, "thread_write_all returned %d", w.rc);
	close(p[0]);
	close(p[1]);
}

static void *wait_for_stop(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop))
		usleep(1000);
	return NULL;
}

Test(thread, stop_of_a_thread_that_ends_by_itself)
{
	pthread_t t;

	cr_assert_eq(thread_start(&t, wait_for_stop, NULL), 0);
	atomic_store(&stop, true);
	cr_assert(thread_stop(t, 10000, &give_up));
	cr_assert_not(atomic_load(&give_up), "no reason to give up");
}

static void *report_mask(void *arg)
{
	sigset_t *mask = arg;

	pthread_sigmask(SIG_BLOCK, NULL, mask);
	return NULL;
}

Test(thread, only_the_kick_signal_reaches_a_helper_thread)
{
	sigset_t none, mask;
	pthread_t t;

	sigemptyset(&none);
	pthread_sigmask(SIG_SETMASK, &none, NULL);
	cr_assert_eq(thread_start(&t, report_mask, &mask), 0);
	pthread_join(t, NULL);
	cr_assert(sigismember(&mask, SIGINT));
	cr_assert(sigismember(&mask, SIGTERM));
	cr_assert(sigismember(&mask, SIGHUP));
	cr_assert_not(sigismember(&mask, THREAD_KICK_SIGNAL));
	cr_assert_not(sigismember(&mask, SIGSEGV), "a fault must still be reported");
	/* The caller's own mask is left as it was. */
	pthread_sigmask(SIG_BLOCK, NULL, &mask);
	cr_assert_not(sigismember(&mask, SIGINT));
}

static void *drain_slowly(void *arg)
{
	int fd = *(int *)arg;
	char buf[4096];
	size_t total = 0;
	ssize_t n;

	usleep(50000);   /* let the writer find the pipe full first */
	while (total < (1 << 20) && (n = read(fd, buf, sizeof(buf))) > 0)
		total += (size_t)n;
	return (void *)total;
}

Test(thread, write_all_waits_on_a_non_blocking_fd, .timeout = 30)
{
	struct writer w = { 0 };
	pthread_t reader;
	void *total;
	int p[2];

	cr_assert_eq(pipe(p), 0);
	cr_assert_eq(fcntl(p[1], F_SETFL, O_NONBLOCK), 0, "only the write end");
	w.fd = p[1];
	cr_assert_eq(pthread_create(&reader, NULL, drain_slowly, &p[0]), 0);
	write_mib(&w);
	cr_assert_eq(w.rc, 0, "thread_write_all: %s", strerror(-w.rc));
	pthread_join(reader, &total);
	cr_assert_eq((size_t)total, 1 << 20, "every byte arrives");
	close(p[0]);
	close(p[1]);
}

#define DEEP_BYTES (64 * 1024)

/* A deep frame that writes its pages, then returns: where they were
 * (an address only, never used as a pointer). */
static __attribute__((noinline)) void dirty_deep_frame(uintptr_t *where)
{
	volatile char buf[DEEP_BYTES];

	for (size_t i = 0; i < sizeof(buf); i += 512)
		buf[i] = 1;
	*where = (uintptr_t)&buf[0];
}

static unsigned resident_pages(uintptr_t from, size_t len)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), start = (from + page - 1) & ~(page - 1);
	unsigned char vec[DEEP_BYTES / 4096 + 1];
	unsigned n = 0;

	len = (len - (start - from)) & ~(page - 1);
	cr_assert_eq(mincore((void *)start, len, vec), 0, "%s", strerror(errno));
	for (size_t i = 0; i < len / page; i++)
		n += vec[i] & 1;
	return n;
}

/* The main thread's dead frames go back to the kernel; the live ones and
 * what runs after stay intact. */
Test(thread, dead_stack_below_the_frame_given_back)
{
	volatile int live = 42;
	uintptr_t deep, again;

	dirty_deep_frame(&deep);
	size_t len = DEEP_BYTES / 2;   /* the deepest half: far below this frame */

	cr_assert_gt(resident_pages(deep, len), 0, "the deep frame's pages were written");
	thread_drop_dead_stack();
	cr_assert_eq(resident_pages(deep, len), 0, "the dead frames' pages are given back");
	cr_assert_eq(live, 42);
	dirty_deep_frame(&again);
	cr_assert_gt(resident_pages(again, len), 0, "the stack is usable again");
}

/* The stack mapping a thread runs on, from pthread_getattr_np. */
static void *stack_size_of_self(void *arg)
{
	pthread_attr_t attr;
	void *addr;
	size_t *size = arg;

	if (pthread_getattr_np(pthread_self(), &attr) == 0) {
		pthread_attr_getstack(&attr, &addr, size);
		pthread_attr_destroy(&attr);
	}
	return NULL;
}

/* Smaller than a transparent huge page (2 MiB on x86-64), a stack can never
 * be backed by one: no thread of a VM costs 2 MiB for a few KiB used. */
Test(thread, stacks_cannot_hold_a_huge_page)
{
	size_t size = 0;
	pthread_t t;

	cr_assert_eq(thread_create(&t, stack_size_of_self, &size), 0);
	pthread_join(t, NULL);
	cr_assert_geq(size, (size_t)THREAD_STACK_SIZE);
	cr_assert_lt(size, (size_t)2 << 20, "a thread's stack is %zu bytes", size);

	size = 0;
	cr_assert_eq(thread_start(&t, stack_size_of_self, &size), 0);
	pthread_join(t, NULL);
	cr_assert_lt(size, (size_t)2 << 20, "thread_start's stack is %zu bytes", size);
}
