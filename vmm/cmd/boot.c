/* boot.c - mayfly boot: a VM with a console, cold or from a snapshot; with --vsock, one that exec, cp, pause and fork reach. */
#include "cmd/boot.h"
#include "launch/guest_files.h"
#include "launch/launch.h"
#include "launch/restore.h"
#include "lib/clock.h"
#include "lib/exitcode.h"
#include "lib/log.h"
#include "seccomp/seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What launch_run takes, and a restored VM's config and snapshot. */
struct boot {
	struct launch launch;
	struct vm_config restored;
	struct snapshot snap;
	int timings_fd;               /* --timings FILE, opened for appending */
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

/* --timings FILE, after launch_run, in the VM process: one JSON line
 * appended to the file opened before the jail, with one write (the
 * thread is under its seccomp filter: the line is made in memory). */
static int boot_timings(const struct launch *l, int fd, const char *path)
{
	struct event_timings t;
	char *line = NULL;
	size_t len = 0;
	FILE *mem;
	ssize_t n;

	if (!l->vm_process || !l->built)
		return 0;   /* the supervisor, or a VM that never ran */
	mem = open_memstream(&line, &len);
	if (!mem) {
		log_say("cannot write --timings %s: out of memory", path);
		return -ENOMEM;
	}
	launch_timings(l, clock_now_ns(), &t);
	event_timings(mem, &t);
	fclose(mem);
	n = write(fd, line, len);
	free(line);
	if (n != (ssize_t)len) {
		log_say("cannot write --timings %s: %s", path, n < 0 ? strerror(errno) : "short write");
		return -EIO;
	}
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
	/* Opened now: a jailed VM process can no longer name the file. */
	b->timings_fd = -1;
	if (c->timings) {
		b->timings_fd = open(c->timings, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (b->timings_fd < 0) {
			log_say("cannot open --timings %s: %s", c->timings, strerror(errno));
			free(b);
			return EXIT_USAGE;
		}
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
	if (c->timings) {
		if (boot_timings(l, b->timings_fd, c->timings) && !code)
			code = EXIT_INTERNAL;
		close(b->timings_fd);
	}
	if (l->snap) {
		config_free(&b->restored);
		snapshot_free(&b->snap);
	}
	free(b);
	return code;
}
