/* main.c - mayfly-agent: command line, listening socket, signals, then the loop; SHUTDOWN's end. */
#include "agent.h"
#include "num.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/vm_sockets.h>

static const char usage[] =
	"usage: mayfly-agent [--port N | --unix PATH | --fd N] [--home DIR] [--defaults FILE]\n"
	"                    [--allow-shutdown] [-v]\n"
	"  (default)          listen on vsock port %d (any CID; only the host may connect)\n"
	"  --port N           another vsock port\n"
	"  --unix PATH        listen on a Unix socket instead (host tests)\n"
	"  --fd N             serve one connected socket, exit when it closes (host tests)\n"
	"  --home DIR         default cwd of processes and base of relative paths (/root)\n"
	"  --defaults FILE    an image's run defaults for every process: ENV K=V,\n"
	"                     WORKDIR /dir, USER user[:group] lines (oci-import's)\n"
	"  --allow-shutdown   SHUTDOWN powers the machine off (implied as PID 1);\n"
	"                     otherwise SHUTDOWN only ends the agent\n"
	"  --net-unix PATH    NET relays proxy clients to this Unix socket, not to\n"
	"                     vsock (host tests)\n"
	"  -v                 log closed connections and their reasons on stderr\n"
	"docs/protocol.md describes the protocol.\n";

struct options {
	enum { LISTEN_VSOCK, LISTEN_UNIX, SERVE_FD } mode;
	unsigned port;
	const char *unix_path;
	int fd;
	const char *defaults;       /* --defaults FILE */
};

/* One parser for the agent as for mayfly (getopt_long, num.c's numbers). */
static int parse_args(int argc, char **argv, struct agent *a, struct options *o)
{
	enum { O_PORT = 256, O_UNIX, O_FD, O_HOME, O_ALLOW_SHUTDOWN, O_DEFAULTS, O_NET_UNIX };
	static const struct option longopts[] = {
		{ "port", required_argument, NULL, O_PORT },
		{ "unix", required_argument, NULL, O_UNIX },
		{ "fd", required_argument, NULL, O_FD },
		{ "home", required_argument, NULL, O_HOME },
		{ "defaults", required_argument, NULL, O_DEFAULTS },
		{ "allow-shutdown", no_argument, NULL, O_ALLOW_SHUTDOWN },
		{ "net-unix", required_argument, NULL, O_NET_UNIX },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	uint64_t v;
	int id;

	opterr = 0;
	while ((id = getopt_long(argc, argv, "+:hv", longopts, NULL)) != -1) {
		switch (id) {
		case O_ALLOW_SHUTDOWN:
			a->allow_shutdown = true;
			break;
		case 'v':
			a->verbose = true;
			break;
		case 'h':
			printf(usage, PROTO_AGENT_PORT);
			exit(0);
		case O_PORT:
			/* VMADDR_PORT_ANY (2^32 - 1) is not a port. */
			if (num_parse_u64(optarg, 0, UINT32_MAX - 1, &v))
				goto bad;
			o->mode = LISTEN_VSOCK;
			o->port = (unsigned)v;
			break;
		case O_UNIX:
			if (!optarg[0])
				goto bad;
			o->mode = LISTEN_UNIX;
			o->unix_path = optarg;
			break;
		case O_FD:
			if (num_parse_u64(optarg, 0, 65535, &v))
				goto bad;
			o->mode = SERVE_FD;
			o->fd = (int)v;
			break;
		case O_HOME:
			if (!optarg[0])
				goto bad;
			a->home = optarg;
			break;
		case O_NET_UNIX:
			if (!optarg[0])
				goto bad;
			a->net_unix = optarg;
			break;
		case O_DEFAULTS:
			if (!optarg[0])
				goto bad;
			o->defaults = optarg;
			break;
		default:
			goto bad;
		}
	}
	if (optind == argc)
		return 0;
bad:
	fprintf(stderr, "mayfly-agent: bad arguments\n");
	fprintf(stderr, usage, PROTO_AGENT_PORT);
	return -EINVAL;
}

static int listen_vsock(unsigned port)
{
	struct sockaddr_vm svm = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_ANY, .svm_port = port };
	int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&svm, sizeof(svm)) < 0 || listen(fd, 16) < 0) {
		int err = errno;

		close(fd);
		return -err;
	}
	return fd;
}

static int listen_unix(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct stat st;
	int fd;

	if (strlen(path) >= sizeof(sun.sun_path))
		return -ENAMETOOLONG;
	strcpy(sun.sun_path, path);
	/* A socket left by an earlier agent would make bind fail; anything else stays. */
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 || listen(fd, 16) < 0) {
		int err = errno;

		close(fd);
		return -err;
	}
	return fd;
}

/* Signals the loop reads from a signalfd; they must be blocked to get there. */
static int setup_signals(void)
{
	sigset_t set;
	int fd;

	signal(SIGPIPE, SIG_IGN);    /* a closed connection is an error return, not death */
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		return -errno;
	fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* fds 0-2 open, so that no pipe of ours lands there and gets dup2'd over. */
static void ensure_std_fds(void)
{
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) < 0)
			break;
}

/* SIGKILL every process still known and give them a moment to be reaped. */
static void kill_everything(struct agent *a)
{
	struct timespec ms5 = { 0, 5 * 1000 * 1000 };

	struct conn *c;

	while ((c = a->conns)) {
		a->conns = c->next;
		conn_close(c, false);
		conn_free(c);
	}
	a->nconns = 0;
	for (int i = 0; i < 100 && a->orphans; i++) {
		procs_reap(a);
		procs_sweep(a, NULL);
		if (a->orphans)
			nanosleep(&ms5, NULL);
	}
}

int main(int argc, char **argv)
{
	struct agent a = { .listen_fd = -1, .sig_fd = -1, .home = "/root" };
	struct options o = { .mode = LISTEN_VSOCK, .port = PROTO_AGENT_PORT, .fd = -1 };
	bool pid1 = getpid() == 1;
	int rc;

	if (parse_args(argc, argv, &a, &o) < 0)
		return 2;
	a.allow_shutdown |= pid1;
	a.owns_guest = o.mode == LISTEN_VSOCK;
	a.start_ms = now_ms();
	ensure_std_fds();
	if (o.defaults) {
		/* A bad line costs that line, not the agent: the VM must still answer. */
		rc = defaults_load(&a.defaults, o.defaults, "");
		if (rc)
			agent_log("--defaults %s: %s (kept what was good)", o.defaults, strerror(-rc));
	}
	/* Modes in FILE_WRITE and MKDIR are exact; children get umask 022 back. */
	umask(0);
	if (chdir(a.home) < 0 && chdir("/") < 0)
		agent_log("chdir /: %m");
	/* Orphans of our processes come back to us to be reaped (PID 1 gets them anyway). */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	a.sig_fd = setup_signals();
	if (a.sig_fd < 0) {
		agent_log("signals: %s", strerror(-a.sig_fd));
		return 1;
	}

	if (o.mode == SERVE_FD) {
		a.single = true;
		if (!conn_new(&a, o.fd)) {
			agent_log("--fd %d: cannot serve it", o.fd);
			return 1;
		}
	} else {
		a.listen_fd = o.mode == LISTEN_UNIX ? listen_unix(o.unix_path) : listen_vsock(o.port);
		if (a.listen_fd < 0) {
			if (o.mode == LISTEN_UNIX)
				agent_log("listen on %s: %s", o.unix_path, strerror(-a.listen_fd));
			else
				agent_log("listen on vsock port %u: %s", o.port, strerror(-a.listen_fd));
			return 1;
		}
	}

	rc = loop_run(&a);
	net_stop(&a);
	kill_everything(&a);
	if (o.mode == LISTEN_UNIX)
		unlink(o.unix_path);
	if (rc == 1 && a.allow_shutdown) {
		sync();
		/* Not RB_POWER_OFF: a mayfly VM has no ACPI, so power-off would only halt
		 * the vCPU. A reboot with the guest's reboot=k ends the VM (mayfly exits 0). */
		reboot(RB_AUTOBOOT);
		agent_log("reboot: %m");
		while (pid1)
			pause();      /* PID 1 must not exit */
		return 1;
	}
	return rc < 0 ? 1 : 0;
}
