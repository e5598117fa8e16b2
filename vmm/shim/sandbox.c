/* sandbox.c - a container's microVM: a child process of the shim that runs the one launch path (`containerd-shim-mayfly-v2 vm`, i.e. mayfly boot), reached over its vsock socket (the guest agent) and its control socket (suspend, resume). */
#include "shim/sandbox.h"
#include "agent_client/session.h"
#include "control/ctl_client.h"
#include "lib/clock.h"
#include "lib/errmsg.h"
#include "lib/log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define NS               1000000000ULL
#define SANDBOX_MAX_ARGS (32 + 2 * 64)
#define CTL_WAIT_S       30

static int dial(void *opaque)
{
	return agent_dial_unix(opaque);
}

/* The VM process's end, waited for here so that nothing else reaps it. */
static void *reap(void *arg)
{
	struct sandbox *s = arg;
	int status = 0;

	while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR)
		;
	pthread_mutex_lock(&s->lock);
	s->ended = true;
	s->exit_status = status;
	pthread_cond_broadcast(&s->ended_cond);
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* The options that make c's VM (a snapshot's key: not its id, socket,
 * hostname or network), after argv[0..n). */
static int vm_args(const struct sandbox_config *c, char **argv, int n, char bufs[4][160])
{
	argv[n++] = "--kernel";
	argv[n++] = (char *)c->kernel;
	argv[n++] = "--initrd";
	argv[n++] = (char *)c->initrd;
	argv[n++] = "--rootfs";
	argv[n++] = (char *)c->image;
	snprintf(bufs[0], sizeof(bufs[0]), "--mem=%llu", (unsigned long long)c->mem_mib);
	argv[n++] = bufs[0];
	snprintf(bufs[1], sizeof(bufs[1]), "--cpus=%u", c->cpus);
	argv[n++] = bufs[1];
	/* The image is the container's root, mounted by the guest's init;
	 * the VM's own root stays the initramfs (mayfly's init and agent). */
	argv[n++] = "--cmdline-append";
	argv[n++] = "mayfly.container=/dev/vda";
	/* Part of the device set, so of the snapshot and its key; a restore
	 * takes the snapshot's. */
	if (c->spare_disks) {
		snprintf(bufs[3], sizeof(bufs[3]), "--spare-disks=%u", c->spare_disks);
		argv[n++] = bufs[3];
	}
	if (c->cpu_pct) {
		snprintf(bufs[2], sizeof(bufs[2]), "--cpu-quota=%u", c->cpu_pct);
		argv[n++] = bufs[2];
	}
	if (c->verbose)
		argv[n++] = "-v";
	argv[n] = NULL;
	return n;
}

/* `self vm ...`: mayfly boot's options for c, cold or restored. */
static void build_argv(const struct sandbox_config *c, const char *vsock, char **argv,
		       char bufs[4][160])
{
	int n = 0;

	argv[n++] = (char *)c->self;
	argv[n++] = "vm";
	argv[n++] = "--id";
	argv[n++] = (char *)c->id;
	argv[n++] = "--vsock";
	argv[n++] = (char *)vsock;
	if (c->snapshot) {
		argv[n++] = "--snapshot";
		argv[n++] = (char *)c->snapshot;
		argv[n++] = "--rootfs";   /* the snapshot's image, by content */
		argv[n++] = (char *)c->image;   /* spare disk slots: the snapshot's */
		if (c->cpu_pct) {
			snprintf(bufs[2], sizeof(bufs[2]), "--cpu-quota=%u", c->cpu_pct);
			argv[n++] = bufs[2];
		}
		if (c->verbose)
			argv[n++] = "-v";
	} else {
		n = vm_args(c, argv, n, bufs);
	}
	for (int i = 0; i < c->nallow_net && n < SANDBOX_MAX_ARGS - 3; i++) {
		argv[n++] = "--allow-net";
		argv[n++] = c->allow_net[i];
	}
	argv[n] = NULL;
}

/* The child: stdin /dev/null, stdout onto stderr (the shim's log), no
 * other descriptor, then the VM. Only async-signal-safe calls: the shim
 * has threads. */
static void exec_vm(char **argv, int out_fd)
{
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	sigset_t none;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (null < 0 || dup2(null, STDIN_FILENO) < 0 ||
	    dup2(out_fd >= 0 ? out_fd : STDERR_FILENO, STDOUT_FILENO) < 0)
		_exit(127);
	syscall(SYS_close_range, 3, ~0U, 0);
	execv(argv[0], argv);
	_exit(127);
}

/*
 * Every VM is forked by one thread that lives as long as the shim: the
 * VM's jail supervisor dies with the thread that forked it (its
 * PDEATHSIG follows the parent thread), and a ttrpc worker thread may end
 * long before the container does.
 */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	char **argv;               /* a request; NULL: none */
	int out_fd;                /* its stdout; -1: our stderr */
	pid_t pid;                 /* its answer: the child, or -errno */
	bool answered, started;
	pthread_t thread;
} spawner = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static void *spawn_loop(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&spawner.lock);
	for (;;) {
		sigset_t all, old;
		pid_t pid;

		while (!spawner.argv)
			pthread_cond_wait(&spawner.cond, &spawner.lock);
		/* The child starts with every signal blocked, then exec's own mask. */
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		pid = fork();
		if (pid == 0)
			exec_vm(spawner.argv, spawner.out_fd);
		spawner.pid = pid < 0 ? -errno : pid;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		spawner.argv = NULL;
		spawner.answered = true;
		pthread_cond_broadcast(&spawner.cond);
	}
	return NULL;
}

int sandbox_spawner_start(void)
{
	int rc = pthread_create(&spawner.thread, NULL, spawn_loop, NULL);

	spawner.started = rc == 0;
	return -rc;
}

/* Fork and exec argv on the spawner thread, its stdout out_fd (-1: our
 * stderr): the child's pid, or -errno. */
static pid_t spawn(char **argv, int out_fd)
{
	pid_t pid;

	if (!spawner.started)
		return -ESRCH;
	pthread_mutex_lock(&spawner.lock);
	while (spawner.argv || spawner.answered)
		pthread_cond_wait(&spawner.cond, &spawner.lock);   /* one request at a time */
	spawner.argv = argv;
	spawner.out_fd = out_fd;
	pthread_cond_broadcast(&spawner.cond);
	while (!spawner.answered)
		pthread_cond_wait(&spawner.cond, &spawner.lock);
	pid = spawner.pid;
	spawner.answered = false;
	pthread_cond_broadcast(&spawner.cond);
	pthread_mutex_unlock(&spawner.lock);
	return pid;
}

int sandbox_guest_run(struct sandbox *s, char *const *argv, int argc, const char *what, char *err,
		      size_t errlen)
{
	struct agent_client *client = calloc(1, sizeof(*client));
	struct exec_spec spec;
	struct exec_result res;
	int rc;

	if (!client)
		return errmsg_invalid(err, errlen, "out of memory");
	rc = sandbox_connect(s, client, err, errlen);
	if (!rc) {
		session_spec_init(&spec);
		spec.argv = (char **)argv;
		spec.argc = argc;
		spec.out_fd = spec.err_fd = -1;
		spec.deadline_ns = clock_now_ns() + CTL_WAIT_S * NS;
		session_exec(client, &spec, &res);
		if (res.exit_code) {
			snprintf(err, errlen, "%s in the VM failed: %s", what,
				 res.error[0] ? res.error : "exit status not 0");
			rc = -EIO;
		}
	}
	agent_client_close(client);
	free(client);
	return rc;
}

/* The container's hostname, set in the VM (a restored guest has its
 * snapshot's): `hostname NAME` run by the agent in the VM's own root. */
static int set_hostname(struct sandbox *s, const char *name, char *err, size_t errlen)
{
	char *argv[] = { "hostname", (char *)name, NULL };

	return sandbox_guest_run(s, argv, 2, "setting the hostname", err, errlen);
}

int sandbox_insert_disk(struct sandbox *s, unsigned slot, const char *image, const char *id,
			char *err, size_t errlen)
{
	const char *why = "";
	int fd = open(image, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), rc;

	if (fd < 0)
		return errmsg_invalid(err, errlen, "cannot open '%.200s': %s", image, strerror(errno));
	rc = ctl_client_disk_insert(s->vsock, slot, fd, id, clock_now_ns() + CTL_WAIT_S * NS, s->pidfd,
				    &why);
	close(fd);
	if (rc)
		snprintf(err, errlen, "cannot insert the container's disk into the pod's VM: %s",
			 rc == -ENAMETOOLONG ? "no control socket" : why);
	return rc;
}

/* The VM makes its socket once it is built: with many VMs starting at
 * once that can take longer than the few seconds agent_client_connect
 * gives a missing socket, so wait here while the VM lives. */
static void wait_for_socket(struct sandbox *s, uint64_t deadline_ns)
{
	struct pollfd p = { .fd = s->pidfd, .events = POLLIN };

	while (access(s->vsock, F_OK) && clock_now_ns() < deadline_ns) {
		if (s->pidfd < 0)
			usleep(50 * 1000);
		else if (poll(&p, 1, 50) > 0)
			return;   /* the VM ended */
	}
}

int sandbox_start(struct sandbox *s, const struct sandbox_config *c, char *err, size_t errlen)
{
	char *argv[SANDBOX_MAX_ARGS + 1], bufs[4][160];
	struct agent_client *probe;
	const char *why = "";
	uint64_t deadline;
	int rc;

	memset(s, 0, sizeof(*s));
	s->pidfd = -1;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->ended_cond, NULL);
	if ((size_t)snprintf(s->vsock, sizeof(s->vsock), "%s/vm.sock", c->dir) >= sizeof(s->vsock))
		return errmsg_invalid(err, errlen, "the VM's socket path under '%s' is too long", c->dir);
	build_argv(c, s->vsock, argv, bufs);
	s->pid = spawn(argv, -1);
	if (s->pid < 0) {
		rc = s->pid;
		s->pid = 0;
		snprintf(err, errlen, "cannot start the VM: %s", strerror(-rc));
		return rc;
	}
	s->pidfd = (int)syscall(SYS_pidfd_open, s->pid, 0);
	rc = pthread_create(&s->reaper, NULL, reap, s);
	if (rc) {
		kill(s->pid, SIGKILL);
		waitpid(s->pid, NULL, 0);
		s->pid = 0;
		snprintf(err, errlen, "cannot start the VM's reaper: %s", strerror(rc));
		return -rc;
	}
	s->reaper_started = true;
	/* Up once its agent answers; the pidfd cuts the wait short if the VM
	 * dies first. */
	probe = calloc(1, sizeof(*probe));
	if (!probe) {
		sandbox_stop(s);
		return errmsg_invalid(err, errlen, "out of memory");
	}
	probe->fd = -1;
	deadline = clock_now_ns() + SANDBOX_START_TIMEOUT_S * NS;
	wait_for_socket(s, deadline);
	rc = agent_client_connect(probe, dial, s->vsock, PROTO_AGENT_PORT, deadline, s->pidfd,
				  &why);
	agent_client_close(probe);
	free(probe);
	if (!rc && c->hostname)
		rc = set_hostname(s, c->hostname, err, errlen);
	else if (rc)
		snprintf(err, errlen, "the VM's guest agent did not answer: %s%s", why,
			 sandbox_ended(s) ? " (the VM ended: see the shim's log)" : "");
	if (rc)
		sandbox_stop(s);
	return rc;
}

int sandbox_snapshot(const struct sandbox_config *c, char *dir, size_t len, char *err,
		     size_t errlen)
{
	char *argv[SANDBOX_MAX_ARGS + 1], bufs[4][160];
	int pipefd[2], status = 0;
	size_t got = 0;
	pid_t pid;

	argv[0] = (char *)c->self;
	argv[1] = "vm-snapshot";
	vm_args(c, argv, 2, bufs);
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return errmsg_invalid(err, errlen, "cannot make a pipe: %s", strerror(errno));
	pid = spawn(argv, pipefd[1]);
	close(pipefd[1]);
	if (pid < 0) {
		close(pipefd[0]);
		return errmsg_invalid(err, errlen, "cannot run vm-snapshot: %s", strerror((int)-pid));
	}
	/* Its one line: the directory. */
	for (;;) {
		ssize_t n = read(pipefd[0], dir + got, len - 1 - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
		if (got == len - 1)
			break;
	}
	close(pipefd[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	dir[got] = '\0';
	dir[strcspn(dir, "\n")] = '\0';
	if (!WIFEXITED(status) || WEXITSTATUS(status) || dir[0] != '/')
		return errmsg_invalid(err, errlen, "no snapshot of the VM (vm-snapshot status %d): "
				      "see the shim's log", status);
	return 0;
}

int sandbox_connect(struct sandbox *s, struct agent_client *client, char *err, size_t errlen)
{
	const char *why = "";
	int rc;

	client->fd = -1;
	rc = agent_client_connect(client, dial, s->vsock, PROTO_AGENT_PORT,
				  clock_now_ns() + AGENT_BOOT_TIMEOUT_S * NS, s->pidfd, &why);
	if (rc)
		snprintf(err, errlen, "cannot reach the guest agent: %s", why);
	return rc;
}

int sandbox_suspend(struct sandbox *s, bool suspend, char *err, size_t errlen)
{
	const char *why = "";
	int rc = ctl_client_call(s->vsock, suspend ? CTL_OP_SUSPEND : CTL_OP_RESUME,
				 clock_now_ns() + CTL_WAIT_S * NS, s->pidfd, &why);

	if (rc)
		snprintf(err, errlen, "cannot %s the VM: %s", suspend ? "pause" : "resume",
			 rc == -ENAMETOOLONG ? "no control socket" : why);
	return rc;
}

bool sandbox_ended(struct sandbox *s)
{
	bool ended;

	if (!s->reaper_started)
		return true;
	pthread_mutex_lock(&s->lock);
	ended = s->ended;
	pthread_mutex_unlock(&s->lock);
	return ended;
}

/* Wait until the VM process ended, at most ms. True when it did. */
static bool wait_ended(struct sandbox *s, int ms)
{
	struct timespec until = clock_realtime_after_ms((unsigned)ms);
	bool ended;

	pthread_mutex_lock(&s->lock);
	while (!s->ended)
		if (pthread_cond_timedwait(&s->ended_cond, &s->lock, &until) == ETIMEDOUT)
			break;
	ended = s->ended;
	pthread_mutex_unlock(&s->lock);
	return ended;
}

void sandbox_stop(struct sandbox *s)
{
	const char *why = "";

	if (!s->reaper_started)
		return;
	/* Asked through its control socket first (an end, exit 0, not an
	 * error line); SIGTERM if it does not answer. The pidfd names this
	 * process even if its pid was reused. */
	if (!sandbox_ended(s) &&
	    (ctl_client_call(s->vsock, CTL_OP_STOP, clock_now_ns() + 2 * NS, s->pidfd, &why) ||
	     !wait_ended(s, SANDBOX_STOP_GRACE_MS)) &&
	    !sandbox_ended(s) && s->pidfd >= 0)
		syscall(SYS_pidfd_send_signal, s->pidfd, SIGTERM, NULL, 0);
	if (!wait_ended(s, SANDBOX_STOP_GRACE_MS)) {
		log_warn("the VM %d did not end within %d ms of SIGTERM: killing it", (int)s->pid,
			 SANDBOX_STOP_GRACE_MS);
		if (s->pidfd >= 0)
			syscall(SYS_pidfd_send_signal, s->pidfd, SIGKILL, NULL, 0);
	}
	pthread_join(s->reaper, NULL);
	s->reaper_started = false;
	if (s->pidfd >= 0)
		close(s->pidfd);
	s->pidfd = -1;
	s->pid = 0;
	pthread_cond_destroy(&s->ended_cond);
	pthread_mutex_destroy(&s->lock);
}

int sandbox_cgroup(struct sandbox *s, char *path, size_t len)
{
	char file[64], line[512];
	FILE *f;
	int child = 0;

	if (sandbox_ended(s))
		return -ESRCH;
	/* The jailed VM process is the supervisor's one child. */
	snprintf(file, sizeof(file), "/proc/%d/task/%d/children", (int)s->pid, (int)s->pid);
	f = fopen(file, "re");
	if (!f || fscanf(f, "%d", &child) != 1)
		child = s->pid;   /* --no-jail: the VM is this process */
	if (f)
		fclose(f);
	snprintf(file, sizeof(file), "/proc/%d/cgroup", child);
	f = fopen(file, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "0::/", 4))
			continue;
		line[strcspn(line, "\n")] = '\0';
		fclose(f);
		if (!strcmp(line, "0::/"))
			return -ENOENT;
		return (size_t)snprintf(path, len, "/sys/fs/cgroup%s", line + 3) < len ? 0 : -ENAMETOOLONG;
	}
	fclose(f);
	return -ENOENT;
}
