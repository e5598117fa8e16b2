/* snapshot_make.c - a snapshot made: boot, run the setup commands through the agent, quiesce it, save the VM, put it in place. */
#include "launch/snapshot_make.h"
#include "agent_client/lifecycle.h"
#include "agent_client/session.h"
#include "launch/launch.h"
#include "lib/log.h"
#include "vm/devices.h"
#include "vm/snapshot.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define IDLE_WAIT_S    15   /* a closing connection may linger 10 s (VSOCK_LINGER_MS) */

struct make_ctx {
	struct launch launch;
	char *const *setups;
	int nsetup;
	const char *tmp;            /* where the snapshot is written (vm_snapshot_tmpdir) */
	const char *out;            /* where it goes: unjailed (no namespaces), the VM
	                             * process installs it; jailed, its supervisor */
	bool installed;
	struct snapshot_sources src;
	bool show_output;           /* the setup commands' output to our stderr */
	int code;                   /* what the job ended with */
	char error[320];
	struct snapshot_stats stats;
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

/* The working set: what the guest writes while it runs a command and
 * quiesces, as each restored VM does first (FRESHEN, a command, its
 * end). Without one the snapshot is saved all the same. */
static void record_workingset(struct vm_agent *va)
{
	char *argv[] = { "true", NULL };
	struct exec_result res;
	struct exec_spec spec;
	int rc = vm_workingset_begin(va->vm);

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
	rc = agent_quiesce(&va->client, &why);
	if (!rc)
		rc = vm_devices_wait_idle(va->vm, IDLE_WAIT_S * 1000, &why);
	if (rc) {
		make_fail(m, RUN_EXIT_AGENT, "%s", why);
		return;
	}
	rc = vm_snapshot_save(va->vm, m->tmp, &m->src, &m->stats, &why);
	if (!rc && !m->launch.jail.inside)
		rc = vm_snapshot_install_own(m->tmp, m->out, &why);
	if (rc) {
		make_fail(m, RUN_EXIT_MAYFLY, "cannot save the snapshot: %s", why);
		return;
	}
	m->installed = !m->launch.jail.inside;
	m->code = 0;
}

/* Unjailed, the main thread is filtered once the VM ran: what was not
 * installed is removed here, on the agent thread, however it ended. */
static void make_end(struct vm_agent *va, void *opaque)
{
	struct make_ctx *m = opaque;

	(void)va;
	if (!m->launch.jail.inside && !m->installed)
		vm_snapshot_discard(m->tmp);
	m->installed = true;   /* gone either way: nobody else touches tmp */
}

/* In the VM process (jailed, or this one unjailed), once it ended: booted,
 * set up and saved into m->tmp, or the one line why not. Its exit code. */
static int make_result(struct make_ctx *m, const char *out, int code)
{
	const struct launch *l = &m->launch;

	if (l->agent.job_done && !m->code) {
		log_info("snapshot in '%s': %llu KiB of memory, %llu KiB of disk overlay, %zu bytes "
			 "of state, a working set of %llu pages; the guest was paused %.1f ms for it",
			 out, (unsigned long long)m->stats.memory_bytes >> 10,
			 (unsigned long long)m->stats.overlay_bytes >> 10, m->stats.state_bytes,
			 (unsigned long long)m->stats.workingset_pages,
			 (double)m->stats.pause_us / 1000);
		return 0;
	}
	if (!l->built)
		return RUN_EXIT_MAYFLY;   /* vm_build logged why */
	if (l->agent.job_done)
		code = m->code;
	else
		code = code == RUN_EXIT_AGENT ? RUN_EXIT_AGENT : RUN_EXIT_MAYFLY;
	log_say("snapshot create: %s", m->error[0] ? m->error :
		vm_exit_reason(&l->vm)[0] ? vm_exit_reason(&l->vm) : "the VM could not be built");
	return code;
}

int snapshot_make(const struct vm_config *cfg, char *const *setups, int nsetup, const char *out,
		  uint64_t start_ns, bool show_output, const struct jail_config *jc,
		  const struct net_policy *net)
{
	struct make_ctx *m = calloc(1, sizeof(*m));   /* large: the VM and the client's buffers */
	char tmp[CONFIG_PATH_MAX + 32];
	struct jail_config jail_cfg = *jc;
	struct launch *l;
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
	m->setups = setups;
	m->nsetup = nsetup;
	m->tmp = tmp;
	m->show_output = show_output;
	m->code = RUN_EXIT_MAYFLY;
	jail_cfg.writable_dir = tmp;
	m->out = out;
	l = &m->launch;
	launch_init(l);
	l->cfg = cfg;
	l->jail_cfg = &jail_cfg;
	/* The setup commands alone use the network: QUIESCE stops the
	 * guest's proxy, and a restore gets its own run's rules
	 * (docs/snapshot.md). */
	l->net_policy = net;
	l->fail_code = RUN_EXIT_MAYFLY;
	l->use_agent = true;
	l->agent.job = make_job;
	l->agent.opaque = m;
	l->agent.saves_snapshot = true;
	l->agent.job_end = make_end;
	code = launch_run(l, start_ns);
	if (l->vm_process) {
		code = make_result(m, out, code);
		/* Jailed, the supervisor outside installs it. Unjailed, the agent
		 * thread did, unless it never started (a failed build): then
		 * nothing filtered us yet. */
		if (!l->jail.inside && !m->installed)
			vm_snapshot_discard(tmp);
	} else if (code == 0) {
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
