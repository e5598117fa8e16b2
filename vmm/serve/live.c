/* live.c - mayfly serve's live sandboxes: pause (saved as a snapshot, its VM gone), resume, fork into children, through mayfly pause/fork on the VM's control socket. */
#include "serve/live.h"
#include "lib/clock.h"
#include "lib/fs_tree.h"
#include "lib/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PAUSE_EXIT_S    10      /* after a pause, for the VM process to end */
#define CTL_EXIT_BUSY   5       /* mayfly pause/fork: a call is in flight */

extern char **environ;

/* Run `mayfly pause|fork --vsock VSOCK --out DIR`: its stderr appended to
 * sb's log (best effort: the disk may be the full one) and its last line
 * kept in tail, which says why it failed. Its exit code, or -errno. */
static int run_ctl_once(struct service *svc, struct sandbox *sb, const char *cmd, const char *dir,
			char *tail, size_t tlen)
{
	char *argv[] = { svc->cfg.exe, (char *)cmd, "--vsock", sb->vsock, "--out", (char *)dir,
			 NULL };
	char log[CONFIG_PATH_MAX + 8], buf[1024];
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, dflt;
	size_t kept = 0;
	int rc, status, pfd[2], logfd;
	ssize_t n;
	pid_t pid;

	tail[0] = '\0';
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -errno;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], STDERR_FILENO);
	posix_spawnattr_init(&attr);
	sigemptyset(&none);
	sigfillset(&dflt);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &dflt);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	rc = posix_spawn(&pid, argv[0], &fa, &attr, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	close(pfd[1]);
	if (rc) {
		close(pfd[0]);
		return -rc;
	}
	snprintf(log, sizeof(log), "%s/log", sb->dir);
	logfd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	/* Until its end of file: the last sizeof(buf) - 1 bytes kept. */
	while ((n = read(pfd[0], buf + kept, sizeof(buf) - 1 - kept)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		/* On a full disk the log loses it; the caller still gets the line. */
		if (logfd >= 0 && write(logfd, buf + kept, (size_t)n) < 0) {
			close(logfd);
			logfd = -1;
		}
		kept += (size_t)n;
		if (kept == sizeof(buf) - 1) {
			memmove(buf, buf + kept / 2, kept - kept / 2);
			kept -= kept / 2;
		}
	}
	close(pfd[0]);
	if (logfd >= 0)
		close(logfd);
	registry_last_line(buf, kept, tail, tlen);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The service holds sb for this call alone (no other call of ours is in
 * flight), but the guest agent ends a connection a moment after the host
 * saw the exit of its exec: "busy" then means "not yet", for a bounded
 * while (BUSY_WAIT_MS). A call of someone else's is refused before this. */
#define BUSY_WAIT_MS 3000
static int run_ctl(struct service *svc, struct sandbox *sb, const char *cmd, const char *dir,
		   char *tail, size_t tlen)
{
	struct timespec step = { 0, 100000000 };
	int code;

	for (int waited = 0;; waited += 100) {
		code = run_ctl_once(svc, sb, cmd, dir, tail, tlen);
		if (code != CTL_EXIT_BUSY || waited >= BUSY_WAIT_MS)
			return code;
		nanosleep(&step, NULL);
	}
}

/* Audit a pause, resume or fork: tool, the snapshot's directory, result. */
static void audit(struct service *svc, struct sandbox *sb, const char *caller, const char *tool,
		  const char *dir, int rc, const char *msg)
{
	json_t *call = gate_file_call(tool, dir, NULL);
	struct gate g = svc->gate;
	char why[300];
	uint64_t t0;

	g.sandbox = sb->id;
	g.caller = caller;
	if (!call)
		return;
	/* Not an exec or a write: recorded, never asked about. */
	if (!gate_ask(&g, call, &t0, why, sizeof(why)) &&
	    gate_record_file(&g, call, t0, rc, msg, NULL, why, sizeof(why)))
		log_warn("serve: %s", why);
	json_decref(call);
}

static void set_state(struct service *svc, struct sandbox *sb, enum sb_state st)
{
	pthread_mutex_lock(&svc->lock);
	sb->state = st;
	pthread_cond_broadcast(&svc->changed);
	pthread_mutex_unlock(&svc->lock);
}

static void ctl_failed(struct sandbox *sb, const char *what, int code, const char *tail,
		       char *err, size_t errlen)
{
	snprintf(err, errlen, "cannot %s sandbox %s (mayfly %s exited %d)%s%s", what, sb->id, what,
		 code, tail[0] ? ": " : "", tail);
}

int live_pause(struct service *svc, struct sandbox *sb, const char *caller, char *err,
	       size_t errlen)
{
	char dir[CONFIG_PATH_MAX + 16], tail[300];
	struct timespec ms = { 0, 10000000 };
	int code, i;

	snprintf(dir, sizeof(dir), "%s/" SERVICE_PAUSED, sb->dir);
	code = run_ctl(svc, sb, "pause", dir, tail, sizeof(tail));
	if (code) {
		if (code == CTL_EXIT_BUSY)
			snprintf(err, errlen, "sandbox %s is busy (a call is in flight in it): try "
				 "again when it ends", sb->id);
		else
			ctl_failed(sb, "pause", code, tail, err, errlen);
		audit(svc, sb, caller, "pause", dir, -EIO, err);
		pthread_mutex_lock(&svc->lock);
		sb->state = service_vm_ended(sb) ? SB_EXITED : SB_RUNNING;
		if (sb->state == SB_EXITED)
			snprintf(sb->reason, sizeof(sb->reason), "its VM process ended in a pause");
		pthread_cond_broadcast(&svc->changed);
		pthread_mutex_unlock(&svc->lock);
		return code == CTL_EXIT_BUSY ? 409 : 500;
	}
	/* Saved: the VM process ends by itself. */
	for (i = 0; i < PAUSE_EXIT_S * 100 && !service_vm_ended(sb); i++)
		nanosleep(&ms, NULL);
	if (i == PAUSE_EXIT_S * 100)
		service_vm_stop(sb, 0);
	service_clean_vm(svc, sb->id);
	service_vm_forget(sb);
	service_record(sb, "paused");
	audit(svc, sb, caller, "pause", dir, 0, "");
	set_state(svc, sb, SB_PAUSED);
	return 0;
}

static void *pause_main(void *arg)
{
	struct sandbox *sb = arg;
	struct service *svc = sb->svc;
	char err[400];

	if (live_pause(svc, sb, "idle_timeout", err, sizeof(err)))
		log_warn("serve: auto-pause: %s", err);
	service_put(svc, sb);
	return NULL;
}

int live_pause_async(struct service *svc, struct sandbox *sb)
{
	pthread_attr_t attr;
	pthread_t t;
	int rc;

	sb->svc = svc;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&t, &attr, pause_main, sb);
	pthread_attr_destroy(&attr);
	return -rc;
}

int live_resume(struct service *svc, struct sandbox *sb, char *err, size_t errlen)
{
	char dir[CONFIG_PATH_MAX + 16], done[CONFIG_PATH_MAX + 24];
	uint64_t t0 = clock_now_ns();
	int rc;

	snprintf(dir, sizeof(dir), "%s/" SERVICE_PAUSED, sb->dir);
	rc = service_memory_ok(svc, err, errlen);
	if (!rc)
		rc = service_start_vm(svc, sb, NULL, dir, err, errlen);
	audit(svc, sb, "resume", "resume", dir, rc ? -EIO : 0, rc ? err : "");
	if (rc) {
		service_record(sb, "paused");
		set_state(svc, sb, SB_PAUSED);
		return rc;
	}
	/* The restored VM has its snapshot's files open: the names can go,
	 * and the next pause writes a new one. Renamed away first, whole: a
	 * restart that finds SERVICE_PAUSED finds it complete (adopt.c). */
	snprintf(done, sizeof(done), "%s.done", dir);
	if (rename(dir, done))
		log_warn("serve: cannot rename %s: %s", dir, strerror(errno));
	service_record(sb, "running");
	fs_remove_tree(done);
	metrics_observe(&svc->metrics, M_RESTORE, clock_now_ns() - t0);
	set_state(svc, sb, SB_RUNNING);
	return 0;
}

/* One child of a fork: a new sandbox restored from dir, like its parent,
 * not linked yet (no call sees it before the whole fork has succeeded). */
static int fork_child(struct service *svc, struct sandbox *parent, const char *dir,
		      struct sandbox **out, char *err, size_t errlen)
{
	struct sandbox *sb = service_new_sandbox(svc, parent->tmpl);
	int rc;

	if (!sb) {
		snprintf(err, errlen, "out of memory");
		return 500;
	}
	sb->rec = parent->rec;
	service_copy_env(sb, parent->env, parent->nenv);
	sb->meta = parent->meta ? json_deep_copy(parent->meta) : NULL;
	/* Its parent's network, as its environment. */
	if (api_net_copy(&sb->net, &parent->net)) {
		snprintf(err, errlen, "out of memory");
		rc = 500;
	} else {
		rc = service_start_vm(svc, sb, NULL, dir, err, errlen);
	}
	if (rc) {
		service_discard(svc, sb);
		return rc;
	}
	rc = service_save_spec(sb);
	if (rc) {
		snprintf(err, errlen, "cannot write the sandbox's spec: %s", strerror(-rc));
		service_discard(svc, sb);
		return 500;
	}
	sb->state = SB_RUNNING;
	service_record(sb, "running");
	*out = sb;
	return 0;
}

/* Children restored at once: each restore mostly waits (for its jail, its
 * VM's restore, its agent), so a few per CPU keep the CPUs busy; more would
 * only stretch every child's wait towards the boot deadline. */
static unsigned fork_parallel(unsigned count)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned n = cpus > 0 ? (unsigned)cpus * LIVE_FORK_PER_CPU : LIVE_FORK_PER_CPU;

	if (n > LIVE_FORK_PARALLEL_MAX)
		n = LIVE_FORK_PARALLEL_MAX;
	return n < count ? n : count;
}

/* The children of one fork, restored by fork_parallel() threads. */
struct fork_batch {
	struct service *svc;
	struct sandbox *parent;
	const char *dir;
	pthread_mutex_t lock;
	unsigned count, next;      /* children asked for; the next to start */
	bool failed;               /* once set, no more are started */
	int rc;                    /* the first failure's status */
	char *err;                 /* and its message */
	size_t errlen;
	struct sandbox *made[LIVE_MAX_FORK];   /* NULL where none was made */
};

static void *fork_worker(void *arg)
{
	struct fork_batch *b = arg;
	char err[400];

	for (;;) {
		unsigned i;
		int rc;

		pthread_mutex_lock(&b->lock);
		if (b->failed || b->next == b->count) {
			pthread_mutex_unlock(&b->lock);
			return NULL;
		}
		i = b->next++;
		pthread_mutex_unlock(&b->lock);
		rc = fork_child(b->svc, b->parent, b->dir, &b->made[i], err, sizeof(err));
		if (!rc)
			continue;
		pthread_mutex_lock(&b->lock);
		if (!b->failed) {
			b->failed = true;
			b->rc = rc;
			snprintf(b->err, b->errlen, "child %u of %u: %s", i + 1, b->count, err);
		}
		pthread_mutex_unlock(&b->lock);
	}
}

/* Restore count children from dir, fork_parallel() at a time; all or none:
 * linked together once every child answers; on a failure (or a drain) the
 * children made are discarded, never seen by a call. 0 with *children
 * (their JSON, made before any call could delete one), or an HTTP status
 * with err (the first child's failure). */
static int fork_children(struct service *svc, struct sandbox *parent, const char *dir,
			 unsigned count, json_t **children, char *err, size_t errlen)
{
	struct fork_batch b = { .svc = svc, .parent = parent, .dir = dir, .count = count,
				.err = err, .errlen = errlen };
	pthread_t threads[LIVE_FORK_PARALLEL_MAX];
	unsigned started = 0, want = fork_parallel(count);

	pthread_mutex_init(&b.lock, NULL);
	for (; started < want; started++) {
		int rc = pthread_create(&threads[started], NULL, fork_worker, &b);

		if (rc) {
			/* Fewer at once still does it, unless there is none. */
			if (started)
				break;
			snprintf(err, errlen, "cannot start a thread: %s", strerror(rc));
			pthread_mutex_destroy(&b.lock);
			return 500;
		}
	}
	for (unsigned i = 0; i < started; i++)
		pthread_join(threads[i], NULL);
	pthread_mutex_destroy(&b.lock);
	if (!b.failed) {
		*children = json_array();
		for (unsigned i = 0; *children && i < count; i++)
			json_array_append_new(*children, service_sandbox_json(b.made[i]));
		if (service_link(svc, b.made, count)) {
			json_decref(*children);
			*children = NULL;
			b.rc = 503;
			snprintf(err, errlen, "the service is shutting down");
			b.failed = true;
		}
	}
	if (b.failed) {
		for (unsigned i = 0; i < count; i++)
			if (b.made[i])
				service_discard(svc, b.made[i]);
		return b.rc;
	}
	return 0;
}

int live_fork(struct service *svc, struct sandbox *sb, const char *caller, unsigned count,
	      json_t **children, char *err, size_t errlen)
{
	char dir[CONFIG_PATH_MAX + 64], tail[300];
	int code, rc = 0;

	if (count == 0 || count > LIVE_MAX_FORK) {
		snprintf(err, errlen, "a fork makes 1 to %u children", LIVE_MAX_FORK);
		return 400;
	}
	rc = service_memory_ok(svc, err, errlen);
	if (rc)
		return rc;
	pthread_mutex_lock(&svc->lock);
	if (svc->stopping || svc->count + count > svc->cfg.max_sandboxes) {
		pthread_mutex_unlock(&svc->lock);
		snprintf(err, errlen, "too many sandboxes for %u more (at most %u)", count,
			 svc->cfg.max_sandboxes);
		return 503;
	}
	svc->count += count;
	pthread_mutex_unlock(&svc->lock);
	snprintf(dir, sizeof(dir), "%s/forks", svc->cfg.state);
	mkdir(dir, 0700);
	snprintf(dir, sizeof(dir), "%s/forks/%s-%llu", svc->cfg.state, sb->id,
		 (unsigned long long)clock_now_ns());
	code = run_ctl(svc, sb, "fork", dir, tail, sizeof(tail));
	if (code) {
		if (code == CTL_EXIT_BUSY)
			snprintf(err, errlen, "sandbox %s is busy (a call is in flight in it): try "
				 "again when it ends", sb->id);
		else
			ctl_failed(sb, "fork", code, tail, err, errlen);
		rc = code == CTL_EXIT_BUSY ? 409 : 500;
	}
	if (!rc)
		rc = fork_children(svc, sb, dir, count, children, err, errlen);
	/* Every child has the snapshot's files open: the names can go. */
	fs_remove_tree(dir);
	audit(svc, sb, caller, "fork", dir, rc ? -EIO : 0, rc ? err : "");
	if (rc) {
		/* No child linked: every place given back. */
		pthread_mutex_lock(&svc->lock);
		svc->count -= count;
		pthread_mutex_unlock(&svc->lock);
		return rc;
	}
	return 201;
}
