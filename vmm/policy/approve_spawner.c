/* approve_spawner.c - the approver's spawner: forked before the jail, it runs --approve's command for each call the jailed, filtered VMM sends it over a socket pair. */
#include "policy/approve_spawner.h"
#include "lib/clock.h"
#include "lib/helper.h"
#include "lib/log.h"
#include "lib/sock_io.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define SPAWNER_FD 3   /* the spawner's socket, once everything else is closed */

/* The spawner's life: one call after another until the end of file. */
static __attribute__((noreturn)) void serve(const struct approver *a, int fd)
{
	struct approve_result res;
	uint32_t len;
	char *call;

	for (;;) {
		if (sock_move_all(fd, &len, sizeof(len), false, 0))
			_exit(0);
		call = len < APPROVE_SPAWNER_MAX_CALL ? malloc((size_t)len + 1) : NULL;
		if (!call || sock_move_all(fd, call, len, false, 0))
			_exit(1);
		call[len] = '\0';
		approve_check_until(a, call, fd, &res);
		free(call);
		if (sock_move_all(fd, &res, sizeof(res), true, 0))
			_exit(0);
	}
}

/* In the forked child: only the socket (as SPAWNER_FD) and stderr stay;
 * Ctrl-C and the like end mayfly, whose end ends us (an approver running
 * then is killed, never left behind). */
static __attribute__((noreturn)) void become_spawner(const struct approver *a, int fd)
{
	if (helper_become("mayfly-approve") ||
	    (fd != SPAWNER_FD && dup3(fd, SPAWNER_FD, O_CLOEXEC) < 0))
		_exit(1);
	closefrom(SPAWNER_FD + 1);
	serve(a, SPAWNER_FD);
}

int approve_spawner_start(struct approve_spawner *s, const struct approver *a)
{
	int sv[2];
	pid_t pid;

	memset(s, 0, sizeof(*s));
	s->fd = -1;
	s->timeout_ms = a->timeout_ms ? a->timeout_ms : APPROVE_DEFAULT_TIMEOUT_S * 1000U;
	pthread_mutex_init(&s->lock, NULL);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	fflush(NULL);   /* nothing buffered is written twice */
	pid = fork();
	if (pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return -errno;
	}
	if (pid == 0) {
		close(sv[0]);
		become_spawner(a, sv[1]);
	}
	close(sv[1]);
	s->fd = sv[0];
	s->pid = pid;
	s->owner = getpid();
	return 0;
}

void approve_spawner_ask(struct approve_spawner *s, const char *call_json,
			 struct approve_result *res)
{
	uint64_t start = clock_now_ns(),
		 deadline = start + (s->timeout_ms + (uint64_t)APPROVE_SPAWNER_GRACE_MS) * 1000000ULL;
	size_t n = strlen(call_json);
	uint32_t len = (uint32_t)n;
	int rc;

	memset(res, 0, sizeof(*res));
	if (n >= APPROVE_SPAWNER_MAX_CALL) {
		snprintf(res->reason, sizeof(res->reason), "the call is too large to ask about "
			 "(%zu bytes)", n);
		return;
	}
	pthread_mutex_lock(&s->lock);
	rc = s->broken || s->fd < 0 ? -EPIPE : 0;
	if (!rc)
		rc = sock_move_all(s->fd, &len, sizeof(len), true, deadline);
	if (!rc)
		rc = sock_move_all(s->fd, (void *)call_json, n, true, deadline);
	if (!rc)
		rc = sock_move_all(s->fd, res, sizeof(*res), false, deadline);
	if (rc) {
		/* Half a call or half an answer: the stream is lost for good. */
		s->broken = true;
		memset(res, 0, sizeof(*res));
		snprintf(res->reason, sizeof(res->reason), "the approver's spawner %s",
			 rc == -ETIMEDOUT ? "did not answer in time" : "is gone");
		res->duration_us = (clock_now_ns() - start) / 1000;
	}
	pthread_mutex_unlock(&s->lock);
	res->reason[sizeof(res->reason) - 1] = '\0';
}

void approve_spawner_stop(struct approve_spawner *s)
{
	int status;

	if (s->pid <= 0)
		return;   /* never started (a zeroed struct included) */
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	if (s->owner == getpid())
		while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR)
			;
	pthread_mutex_destroy(&s->lock);
	s->pid = 0;
}
