/* helper.c - a helper process forked before the jail (the approver's spawner, the audit log's writer): its name, its signals, its standard streams. */
#include "lib/helper.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

int helper_become(const char *name)
{
	sigset_t none;
	int null;

	prctl(PR_SET_NAME, name, 0, 0, 0);
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(null, STDOUT_FILENO) < 0)
		return -1;
	close(null);
	return 0;
}
