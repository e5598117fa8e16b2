/* fake_vmm.c - a stand-in for `mayfly boot --snapshot DIR --vsock PATH` for mayfly serve's unit tests: no KVM, the real guest agent on the host behind the same socket protocol. */
/*
 * usage: fake_vmm boot ... --vsock PATH ...   (every other option ignored)
 * Listens on PATH like mayfly boot's hybrid vsock; for each connection it
 * reads "CONNECT <port>\n", answers "OK 1\n" and hands the connection to
 * $MAYFLY_AGENT --fd (one agent process per connection, home $FAKE_VMM_HOME
 * or /tmp). SIGTERM ends it (and its agents): exit 0, PATH removed.
 * $FAKE_VMM_FAIL set: it exits 1 at once with one line, like a VM that
 * cannot start; $FAKE_VMM_FAIL_NTH=N: only the Nth VM restored from a
 * fork's snapshot (a DIR under .../forks/) does (counted in
 * $FAKE_VMM_HOME/fork-starts), after $FAKE_VMM_FAIL_DELAY_MS (default 0:
 * the fork's other children are up by then).
 * $FAKE_VMM_DELAY_MS: every VM waits that long before it listens (a slow
 * restore).
 * PATH.ctl, bound before PATH like boot's control socket, answers READY
 * with OK (the agent behind PATH is up by then); any other request gets
 * its connection closed.
 * usage: fake_vmm fork ... --out DIR: a fork that saved nothing: DIR made.
 */
#include "control/ctl_msg.h"

#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *sock_path;
static char ctl_path[128];

static void on_term(int sig)
{
	(void)sig;
	unlink(sock_path);
	unlink(ctl_path);
	kill(0, SIGKILL);   /* our agents: we lead the group the service made */
	_exit(0);
}

static void serve_one(int c, const char *agent, const char *home)
{
	char line[64];
	size_t n = 0;

	while (n < sizeof(line) - 1 && read(c, line + n, 1) == 1 && line[n] != '\n')
		n++;
	line[n] = '\0';
	if (strncmp(line, "CONNECT ", 8) || write(c, "OK 1\n", 5) != 5)
		_exit(1);
	/* The agent waits for its commands: not our SIGCHLD disposition. */
	signal(SIGCHLD, SIG_DFL);
	if (dup2(c, 10) < 0)
		_exit(127);
	execl(agent, "mayfly-agent", "--fd", "10", "--home", home, (char *)NULL);
	_exit(127);
}

static int listen_at(const char *path, int type)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, type, 0);

	if (strlen(path) >= sizeof(sa.sun_path))
		return -1;
	strcpy(sa.sun_path, path);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 16) < 0)
		return -1;
	return fd;
}

/* One control request: READY answered OK. */
static void answer_ctl(int c)
{
	uint8_t in[CTL_REQUEST_LEN], out[CTL_REPLY_LEN];
	struct ctl_reply r = { .status = CTL_ST_OK };
	struct ctl_request req;
	const char *why;
	int fds[CTL_NFDS], nfds, n = ctl_recv(c, in, sizeof(in), fds, 0, &nfds, 5000, -1);

	if (n <= 0 || ctl_request_decode(&req, in, (size_t)n, nfds, &why) || req.op != CTL_OP_READY)
		return;
	ctl_reply_encode(&r, out);
	ctl_send(c, out, sizeof(out), NULL, 0);
}

/* Whether this start is the $FAKE_VMM_FAIL_NTH start of a fork's child. */
static int nth_fork_child(const char *snap, const char *home)
{
	const char *nth = getenv("FAKE_VMM_FAIL_NTH");
	char path[4096];
	struct stat st;
	int fd;

	if (!nth || !snap || !strstr(snap, "/forks/"))
		return 0;
	snprintf(path, sizeof(path), "%s/fork-starts", home ? home : "/tmp");
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0600);
	/* One byte per start, appended: the size after ours is our number. */
	if (fd < 0 || write(fd, "x", 1) != 1 || fstat(fd, &st) < 0)
		return 0;
	close(fd);
	return st.st_size == atoi(nth);
}

int main(int argc, char **argv)
{
	const char *agent = getenv("MAYFLY_AGENT"), *home = getenv("FAKE_VMM_HOME");
	const char *snap = NULL, *out = NULL;
	int fd, ctl;

	for (int i = 1; i + 1 < argc; i++) {
		if (!strcmp(argv[i], "--vsock"))
			sock_path = argv[i + 1];
		if (!strcmp(argv[i], "--snapshot"))
			snap = argv[i + 1];
		if (!strcmp(argv[i], "--out"))
			out = argv[i + 1];
	}
	if (argc > 1 && !strcmp(argv[1], "fork"))
		return out && mkdir(out, 0700) == 0 ? 0 : 1;
	if (getenv("FAKE_VMM_FAIL") || nth_fork_child(snap, home)) {
		const char *delay = getenv("FAKE_VMM_FAIL_DELAY_MS");

		if (delay && !getenv("FAKE_VMM_FAIL"))
			usleep((useconds_t)atoi(delay) * 1000);
		fprintf(stderr, "mayfly: cannot restore: a fake failure\n");
		return 1;
	}
	if (!sock_path || !agent) {
		fprintf(stderr, "fake_vmm: --vsock PATH and $MAYFLY_AGENT needed\n");
		return 2;
	}
	if (getenv("FAKE_VMM_DELAY_MS"))
		usleep((useconds_t)atoi(getenv("FAKE_VMM_DELAY_MS")) * 1000);
	signal(SIGTERM, on_term);
	signal(SIGCHLD, SIG_IGN);   /* agents reaped by the kernel */
	if (ctl_socket_path(sock_path, ctl_path, sizeof(ctl_path)) ||
	    (ctl = listen_at(ctl_path, SOCK_SEQPACKET)) < 0 ||
	    (fd = listen_at(sock_path, SOCK_STREAM)) < 0) {
		perror("fake_vmm");
		return 1;
	}
	for (;;) {
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = ctl, .events = POLLIN } };
		int c;

		if (poll(p, 2, -1) < 0)
			continue;
		if (p[1].revents) {
			c = accept(ctl, NULL, NULL);
			if (c >= 0) {
				answer_ctl(c);
				close(c);
			}
		}
		if (!p[0].revents)
			continue;
		c = accept(fd, NULL, NULL);
		if (c < 0)
			continue;
		if (fork() == 0) {
			close(fd);
			close(ctl);
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			serve_one(c, agent, home ? home : "/tmp");
		}
		close(c);
	}
}
