/* proc.c - one process of a container (its init or an exec): run in the VM through the guest agent, its stdio carried to and from containerd's fifos, its exit recorded. */
#include "shim/proc.h"
#include "agent_client/session.h"
#include "lib/errmsg.h"
#include "lib/log.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROC_MAX_OUTPUT (1ULL << 62)   /* containerd's fifos: no cap of ours */

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static char *dup_or_null(const char *s, bool *failed)
{
	char *copy;

	if (!s || !*s)
		return NULL;
	copy = strdup(s);
	*failed |= copy == NULL;
	return copy;
}

int proc_init(struct shim_proc *p, const char *exec_id, struct oci_process *spec,
	      const char *stdin_path, const char *stdout_path, const char *stderr_path,
	      bool terminal, const char *root, pthread_mutex_t *lock, pthread_cond_t *changed)
{
	bool failed = false;

	memset(p, 0, sizeof(*p));
	snprintf(p->exec_id, sizeof(p->exec_id), "%s", exec_id ? exec_id : "");
	p->spec = *spec;
	memset(spec, 0, sizeof(*spec));
	p->stdin_path = dup_or_null(stdin_path, &failed);
	p->stdout_path = dup_or_null(stdout_path, &failed);
	p->stderr_path = dup_or_null(stderr_path, &failed);
	p->terminal = terminal;
	p->root = root;
	p->lock = lock;
	p->changed = changed;
	p->state = PROC_CREATED;
	p->in_fd = p->out_fd = p->err_fd = -1;
	p->sig[0] = p->sig[1] = p->winch[0] = p->winch[1] = -1;
	if (failed) {
		proc_destroy(p);
		return -ENOMEM;
	}
	return 0;
}

/* containerd's fifos. Output ones are opened read-write: that never waits
 * for a reader, and a reader that comes and goes costs the process no
 * EPIPE. stdin is opened without waiting for its writer, then read
 * blocking (the session polls it first). */
static int open_stdio(struct shim_proc *p, char *err, size_t errlen)
{
	const char *paths[3] = { p->stdin_path, p->stdout_path, p->stderr_path };
	int *fds[3] = { &p->in_fd, &p->out_fd, &p->err_fd };

	for (int i = 0; i < 3; i++) {
		if (!paths[i])
			continue;
		*fds[i] = open(paths[i], (i ? O_RDWR : O_RDONLY) | O_NONBLOCK | O_CLOEXEC);
		if (*fds[i] < 0) {
			int rc = -errno;

			snprintf(err, errlen, "cannot open the %s fifo '%.200s': %s",
				 i == 0 ? "stdin" : i == 1 ? "stdout" : "stderr", paths[i], strerror(errno));
			return rc;
		}
		fcntl(*fds[i], F_SETFL, fcntl(*fds[i], F_GETFL) & ~O_NONBLOCK);
	}
	return 0;
}

static void note_started(void *opaque, uint32_t pid)
{
	struct shim_proc *p = opaque;

	pthread_mutex_lock(p->lock);
	p->pid = pid;
	p->state = PROC_RUNNING;
	pthread_cond_broadcast(p->changed);
	pthread_mutex_unlock(p->lock);
}

/* What containerd reports as the exit status: the command's code, 128 +
 * the signal that killed it, and 137 (SIGKILL's) when the VM or its agent
 * went away under it. */
static uint32_t exit_status(const struct exec_result *res)
{
	if (res->signo)
		return 128u + (uint32_t)res->signo;
	if (res->error[0] && res->started_ns)
		return 128u + SIGKILL;
	return (uint32_t)res->exit_code;
}

static void *proc_thread(void *arg)
{
	struct shim_proc *p = arg;
	struct exec_spec spec;
	struct exec_result res;

	session_spec_init(&spec);
	spec.argv = p->spec.argv;
	spec.argc = p->spec.argc;
	spec.env = p->spec.env;
	spec.nenv = p->spec.nenv;
	spec.cwd = p->spec.cwd;
	spec.root = p->root;
	spec.uid = p->spec.uid;
	spec.gid = p->spec.gid;
	spec.groups = p->spec.groups;
	spec.ngroups = p->spec.ngroups;
	spec.stdin_fd = p->in_fd;
	spec.out_fd = p->out_fd;
	spec.err_fd = p->err_fd;
	spec.pty = p->terminal;
	spec.rows = 24;
	spec.cols = 80;
	spec.signal_fd = p->sig[0];
	spec.winch_fd = p->winch[0];
	spec.tty_fd = -1;
	spec.max_output = PROC_MAX_OUTPUT;
	spec.started = note_started;
	spec.started_opaque = p;
	session_exec(p->client, &spec, &res);
	if (res.error[0])
		log_info("process %s%s: %s", p->exec_id[0] ? "exec " : "init", p->exec_id, res.error);
	pthread_mutex_lock(p->lock);
	if (!res.started_ns)
		snprintf(p->error, sizeof(p->error), "%s", res.error[0] ? res.error : "it did not start");
	p->exit_status = res.started_ns ? exit_status(&res) : 0;
	clock_gettime(CLOCK_REALTIME, &p->exited_at);
	p->state = PROC_STOPPED;
	pthread_cond_broadcast(p->changed);
	pthread_mutex_unlock(p->lock);
	/* Its output is all written: the readers see the end. */
	close_fd(&p->out_fd);
	close_fd(&p->err_fd);
	agent_client_close(p->client);
	if (res.started_ns && p->on_exit)
		p->on_exit(p, p->on_exit_opaque);
	return NULL;
}

int proc_start(struct shim_proc *p, struct sandbox *vm, proc_exit_fn on_exit, void *opaque,
	       char *err, size_t errlen)
{
	int rc = open_stdio(p, err, errlen);

	if (!rc && (pipe2(p->sig, O_CLOEXEC | O_NONBLOCK) < 0 ||
		    pipe2(p->winch, O_CLOEXEC | O_NONBLOCK) < 0))
		rc = errmsg_invalid(err, errlen, "cannot make a pipe: %s", strerror(errno));
	if (!rc && !(p->client = calloc(1, sizeof(*p->client))))
		rc = errmsg_invalid(err, errlen, "out of memory");
	if (!rc)
		rc = sandbox_connect(vm, p->client, err, errlen);
	p->on_exit = on_exit;
	p->on_exit_opaque = opaque;
	if (!rc) {
		rc = -pthread_create(&p->thread, NULL, proc_thread, p);
		if (rc)
			snprintf(err, errlen, "cannot start a thread: %s", strerror(-rc));
		p->thread_started = rc == 0;
	}
	pthread_mutex_lock(p->lock);
	if (rc) {
		snprintf(p->error, sizeof(p->error), "%s", err);
		p->state = PROC_STOPPED;
		clock_gettime(CLOCK_REALTIME, &p->exited_at);
		pthread_cond_broadcast(p->changed);
	}
	while (p->state == PROC_CREATED)
		pthread_cond_wait(p->changed, p->lock);
	if (!rc && !p->pid) {
		/* It stopped without starting: the agent said why. */
		snprintf(err, errlen, "%s", p->error);
		rc = -ENOEXEC;
	}
	pthread_mutex_unlock(p->lock);
	return rc;
}

/* Under *p->lock: whether p runs. */
static bool running(struct shim_proc *p)
{
	bool r;

	pthread_mutex_lock(p->lock);
	r = p->state == PROC_RUNNING;
	pthread_mutex_unlock(p->lock);
	return r;
}

int proc_signal(struct shim_proc *p, int signo)
{
	uint8_t b = (uint8_t)signo;

	if (signo < 1 || signo > 64)
		return -EINVAL;
	if (!running(p))
		return -ESRCH;
	return write(p->sig[1], &b, 1) == 1 ? 0 : -errno;
}

int proc_resize(struct shim_proc *p, uint16_t rows, uint16_t cols)
{
	uint16_t size[2] = { rows, cols };

	if (!p->terminal)
		return -EINVAL;
	if (!running(p))
		return -ESRCH;
	return write(p->winch[1], size, sizeof(size)) == (ssize_t)sizeof(size) ? 0 : -errno;
}

int proc_close_stdin(struct shim_proc *p)
{
	int fd;

	if (!running(p))
		return -ESRCH;
	if (!p->stdin_path)
		return 0;
	/* The session sees stdin's end once every writer of the fifo is gone:
	 * one of ours that comes and goes makes sure it sees one even if the
	 * client never opened it (a fifo's reader is hung up on only after a
	 * writer has been there). */
	fd = open(p->stdin_path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd >= 0)
		close(fd);
	return 0;
}

void proc_destroy(struct shim_proc *p)
{
	if (p->thread_started)
		pthread_join(p->thread, NULL);
	p->thread_started = false;
	if (p->client) {
		agent_client_close(p->client);
		free(p->client);
		p->client = NULL;
	}
	close_fd(&p->in_fd);
	close_fd(&p->out_fd);
	close_fd(&p->err_fd);
	for (int i = 0; i < 2; i++) {
		close_fd(&p->sig[i]);
		close_fd(&p->winch[i]);
	}
	oci_process_free(&p->spec);
	free(p->stdin_path);
	free(p->stdout_path);
	free(p->stderr_path);
	p->stdin_path = p->stdout_path = p->stderr_path = NULL;
}
