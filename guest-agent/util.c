/* util.c - clocks, the agent's log line, and process-group signalling. */
#include "agent.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t now_ms(void)
{
	return now_us() / 1000u;
}

void agent_log(const char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* One write per line: the console is shared with init and the kernel. */
	fprintf(stderr, "mayfly-agent: %s\n", line);
}

void kill_group(pid_t pid, int sig)
{
	if (pid <= 0)
		return;
	/* Between fork and the child's setsid() the group does not exist yet. */
	if (kill(-pid, sig) < 0 && errno == ESRCH)
		kill(pid, sig);
}

uint32_t file_type_of(mode_t m)
{
	return S_ISREG(m) ? PROTO_FT_FILE : S_ISDIR(m) ? PROTO_FT_DIR :
	       S_ISLNK(m) ? PROTO_FT_SYMLINK : PROTO_FT_OTHER;
}

void relay_child_init(int fd)
{
	sigset_t none;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (dup2(fd, 3) < 0)
		_exit(1);
	close_range(4, ~0U, 0);
}
