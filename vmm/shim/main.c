/* main.c - containerd-shim-mayfly-v2: containerd's runtime v2 shim (start, delete, the Task service on ttrpc), and `vm`, the one launch path that runs each container's microVM. */
#include "cmd/boot.h"
#include "cmd/cli.h"
#include "launch/guest_files.h"
#include "launch/snapcache.h"
#include "lib/exitcode.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "seccomp/seccomp.h"
#include "shim/events.h"
#include "shim/runtime.h"
#include "shim/sandbox.h"
#include "shim/task.h"
#include "shim/task_api.h"
#include "shim/ttrpc_server.h"
#include "version.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define LISTEN_FD        3      /* containerd's convention: the daemon's socket */
#define STOP_GRACE_MS    3000
#define SHIM_VERSION     "mayfly " MAYFLY_VERSION

/* `vm`: a container's VM, exactly mayfly boot (cmd/boot.c, the launch path). */
static int run_vm(int argc, char **argv, uint64_t start_ns)
{
	struct cli *c = mmap(NULL, sizeof(*c), PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int code;

	if (c == MAP_FAILED) {
		log_say("out of memory");
		return 1;
	}
	code = cmd_boot(c, argc, argv, start_ns);
	cli_free(c);
	munmap(c, sizeof(*c));
	return code;
}

/* `vm-snapshot`: the snapshot of that VM booted and agent-ready, made once
 * (launch/snapcache.c: keyed by mayfly, the kernel, initramfs, image,
 * command line, memory and vCPUs), its directory printed. Exit 0, 3 when
 * there is no cache directory, else mayfly's code. */
static int run_vm_snapshot(int argc, char **argv)
{
	struct cli *c = mmap(NULL, sizeof(*c), PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char dir[PATH_MAX];
	int code;

	if (c == MAP_FAILED) {
		log_say("out of memory");
		return 1;
	}
	code = cli_parse_or_exit(c, CLI_BOOT, argc, argv, EXIT_USAGE);
	if (code < 0) {
		log_init(c->vm.id, c->vm.log_level);
		c->vm.vsock = true;   /* the agent: snapshots are of agent-ready VMs */
		c->vm.vsock_path[0] = '\0';
		c->vm.console_out = c->verbose ? CONSOLE_OUT_STDERR : CONSOLE_OUT_DISCARD;
		code = seccomp_setup(c->no_seccomp) ? EXIT_INTERNAL :
		       snapcache_get(&c->vm, dir, sizeof(dir), c->verbose, &c->jail);
		if (code == 0)
			printf("%s\n", dir);
		code = code < 0 ? 3 : code;
	}
	cli_free(c);
	munmap(c, sizeof(*c));
	return code;
}

/* The bundle's "log" fifo (containerd reads it into its own log) as our
 * stderr, the VMs' too; without a reader, stderr stays as it is. */
static void open_log(void)
{
	int fd = open("log", O_WRONLY | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return;
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	dup2(fd, STDERR_FILENO);
	close(fd);
}

/* The default guest's kernel and initramfs, or NULL with a warning (every
 * Create then fails saying why). */
static const char *guest_file(const char *name, char *out, size_t len)
{
	if (guest_files_find(name, out, len) == 0)
		return out;
	log_warn("no %s in the default guest (build it with tools/build-guest, or set "
		 "MAYFLY_GUEST_DIR): no container can start", name);
	return NULL;
}

/* Wait for Shutdown (exit_fd) or SIGTERM/SIGINT. */
static void wait_for_end(int exit_fd)
{
	sigset_t set;
	int sfd;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sfd = signalfd(-1, &set, SFD_CLOEXEC);
	for (;;) {
		struct pollfd p[2] = { { .fd = exit_fd, .events = POLLIN },
				       { .fd = sfd, .events = POLLIN } };

		if (poll(p, sfd >= 0 ? 2 : 1, -1) < 0 && errno == EINTR)
			continue;
		if (p[0].revents || (sfd >= 0 && p[1].revents))
			break;
	}
	if (sfd >= 0)
		close(sfd);
}

static int serve(const struct runtime_args *a, const char *self)
{
	char kernel[PATH_MAX], initrd[PATH_MAX];
	struct ttrpc_server_config cfg = { 0 };
	struct task_api_forwarder fwd = { getenv("TTRPC_ADDRESS"), -1 };
	struct ttrpc_server *srv = NULL;
	struct task_service svc;
	struct sockaddr_un addr;
	socklen_t alen = sizeof(addr);
	struct events ev;
	sigset_t block;
	int exit_fd, rc;

	open_log();
	log_init(a->id ? a->id : "shim", a->debug ? LOG_INFO : LOG_WARN);
	/* containerd's environment may have no home: the images and snapshots
	 * (every VM of ours inherits this) go to /var/cache/mayfly then. */
	if (!getenv("MAYFLY_CACHE") && !getenv("XDG_CACHE_HOME") && !getenv("HOME"))
		setenv("MAYFLY_CACHE", "/var/cache/mayfly", 1);
	signal(SIGPIPE, SIG_IGN);
	/* Every thread from here on leaves these to the main thread's signalfd. */
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	pthread_sigmask(SIG_BLOCK, &block, NULL);
	if (!fwd.address || !*fwd.address) {
		log_say("TTRPC_ADDRESS is not set: containerd starts this shim with it");
		return 1;
	}
	if (getsockname(LISTEN_FD, (struct sockaddr *)&addr, &alen) < 0 || addr.sun_family != AF_UNIX) {
		log_say("no listening socket on fd %d: start this shim with `start`", LISTEN_FD);
		return 1;
	}
	if (mkdir(RUNTIME_RUN_DIR, 0711) < 0 && errno != EEXIST) {
		log_say("cannot create " RUNTIME_RUN_DIR ": %s", strerror(errno));
		return 1;
	}
	exit_fd = eventfd(0, EFD_CLOEXEC);
	if (exit_fd < 0 || sandbox_spawner_start() ||
	    events_start(&ev, a->namespace, task_api_forward, &fwd)) {
		log_say("cannot start the shim's threads: %s", strerror(errno));
		return 1;
	}
	task_service_init(&svc, self, guest_file(CONFIG_DEFAULT_KERNEL, kernel, sizeof(kernel)),
			  guest_file("initramfs.cpio.gz", initrd, sizeof(initrd)), RUNTIME_RUN_DIR,
			  a->debug, &ev, SHIM_VERSION, exit_fd);
	cfg.methods = task_api_methods(&cfg.n_methods);
	cfg.opaque = &svc;
	rc = ttrpc_server_start(&srv, LISTEN_FD, &cfg);
	if (rc) {
		log_say("cannot serve ttrpc: %s", strerror(-rc));
		events_stop(&ev, 0);
		return 1;
	}
	log_info("serving namespace %s on %s", a->namespace, addr.sun_path);
	wait_for_end(exit_fd);
	ttrpc_server_stop(srv, STOP_GRACE_MS);
	task_service_close(&svc);
	events_stop(&ev, STOP_GRACE_MS);
	if (fwd.fd >= 0)
		close(fwd.fd);
	close(LISTEN_FD);
	if (addr.sun_path[0])
		unlink(addr.sun_path);
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t start_ns = clock_now_ns();
	struct runtime_args a;
	char self[PATH_MAX], err[256];
	ssize_t n;

	if (argc >= 2 && !strcmp(argv[1], "vm"))
		return run_vm(argc - 1, argv + 1, start_ns);
	if (argc >= 2 && !strcmp(argv[1], "vm-snapshot"))
		return run_vm_snapshot(argc - 1, argv + 1);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		fputs("containerd-shim-mayfly-v2: cannot find its own binary\n", stderr);
		return 1;
	}
	self[n] = '\0';
	if (runtime_parse(&a, argc, argv, err, sizeof(err))) {
		fprintf(stderr, "containerd-shim-mayfly-v2: %s\n", err);
		return 2;
	}
	if (a.bundle && chdir(a.bundle) < 0) {
		fprintf(stderr, "containerd-shim-mayfly-v2: cannot enter the bundle %s: %s\n", a.bundle,
			strerror(errno));
		return 1;
	}
	log_init(a.id ? a.id : "shim", a.debug ? LOG_INFO : LOG_WARN);
	switch (a.action) {
	case RUNTIME_VERSION:
		printf("containerd-shim-mayfly-v2:\n  Version: %s\n  Revision: %s\n  Build: %s\n",
		       MAYFLY_VERSION, MAYFLY_COMMIT, MAYFLY_BUILD);
		return 0;
	case RUNTIME_START:
		return runtime_start(&a, self);
	case RUNTIME_DELETE:
		return runtime_delete(&a);
	case RUNTIME_SERVE:
		break;
	}
	return serve(&a, self);
}
