/* thread.h - helper threads a stop can always end: kicked out of blocking calls, joined for sure. */
#ifndef MAYFLY_LIB_THREAD_H
#define MAYFLY_LIB_THREAD_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

/* The signal thread_kick sends. Its handler does nothing and is installed
 * without SA_RESTART: the point is that the kicked thread's blocking call
 * (KVM_RUN, write, poll) returns EINTR. */
#define THREAD_KICK_SIGNAL SIGUSR1

/* How often thread_stop kicks a thread that outlived its grace: a kick
 * landing just before the thread enters its blocking call is lost, so one
 * is never enough. */
#define THREAD_KICK_INTERVAL_MS 10

/* Install THREAD_KICK_SIGNAL's handler. Idempotent and thread-safe; every
 * other function here calls it. 0 or -errno. */
int thread_init(void) __attribute__((warn_unused_result));

/* Every VMM thread's stack: 1 MiB, not glibc's default (RLIMIT_STACK,
 * 8 MiB). With transparent huge pages "always" (Debian's default), an
 * 8 MiB stack holds whole 2 MiB-aligned blocks, and khugepaged (or the
 * first fault) backs one with a huge page when the stack has touched a
 * single 4 KiB page of it: 2 MiB private in a VM that should cost less
 * than one. A stack smaller than a huge page never holds one. Our
 * threads do not recurse; their deepest frames use tens of KiB. */
#define THREAD_STACK_SIZE (1024 * 1024)

/* pthread_create with a THREAD_STACK_SIZE stack, the caller's signal mask
 * inherited as usual. 0 or -errno. */
int thread_create(pthread_t *thread, void *(*fn)(void *), void *arg)
	__attribute__((warn_unused_result));

/* thread_create, the new thread with every asynchronous signal blocked
 * but THREAD_KICK_SIGNAL: SIGINT/SIGTERM/SIGHUP stay for the main
 * thread's signalfd, whatever the caller's mask. (Signals a fault raises,
 * SIGSEGV and the like, are never blocked.) 0 or -errno. */
int thread_start(pthread_t *thread, void *(*fn)(void *), void *arg)
	__attribute__((warn_unused_result));

/* Detached threads counted, so that their owner can wait for the last
 * (a front end's thread per connection). */
struct thread_crew {
	pthread_mutex_t lock;
	pthread_cond_t ended;
	unsigned n;
};
void thread_crew_init(struct thread_crew *c);
/* fn(arg) on a detached thread_create'd thread, when fewer than max run.
 * 0; -EAGAIN at max; -errno. fn must end with thread_crew_done. */
int thread_crew_start(struct thread_crew *c, unsigned max, void *(*fn)(void *), void *arg)
	__attribute__((warn_unused_result));
void thread_crew_done(struct thread_crew *c);
/* Until none runs (tell them to end first). */
void thread_crew_wait(struct thread_crew *c);
void thread_crew_destroy(struct thread_crew *c);

/* set = SIGINT, SIGTERM and SIGHUP: the signals that stop a VM. */
void thread_stop_signals(sigset_t *set);

/* Block SIGINT, SIGTERM and SIGHUP on the calling thread (and the threads
 * it starts): they are for vm_run's signalfd, never a default action on a
 * thread that happens to be waiting elsewhere. */
void thread_block_stop_signals(void);

/* Make `thread`'s blocking system call return EINTR, now or (if it is not
 * in one) never: a thread that must see the kick checks a flag after the
 * call. Never blocks. Does nothing before a successful thread_init. */
void thread_kick(pthread_t thread);

/* Join `thread`, already told to stop: wait up to grace_ms for it to end by
 * itself; then set *give_up and kick it every THREAD_KICK_INTERVAL_MS until
 * it has ended. The thread must check *give_up after each blocking call
 * (thread_write_all does) and then return without blocking again. Returns
 * only once the thread has exited and been joined: true when it ended
 * within the grace, false when it had to give up. */
bool thread_stop(pthread_t thread, unsigned grace_ms, atomic_bool *give_up);

/* Name the calling thread "mayfly-<role>" (ps -L, /proc/PID/task/TID/comm;
 * at most 15 characters, the rest cut), before its seccomp filter, which
 * forbids the prctl. The main thread keeps the process's name. */
void thread_set_name(const char *role);

/* Main thread only, about to wait for long (a VM process, a jail's
 * supervisor): give back the pages of its stack below the current frame
 * (dead frames of the build, written after a fork or clone, so each copy
 * is this process's alone). Page by page down to the stack's first
 * unmapped page (the kernel keeps a gap below the main stack), at most
 * THREAD_DEAD_STACK_MAX; a page touched again comes back zeroed. Not for
 * other threads: below their stacks lie other mappings. */
#define THREAD_DEAD_STACK_MAX (1024 * 1024)
void thread_drop_dead_stack(void);

/* Write all of buf to fd from a thread thread_stop may end: retries short
 * writes and EINTR, waits in poll(2) when fd is non-blocking, and checks
 * *give_up after every call. 0, -ECANCELED once *give_up is set (what was
 * not written is dropped), or -errno of a failed write (EPIPE: the reader
 * is gone). */
int thread_write_all(int fd, const void *buf, size_t len, const atomic_bool *give_up);

#endif
