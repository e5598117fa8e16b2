/* audit_writer.c - the audit log's writer: a process forked before the jail that holds the log, so the jailed VM process never does and cannot cut it back. */
#include "policy/audit_writer.h"
#include "lib/helper.h"
#include "seccomp/seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define WRITER_SOCK 3   /* the writer's socket, once everything else is closed */
#define WRITER_LOG  4   /* and the log */

/* In the forked child: only the socket, the log and stderr stay; Ctrl-C
 * and the like end mayfly, whose end ends us (at the end of file). */
static __attribute__((noreturn)) void become_writer(struct audit_log *log, int sock)
{
	/* Above both numbers first: either may be 3 or 4 already. */
	int s = fcntl(sock, F_DUPFD_CLOEXEC, 10), l = fcntl(log->fd, F_DUPFD_CLOEXEC, 10);

	if (helper_become("mayfly-audit") || s < 0 || l < 0 ||
	    dup3(s, WRITER_SOCK, O_CLOEXEC) < 0 || dup3(l, WRITER_LOG, O_CLOEXEC) < 0)
		_exit(1);
	closefrom(WRITER_LOG + 1);
	/* It parses what a compromised VM sends: its own filter first, once
	 * what would open a file later has done so: jansson's hash seed
	 * (/dev/urandom on first use) and the time zone (strftime's tzset
	 * reads /etc/localtime once). */
	json_object_seed(0);
	tzset();
	seccomp_enter(SECCOMP_ROLE_AUDIT);
	log->fd = WRITER_LOG;
	log->remote = -1;
	while (audit_serve_one(log, WRITER_SOCK) == 0)
		;
	_exit(0);
}

int audit_writer_start(struct audit_log *log, char *err, size_t errlen)
{
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		snprintf(err, errlen, "cannot start the audit log's writer: %s", strerror(errno));
		return -errno;
	}
	fflush(NULL);   /* nothing buffered is written twice */
	pid = fork();
	if (pid < 0) {
		int rc = -errno;

		close(sv[0]);
		close(sv[1]);
		snprintf(err, errlen, "cannot start the audit log's writer: %s", strerror(-rc));
		return rc;
	}
	if (pid == 0) {
		close(sv[0]);
		become_writer(log, sv[1]);
	}
	close(sv[1]);
	close(log->fd);
	log->fd = -1;
	log->remote = sv[0];
	log->writer = pid;
	log->owner = getpid();
	return 0;
}
