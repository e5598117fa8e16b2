/* snapshot_cmd.c - mayfly snapshot create: boot, run the setup commands through the agent, quiesce it, save the VM. */
#include "agent/snapshot_cmd.h"
#include "agent/session.h"
#include "agent/vm_agent.h"
#include "clock.h"
#include "guest_files.h"
#include "log.h"
#include "net/net.h"
#include "seccomp/seccomp.h"
#include "vm_devices.h"
#include "vm_snapshot.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define QUIESCE_WAIT_S 30
#define IDLE_WAIT_S    15   /* a closing connection may linger 10 s (VSOCK_LINGER_MS) */
#define NS             1000000000ULL

struct make_ctx {
	struct vm_agent va;
	char *const *setups;
	int nsetup;
	const char *tmp;            /* where the snapshot is written (vm_snapshot_tmpdir) */
	const char *out;            /* unjailed (no namespaces): installed here, from tmp */
	bool installed;
	struct snapshot_sources src;
	bool show_output;           /* the setup commands' output to our stderr */
	int code;                   /* what the job ended with */
	char error[320];
	struct snapshot_stats stats;
	struct net_run net;         /* --allow-net: the setup commands' network */
};

static void make_fail(struct make_ctx *m, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void make_fail(struct make_ctx *m, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(m->error, sizeof(m->error), fmt, ap);
	va_end(ap);
	m->code = code;
}

int snapshot_quiesce(struct agent_client *c, const char **why)
{
	uint64_t deadline = clock_now_ns() + QUIESCE_WAIT_S * NS;
	uint32_t id = agent_client_id(c);
	struct proto_writer w;
	struct proto_frame f;
	int rc, len;

	proto_begin(&w, c->wbuf, sizeof(c->wbuf), PROTO_QUIESCE, id);
	len = proto_end(&w);
	rc = len < 0 ? len : agent_client_send(c, (size_t)len, deadline);
	while (!rc) {
		rc = agent_client_recv(c, &f, deadline);
		if (rc == 1 && f.id == id && f.type == PROTO_OK) {
			rc = 0;
			break;
		}
		if (rc == 1 && f.id == id) {
			*why = "the guest agent refused QUIESCE";
			return -EPROTO;
		}
		rc = rc == 1 ? 0 : rc ? rc : -ETIMEDOUT;
	}
	if (rc) {
		*why = "the guest agent did not answer QUIESCE";
		return rc;
	}
	/* Then its end of the connection closes: nothing is in flight. */
	do
		rc = agent_client_recv(c, &f, deadline);
	while (rc == 1);
	if (rc != -EPIPE) {
		*why = "the guest agent did not close its connections after QUIESCE";
		return rc ? rc : -ETIMEDOUT;
	}
	agent_client_close(c);
	return 0;
}

/* The working set: what the guest writes while it runs a command and
 * quiesces, as each restored VM does first (FRESHEN, a command, its
 * end). Without one the snapshot is saved all the same. */
static void record_workingset(struct vm_agent *va)
{
	char *argv[] = { "true", NULL };
	struct exec_result res;
	struct exec_spec spec;
	int rc = vm_workingset_begin(&va->vm);

	if (rc) {
		log_info("no working set recorded (KVM dirty logging: %s)", strerror(-rc));
		return;
	}
	session_spec_init(&spec);
	spec.argv = argv;
	spec.argc = 1;
	spec.out_fd = spec.err_fd = -1;
	session_exec(&va->client, &spec, &res);
	if (res.error[0] || res.exit_code)
		log_info("the working set's command (true) failed: %s",
			 res.error[0] ? res.error : "exit status not 0");
}

static void make_job(struct vm_agent *va, void *opaque)
{
	struct make_ctx *m = opaque;
	const char *why = "";
	int rc;

	for (int i = 0; i < m->nsetup; i++) {
		char *argv[] = { "/bin/sh", "-c", m->setups[i], NULL };
		struct exec_result res;
		struct exec_spec spec;

		session_spec_init(&spec);
		spec.argv = argv;
		spec.argc = 3;
		spec.out_fd = spec.err_fd = m->show_output ? STDERR_FILENO : -1;
		log_say("setup %d/%d: %s", i + 1, m->nsetup, m->setups[i]);
		session_exec(&va->client, &spec, &res);
		if (res.error[0] || res.exit_code) {
			make_fail(m, res.exit_code ? res.exit_code : RUN_EXIT_AGENT,
				  "--setup %d (%.100s) failed: %s", i + 1, m->setups[i],
				  res.error[0] ? res.error : "exit status not 0");
			return;
		}
	}
	record_workingset(va);
	rc = snapshot_quiesce(&va->client, &why);
	if (!rc)
		rc = vm_devices_wait_idle(&va->vm, IDLE_WAIT_S * 1000, &why);
	if (rc) {
		make_fail(m, RUN_EXIT_AGENT, "%s", why);
		return;
	}
	rc = vm_snapshot_save(&va->vm, m->tmp, &m->src, &m->stats, &why);
	if (!rc && m->out)
		rc = vm_snapshot_install_own(m->tmp, m->out, &why);
	if (rc) {
		make_fail(m, RUN_EXIT_MAYFLY, "cannot save the snapshot: %s", why);
		return;
	}
	m->installed = m->out != NULL;
	m->code = 0;
}

/* Unjailed, the main thread is filtered once the VM ran: what was not
 * installed is removed here, on the agent thread, however it ended. */
static void make_end(struct vm_agent *va, void *opaque)
{
	struct make_ctx *m = opaque;

	(void)va;
	if (m->out && !m->installed)
		vm_snapshot_discard(m->tmp);
	m->installed = true;   /* gone either way: nobody else touches tmp */
}

/* The VM process's part (jailed, or this process unjailed): boot, set
 * up, save into m->tmp. Its exit code. */
static int make_vm(struct make_ctx *m, const struct vm_config *cfg, const char *out,
		   uint64_t start_ns)
{
	int code = vm_agent_run(&m->va, cfg, NULL, start_ns);

	vm_agent_destroy(&m->va);
	if (m->va.job_done && !m->code) {
		log_info("snapshot in '%s': %llu KiB of memory, %llu KiB of disk overlay, %zu bytes "
			 "of state, a working set of %llu pages; the guest was paused %.1f ms for it",
			 out, (unsigned long long)m->stats.memory_bytes >> 10,
			 (unsigned long long)m->stats.overlay_bytes >> 10, m->stats.state_bytes,
			 (unsigned long long)m->stats.workingset_pages,
			 (double)m->stats.pause_us / 1000);
		code = 0;
	} else if (!m->va.built) {
		code = RUN_EXIT_MAYFLY;   /* vm_build logged why */
	} else {
		if (m->va.job_done)
			code = m->code;
		else
			code = code == RUN_EXIT_AGENT ? RUN_EXIT_AGENT : RUN_EXIT_MAYFLY;
		log_say("snapshot create: %s", m->error[0] ? m->error :
			m->va.vm.exit_reason[0] ? m->va.vm.exit_reason : "the VM could not be built");
	}
	return code;
}

int snapshot_make(const struct vm_config *cfg, char *const *setups, int nsetup, const char *out,
		  uint64_t start_ns, bool show_output, const struct jail_config *jc,
		  const struct net_policy *net)
{
	struct make_ctx *m = calloc(1, sizeof(*m));   /* large: the client's buffers */
	char tmp[CONFIG_PATH_MAX + 32];
	struct jail_config jail_cfg = *jc;
	struct jail jail;
	const char *why = "";
	int code, rc;

	if (!m) {
		log_say("out of memory");
		return RUN_EXIT_MAYFLY;
	}
	/* Made here, as the caller; the jailed VM writes into it; whoever is
	 * outside the jail puts it in out's place once the VM succeeded. */
	rc = vm_snapshot_tmpdir(out, cfg, tmp, sizeof(tmp), &m->src, &why);
	if (rc) {
		log_say("snapshot create: %s", why);
		free(m);
		return RUN_EXIT_MAYFLY;
	}
	m->va.cancel_fd = -1;
	m->va.job = make_job;
	m->va.saves_snapshot = true;
	m->va.opaque = m;
	m->va.jail = &jail;
	m->setups = setups;
	m->nsetup = nsetup;
	m->tmp = tmp;
	m->show_output = show_output;
	m->code = RUN_EXIT_MAYFLY;
	jail_cfg.writable_dir = tmp;
	/* The broker before the jail: it keeps the host's network. The setup
	 * commands alone use it; QUIESCE stops the guest's proxy, and a
	 * restore gets its own run's rules (docs/snapshot.md). */
	if (net_run_start(&m->net, net, jc->uid, jc->gid)) {
		vm_snapshot_discard(tmp);
		free(m);
		return RUN_EXIT_MAYFLY;
	}
	m->va.net = &m->net;
	if (jail_start(&jail, &jail_cfg, cfg, RUN_EXIT_MAYFLY, &code) == JAIL_VM) {
		if (!jail.inside) {
			/* No namespaces (--no-jail, or no user namespace): the
			 * agent thread installs or removes it, as the VM ends. */
			m->out = out;
			m->va.job_end = make_end;
		}
		code = make_vm(m, cfg, out, start_ns);
		/* Jailed, the supervisor outside installs it. The agent thread
		 * never started (the build failed): nothing filtered us yet. */
		if (!jail.inside && !m->installed)
			vm_snapshot_discard(tmp);
		net_run_stop(&m->net);
		free(m);
		return code;
	}
	net_run_stop(&m->net);
	if (code == 0) {
		rc = vm_snapshot_install(tmp, out, &why);
		if (rc) {
			log_say("snapshot create: cannot save the snapshot: %s", why);
			code = RUN_EXIT_MAYFLY;
		}
	} else {
		vm_snapshot_discard(tmp);
	}
	free(m);
	return code;
}

/* The VM a snapshot is made of: cli's config, its rootfs (the default
 * guest's when none is given) and an in-process vsock device. */
int snapshot_vm_config(struct vm_config *vm, int verbose)
{
	char err[256];

	if (guest_files_rootfs(vm, true, err, sizeof(err))) {
		log_say("%s", err);
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

int cmd_snapshot(struct cli *c, int argc, char **argv, uint64_t start_ns)
{
	int code;

	if (argc < 2 || strcmp(argv[1], "create")) {
		log_say("usage: mayfly snapshot create [options] --out DIR (see mayfly snapshot "
			"create --help)");
		return RUN_EXIT_MAYFLY;
	}
	code = cli_parse_or_exit(c, CLI_SNAPSHOT, argc - 1, argv + 1, RUN_EXIT_MAYFLY);
	if (code >= 0)
		return code;
	code = snapshot_vm_config(&c->vm, c->verbose);
	if (code)
		return code;
	log_init(c->vm.id, c->vm.log_level);
	if (seccomp_setup(c->no_seccomp))
		return RUN_EXIT_MAYFLY;
	return snapshot_make(&c->vm, c->setups, c->nsetup, c->out, start_ns, true, &c->jail,
			     &c->net);
}
