/* run.c - mayfly run: a fresh VM per command, driven through its guest agent in the same process; mayfly exec and cp for a running VM. */
#include "agent/run.h"
#include "agent/events.h"
#include "agent/session.h"
#include "agent/term.h"
#include "agent/transfer.h"
#include "clock.h"
#include "guest_files.h"
#include "log.h"
#include "vm.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define RUN_BOOT_TIMEOUT_S 60   /* exec -> agent ready; nested emulation needs ~5 s */
#define RUN_INIT_WAIT_S    20   /* how long the boot timer alone is waited for */
#define RUN_AGENT_GRACE_S  10   /* past --timeout, for the agent's own EXIT to arrive */
#define NS                 1000000000ULL

/* What the agent thread of mayfly run shares with the main thread. */
struct run_ctx {
	struct vm *vm;
	const struct run_opts *o;
	uint64_t start_ns;
	int cancel_fd;                /* eventfd: the VM ended; every agent wait gives up */
	int sigs[2];                  /* pipe: signals for the command */
	_Atomic bool running;         /* the command is running: signals go to it */
	_Atomic bool forwarded;       /* one signal was passed on; the next ends the VM */
	bool done;                    /* the command ran to an answer (read after join) */
	int stdin_fd;
	struct term term;
	struct exec_result res;
	uint64_t ready_ns;
	struct agent_client client;
};

static double ms_since(uint64_t from, uint64_t to)
{
	return from && to ? (double)(to - from) / 1e6 : -1;
}

static void timing_line(const struct run_ctx *ctx, uint64_t built_ns, uint64_t end_ns)
{
	struct event_timings t = {
		.vmm_setup = ms_since(ctx->start_ns, built_ns),
		.guest_init = (double)vm_guest_init_us(ctx->vm) / 1000,
		.agent_ready = ms_since(ctx->start_ns, ctx->ready_ns),
		.command_start = ms_since(ctx->start_ns, ctx->res.started_ns),
		.command_end = ms_since(ctx->start_ns, ctx->res.ended_ns),
		.teardown = ms_since(ctx->res.ended_ns, end_ns),
		.total = ms_since(ctx->start_ns, end_ns),
	};

	log_info("timing: vmm setup %.1f ms, guest init at %.1f ms, agent ready at %.1f ms, "
		 "command started at %.1f ms, ended at %.1f ms, teardown %.1f ms, total %.1f ms",
		 t.vmm_setup, t.guest_init, t.agent_ready, t.command_start, t.command_end,
		 t.teardown, t.total);
	if (ctx->o->json)
		event_timings(stdout, &t);
}

/* Each --put (before) or --get (after), each with its own deadline. */
static bool copy_files(struct agent_client *c, const struct run_opts *o, bool put,
		       struct exec_result *res)
{
	const struct run_file *files = put ? o->puts : o->gets;
	int n = put ? o->nput : o->nget;
	char why[256];

	for (int i = 0; i < n; i++) {
		uint64_t deadline = clock_now_ns() + o->call_timeout_s * NS;
		int rc = put ? transfer_put(c, files[i].local, files[i].guest, deadline, why, sizeof(why)) :
			       transfer_get(c, files[i].guest, files[i].local, o->max_get_bytes,
					    deadline, why, sizeof(why));

		if (rc) {
			snprintf(res->error, sizeof(res->error), "%s %.100s: %.120s",
				 put ? "--put" : "--get", put ? files[i].local : files[i].guest, why);
			res->exit_code = RUN_EXIT_AGENT;
			return false;
		}
	}
	return true;
}

static void spec_from_opts(struct exec_spec *spec, const struct run_opts *o, int stdin_fd,
			   const struct term *term)
{
	session_spec_init(spec);
	spec->argv = o->argv;
	spec->argc = o->argc;
	spec->env = (char **)o->env;
	spec->nenv = o->nenv;
	spec->cwd = o->cwd;
	spec->stdin_fd = stdin_fd;
	spec->json = o->json;
	spec->timeout_ms = o->timeout_s * 1000;
	spec->max_output = o->max_output;
	spec->pty = o->tty;
	spec->rows = 24;
	spec->cols = 80;
	spec->signal_fd = term->sigs[0];
	if (o->tty) {
		struct winsize ws;

		/* The guest's terminal takes the size of ours and follows it. */
		if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col) {
			spec->rows = ws.ws_row;
			spec->cols = ws.ws_col;
		}
		spec->winch_fd = term->winch[0];
		spec->tty_fd = STDIN_FILENO;
	}
	/* The agent enforces the timeout; this only bounds a hung agent. */
	if (o->timeout_s)
		spec->deadline_ns = clock_now_ns() + (o->timeout_s + RUN_AGENT_GRACE_S) * NS;
}

static int dial_vm(void *opaque)
{
	return vm_connect_vsock(opaque);
}

/* No agent can answer before the guest's init has run (it writes the boot
 * timer first): knocking earlier only costs the booting guest a refused
 * connection every few milliseconds. A rootfs whose init never writes the
 * timer is tried anyway after a while. False when the VM ended. */
static bool wait_guest_init(struct run_ctx *ctx)
{
	uint64_t patience = clock_now_ns() + RUN_INIT_WAIT_S * NS;

	while (!vm_guest_init_us(ctx->vm) && clock_now_ns() < patience) {
		struct pollfd p = { .fd = ctx->cancel_fd, .events = POLLIN };

		if (poll(&p, 1, 1) > 0)
			return false;
	}
	return true;
}

static void *run_agent_thread(void *arg)
{
	struct run_ctx *ctx = arg;
	const struct run_opts *o = ctx->o;
	struct exec_spec spec;
	const char *why = "";
	int rc;

	if (!wait_guest_init(ctx))
		return NULL;
	rc = agent_client_connect(&ctx->client, dial_vm, ctx->vm, PROTO_AGENT_PORT,
				  ctx->start_ns + RUN_BOOT_TIMEOUT_S * NS, ctx->cancel_fd, &why);
	if (rc) {
		if (rc != -ECANCELED)
			vm_stop(ctx->vm, RUN_EXIT_AGENT, "%s", why);
		return NULL;
	}
	ctx->ready_ns = clock_now_ns();
	log_info("guest agent ready after %.1f ms", ms_since(ctx->start_ns, ctx->ready_ns));
	memset(&ctx->res, 0, sizeof(ctx->res));
	if (copy_files(&ctx->client, o, true, &ctx->res)) {
		spec_from_opts(&spec, o, ctx->stdin_fd, &ctx->term);
		atomic_store(&ctx->running, true);
		session_exec(&ctx->client, &spec, &ctx->res);
		atomic_store(&ctx->running, false);
		if (ctx->res.ended_ns && o->nget) {
			struct exec_result got = ctx->res;

			if (!copy_files(&ctx->client, o, false, &got) && ctx->res.exit_code == 0) {
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
	uint8_t b = (uint8_t)signo;

	if (!atomic_load(&ctx->running) || atomic_exchange(&ctx->forwarded, true))
		return false;
	if (write(ctx->sigs[1], &b, 1) != 1)
		return false;
	log_warn("passing %s to the command (again to stop the VM)", strsignal(signo));
	return true;
}

/* --stdin: -1 none, STDIN_FILENO for "-", or an open file; -2 on error.
 * --tty with a terminal on stdin reads it without being asked. */
static int open_stdin(const struct run_opts *o)
{
	int fd;

	if (!o->stdin_path)
		return o->tty && isatty(STDIN_FILENO) ? STDIN_FILENO : -1;
	if (!strcmp(o->stdin_path, "-"))
		return STDIN_FILENO;
	fd = open(o->stdin_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		log_say("cannot open --stdin '%s': %s", o->stdin_path, strerror(errno));
	return fd < 0 ? -2 : fd;
}

static void report_failure(const struct run_opts *o, const char *msg)
{
	if (o->json)
		event_error(stdout, msg);
	log_say("%s", msg);
}

/* mayfly run's VM: the front end's config, plus its rootfs and an
 * in-process vsock device. */
static int run_config(struct vm_config *vm, int verbose)
{
	char err[256];

	if (!vm->rootfs[0] && guest_files_find("rootfs.ext4", vm->rootfs, sizeof(vm->rootfs))) {
		vm->rootfs[0] = '\0';
		log_say("no --rootfs given and no default rootfs.ext4 found "
			"(build it with tools/build-guest, or set MAYFLY_GUEST_DIR)");
		return RUN_EXIT_MAYFLY;
	}
	vm->vsock = true;
	vm->vsock_path[0] = '\0';
	vm->console_out = verbose ? CONSOLE_OUT_STDERR : CONSOLE_OUT_DISCARD;
	if (guest_files_resolve(vm, err, sizeof(err))) {
		log_say("%s", err);
		return RUN_EXIT_MAYFLY;
	}
	return 0;
}

static int run_main(struct run_ctx *ctx, struct cli *c, uint64_t start_ns)
{
	struct vm vm;
	pthread_t thread;
	sigset_t set, old;
	uint64_t built_ns;
	uint64_t one = 1;
	int code, rc;

	ctx->o = &c->run;
	ctx->start_ns = start_ns;
	ctx->vm = &vm;
	ctx->client.fd = -1;
	log_init(c->vm.id, c->vm.log_level);
	rc = vm_build(&vm, &c->vm, start_ns);
	built_ns = clock_now_ns();
	if (rc) {
		vm_destroy(&vm);
		return RUN_EXIT_MAYFLY;   /* vm_build logged why */
	}
	/* The agent thread must never take SIGINT/SIGTERM: vm_run's signalfd does. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, &old);
	if (pthread_create(&thread, NULL, run_agent_thread, ctx)) {
		report_failure(ctx->o, "cannot start the agent thread");
		vm_destroy(&vm);
		return RUN_EXIT_MAYFLY;
	}
	vm_set_signal_hook(&vm, run_signal_hook, ctx);
	code = vm_run(&vm);
	/* Every wait of the agent thread ends now, whatever it waits for. */
	if (write(ctx->cancel_fd, &one, sizeof(one)) < 0)
		log_warn("cannot stop the agent thread: %s", strerror(errno));
	pthread_join(thread, NULL);
	agent_client_close(&ctx->client);
	vm_destroy(&vm);
	term_close(&ctx->term);

	if (ctx->done) {
		code = ctx->res.exit_code;
		if (ctx->res.error[0])
			report_failure(ctx->o, ctx->res.error);
	} else {
		char msg[300];

		snprintf(msg, sizeof(msg), "the VM ended before the command did: %s", vm.exit_reason);
		report_failure(ctx->o, msg);
		code = code >= 128 ? code : code == RUN_EXIT_AGENT ? RUN_EXIT_AGENT : RUN_EXIT_MAYFLY;
	}
	timing_line(ctx, built_ns, clock_now_ns());
	return code;
}

int cmd_run(struct cli *c, int argc, char **argv, uint64_t start_ns)
{
	struct run_ctx *ctx;
	int code = cli_parse_or_exit(c, CLI_RUN, argc, argv, RUN_EXIT_MAYFLY);

	if (code >= 0)
		return code;
	code = run_config(&c->vm, c->verbose);
	if (code)
		return code;
	ctx = calloc(1, sizeof(*ctx));   /* large: the client's frame buffers */
	if (!ctx) {
		log_say("out of memory");
		return RUN_EXIT_MAYFLY;
	}
	ctx->sigs[0] = ctx->sigs[1] = -1;
	ctx->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ctx->stdin_fd = open_stdin(&c->run);
	if (ctx->cancel_fd < 0 || pipe2(ctx->sigs, O_CLOEXEC | O_NONBLOCK) < 0) {
		log_say("cannot create a pipe: %s", strerror(errno));
		code = RUN_EXIT_MAYFLY;
	} else if (ctx->stdin_fd == -2) {
		code = RUN_EXIT_MAYFLY;
	} else if ((code = term_open(&ctx->term, c->run.tty, false)) != 0) {
		log_say("cannot set up the terminal: %s", strerror(-code));
		code = RUN_EXIT_MAYFLY;
	} else {
		/* The session reads signals from our pipe; term only does the tty. */
		ctx->term.sigs[0] = ctx->sigs[0];
		code = run_main(ctx, c, start_ns);
		ctx->term.sigs[0] = -1;
	}
	term_close(&ctx->term);
	if (ctx->stdin_fd > STDIN_FILENO)
		close(ctx->stdin_fd);
	for (int i = 0; i < 2; i++)
		if (ctx->sigs[i] >= 0)
			close(ctx->sigs[i]);
	if (ctx->cancel_fd >= 0)
		close(ctx->cancel_fd);
	free(ctx);
	return code;
}

/* A VM started just before (boot --vsock S &) may still be booting: allow
 * as long as mayfly run allows its own VM. */
static int connect_running(struct agent_client *c, const struct run_opts *o, int cancel_fd)
{
	const char *why = "";
	int rc = agent_client_connect(c, agent_dial_unix, (void *)o->vsock, PROTO_AGENT_PORT,
				      clock_now_ns() + RUN_BOOT_TIMEOUT_S * NS, cancel_fd, &why);

	if (rc)
		log_say("%s: %s (%s)", o->vsock, why, strerror(-rc));
	return rc;
}

int cmd_exec(struct cli *c, int argc, char **argv)
{
	struct agent_client *client;
	struct exec_result res;
	struct exec_spec spec;
	struct term term;
	int code = cli_parse_or_exit(c, CLI_EXEC, argc, argv, RUN_EXIT_MAYFLY), in;

	if (code >= 0)
		return code;
	log_init("exec", c->vm.log_level);
	in = open_stdin(&c->run);
	if (in == -2)
		return RUN_EXIT_MAYFLY;
	client = calloc(1, sizeof(*client));
	if (!client || term_open(&term, c->run.tty, true)) {
		log_say("cannot set up: %s", client ? strerror(errno) : "out of memory");
		free(client);
		if (in > STDIN_FILENO)
			close(in);
		return RUN_EXIT_MAYFLY;
	}
	code = RUN_EXIT_AGENT;
	if (!connect_running(client, &c->run, term.cancel_fd)) {
		spec_from_opts(&spec, &c->run, in, &term);
		session_exec(client, &spec, &res);
		term_close(&term);
		if (res.error[0])
			report_failure(&c->run, res.error);
		code = res.exit_code;
	}
	term_close(&term);
	agent_client_close(client);
	free(client);
	if (in > STDIN_FILENO)
		close(in);
	return code;
}

int cmd_cp(struct cli *c, int argc, char **argv)
{
	struct agent_client *client;
	char why[256];
	const char *src, *dst;
	uint64_t deadline;
	int rc = cli_parse_or_exit(c, CLI_CP, argc, argv, RUN_EXIT_MAYFLY);

	if (rc >= 0)
		return rc;
	src = c->run.argv[0];
	dst = c->run.argv[1];
	if ((src[0] == ':') == (dst[0] == ':') || (src[0] == ':' ? src[1] : dst[1]) != '/') {
		log_say("exactly one of SRC and DST must be :/absolute/guest/path");
		return RUN_EXIT_MAYFLY;
	}
	log_init("cp", c->vm.log_level);
	client = calloc(1, sizeof(*client));
	if (!client || connect_running(client, &c->run, -1)) {
		free(client);
		return RUN_EXIT_AGENT;
	}
	deadline = clock_now_ns() + c->run.call_timeout_s * NS;
	rc = src[0] == ':' ? transfer_get(client, src + 1, dst, c->run.max_get_bytes, deadline, why,
					  sizeof(why)) :
			     transfer_put(client, src, dst + 1, deadline, why, sizeof(why));
	agent_client_close(client);
	free(client);
	if (rc) {
		log_say("cp %s %s: %s", src, dst, why);
		return RUN_EXIT_AGENT;
	}
	return 0;
}
