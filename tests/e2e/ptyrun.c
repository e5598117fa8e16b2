/* ptyrun.c - run a command on a new pseudo-terminal, as a person at a terminal would: the containerd suite's `ctr run -t` needs a terminal on its stdin, and the harness's L1 has none.
 *
 * usage: ptyrun [-i TEXT] [-s ROWSxCOLS] [-t SECONDS] -- CMD [ARG...]
 *   -i TEXT     typed into the terminal after the command started (\n for Enter)
 *   -s RxC      the terminal's size (default 24x80)
 *   -t SECONDS  kill the command after this long (default 60): exit 124
 * What the command writes to the terminal goes to stdout as it is (with the
 * terminal's \r\n). Exit: the command's status (128+N for signal N), 124 on the
 * timeout, 125 when it cannot be run.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	struct winsize ws = { .ws_row = 24, .ws_col = 80 };
	const char *input = NULL;
	double limit = 60, start;
	int master, status = 0, i;
	bool typed = false;
	pid_t pid;

	for (i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		if (!strcmp(argv[i], "-i") && i + 1 < argc)
			input = argv[++i];
		else if (!strcmp(argv[i], "-s") && i + 1 < argc &&
			 sscanf(argv[++i], "%hux%hu", &ws.ws_row, &ws.ws_col) == 2)
			;
		else if (!strcmp(argv[i], "-t") && i + 1 < argc)
			limit = atof(argv[++i]);
		else
			goto usage;
	}
	if (i + 1 >= argc)
		goto usage;
	pid = forkpty(&master, NULL, NULL, &ws);
	if (pid < 0) {
		perror("ptyrun: forkpty");
		return 125;
	}
	if (pid == 0) {
		execvp(argv[i + 1], argv + i + 1);
		perror("ptyrun: exec");
		_exit(125);
	}
	start = now();
	for (;;) {
		struct pollfd p = { .fd = master, .events = POLLIN };
		char buf[4096];
		ssize_t n;

		if (now() - start > limit) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			fprintf(stderr, "ptyrun: timed out after %.0f s\n", limit);
			return 124;
		}
		if (input && !typed && now() - start > 0.5) {
			/* Typed once the command had a moment to set its terminal up. */
			for (const char *c = input; *c; c++) {
				char ch = *c;

				if (c[0] == '\\' && c[1] == 'n') {
					ch = '\n';
					c++;
				}
				if (write(master, &ch, 1) != 1)
					break;
			}
			typed = true;
		}
		if (poll(&p, 1, 100) > 0) {
			n = read(master, buf, sizeof(buf));
			if (n > 0) {
				if (fwrite(buf, 1, (size_t)n, stdout) != (size_t)n)
					return 125;
				fflush(stdout);
				continue;
			}
			if (n < 0 && errno == EINTR)
				continue;
			break;   /* EIO: every process on the terminal has gone */
		}
		if (waitpid(pid, &status, WNOHANG) == pid)
			goto done;
	}
	waitpid(pid, &status, 0);
done:
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);

usage:
	fputs("usage: ptyrun [-i TEXT] [-s ROWSxCOLS] [-t SECONDS] -- CMD [ARG...]\n", stderr);
	return 125;
}
