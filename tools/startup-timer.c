/* startup-timer.c - time commands from exec to their first stdout byte and to their exit.
 *
 * usage: startup-timer [OPTION...] RUNS NAME -- CMD [ARG...] [-- NAME -- CMD...]...
 *   --marker STR  "first" is the end of the first STR in the output, not its first byte
 *   --exit-only   "first" is always 0 (commands that print nothing, timed to exit)
 *   --stderr      the command's stderr is read (and searched) with its stdout
 *   --stop        once the marker is seen, SIGTERM the command (for commands that
 *                 run until stopped, such as a restored VM): the run counts when the
 *                 marker was seen, whatever the exit status; "exit" is then the time
 *                 until the stopped command was reaped
 *   --save DIR    keep each run's output in DIR/NAME.RUN (RUN from 1)
 * Runs each command RUNS times, interleaved (A B C A B C ...) so that drift in
 * the machine's speed hits every command alike, and prints one line per
 * command: "NAME first_median_us exit_median_us failures". */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_CMDS 8
#define MAX_RUNS 1000
#define RUN_TIMEOUT_US (60ULL * 1000000)
#define STOP_GRACE_US (5ULL * 1000000)   /* SIGTERM, then SIGKILL after this */

struct cmd {
	const char *name;
	char **argv;
	uint64_t first_us[MAX_RUNS], exit_us[MAX_RUNS];
	int ok, failures;
};

static const char *marker;   /* NULL: time the first byte */
static bool exit_only;       /* time the exit only; output is not waited for */
static bool with_stderr;     /* read the command's stderr too */
static bool stop_at_marker;  /* SIGTERM the command once the marker is seen */
static const char *save_dir; /* NULL: the output is not kept */

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, int n)
{
	if (n == 0)
		return 0;
	qsort(v, (size_t)n, sizeof(*v), cmp_u64);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* --save: DIR/NAME.RUN for run number `run`, or -1 (the output is dropped). */
static int open_save(const struct cmd *c, int run)
{
	char path[4096];
	int fd;

	if (!save_dir)
		return -1;
	if (snprintf(path, sizeof(path), "%s/%s.%d", save_dir, c->name, run) >= (int)sizeof(path))
		return -1;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		fprintf(stderr, "startup-timer: %s: %s\n", path, strerror(errno));
	return fd;
}

/* One run: 0 on success (first byte or marker seen, and exit status 0 or,
 * with --stop, the command stopped after the marker). */
static int run_once(struct cmd *c, int run)
{
	int fds[2], status, save_fd;
	uint64_t start, first = 0, stopped = 0;
	pid_t pid;
	char buf[4096];
	size_t matched = 0;
	bool killed = false, reaped = false;

	if (pipe(fds) < 0)
		return -1;
	save_fd = open_save(c, run);
	start = now_us();
	pid = fork();
	if (pid == 0) {
		dup2(fds[1], 1);
		if (with_stderr)
			dup2(fds[1], 2);
		close(fds[0]);
		close(fds[1]);
		execvp(c->argv[0], c->argv);
		_exit(127);
	}
	close(fds[1]);
	for (;;) {
		struct pollfd pfd = { .fd = fds[0], .events = POLLIN };
		ssize_t n;

		/* A hung run is a failure, not a hung benchmark. */
		if (now_us() - start > RUN_TIMEOUT_US) {
			kill(pid, SIGKILL);
			fprintf(stderr, "startup-timer: %s timed out\n", c->name);
			break;
		}
		/* Stopped: the command's end is what counts, not the pipe's (a
		 * child of it may hold the pipe open). */
		if (stopped && waitpid(pid, &status, WNOHANG) == pid) {
			reaped = true;
			break;
		}
		if (stopped && !killed && now_us() - stopped > STOP_GRACE_US) {
			kill(pid, SIGKILL);
			fprintf(stderr, "startup-timer: %s ignored SIGTERM\n", c->name);
			killed = true;
		}
		if (poll(&pfd, 1, stopped ? 1 : 1000) == 0)
			continue;
		n = read(fds[0], buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (save_fd >= 0 && write(save_fd, buf, (size_t)n) != n) {
			fprintf(stderr, "startup-timer: saving %s's output: %s\n", c->name,
				strerror(errno));
			close(save_fd);
			save_fd = -1;
		}
		/* Naive restart is enough for the markers used (no self-overlap). */
		for (ssize_t i = 0; marker && !first && i < n; i++) {
			matched = buf[i] == marker[matched] ? matched + 1 : buf[i] == marker[0];
			if (!marker[matched])
				first = now_us();
		}
		if (!marker && !exit_only && !first)
			first = now_us();
		if (stop_at_marker && first && !stopped) {
			kill(pid, SIGTERM);
			stopped = now_us();
		}
	}
	close(fds[0]);
	if (save_fd >= 0)
		close(save_fd);
	if (!reaped)
		waitpid(pid, &status, 0);
	if (exit_only)
		first = start;
	if (!first || (!stopped && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)))
		return -1;
	c->first_us[c->ok] = first - start;
	c->exit_us[c->ok] = now_us() - start;
	c->ok++;
	return 0;
}

int main(int argc, char **argv)
{
	static struct cmd cmds[MAX_CMDS];
	int ncmds = 0, runs;

	for (;;) {
		int used = 1;

		if (argc > 2 && !strcmp(argv[1], "--marker"))
			marker = argv[2], used = 2;
		else if (argc > 2 && !strcmp(argv[1], "--save"))
			save_dir = argv[2], used = 2;
		else if (argc > 1 && !strcmp(argv[1], "--exit-only"))
			exit_only = true;
		else if (argc > 1 && !strcmp(argv[1], "--stderr"))
			with_stderr = true;
		else if (argc > 1 && !strcmp(argv[1], "--stop"))
			stop_at_marker = true;
		else
			break;
		argv += used;
		argc -= used;
	}
	if (argc < 5 || (runs = atoi(argv[1])) <= 0 || runs > MAX_RUNS || (marker && exit_only) ||
	    (stop_at_marker && exit_only)) {
		fprintf(stderr, "usage: startup-timer [--marker STR [--stop] | --exit-only] [--stderr] "
			"[--save DIR] RUNS NAME -- CMD [ARG...] [-- NAME -- CMD...]\n");
		return 2;
	}
	for (int i = 2; i < argc && ncmds < MAX_CMDS;) {
		struct cmd *c = &cmds[ncmds++];

		memset(c, 0, sizeof(*c));
		c->name = argv[i];
		if (i + 2 >= argc || strcmp(argv[i + 1], "--")) {
			fprintf(stderr, "startup-timer: expected NAME -- CMD\n");
			return 2;
		}
		c->argv = &argv[i + 2];
		for (i += 2; i < argc && strcmp(argv[i], "--"); i++)
			;
		if (i < argc)
			argv[i++] = NULL;   /* terminate this command's argv */
	}
	for (int r = 0; r < runs; r++) {
		for (int k = 0; k < ncmds; k++)
			if (run_once(&cmds[k], r + 1))
				cmds[k].failures++;
		if ((r + 1) % 5 == 0 || r + 1 == runs)
			fprintf(stderr, "startup-timer: %d/%d runs done\n", r + 1, runs);
	}
	for (int k = 0; k < ncmds; k++)
		printf("%s %llu %llu %d\n", cmds[k].name,
		       (unsigned long long)median(cmds[k].first_us, cmds[k].ok),
		       (unsigned long long)median(cmds[k].exit_us, cmds[k].ok), cmds[k].failures);
	return 0;
}
