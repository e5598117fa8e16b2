/* run.c - mayfly run: a fresh VM per command, driven through its guest agent in the same process; mayfly exec and cp for a running VM. */
#include "cmd/run.h"
#include "agent_client/events.h"
#include "agent_client/session.h"
#include "agent_client/transfer.h"
#include "cmd/term.h"
#include "launch/guest_files.h"
#include "launch/launch.h"
#include "launch/restore.h"
#include "launch/snapcache.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "policy/gate.h"
#include "seccomp/seccomp.h"

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
#include <sys/mman.h>
#include <unistd.h>

#define RUN_AGENT_GRACE_S  10   /* past --timeout, for the agent's own EXIT to arrive */
#define NS                 1000000000ULL

/* What the agent thread of mayfly run shares with the main thread. */
struct run_ctx {
	struct launch launch;         /* the VM, its jail, network and approver */
	struct run_choice vm;         /* which VM: cold, or restored from which snapshot */
	const struct run_opts *o;
	int sigs[2];                  /* pipe: signals for the command */
	_Atomic bool running;         /* the command is running: signals go to it */
	_Atomic bool forwarded;       /* one signal was passed on; the next ends the VM */
	int stdin_fd;
	struct term term;
	struct exec_result res;
	struct gate gate;             /* --approve, --audit */
	/* Opened before the VM (a jailed VMM cannot open the user's files):
	 * each --put's fd (or -errno), each --get's target with its open's
	 * error; get_ok (shared with the supervisor) marks the --get copies
	 * that came in whole, which whoever is outside the jail commits. */
	int put_fds[RUN_MAX_FILES];
	struct transfer_target gets[RUN_MAX_FILES];
	int get_rc[RUN_MAX_FILES];
	char get_why[RUN_MAX_FILES][160];
	uint8_t *get_ok;
};

static void timing_line(const struct run_ctx *ctx, uint64_t end_ns)
{
	const struct launch *l = &ctx->launch;
	const struct exec_result *res = &ctx->res;
	struct event_timings t;

	launch_timings(l, end_ns, &t);
	t.command_start = phase_ms(l->start_ns, res->started_ns);
	t.command_end = phase_ms(l->start_ns, res->ended_ns);
	t.teardown = phase_ms(res->ended_ns, end_ns);
	t.phases[PHASE_COMMAND_STARTED] = t.command_start;
	t.phases[PHASE_FIRST_OUTPUT] = phase_ms(l->start_ns, res->first_output_ns);
	t.phases[PHASE_COMMAND_ENDED] = t.command_end;

	log_info("timing (%s): vmm setup %.1f ms, first KVM_RUN at %.1f ms, guest init at %.1f ms, "
		 "agent ready at %.1f ms, command started at %.1f ms, ended at %.1f ms, "
		 "teardown %.1f ms, total %.1f ms", t.restored ? "restored" : "cold boot",
		 t.vmm_setup, t.first_run, t.guest_init, t.agent_ready, t.command_start,
		 t.command_end, t.teardown, t.total);
	if (ctx->o->json)
		event_timings(stdout, &t);
}

/* Fail the run with what a refused or unrecorded call said. */
static void gate_failed(struct exec_result *res, int rc, const char *why)
{
	snprintf(res->error, sizeof(res->error), "%s", why);
	res->exit_code = rc == -EPERM ? RUN_EXIT_REFUSED : RUN_EXIT_MAYFLY;
}

/* One --put or --get (number i) through the gate: approved (a put),
 * copied from the fd or into the target opened before the VM, recorded. */
static bool copy_file(struct run_ctx *ctx, struct agent_client *c, const struct run_opts *o,
		      struct gate *g, int i, bool put, struct exec_result *res)
{
	const struct run_file *f = put ? &o->puts[i] : &o->gets[i];
	json_t *call = gate_file_call(put ? "write_file" : "read_file", f->guest, f->local);
	struct transfer_stats st = { 0 };
	uint64_t deadline, t0;
	char why[256], err[256];
	int rc;

	if (!call) {
		gate_failed(res, -ENOMEM, "out of memory");
		return false;
	}
	rc = gate_ask(g, call, &t0, why, sizeof(why));
	if (rc) {
		gate_failed(res, rc, why);
		json_decref(call);
		return false;
	}
	deadline = clock_now_ns() + o->call_timeout_s * NS;
	if (put) {
		rc = transfer_put_fd(c, ctx->put_fds[i], f->local, f->guest, deadline, &st, err,
				     sizeof(err));
	} else if (ctx->get_rc[i]) {
		rc = ctx->get_rc[i];
		snprintf(err, sizeof(err), "%s", ctx->get_why[i]);
	} else {
		rc = transfer_get_into(c, f->guest, &ctx->gets[i], o->max_get_bytes, deadline, &st,
				       err, sizeof(err));
		if (!rc)
			ctx->get_ok[i] = 1;
	}
	if (rc) {
		snprintf(res->error, sizeof(res->error), "%s %.100s: %.120s", put ? "--put" : "--get",
			 put ? f->local : f->guest, err);
		res->exit_code = RUN_EXIT_AGENT;
	}
	if (gate_record_file(g, call, t0, rc, err, &st, why, sizeof(why))) {
		gate_failed(res, -EIO, why);
		rc = -EIO;
	}
	json_decref(call);
	return rc == 0;
}

/* Each --put (before) or --get (after), each with its own deadline. */
static bool copy_files(struct run_ctx *ctx, struct agent_client *c, const struct run_opts *o,
		       struct gate *g, bool put, struct exec_result *res)
{
	int n = put ? o->nput : o->nget;

	for (int i = 0; i < n; i++)
		if (!copy_file(ctx, c, o, g, i, put, res))
			return false;
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
	spec->root = o->root;
	spec->uid = o->uid;
	spec->gid = o->gid;
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

/* The command through the gate: approved, run, recorded. */
static void run_command(struct run_ctx *ctx, struct exec_spec *spec)
{
	json_t *call = gate_exec_call(spec, NULL, 0);
	char why[256];
	uint64_t t0;
	int rc;

	if (!call) {
		gate_failed(&ctx->res, -ENOMEM, "out of memory");
		return;
	}
	rc = gate_ask(&ctx->gate, call, &t0, why, sizeof(why));
	if (rc) {
		gate_failed(&ctx->res, rc, why);
		json_decref(call);
		return;
	}
	atomic_store(&ctx->running, true);
	session_exec(&ctx->launch.agent.client, spec, &ctx->res);
	atomic_store(&ctx->running, false);
	/* Fail closed: a command whose record is lost does not look fine. */
	if (gate_record_exec(&ctx->gate, call, t0, &ctx->res, why, sizeof(why)))
		gate_failed(&ctx->res, -EIO, why);
	json_decref(call);
}

/* mayfly run's job, on the agent thread: files in, the command, files out. */
static void run_job(struct vm_agent *va, void *opaque)
{
	struct run_ctx *ctx = opaque;
	const struct run_opts *o = ctx->o;
	struct exec_spec spec;

	memset(&ctx->res, 0, sizeof(ctx->res));
	if (!copy_files(ctx, &va->client, o, &ctx->gate, true, &ctx->res))
		return;
	spec_from_opts(&spec, o, ctx->stdin_fd, &ctx->term);
	run_command(ctx, &spec);
	if (ctx->res.ended_ns && o->nget) {
		struct exec_result got = ctx->res;

		if (!copy_files(ctx, &va->client, o, &ctx->gate, false, &got) &&
		    (ctx->res.exit_code == 0 || got.exit_code == RUN_EXIT_MAYFLY)) {
			ctx->res.exit_code = got.exit_code;
			memcpy(ctx->res.error, got.error, sizeof(got.error));
		}
	}
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

void run_launch_init(struct launch *l, struct cli *c, struct gate *g, struct run_choice *choice)
{
	launch_init(l);
	choice->cli = c;
	l->jail_cfg = &c->jail;
	l->net_policy = &c->net;
	l->audit_path = c->run.audit_path;
	l->gate = g;
	l->fail_code = RUN_EXIT_MAYFLY;
	l->use_agent = true;
}

int run_choose_vm(struct run_choice *ch, struct launch *l)
{
	struct cli *c = ch->cli;
	struct restore_given given = { c->mem_given, c->cpus_given, c->kernel_given, c->rootfs_given,
				       false };
	char dir[CONFIG_PATH_MAX];
	const char *why = "";
	int code = agent_vm_config(&c->vm, c->verbose, c->snapshot && !c->cold);

	l->cfg = &c->vm;
	l->snap = NULL;
	if (code || c->cold || (c->vm.nr_disks && !c->snapshot))
		return code;
	if (c->snapshot) {
		snprintf(dir, sizeof(dir), "%s", c->snapshot);
	} else {
		code = snapcache_get(&c->vm, dir, sizeof(dir), c->verbose, &c->jail);
		if (code)
			return code < 0 ? 0 : code;
	}
	if (restore_prepare(&ch->snap, dir, &c->vm, &given, &ch->restored, &why)) {
		log_say("cannot restore '%s': %s", dir, why);
		return RUN_EXIT_MAYFLY;
	}
	ch->restoring = true;
	l->cfg = &ch->restored;
	l->snap = &ch->snap;
	return 0;
}

void run_choice_free(struct run_choice *ch)
{
	if (ch->restoring) {
		config_free(&ch->restored);
		snapshot_free(&ch->snap);
	}
	ch->restoring = false;
}

/* The --put files and --get targets, opened while we still may. */
static int open_files(struct run_ctx *ctx, const struct run_opts *o)
{
	ctx->get_ok = mmap(NULL, RUN_MAX_FILES, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			   -1, 0);
	if (ctx->get_ok == MAP_FAILED) {
		ctx->get_ok = NULL;
		log_say("cannot map memory: %s", strerror(errno));
		return RUN_EXIT_MAYFLY;
	}
	for (int i = 0; i < RUN_MAX_FILES; i++) {
		ctx->put_fds[i] = -EBADF;
		ctx->gets[i].fd = -1;
	}
	for (int i = 0; i < o->nput; i++) {
		int fd = open(o->puts[i].local, O_RDONLY | O_CLOEXEC);

		ctx->put_fds[i] = fd < 0 ? -errno : fd;
	}
	for (int i = 0; i < o->nget; i++)
		ctx->get_rc[i] = transfer_target_open(o->gets[i].local, &ctx->gets[i], ctx->get_why[i],
						      sizeof(ctx->get_why[i]));
	return 0;
}

/* Outside the jail: each --get that came in whole replaces its LOCAL,
 * the others' temporary files go; inside, only our copies are closed. */
static void close_files(struct run_ctx *ctx, const struct run_opts *o, int *code)
{
	char why[256];

	if (!ctx->get_ok)
		return;   /* open_files did not run */
	for (int i = 0; i < o->nput; i++)
		if (ctx->put_fds[i] >= 0)
			close(ctx->put_fds[i]);
	for (int i = 0; i < o->nget; i++) {
		if (ctx->get_rc[i] || ctx->gets[i].fd < 0)
			continue;
		if (ctx->launch.jail.inside) {
			close(ctx->gets[i].fd);
			continue;
		}
		if (transfer_target_close(&ctx->gets[i], ctx->get_ok[i] ? 0 : -ECANCELED, why,
					  sizeof(why)) && ctx->get_ok[i]) {
			char msg[300];

			snprintf(msg, sizeof(msg), "--get %.100s: %.180s", o->gets[i].guest, why);
			report_failure(o, msg);
			if (*code == 0)
				*code = RUN_EXIT_AGENT;
		}
	}
	munmap(ctx->get_ok, RUN_MAX_FILES);
	ctx->get_ok = NULL;
}

/* In the VM process, once it ended: the command's exit code, or why the
 * VM ended first, and the timing line. */
static int run_result(struct run_ctx *ctx, int code)
{
	const struct launch *l = &ctx->launch;

	term_close(&ctx->term);
	if (!l->built)
		return RUN_EXIT_MAYFLY;   /* vm_build logged why, in one line */
	if (l->agent.job_done) {
		code = ctx->res.exit_code;
		if (ctx->res.error[0])
			report_failure(ctx->o, ctx->res.error);
	} else {
		char msg[300];

		snprintf(msg, sizeof(msg), "the VM ended before the command did: %s",
			 vm_exit_reason(&l->vm));
		report_failure(ctx->o, msg);
		code = code >= 128 ? code : code == RUN_EXIT_AGENT ? RUN_EXIT_AGENT : RUN_EXIT_MAYFLY;
	}
	timing_line(ctx, clock_now_ns());
	return code;
}

/* launch's step 2: the VM chosen (cold, or which snapshot), the --put
 * files and --get targets opened while we still may. */
static int run_prepare(struct launch *l, void *opaque)
{
	struct run_ctx *ctx = opaque;
	int code = run_choose_vm(&ctx->vm, l);

	return code ? code : open_files(ctx, ctx->o);
}

static int run_main(struct run_ctx *ctx, struct cli *c, uint64_t start_ns)
{
	struct launch *l = &ctx->launch;
	int code;

	ctx->o = &c->run;
	log_init(c->vm.id, c->vm.log_level);
	if (seccomp_setup(c->no_seccomp))
		return RUN_EXIT_MAYFLY;
	events_prepare();
	gate_init(&ctx->gate, c->run.approve_cmd, c->run.approve_timeout_s, c->vm.id, "cli");
	run_launch_init(l, c, &ctx->gate, &ctx->vm);
	l->prepare = run_prepare;
	l->prepare_opaque = ctx;
	l->agent.job = run_job;
	l->agent.opaque = ctx;
	l->agent.signal_hook = run_signal_hook;
	code = launch_run(l, start_ns);
	if (l->vm_process)
		code = run_result(ctx, code);
	close_files(ctx, &c->run, &code);
	run_choice_free(&ctx->vm);
	return code;
}

int cmd_run(struct cli *c, int argc, char **argv, uint64_t start_ns)
{
	struct run_ctx *ctx;
	int code = cli_parse_or_exit(c, CLI_RUN, argc, argv, RUN_EXIT_MAYFLY);

	if (code >= 0)
		return code;
	ctx = calloc(1, sizeof(*ctx));   /* large: the client's frame buffers */
	if (!ctx) {
		log_say("out of memory");
		return RUN_EXIT_MAYFLY;
	}
	ctx->sigs[0] = ctx->sigs[1] = -1;
	ctx->stdin_fd = open_stdin(&c->run);
	if (pipe2(ctx->sigs, O_CLOEXEC | O_NONBLOCK) < 0) {
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
	free(ctx);
	return code;
}

/* A VM started just before (boot --vsock S &) may still be booting: allow
 * as long as mayfly run allows its own VM. */
static int connect_running(struct agent_client *c, const struct run_opts *o, int cancel_fd)
{
	const char *why = "";
	int rc = agent_client_connect(c, agent_dial_unix, (void *)o->vsock, PROTO_AGENT_PORT,
				      clock_now_ns() + AGENT_BOOT_TIMEOUT_S * NS, cancel_fd, &why);

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
	rc = src[0] == ':' ? transfer_get(client, src + 1, dst, c->run.max_get_bytes, deadline, NULL,
					  why, sizeof(why)) :
			     transfer_put(client, src, dst + 1, deadline, NULL, why, sizeof(why));
	agent_client_close(client);
	free(client);
	if (rc) {
		log_say("cp %s %s: %s", src, dst, why);
		return RUN_EXIT_AGENT;
	}
	return 0;
}
