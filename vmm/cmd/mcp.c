/* mcp.c - mayfly mcp: the session's VM in this process, the MCP server as its agent job. */
#include "cmd/mcp.h"
#include "agent_client/session.h"
#include "cmd/run.h"
#include "launch/launch.h"
#include "lib/log.h"
#include "mcp/mcp.h"
#include "policy/gate.h"
#include "seccomp/seccomp.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* run_command's output collected in memory: at most this much of it. */
#define MCP_MAX_OUTPUT (16ULL << 20)

struct mcp_ctx {
	struct launch launch;      /* the session's VM, its jail, network and approver */
	struct mcp_server srv;
	struct gate gate;
	struct run_choice vm;      /* which VM: as mayfly run chooses */
	int served;                /* mcp_serve's result */
};

static void mcp_job(struct vm_agent *va, void *opaque)
{
	struct mcp_ctx *ctx = opaque;

	ctx->srv.client = &va->client;
	ctx->served = mcp_serve(&ctx->srv);
	if (ctx->served)
		log_say("mcp: the session ended: %s", ctx->served == -EPIPE ?
			"the guest agent connection or the audit log failed" : strerror(-ctx->served));
}

/* In the VM process, jailed, before any VM thread: the session's reader
 * and watcher, which stop with the VM (cancel_fd). */
static int mcp_threads(struct vm_agent *va, void *opaque)
{
	struct mcp_ctx *ctx = opaque;

	ctx->srv.stop_fd = va->cancel_fd;
	return mcp_start(&ctx->srv);
}

/* After the VM ended: its threads were started whether or not the job ran
 * (a failed build, an agent that never answered). */
static void mcp_threads_stop(struct vm_agent *va, void *opaque)
{
	struct mcp_ctx *ctx = opaque;

	(void)va;
	mcp_stop(&ctx->srv);
}

/* launch's step 2: the VM chosen as mayfly run chooses it. */
static int mcp_prepare(struct launch *l, void *opaque)
{
	struct mcp_ctx *ctx = opaque;

	return run_choose_vm(&ctx->vm, l);
}

/* In the VM process, once it ended. */
static int mcp_result(struct mcp_ctx *ctx, int code)
{
	const struct launch *l = &ctx->launch;

	if (!l->built)
		return RUN_EXIT_MAYFLY;   /* vm_build logged why */
	if (l->agent.job_done && code == 0)
		return ctx->served ? RUN_EXIT_AGENT : 0;   /* the job stopped the VM */
	/* A signal, a guest crash, a lost agent: the VM ended first. */
	log_say("the VM ended before the session did: %s", vm_exit_reason(&l->vm));
	return code >= 128 || code == RUN_EXIT_AGENT ? code : RUN_EXIT_MAYFLY;
}

int cmd_mcp(struct cli *c, int argc, char **argv, uint64_t start_ns)
{
	struct mcp_ctx *ctx;
	struct launch *l;
	int code = cli_parse_or_exit(c, CLI_MCP, argc, argv, RUN_EXIT_MAYFLY);

	if (code >= 0)
		return code;
	log_init(c->vm.id, c->vm.log_level);
	if (seccomp_setup(c->no_seccomp))
		return RUN_EXIT_MAYFLY;
	/* A client that went away is a write error to handle, not a death. */
	signal(SIGPIPE, SIG_IGN);
	ctx = calloc(1, sizeof(*ctx));   /* large: the VM and the client's frame buffers */
	if (!ctx) {
		log_say("out of memory");
		return RUN_EXIT_MAYFLY;
	}
	gate_init(&ctx->gate, c->run.approve_cmd, c->run.approve_timeout_s, c->vm.id, "mcp:unknown");
	ctx->srv = (struct mcp_server){
		.in_fd = STDIN_FILENO, .out_fd = STDOUT_FILENO, .stop_fd = -1, .gate = &ctx->gate,
		.limits = {
			.call_timeout_s = c->run.call_timeout_s,
			.max_get_bytes = c->run.max_get_bytes < MCP_MAX_OUTPUT ?
					 c->run.max_get_bytes : MCP_MAX_OUTPUT,
			.max_output = c->run.max_output < MCP_MAX_OUTPUT ?
				      c->run.max_output : MCP_MAX_OUTPUT,
			.max_timeout_s = RUN_MAX_TIMEOUT_S,
		},
	};
	l = &ctx->launch;
	run_launch_init(l, c, &ctx->gate, &ctx->vm);
	l->prepare = mcp_prepare;
	l->prepare_opaque = ctx;
	l->agent.job = mcp_job;
	l->agent.opaque = ctx;
	l->agent.start_threads = mcp_threads;
	l->agent.stop_threads = mcp_threads_stop;
	code = launch_run(l, start_ns);
	if (l->vm_process)
		code = mcp_result(ctx, code);
	run_choice_free(&ctx->vm);
	free(ctx);
	return code;
}
