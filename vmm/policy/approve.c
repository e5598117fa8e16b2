/* approve.c - the approval hook: run the operator's command with the call on its stdin, bounded in time; exit 0 allows. */
#include "policy/approve.h"
#include "lib/clock.h"
#include "lib/log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define POLL_FALLBACK_MS 10    /* without pidfd_open: how often waitpid looks */

extern char **environ;

/* The approver's process and our ends of its pipes. */
struct child {
	pid_t pid;
	int pidfd;                 /* -1: poll waitpid instead */
	int in_fd;                 /* its stdin; -1 once all was written (or it closed) */
	int out_fd;                /* its stdout; -1 at its end */
	const char *msg;
	size_t msg_len, sent;
	char out[APPROVE_REASON_MAX + 1];
	size_t out_len;
};

static int spawn(struct child *ch, const char *cmd)
{
	int in[2] = { -1, -1 }, out[2] = { -1, -1 };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, dfl;
	char *argv[] = { "sh", "-c", (char *)cmd, NULL };
	int rc;

	/* Its stdin is a socket: send(MSG_NOSIGNAL) to an approver that quit
	 * without reading is EPIPE here, never a SIGPIPE for all of mayfly. */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) < 0 || pipe2(out, O_CLOEXEC) < 0) {
		rc = errno;
		goto out_pipes;
	}
	sigemptyset(&none);
	/* Ours may be ignored (SIGPIPE) or blocked for the VM's signalfd
	 * (SIGINT/SIGTERM/SIGHUP). The approver gets the defaults back. */
	sigemptyset(&dfl);
	sigaddset(&dfl, SIGPIPE);
	sigaddset(&dfl, SIGINT);
	sigaddset(&dfl, SIGTERM);
	sigaddset(&dfl, SIGHUP);
	sigaddset(&dfl, SIGCHLD);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
				 POSIX_SPAWN_SETSIGDEF);
	posix_spawnattr_setpgroup(&attr, 0);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &dfl);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
	posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
	/* Nothing of ours beyond stderr: not the VM, not the MCP client's pipes. */
	posix_spawn_file_actions_addclosefrom_np(&fa, STDERR_FILENO + 1);
	/* posix_spawn uses CLONE_VM|CLONE_VFORK: no copy of the guest's page tables. */
	rc = posix_spawn(&ch->pid, "/bin/sh", &fa, &attr, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	if (rc)
		goto out_pipes;
	close(in[0]);
	close(out[1]);
	shutdown(in[1], SHUT_RD);
	ch->in_fd = in[1];
	ch->out_fd = out[0];
	fcntl(ch->out_fd, F_SETFL, O_NONBLOCK);
	ch->pidfd = pidfd_open(ch->pid, 0);
	return 0;
out_pipes:
	for (int i = 0; i < 2; i++) {
		if (in[i] >= 0)
			close(in[i]);
		if (out[i] >= 0)
			close(out[i]);
	}
	return rc;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Feed stdin; an approver that does not read it is not our problem. */
static void feed(struct child *ch)
{
	while (ch->in_fd >= 0 && ch->sent < ch->msg_len) {
		ssize_t n = send(ch->in_fd, ch->msg + ch->sent, ch->msg_len - ch->sent,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			close_fd(&ch->in_fd);   /* EPIPE: it closed its stdin */
			return;
		}
		ch->sent += (size_t)n;
	}
	/* All of it: the end of file is the end of the call. */
	if (ch->in_fd >= 0)
		shutdown(ch->in_fd, SHUT_WR);
	close_fd(&ch->in_fd);
}

/* Keep what fits of its stdout, drop the rest (it must never block on us). */
static void drain(struct child *ch)
{
	char buf[4096];

	while (ch->out_fd >= 0) {
		ssize_t n = read(ch->out_fd, buf, sizeof(buf));
		size_t room = sizeof(ch->out) - 1 - ch->out_len;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			close_fd(&ch->out_fd);
			return;
		}
		if (room) {
			memcpy(ch->out + ch->out_len, buf, (size_t)n < room ? (size_t)n : room);
			ch->out_len += (size_t)n < room ? (size_t)n : room;
		}
	}
}

/* Has it exited? Peek without reaping, so its group id stays ours. */
static bool exited(struct child *ch)
{
	siginfo_t si = { 0 };

	return waitid(P_PID, (id_t)ch->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid;
}

/* The first line of its stdout, escaped, for the reason. */
static void first_line(struct child *ch, char *out, size_t len)
{
	char *nl;

	ch->out[ch->out_len] = '\0';
	nl = strchr(ch->out, '\n');
	if (nl)
		*nl = '\0';
	out[0] = '\0';
	if (ch->out[0])
		log_escape(out, len, ch->out);
}

void approve_check(const struct approver *a, const char *call_json, struct approve_result *res)
{
	approve_check_until(a, call_json, -1, res);
}

void approve_check_until(const struct approver *a, const char *call_json, int stop_fd,
			 struct approve_result *res)
{
	uint64_t start = clock_now_ns(), timeout_ms, deadline;
	struct child ch = { .pidfd = -1, .in_fd = -1, .out_fd = -1 };
	char said[APPROVE_REASON_MAX + 1], *msg = NULL;
	bool done = false, stopped = false;
	int status = 0, rc;

	memset(res, 0, sizeof(*res));
	if (!a || !a->cmd) {
		res->allowed = true;
		return;
	}
	timeout_ms = a->timeout_ms ? a->timeout_ms : APPROVE_DEFAULT_TIMEOUT_S * 1000ULL;
	deadline = start + timeout_ms * 1000000ULL;
	if (asprintf(&msg, "%s\n", call_json) < 0) {
		snprintf(res->reason, sizeof(res->reason), "the approver could not be asked: out of memory");
		return;
	}
	ch.msg = msg;
	ch.msg_len = strlen(msg);
	rc = spawn(&ch, a->cmd);
	if (rc) {
		snprintf(res->reason, sizeof(res->reason), "the approver could not be started: %s",
			 strerror(rc));
		free(msg);
		return;
	}
	feed(&ch);
	while (!done) {
		struct pollfd p[4] = { { .fd = ch.pidfd, .events = POLLIN },
				       { .fd = ch.out_fd, .events = POLLIN },
				       { .fd = ch.in_fd, .events = POLLOUT },
				       { .fd = stop_fd, .events = POLLIN | POLLRDHUP } };
		uint64_t now = clock_now_ns();
		int ms;

		if (exited(&ch)) {
			done = true;
			break;
		}
		if (now >= deadline)
			break;
		ms = (int)((deadline - now + 999999) / 1000000);
		if (ch.pidfd < 0 && ms > POLL_FALLBACK_MS)
			ms = POLL_FALLBACK_MS;
		if (poll(p, 4, ms) < 0 && errno != EINTR)
			break;
		if (p[3].revents) {
			stopped = true;
			break;
		}
		drain(&ch);
		if (p[2].revents)
			feed(&ch);
	}
	drain(&ch);
	/* Its group: what it left behind, or all of it when it took too long.
	 * Before the reaping, so the group id cannot have been reused. */
	kill(-ch.pid, SIGKILL);
	while (waitpid(ch.pid, &status, 0) < 0 && errno == EINTR)
		;
	res->duration_us = (clock_now_ns() - start) / 1000;
	first_line(&ch, said, sizeof(said));
	if (stopped)
		snprintf(res->reason, sizeof(res->reason), "mayfly ended before the approver answered "
			 "(killed)");
	else if (!done)
		snprintf(res->reason, sizeof(res->reason), "the approver did not answer within %.3g s "
			 "(killed)", (double)timeout_ms / 1000);
	else if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		res->allowed = true;
	else if (WIFEXITED(status))
		snprintf(res->reason, sizeof(res->reason), "the approver exited %d%s%s",
			 WEXITSTATUS(status), said[0] ? ": " : "", said);
	else
		snprintf(res->reason, sizeof(res->reason), "the approver was killed by signal %d%s%s",
			 WTERMSIG(status), said[0] ? ": " : "", said);
	close_fd(&ch.pidfd);
	close_fd(&ch.in_fd);
	close_fd(&ch.out_fd);
	free(msg);
}
