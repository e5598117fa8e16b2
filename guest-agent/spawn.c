/* spawn.c - fork and exec one EXEC request: a new session, pipes or a PTY, env, cwd, PATH search, errno back to the agent. */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

/* What failed in the child before the program ran (status pipe stage). */
enum spawn_stage {
	STAGE_SETUP = 1, STAGE_TTY = 2, STAGE_CHDIR = 3, STAGE_EXEC = 4, STAGE_CHROOT = 5,
	STAGE_USER = 6,
};

/* PROTO_EXEC_ROOT's groups go to setgroups as they are. */
_Static_assert(sizeof(gid_t) == sizeof(uint32_t), "gid_t is 32 bits");

const char *spawn_stage_name(uint32_t stage)
{
	static const char *const names[] = {
		[STAGE_SETUP] = "setting up stdio", [STAGE_TTY] = "taking the terminal",
		[STAGE_CHDIR] = "chdir", [STAGE_EXEC] = "execve", [STAGE_CHROOT] = "chroot",
		[STAGE_USER] = "setting the user (setgroups, setgid, setuid)",
	};

	return stage < sizeof(names) / sizeof(names[0]) && names[stage] ? names[stage] : "exec";
}

/* The child's end: tell the agent what failed, and go. Only async-signal-safe
 * calls from here on, as in any child of fork. */
static void __attribute__((noreturn)) child_fail(int st, uint32_t stage, int err)
{
	uint32_t msg[2] = { stage, (uint32_t)err };
	ssize_t n;

	do
		n = write(st, msg, sizeof(msg));
	while (n < 0 && errno == EINTR);
	_exit(127);
}

/* execvp's search, with PATH taken from the program's own environment (glibc's
 * execvpe reads the agent's) and no /bin/sh retry on ENOEXEC. Returns errno. */
static int exec_search(char *const argv[], char *const envp[])
{
	const char *file = argv[0], *path = AGENT_DEFAULT_PATH, *p, *end;
	char buf[PATH_MAX];
	size_t flen = strlen(file), dlen;
	bool eacces = false;

	if (flen == 0)
		return ENOENT;
	if (strchr(file, '/')) {
		execve(file, argv, envp);
		return errno;
	}
	for (char *const *e = envp; *e; e++)
		if (strncmp(*e, "PATH=", 5) == 0)
			path = *e + 5;
	for (p = path;; p = end + 1) {
		end = strchrnul(p, ':');
		dlen = (size_t)(end - p);
		if (dlen == 0) {
			buf[0] = '.';         /* an empty entry is the current directory */
			dlen = 1;
		} else if (dlen < sizeof(buf)) {
			memcpy(buf, p, dlen);
		}
		if (dlen + 1 + flen < sizeof(buf)) {
			buf[dlen] = '/';
			memcpy(buf + dlen + 1, file, flen + 1);
			execve(buf, argv, envp);
			if (errno == EACCES)
				eacces = true;
			else if (errno != ENOENT && errno != ENOTDIR && errno != ENAMETOOLONG)
				return errno;
		}
		if (*end == '\0')
			break;
	}
	return eacces ? EACCES : ENOENT;
}

struct child_fds {
	int st;                     /* status pipe, write end */
	int slave;                  /* PTY slave, or -1 */
	int in, out, err;           /* pipe ends for the child, in = -1: /dev/null */
};

static void __attribute__((noreturn)) child_run(const struct proto_exec *e, char **envp,
						const struct agent *a, const struct child_fds *fds)
{
	const char *home = a->defaults.workdir ? a->defaults.workdir : a->home;
	sigset_t none;
	int in = fds->in;

	/* The agent blocks the signals its signalfd takes and ignores SIGPIPE;
	 * a program must start with neither. */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	/* Its own session and process group: SIGNAL, the timeout and a closing
	 * connection reach everything it starts, and the agent's terminal is not its. */
	if (setsid() < 0)
		child_fail(fds->st, STAGE_SETUP, errno);
	if (fds->slave >= 0) {
		if (ioctl(fds->slave, TIOCSCTTY, 0) < 0)
			child_fail(fds->st, STAGE_TTY, errno);
		if (dup2(fds->slave, 0) < 0 || dup2(fds->slave, 1) < 0 || dup2(fds->slave, 2) < 0)
			child_fail(fds->st, STAGE_SETUP, errno);
	} else {
		if (in < 0)
			in = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (in < 0)
			child_fail(fds->st, STAGE_SETUP, errno);
		if (dup2(in, 0) < 0 || dup2(fds->out, 1) < 0 || dup2(fds->err, 2) < 0)
			child_fail(fds->st, STAGE_SETUP, errno);
	}
	/* Whatever the agent inherited without CLOEXEC must not reach the program;
	 * CLOEXEC rather than close keeps the status pipe until execve. */
	if (close_range(3, ~0u, CLOSE_RANGE_CLOEXEC) < 0)
		for (int fd = 3; fd < 1024; fd++)
			fcntl(fd, F_SETFD, FD_CLOEXEC);
	if (e->flags & PROTO_EXEC_ROOT) {
		/* A container's root: the cwd, PATH's directories and the program
		 * are looked up inside it from here on. */
		if (chroot(e->root) < 0 || chdir("/") < 0)
			child_fail(fds->st, STAGE_CHROOT, errno);
		home = "/";
	}
	if (e->cwd[0]) {
		if (chdir(e->cwd) < 0)
			child_fail(fds->st, STAGE_CHDIR, errno);
	} else if (chdir(home) < 0 && chdir("/") < 0) {
		child_fail(fds->st, STAGE_CHDIR, errno);
	}
	if (e->flags & PROTO_EXEC_ROOT) {
		/* The request's user, exactly: groups first, while still allowed
		 * to change them; the image's defaults do not apply. */
		umask((mode_t)e->umask);
		if (setgroups(e->ngroups, (const gid_t *)e->groups) < 0 || setgid(e->gid) < 0 ||
		    setuid(e->uid) < 0)
			child_fail(fds->st, STAGE_USER, errno);
	} else {
		umask(022);
		/* The image's USER: groups first, while still allowed to change them. */
		if (a->defaults.has_user &&
		    (setgroups(0, NULL) < 0 || setgid(a->defaults.gid) < 0 ||
		     setuid(a->defaults.uid) < 0))
			child_fail(fds->st, STAGE_SETUP, errno);
	}
	child_fail(fds->st, STAGE_EXEC, exec_search(e->argv, envp));
}

/* The defaults' environment with e's on top (same name: e's wins), plus the
 * default PATH when neither has one, and the proxy's variables when the
 * guest has a network (NET): a new array. */
static char **env_with_path(const struct agent *a, const struct proto_exec *e)
{
	static char default_path[] = "PATH=" AGENT_DEFAULT_PATH;
	const struct agent_defaults *d = &a->defaults;
	char **envp = calloc((size_t)e->envc + d->nenv + 2 + 8, sizeof(char *));
	bool has_path = false;
	size_t n = 0;

	if (!envp)
		return NULL;
	for (unsigned i = 0; i < d->nenv; i++) {
		size_t klen = strcspn(d->env[i], "=") + 1;
		bool overridden = false;

		for (uint32_t j = 0; j < e->envc && !overridden; j++)
			overridden = strncmp(e->envp[j], d->env[i], klen) == 0;
		if (!overridden)
			envp[n++] = d->env[i];
	}
	for (uint32_t i = 0; i < e->envc; i++)
		envp[n++] = e->envp[i];
	n = (size_t)net_env(a, envp, (int)n, e);
	for (size_t i = 0; i < n; i++)
		has_path |= strncmp(envp[i], "PATH=", 5) == 0;
	if (!has_path)
		envp[n] = default_path;
	return envp;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? -errno : 0;
}

int spawn_proc(struct agent *a, struct proc *p, const struct proto_exec *e)
{
	int st[2] = { -1, -1 }, out[2] = { -1, -1 }, err[2] = { -1, -1 }, in[2] = { -1, -1 };
	int master = -1, slave = -1, in_dup = -1, rc;
	char **envp = env_with_path(a, e);
	struct child_fds cfds;
	pid_t pid;

	if (!envp)
		return -ENOMEM;
	if (pipe2(st, O_CLOEXEC) < 0)
		goto err_errno;
	if (p->pty) {
		struct winsize ws = { .ws_row = e->rows ? e->rows : 24, .ws_col = e->cols ? e->cols : 80 };

		if (openpty(&master, &slave, NULL, NULL, &ws) < 0)
			goto err_errno;
		if (fcntl(master, F_SETFD, FD_CLOEXEC) < 0 || fcntl(slave, F_SETFD, FD_CLOEXEC) < 0)
			goto err_errno;
		/* Terminal input gets its own fd so it can end apart from the output. */
		in_dup = fcntl(master, F_DUPFD_CLOEXEC, 3);
		if (in_dup < 0)
			goto err_errno;
	} else {
		if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0)
			goto err_errno;
		if ((e->flags & PROTO_EXEC_STDIN) && pipe2(in, O_CLOEXEC) < 0)
			goto err_errno;
	}

	pid = fork();
	if (pid < 0)
		goto err_errno;
	if (pid == 0) {
		cfds = (struct child_fds){ .st = st[1], .slave = slave, .in = in[0],
					   .out = out[1], .err = err[1] };
		child_run(e, envp, a, &cfds);
	}

	close_fd(&st[1]);
	close_fd(&slave);
	close_fd(&in[0]);
	close_fd(&out[1]);
	close_fd(&err[1]);
	free(envp);
	p->pid = pid;
	p->status_fd = st[0];
	if (p->pty) {
		p->out_fd = master;
		p->in_fd = in_dup;
	} else {
		p->out_fd = out[0];
		p->err_fd = err[0];
		p->in_fd = in[1];
	}
	/* The loop never blocks on a child: a stuck program must not stall the agent. */
	set_nonblock(p->status_fd);
	set_nonblock(p->out_fd);
	if (p->err_fd >= 0)
		set_nonblock(p->err_fd);
	if (p->in_fd >= 0)
		set_nonblock(p->in_fd);
	return 0;

err_errno:
	rc = -errno;
	close_fd(&st[0]);
	close_fd(&st[1]);
	close_fd(&master);
	close_fd(&slave);
	close_fd(&in_dup);
	close_fd(&out[0]);
	close_fd(&out[1]);
	close_fd(&err[0]);
	close_fd(&err[1]);
	close_fd(&in[0]);
	close_fd(&in[1]);
	free(envp);
	return rc;
}
