/* mcp_cmd.c - mayfly mcp: the session's VM in this process, the MCP server as its agent job. */
#include "agent/mcp_cmd.h"
#include "agent/gate.h"
#include "agent/mcp.h"
#include "agent/run.h"
#include "agent/session.h"
#include "agent/vm_agent.h"
#include "log.h"
#include "net/net.h"
#include "seccomp/seccomp.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* run_command's output collected in memory: at most this much of it. */
#define MCP_MAX_OUTPUT (16ULL << 20)

struct mcp_ctx {
	struct vm_agent va;
	struct mcp_server srv;
	struct gate gate;
	struct approve_spawner spawner;
	struct jail jail;
	struct audit_log audit;
	struct snapshot snap;
	struct vm_config restored;
	struct net_run net;        /* --allow-net: the session's network */
	bool restoring;
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

/* The VM process's part (jailed, or this process with --no-jail). */
static int mcp_vm(struct mcp_ctx *ctx, const struct vm_config *cfg, uint64_t start_ns)
{
	int code;

	ctx->va.job = mcp_job;
	ctx->va.opaque = ctx;
	ctx->va.jail = &ctx->jail;
	ctx->va.start_threads = mcp_threads;
	code = vm_agent_run(&ctx->va, cfg, ctx->restoring ? &ctx->snap : NULL, start_ns);
	/* The job never ran (a failed build, an agent that never answered):
	 * its threads were started all the same. */
	mcp_stop(&ctx->srv);
	vm_agent_destroy(&ctx->va);
	if (!ctx->va.built)
		return RUN_EXIT_MAYFLY;   /* vm_build logged why */
	if (ctx->va.job_done && code == 0)
		return ctx->served ? RUN_EXIT_AGENT : 0;   /* the job stopped the VM */
	/* A signal, a guest crash, a lost agent: the VM ended first. */
	log_say("the VM ended before the session did: %s", ctx->va.vm.exit_reason);
	return code >= 128 || code == RUN_EXIT_AGENT ? code : RUN_EXIT_MAYFLY;
}

int cmd_mcp(struct cli *c, int argc, char **argv, uint64_t start_ns)
{
	const struct vm_config *cfg;
	struct mcp_ctx *ctx;
	int code = cli_parse_or_exit(c, CLI_MCP, argc, argv, RUN_EXIT_MAYFLY);

	if (code >= 0)
		return code;
	log_init(c->vm.id, c->vm.log_level);
	if (seccomp_setup(c->no_seccomp))
		return RUN_EXIT_MAYFLY;
	/* A client that went away is a write error to handle, not a death. */
	signal(SIGPIPE, SIG_IGN);
	ctx = calloc(1, sizeof(*ctx));   /* large: the client's frame buffers */
	if (!ctx) {
		log_say("out of memory");
		return RUN_EXIT_MAYFLY;
	}
	ctx->va.cancel_fd = -1;
	if (gate_open(&ctx->gate, &ctx->audit, &c->run, c->vm.id, "mcp:unknown")) {
		free(ctx);
		return RUN_EXIT_MAYFLY;
	}
	code = run_choose_vm(c, &ctx->snap, &ctx->restoring, &ctx->restored, &cfg);
	if (!code) {
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
		/* The broker and the approver's spawner before the jail and
		 * the filters: one keeps the host's network, the other its shell. */
		if (net_run_start(&ctx->net, &c->net, c->jail.uid, c->jail.gid))
			code = RUN_EXIT_MAYFLY;
		ctx->net.audit_log = ctx->gate.audit;
		ctx->va.net = &ctx->net;
		if (!code)
			code = run_start_spawner(&ctx->gate, &ctx->spawner);
		if (!code && jail_start(&ctx->jail, &c->jail, cfg, RUN_EXIT_MAYFLY, &code) == JAIL_VM)
			code = mcp_vm(ctx, cfg, start_ns);
		approve_spawner_stop(&ctx->spawner);
		net_run_stop(&ctx->net);
	}
	if (ctx->restoring)
		snapshot_free(&ctx->snap);
	gate_close(&ctx->gate);
	free(ctx);
	return code;
}
