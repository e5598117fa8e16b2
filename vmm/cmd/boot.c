/* boot.c - mayfly boot: a VM with a console, cold or from a snapshot; with --vsock, one that exec, cp, pause and fork reach. */
#include "cmd/boot.h"
#include "launch/guest_files.h"
#include "launch/launch.h"
#include "launch/restore.h"
#include "lib/exitcode.h"
#include "lib/log.h"
#include "seccomp/seccomp.h"

#include <errno.h>
#include <stdlib.h>

/* What launch_run takes, and a restored VM's config and snapshot. */
struct boot {
	struct launch launch;
	struct vm_config restored;
	struct snapshot snap;
};

/* --snapshot DIR: loaded and held against the flags the user gave. */
static int boot_load(struct boot *b, struct cli *c)
{
	struct restore_given given = { c->mem_given, c->cpus_given, c->kernel_given, c->rootfs_given,
				       c->spare_given };
	const char *why = "";
	int rc = restore_prepare(&b->snap, c->snapshot, &c->vm, &given, &b->restored, &why);

	if (rc) {
		log_say("cannot restore '%s': %s", c->snapshot, why);
		return rc == -EINVAL ? EXIT_USAGE : EXIT_BAD_IMAGE;
	}
	b->launch.cfg = &b->restored;
	b->launch.snap = &b->snap;
	return 0;
}

int cmd_boot(struct cli *c, int argc, char **argv, uint64_t start_ns)
{
	struct boot *b;
	struct launch *l;
	char err[256];
	int code = cli_parse_or_exit(c, CLI_BOOT, argc, argv, EXIT_USAGE);

	if (code >= 0)
		return code;
	log_init(c->vm.id, c->vm.log_level);
	if (seccomp_setup(c->no_seccomp))
		return EXIT_INTERNAL;
	b = calloc(1, sizeof(*b));   /* large: the VM and the agent client's buffers */
	if (!b) {
		log_say("out of memory");
		return EXIT_INTERNAL;
	}
	code = 0;
	l = &b->launch;
	launch_init(l);
	l->cfg = &c->vm;
	l->jail_cfg = &c->jail;
	if (c->snapshot) {
		code = boot_load(b, c);
	} else if (guest_files_resolve(&c->vm, err, sizeof(err))) {
		log_say("%s", err);
		code = EXIT_BAD_IMAGE;
	}
	/* A restored guest's agent is freshened (its clock and entropy are
	 * this run's) before anyone else connects; with --allow-net it is
	 * told to serve the proxy. --audit records the network's attempts
	 * (exec and cp are other processes, with logs of their own). */
	if (!code && (l->snap || net_enabled(&c->net))) {
		l->use_agent = true;
		l->agent.keep_running = true;
		l->net_policy = &c->net;
		l->audit_path = c->run.audit_path;
	}
	if (!code)
		code = launch_run(l, start_ns);
	if (l->snap) {
		config_free(&b->restored);
		snapshot_free(&b->snap);
	}
	free(b);
	return code;
}
