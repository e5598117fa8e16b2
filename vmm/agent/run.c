/* run.c - mayfly run: a fresh VM per command, driven through its guest agent; mayfly exec and cp for a running VM. */
#include "agent/run.h"
#include "agent/run_opts.h"
#include "agent/session.h"
#include "clock.h"
#include "config.h"
#include "log.h"
#include "vm.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RUN_BOOT_TIMEOUT_S 60   /* exec -> agent ready; nested emulation needs ~5 s */
#define RUN_INIT_WAIT_S    20   /* how long the boot timer alone is waited for */

const char run_usage[] =
	"usage: mayfly run [options] [--] CMD [ARG...]\n"
	"\n"
	"Boot a fresh microVM from the copy-on-write rootfs, run CMD in it through the\n"
	"guest agent, stream its stdout and stderr here, tear the VM down, and exit\n"
	"with CMD's exit code.\n"
	"\n"
	"  --rootfs IMG       root image (default: the guest tools/build-guest built)\n"
	"  --kernel FILE      guest kernel (default: the built one)\n"
	"  --mem MIB          guest RAM (default 256)\n"
	"  --cpus N           vCPUs (default 1)\n"
	"  --timeout SEC      kill CMD after SEC seconds (exit 124)\n"
	"  --env K=V          environment for CMD (repeatable; PATH has a default)\n"
	"  --cwd DIR          working directory in the guest (default /root)\n"
	"  --stdin FILE|-     feed CMD's stdin from FILE or from mayfly's stdin\n"
	"  --put LOCAL:GUEST  copy a file into the VM before CMD (repeatable)\n"
	"  --get GUEST:LOCAL  copy a file out of the VM after CMD (repeatable)\n"
	"  --tty              run CMD on a pseudo-terminal in the guest (its size from\n"
	"                     ours, else 24x80); stdout then carries both streams\n"
	"  --json             one JSON event per line on stdout (started, stdout,\n"
	"                     stderr, exit, timings) instead of the raw streams\n"
	"  --id ID            VM id for log lines\n"
	"  -v, --verbose      log lines and the guest console on stderr (-vv: debug)\n"
	"\n"
	"A first SIGINT or SIGTERM goes to CMD; a second one ends the VM.\n"
	"Exit: CMD's code; 124 timed out, 125 mayfly or the VM failed, 126 the agent\n"
	"failed or CMD could not run, 127 CMD not found, 128+N CMD killed by signal N.\n";

const char exec_usage[] =
	"usage: mayfly exec --vsock PATH [options] [--] CMD [ARG...]\n"
	"\n"
	"Run CMD in a VM started with `mayfly boot --vsock PATH` (several calls, one VM).\n"
	"Options as for mayfly run: --timeout, --env, --cwd, --stdin, --tty, --json, -v.\n";

const char cp_usage[] =
	"usage: mayfly cp --vsock PATH SRC DST\n"
	"\n"
	"Copy a file into or out of a VM started with `mayfly boot --vsock PATH`.\n"
	"The guest side is written :/absolute/path, e.g. mayfly cp --vsock s ./a :/root/a\n";

/* What the agent thread of mayfly run shares with the main thread. */
struct run_ctx {
	struct vm *vm;
	const struct run_opts *o;
	const char *sock;
	uint64_t start_ns;
	_Atomic bool vm_ended;        /* the main thread's vm_run returned */
	_Atomic int client_fd;        /* published so the main thread can unblock us */
	bool done;                    /* the command ran to an answer (read after join) */
	_Atomic bool running;         /* the command is running: signals go to it */
	_Atomic bool forwarded;       /* one signal was passed on; the next ends the VM */
	_Atomic int signo;
	int sig_fd;                   /* eventfd: the agent thread sends `signo` */
	int stdin_fd;
	struct exec_result res;
	uint64_t ready_ns;
	struct agent_client client;
};

static void timing_line(const struct run_ctx *ctx, uint64_t built_ns, uint64_t end_ns)
{
	uint64_t boot_us = boot_timer_elapsed_us(&ctx->vm->boot_timer);
	double setup = (double)(built_ns - ctx->start_ns) / 1e6;
	double ready = ctx->ready_ns ? (double)(ctx->ready_ns - ctx->start_ns) / 1e6 : -1;
	double started = ctx->res.started_ns ? (double)(ctx->res.started_ns - ctx->start_ns) / 1e6 : -1;
	double ended = ctx->res.ended_ns ? (double)(ctx->res.ended_ns - ctx->start_ns) / 1e6 : -1;
	double total = (double)(end_ns - ctx->start_ns) / 1e6;
	double teardown = ctx->res.ended_ns ? (double)(end_ns - ctx->res.ended_ns) / 1e6 : -1;

	log_info("timing: vmm setup %.1f ms, guest init at %.1f ms, agent ready at %.1f ms, "
		 "command started at %.1f ms, ended at %.1f ms, teardown %.1f ms, total %.1f ms",
		 setup, (double)boot_us / 1000, ready, started, ended, teardown, total);
	if (ctx->o->json)
		session_json_event("timings", "\"vmm_setup_ms\":%.1f,\"guest_init_ms\":%.1f,"
				   "\"agent_ready_ms\":%.1f,\"command_start_ms\":%.1f,"
				   "\"command_end_ms\":%.1f,\"teardown_ms\":%.1f,\"total_ms\":%.1f",
				   setup, (double)boot_us / 1000, ready, started, ended, teardown, total);
}

static bool copy_files(struct agent_client *c, const struct run_file *files, int n, bool put,
		       struct exec_result *res)
{
	char why[256];

	for (int i = 0; i < n; i++) {
		int rc = put ? agent_client_put(c, files[i].local, files[i].guest, why, sizeof(why)) :
			       agent_client_get(c, files[i].guest, files[i].local, why, sizeof(why));

		if (rc) {
			snprintf(res->error, sizeof(res->error), "%s %.100s: %.120s",
				 put ? "--put" : "--get", put ? files[i].local : files[i].guest, why);
			res->exit_code = RUN_EXIT_AGENT;
			return false;
		}
	}
	return true;
}

static void spec_from_opts(struct exec_spec *spec, const struct run_opts *o, int stdin_fd)
{
	memset(spec, 0, sizeof(*spec));
	spec->signal_fd = -1;
	spec->argv = o->argv;
	spec->argc = o->argc;
	spec->env = (char **)o->env;
	spec->nenv = o->nenv;
	spec->cwd = o->cwd;
	spec->stdin_fd = stdin_fd;
	spec->json = o->json;
	spec->timeout_ms = o->timeout_s * 1000;
	spec->pty = o->tty;
	spec->rows = 24;
	spec->cols = 80;
	if (o->tty) {
		struct winsize ws;

		/* The guest's terminal takes the size of ours, when we have one. */
		if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col) {
			spec->rows = ws.ws_row;
			spec->cols = ws.ws_col;
		}
	}
	/* The agent enforces the timeout; this only bounds a hung agent. */
	if (o->timeout_s)
		spec->deadline_ns = clock_now_ns() + (o->timeout_s + 10ULL) * 1000000000ULL;
}

static void *run_agent_thread(void *arg)
{
	struct run_ctx *ctx = arg;
	struct exec_spec spec;
	const char *why = "";
	uint64_t deadline = ctx->start_ns + RUN_BOOT_TIMEOUT_S * 1000000000ULL;
	uint64_t patience = clock_now_ns() + RUN_INIT_WAIT_S * 1000000000ULL;
	struct timespec ms = { 0, 1000000 };
	int rc;

	/* No agent can answer before the guest's init has run (it writes the
	 * boot timer first): knocking earlier only costs the booting guest a
	 * refused connection every few milliseconds. A rootfs whose init never
	 * writes the timer is tried anyway after a while. */
	while (!boot_timer_elapsed_us(&ctx->vm->boot_timer) && clock_now_ns() < patience &&
	       !atomic_load(&ctx->vm_ended))
		nanosleep(&ms, NULL);
	rc = agent_client_connect(&ctx->client, ctx->sock, PROTO_AGENT_PORT, deadline,
				  &ctx->vm_ended, &why);
	if (rc) {
		if (rc != -ECANCELED)
			vm_stop(ctx->vm, RUN_EXIT_AGENT, "%s", why);
		return NULL;
	}
	atomic_store(&ctx->client_fd, ctx->client.fd);
	ctx->ready_ns = clock_now_ns();
	log_info("guest agent ready after %.1f ms",
		 (double)(ctx->ready_ns - ctx->start_ns) / 1e6);
	/* The main thread may have ended the VM (a signal) while we connected. */
	if (atomic_load(&ctx->vm_ended))
		return NULL;
	memset(&ctx->res, 0, sizeof(ctx->res));
	if (copy_files(&ctx->client, ctx->o->puts, ctx->o->nput, true, &ctx->res)) {
		spec_from_opts(&spec, ctx->o, ctx->stdin_fd);
		spec.signal_fd = ctx->sig_fd;
		spec.signal_no = &ctx->signo;
		atomic_store(&ctx->running, true);
		session_exec(&ctx->client, &spec, &ctx->res);
		atomic_store(&ctx->running, false);
		if (ctx->res.ended_ns && ctx->o->nget) {
			struct exec_result got = ctx->res;

			if (!copy_files(&ctx->client, ctx->o->gets, ctx->o->nget, false, &got) &&
			    ctx->res.exit_code == 0) {
				ctx->res.exit_code = got.exit_code;
				memcpy(ctx->res.error, got.error, sizeof(got.error));
			}
		}
	}
	ctx->done = true;
	/* Nothing in the VM is worth keeping: end it now, no guest shutdown. */
	vm_stop(ctx->vm, 0, "command finished");
	return NULL;
}

/* vm_run's signal hook: the first SIGINT/SIGTERM/SIGHUP while the command
 * runs goes to the command (as `docker run` does), so it can clean up and
 * its own exit status comes back; a second one ends the VM. */
static bool run_signal_hook(void *opaque, int signo)
{
	struct run_ctx *ctx = opaque;
	uint64_t one = 1;

	if (!atomic_load(&ctx->running) || atomic_exchange(&ctx->forwarded, true))
		return false;
	atomic_store(&ctx->signo, signo);
	if (write(ctx->sig_fd, &one, sizeof(one)) < 0)
		return false;
	log_warn("passing %s to the command (again to stop the VM)", strsignal(signo));
	return true;
}

static int open_stdin(const struct run_opts *o)
{
	int fd;

	if (!o->stdin_path)
		return -1;
	if (!strcmp(o->stdin_path, "-"))
		return STDIN_FILENO;
	fd = open(o->stdin_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		fprintf(stderr, "mayfly: cannot open --stdin '%s': %s\n", o->stdin_path,
			strerror(errno));
	return fd < 0 ? -2 : fd;
}

/* The boot flags mayfly run implies, parsed by the one boot parser. */
static int run_config(struct vm_config *cfg, const struct run_opts *o, const char *sock,
		      char *rootfs, size_t rootfs_len)
{
	char mem[24], cpus[24], err[256];
	char *args[24];
	int n = 0;

	if (o->rootfs) {
		snprintf(rootfs, rootfs_len, "%s", o->rootfs);
	} else if (config_default_guest_file("rootfs.ext4", rootfs, rootfs_len)) {
		fprintf(stderr, "mayfly: no --rootfs given and no default rootfs.ext4 found "
			"(build it with tools/build-guest, or set MAYFLY_GUEST_DIR)\n");
		return RUN_EXIT_MAYFLY;
	}
	snprintf(mem, sizeof(mem), "%llu", (unsigned long long)o->mem_mib);
	snprintf(cpus, sizeof(cpus), "%u", o->cpus);
	args[n++] = "--rootfs";
	args[n++] = rootfs;
	args[n++] = "--vsock";
	args[n++] = (char *)sock;
	args[n++] = "--mem";
	args[n++] = mem;
	args[n++] = "--cpus";
	args[n++] = cpus;
	if (o->kernel) {
		args[n++] = "--kernel";
		args[n++] = (char *)o->kernel;
	}
	if (o->id) {
		args[n++] = "--id";
		args[n++] = (char *)o->id;
	}
	for (int v = 0; v < o->verbose && v < 2; v++)
		args[n++] = "-v";
	if (config_parse(cfg, n, args, err, sizeof(err)) != CONFIG_OK ||
	    config_resolve_defaults(cfg, err, sizeof(err)) != CONFIG_OK) {
		fprintf(stderr, "mayfly: %s\n", err);
		return RUN_EXIT_MAYFLY;
	}
	cfg->console_out = o->verbose ? CONSOLE_OUT_STDERR : CONSOLE_OUT_DISCARD;
	return 0;
}

static void report_failure(const struct run_opts *o, const char *msg)
{
	if (o->json) {
		char s[600];

		session_json_string(s, sizeof(s), (const uint8_t *)msg, strlen(msg));
		session_json_event("error", "\"message\":%s", s);
	}
	fprintf(stderr, "mayfly: %s\n", msg);
}

static int run_main(struct run_ctx *ctx, int argc, char **argv, uint64_t start_ns)
{
	char dir[] = "/tmp/mayfly-run-XXXXXX", sock[64], err[256], rootfs[4096];
	struct run_opts o;
	struct vm_config cfg;
	struct vm vm;
	pthread_t thread;
	sigset_t set, old;
	uint64_t built_ns;
	int code, rc;

	rc = run_opts_parse(&o, RUN_MODE_RUN, argc, argv, err, sizeof(err));
	if (rc) {
		if (rc > 0)
			fputs(run_usage, stdout);
		else
			fprintf(stderr, "mayfly: %s (see mayfly run --help)\n", err);
		return rc > 0 ? 0 : RUN_EXIT_MAYFLY;
	}
	/* The VM's vsock socket lives in a private directory, removed at exit. */
	if (!mkdtemp(dir)) {
		fprintf(stderr, "mayfly: cannot create a temporary directory: %s\n", strerror(errno));
		return RUN_EXIT_MAYFLY;
	}
	snprintf(sock, sizeof(sock), "%s/vsock", dir);
	ctx->o = &o;
	ctx->sock = sock;
	ctx->start_ns = start_ns;
	ctx->vm = &vm;
	ctx->client.fd = -1;
	atomic_store(&ctx->client_fd, -1);
	ctx->sig_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ctx->sig_fd < 0) {
		fprintf(stderr, "mayfly: cannot create an eventfd: %s\n", strerror(errno));
		rmdir(dir);
		return RUN_EXIT_MAYFLY;
	}
	code = run_config(&cfg, &o, sock, rootfs, sizeof(rootfs));
	if (!code) {
		ctx->stdin_fd = open_stdin(&o);
		if (ctx->stdin_fd == -2)
			code = RUN_EXIT_MAYFLY;
	}
	if (code) {
		rmdir(dir);
		return code;
	}
	log_init(cfg.id, cfg.log_level);
	rc = vm_build(&vm, &cfg, start_ns);
	built_ns = clock_now_ns();
	if (rc) {
		vm_destroy(&vm);
		rmdir(dir);
		return RUN_EXIT_MAYFLY;   /* vm_build logged why */
	}
	/* The agent thread must never take SIGINT/SIGTERM: vm_run's signalfd does. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, &old);
	if (pthread_create(&thread, NULL, run_agent_thread, ctx)) {
		report_failure(&o, "cannot start the agent thread");
		vm_destroy(&vm);
		rmdir(dir);
		return RUN_EXIT_MAYFLY;
	}
	vm.signal_hook = run_signal_hook;
	vm.signal_hook_opaque = ctx;
	code = vm_run(&vm);
	atomic_store(&ctx->vm_ended, true);
	{
		int fd = atomic_load(&ctx->client_fd);

		if (fd >= 0)
			shutdown(fd, SHUT_RDWR);   /* unblock the agent thread */
	}
	pthread_join(thread, NULL);
	agent_client_close(&ctx->client);
	vm_destroy(&vm);
	rmdir(dir);
	if (ctx->stdin_fd > STDIN_FILENO)
		close(ctx->stdin_fd);

	if (ctx->done) {
		code = ctx->res.exit_code;
		if (ctx->res.error[0])
			report_failure(&o, ctx->res.error);
	} else {
		char msg[300];

		snprintf(msg, sizeof(msg), "the VM ended before the command did: %s", vm.exit_reason);
		report_failure(&o, msg);
		code = code >= 128 ? code : code == RUN_EXIT_AGENT ? RUN_EXIT_AGENT : RUN_EXIT_MAYFLY;
	}
	timing_line(ctx, built_ns, clock_now_ns());
	return code;
}

int cmd_run(int argc, char **argv, uint64_t start_ns)
{
	struct run_ctx *ctx = calloc(1, sizeof(*ctx));   /* large: the client's frame buffers */
	int code;

	if (!ctx) {
		fprintf(stderr, "mayfly: out of memory\n");
		return RUN_EXIT_MAYFLY;
	}
	ctx->sig_fd = -1;
	code = run_main(ctx, argc, argv, start_ns);
	if (ctx->sig_fd >= 0)
		close(ctx->sig_fd);
	free(ctx);
	return code;
}

/* A VM started just before (boot --vsock S &) may still be booting: allow
 * as long as mayfly run allows its own VM. */
static int connect_running(struct agent_client *c, const struct run_opts *o)
{
	const char *why = "";
	int rc = agent_client_connect(c, o->vsock, PROTO_AGENT_PORT,
				      clock_now_ns() + RUN_BOOT_TIMEOUT_S * 1000000000ULL, NULL, &why);

	if (rc)
		fprintf(stderr, "mayfly: %s: %s (%s)\n", o->vsock, why, strerror(-rc));
	return rc;
}

int cmd_exec(int argc, char **argv)
{
	struct agent_client *client;
	struct exec_result res;
	struct exec_spec spec;
	struct run_opts o;
	char err[256];
	int rc = run_opts_parse(&o, RUN_MODE_EXEC, argc, argv, err, sizeof(err)), in;

	if (rc) {
		if (rc > 0)
			fputs(exec_usage, stdout);
		else
			fprintf(stderr, "mayfly: %s (see mayfly exec --help)\n", err);
		return rc > 0 ? 0 : RUN_EXIT_MAYFLY;
	}
	log_init("exec", o.verbose >= 2 ? LOG_DEBUG : o.verbose ? LOG_INFO : LOG_WARN);
	in = open_stdin(&o);
	if (in == -2)
		return RUN_EXIT_MAYFLY;
	signal(SIGPIPE, SIG_IGN);
	client = calloc(1, sizeof(*client));
	if (!client || connect_running(client, &o)) {
		free(client);
		return RUN_EXIT_AGENT;
	}
	spec_from_opts(&spec, &o, in);
	session_exec(client, &spec, &res);
	if (res.error[0])
		report_failure(&o, res.error);
	agent_client_close(client);
	free(client);
	return res.exit_code;
}

int cmd_cp(int argc, char **argv)
{
	struct agent_client *client;
	struct run_opts o;
	char err[256], why[256];
	const char *src, *dst;
	int rc = run_opts_parse(&o, RUN_MODE_CP, argc, argv, err, sizeof(err));

	if (rc) {
		if (rc > 0)
			fputs(cp_usage, stdout);
		else
			fprintf(stderr, "mayfly: %s (see mayfly cp --help)\n", err);
		return rc > 0 ? 0 : RUN_EXIT_MAYFLY;
	}
	src = o.argv[0];
	dst = o.argv[1];
	if ((src[0] == ':') == (dst[0] == ':') || (src[0] == ':' ? src[1] : dst[1]) != '/') {
		fprintf(stderr, "mayfly: exactly one of SRC and DST must be :/absolute/guest/path\n");
		return RUN_EXIT_MAYFLY;
	}
	log_init("cp", o.verbose ? LOG_INFO : LOG_WARN);
	signal(SIGPIPE, SIG_IGN);
	client = calloc(1, sizeof(*client));
	if (!client || connect_running(client, &o)) {
		free(client);
		return RUN_EXIT_AGENT;
	}
	rc = src[0] == ':' ? agent_client_get(client, src + 1, dst, why, sizeof(why)) :
			     agent_client_put(client, src, dst + 1, why, sizeof(why));
	agent_client_close(client);
	free(client);
	if (rc) {
		fprintf(stderr, "mayfly: cp %s %s: %s\n", src, dst, why);
		return RUN_EXIT_AGENT;
	}
	return 0;
}
