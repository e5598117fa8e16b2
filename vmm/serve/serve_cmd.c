/* serve_cmd.c - mayfly serve: the HTTP API for many sandboxes, until SIGTERM drains it. */
#include "serve/serve_cmd.h"
#include "policy/gate.h"
#include "agent_client/session.h"
#include "launch/snapcache.h"
#include "launch/guest_files.h"
#include "lib/exitcode.h"
#include "lib/image_id.h"
#include "jail/cgroup.h"
#include "jail/jail.h"
#include "lib/thread.h"
#include "lib/log.h"
#include "seccomp/seccomp.h"
#include "serve/e2b_http.h"
#include "serve/http.h"
#include "serve/service.h"
#include "serve/tokens.h"
#include "vm/snapshot.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#define SERVE_DRAIN_GRACE_MS 10000
#define SERVE_TICK_MS        250
/* STATE/sb/<16 hex>/vm/vsock, plus the "_PORT" and ".ctl" sockets beside
 * it, must fit a Unix socket's 107 bytes. */
#define SERVE_STATE_MAX      (CONFIG_VSOCK_PATH_MAX - 4 - 16 - 9 - 12)

struct serve_ctx {
	struct service svc;
	struct http_server http;
	struct e2b_server e2b;     /* --e2b: listen_fd -1 without */
	struct tls_front tls;      /* --e2b-cert, --e2b-key */
	struct tokens tokens;
	char state[PATH_MAX];
	char socket[CONFIG_VSOCK_PATH_MAX + 1];
	char args[6][32];          /* values of the boot options passed on */
	char audit[PATH_MAX];      /* --audit, absolute: each VM records its connection attempts */
};

static int mkdirs(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0700) < 0 && errno != EEXIST) {
			*p = '/';
			return -errno;
		}
		*p = '/';
	}
	return mkdir(path, 0700) < 0 && errno != EEXIST ? -errno : 0;
}

/* --state, or the default: made, absolute, short enough for sockets. */
static int state_dir(struct serve_ctx *x, const char *given)
{
	char want[PATH_MAX];
	const char *home = getenv("HOME");
	int rc;

	if (given)
		snprintf(want, sizeof(want), "%s", given);
	else if (geteuid() == 0)
		snprintf(want, sizeof(want), "/var/lib/mayfly/serve");
	else if (home && home[0] == '/')
		snprintf(want, sizeof(want), "%s/.cache/mayfly/serve", home);
	else {
		log_say("serve: no --state and no $HOME: give --state DIR");
		return -EINVAL;
	}
	rc = mkdirs(want);
	if (rc || !realpath(want, x->state)) {
		log_say("serve: cannot use the state directory %s: %s", want,
			strerror(rc ? -rc : errno));
		return rc ? rc : -errno;
	}
	if (strlen(x->state) > SERVE_STATE_MAX) {
		log_say("serve: the state directory %s is longer than %d bytes: its sandboxes' "
			"sockets would not fit a Unix socket path (give a shorter --state)", x->state,
			SERVE_STATE_MAX);
		return -ENAMETOOLONG;
	}
	return 0;
}

/* The template's vCPUs and memory, from its snapshot (a create asking
 * for others is refused before any VM starts). */
static int template_shape(struct service_template *t)
{
	const char *why = "";
	struct snapshot snap;

	if (snapshot_load(&snap, t->dir, &why)) {
		log_say("serve: template '%s' (%s): %s", t->name, t->dir, why);
		return RUN_EXIT_MAYFLY;
	}
	t->cpus = snap.cfg.cpus;
	t->mem_mib = snap.cfg.mem_mib;
	snapshot_free(&snap);
	/* Every create restores from it, for hours maybe: a default snapshot
	 * must outlive the cache's eviction of the least recently used. */
	t->hold_fd = snapcache_hold(t->dir);
	if (t->hold_fd < 0) {
		log_say("serve: template '%s' (%s): %s", t->name, t->dir, strerror(-t->hold_fd));
		return RUN_EXIT_MAYFLY;
	}
	return 0;
}

/* A template's id: its directory's name (a cached snapshot's content
 * hash), at most 64 characters. Copied by hand: snprintf from t->dir into
 * t->id is one object to the compiler's overlap check. */
static void template_id(struct service_template *t)
{
	const char *slash = strrchr(t->dir, '/'), *base = slash ? slash + 1 : t->dir;
	size_t n = strnlen(base, 64);

	if (n > sizeof(t->id) - 1)
		n = sizeof(t->id) - 1;
	memcpy(t->id, base, n);
	t->id[n] = '\0';
}

/* The default template: --snapshot DIR, or the default snapshot (made now
 * when it is not there yet). */
static int template(struct cli *c, struct service_template *t)
{
	int code;

	snprintf(t->name, sizeof(t->name), "default");
	if (c->snapshot) {
		if (!realpath(c->snapshot, t->dir)) {
			log_say("serve: --snapshot %s: %s", c->snapshot, strerror(errno));
			return RUN_EXIT_MAYFLY;
		}
	} else {
		code = agent_vm_config(&c->vm, c->verbose, false);
		if (!code)
			code = snapcache_get(&c->vm, t->dir, sizeof(t->dir), c->verbose, &c->jail);
		if (code) {
			if (code < 0)
				log_say("serve: no cache directory for the default snapshot: give "
					"--snapshot DIR");
			return RUN_EXIT_MAYFLY;
		}
	}
	template_id(t);
	return 0;
}

/* --template NAME=DIR (the form checked by cli.c): each another template. */
static int more_templates(struct cli *c, struct service_config *cfg)
{
	for (int i = 0; i < c->serve.ntemplates; i++) {
		const char *arg = c->serve.templates[i], *eq = strchr(arg, '=');
		struct service_template *t = &cfg->tmpl[cfg->ntmpl];

		snprintf(t->name, sizeof(t->name), "%.*s", (int)(eq - arg), arg);
		for (unsigned j = 0; j < cfg->ntmpl; j++)
			if (!strcmp(cfg->tmpl[j].name, t->name)) {
				log_say("serve: --template %s: the name '%s' is given twice", arg, t->name);
				return RUN_EXIT_MAYFLY;
			}
		if (!realpath(eq + 1, t->dir)) {
			log_say("serve: --template %s: %s", arg, strerror(errno));
			return RUN_EXIT_MAYFLY;
		}
		template_id(t);
		cfg->ntmpl++;
	}
	return 0;
}

/* The boot options the VM processes take from ours. */
static int pass_on(struct serve_ctx *x, struct cli *c)
{
	struct service_config *cfg = &x->svc.cfg;
	struct jail_config dflt;

	jail_config_init(&dflt);
	if (c->no_seccomp)
		cfg->extra[cfg->nextra++] = "--no-seccomp";
	if (c->jail.disabled)
		cfg->extra[cfg->nextra++] = "--no-jail";
	if (c->jail.uid != dflt.uid) {
		snprintf(x->args[0], sizeof(x->args[0]), "--uid=%u", (unsigned)c->jail.uid);
		cfg->extra[cfg->nextra++] = x->args[0];
	}
	if (c->jail.gid != dflt.gid) {
		snprintf(x->args[1], sizeof(x->args[1]), "--gid=%u", (unsigned)c->jail.gid);
		cfg->extra[cfg->nextra++] = x->args[1];
	}
	if (c->jail.cpu_pct != dflt.cpu_pct) {
		snprintf(x->args[2], sizeof(x->args[2]), "--cpu-quota=%u", c->jail.cpu_pct);
		cfg->extra[cfg->nextra++] = x->args[2];
	}
	if (strcmp(c->vm.kvm_device, "/dev/kvm")) {
		cfg->extra[cfg->nextra++] = "--kvm-device";
		cfg->extra[cfg->nextra++] = (char *)c->vm.kvm_device;   /* an argv entry: never written */
	}
	return 0;
}

static int setup(struct serve_ctx *x, struct cli *c)
{
	struct service_config *cfg = &x->svc.cfg;
	char err[300];
	ssize_t n;
	int fd, code;

	if (c->serve.socket && c->serve.listen) {
		log_say("serve: --socket and --listen exclude each other");
		return EXIT_USAGE;
	}
	if ((c->serve.listen || c->serve.e2b) && !c->serve.tokens) {
		log_say("serve: --%s needs --tokens FILE (a TCP port has no file permissions)",
			c->serve.listen ? "listen" : "e2b");
		return EXIT_USAGE;
	}
	if (!c->serve.e2b_cert != !c->serve.e2b_key || (c->serve.e2b_cert && !c->serve.e2b)) {
		log_say("serve: --e2b-cert and --e2b-key go together, with --e2b");
		return EXIT_USAGE;
	}
	if (c->serve.e2b_cert && tls_front_load(&x->tls, c->serve.e2b_cert, c->serve.e2b_key, err,
						sizeof(err))) {
		log_say("serve: %s", err);
		return EXIT_USAGE;
	}
	if (c->serve.e2b_domain && strlen(c->serve.e2b_domain) > E2B_DOMAIN_MAX) {
		log_say("serve: --e2b-domain is longer than %d bytes", E2B_DOMAIN_MAX);
		return EXIT_USAGE;
	}
	if (c->serve.tokens && tokens_load(&x->tokens, c->serve.tokens, err, sizeof(err))) {
		log_say("serve: %s", err);
		return EXIT_USAGE;
	}
	if (state_dir(x, c->serve.state))
		return RUN_EXIT_MAYFLY;
	n = readlink("/proc/self/exe", cfg->exe, sizeof(cfg->exe) - 1);
	if (n <= 0) {
		log_say("serve: cannot find our own binary: %s", strerror(errno));
		return RUN_EXIT_MAYFLY;
	}
	cfg->exe[n] = '\0';
	if (template(c, &cfg->tmpl[0]))
		return RUN_EXIT_MAYFLY;
	cfg->ntmpl = 1;
	if (more_templates(c, cfg))
		return RUN_EXIT_MAYFLY;
	cfg->state = x->state;
	cfg->pool = c->serve.pool;
	cfg->ephemeral = c->serve.ephemeral;
	cfg->memory_reserve_mib = c->serve.memory_reserve_mib;
	cfg->meminfo = "/proc/meminfo";
	cfg->max_sandboxes = c->serve.max_sandboxes;
	cfg->call_timeout_s = c->run.call_timeout_s;
	cfg->max_output = c->run.max_output;
	cfg->max_file = c->run.max_get_bytes < (256ULL << 20) ? c->run.max_get_bytes : 256ULL << 20;
	cfg->paths.cgroup_root = CGROUP_ROOT;
	cfg->paths.jail_bases[0] = JAIL_ROOT_BASE;
	cfg->paths.jail_bases[1] = getenv("TMPDIR") && getenv("TMPDIR")[0] == '/' ?
				   getenv("TMPDIR") : "/tmp";
	pass_on(x, c);
	if (gate_open(&x->svc.gate, &x->svc.audit, c->run.audit_path, c->run.approve_cmd,
		      c->run.approve_timeout_s, NULL, "serve"))
		return RUN_EXIT_MAYFLY;
	/* The sandboxes' --allow-net connection attempts go to the same log:
	 * each VM with rules appends under the log's lock, in the one chain. */
	if (c->run.audit_path) {
		if (!realpath(c->run.audit_path, x->audit)) {
			log_say("serve: --audit %s: %s", c->run.audit_path, strerror(errno));
			return RUN_EXIT_MAYFLY;
		}
		cfg->audit = x->audit;
	}
	if (c->serve.listen) {
		fd = http_listen_tcp("listen", c->serve.listen, false, err, sizeof(err));
	} else {
		if (c->serve.socket)
			snprintf(x->socket, sizeof(x->socket), "%s", c->serve.socket);
		else if (snprintf(x->socket, sizeof(x->socket), "%s/api.sock", x->state) >=
			 (int)sizeof(x->socket)) {
			log_say("serve: %s/api.sock is too long for a Unix socket: give --socket", x->state);
			return RUN_EXIT_MAYFLY;
		}
		fd = http_listen_unix(x->socket, err, sizeof(err));
	}
	if (fd < 0) {
		log_say("serve: %s", err);
		return fd == -EINVAL ? EXIT_USAGE : RUN_EXIT_MAYFLY;
	}
	if (c->serve.e2b) {
		x->e2b.listen_fd = http_listen_tcp("e2b", c->serve.e2b, c->serve.e2b_cert != NULL,
						   err, sizeof(err));
		if (x->e2b.listen_fd < 0) {
			log_say("serve: %s", err);
			code = x->e2b.listen_fd == -EINVAL ? EXIT_USAGE : RUN_EXIT_MAYFLY;
			x->e2b.listen_fd = -1;
			goto out_close;
		}
	}
	/* Each template read whole (after the usage checks above): one that is
	 * no snapshot stops the start, not every create. */
	for (unsigned i = 0; i < cfg->ntmpl; i++)
		if (template_shape(&cfg->tmpl[i])) {
			code = RUN_EXIT_MAYFLY;
			goto out_close;
		}
	x->http = (struct http_server){
		.listen_fd = fd, .svc = &x->svc, .tokens = c->serve.tokens ? &x->tokens : NULL,
		.max_file = cfg->max_file,
	};
	if (!c->serve.listen)
		snprintf(x->http.unix_path, sizeof(x->http.unix_path), "%s", x->socket);
	x->e2b.svc = &x->svc;
	x->e2b.tokens = &x->tokens;
	x->e2b.max_file = cfg->max_file;
	x->e2b.tls = c->serve.e2b_cert ? &x->tls : NULL;
	snprintf(x->e2b.domain, sizeof(x->e2b.domain), "%s",
		 c->serve.e2b_domain ? c->serve.e2b_domain : "localhost");
	return 0;
out_close:
	close(fd);
	if (!c->serve.listen)
		unlink(x->socket);
	if (x->e2b.listen_fd >= 0)
		close(x->e2b.listen_fd);
	x->e2b.listen_fd = -1;
	return code;
}

/* Until SIGTERM or SIGINT: spawn what is asked for, reap, expire. */
static void loop(struct serve_ctx *x, int sfd)
{
	for (;;) {
		struct pollfd p[2] = { { sfd, POLLIN, 0 }, { x->svc.sup.efd, POLLIN, 0 } };
		struct signalfd_siginfo si;

		if (poll(p, 2, SERVE_TICK_MS) < 0 && errno != EINTR)
			break;
		if (p[1].revents & POLLIN)
			supervise_pending(&x->svc.sup);
		if (p[0].revents & POLLIN && read(sfd, &si, sizeof(si)) == sizeof(si) &&
		    si.ssi_signo != SIGCHLD) {
			log_say("serve: %s: draining", strsignal((int)si.ssi_signo));
			return;
		}
		service_tick(&x->svc);
	}
}

int cmd_serve(struct cli *c, int argc, char **argv, uint64_t start_ns)
{
	struct serve_ctx *x;
	sigset_t set;
	int code = cli_parse_or_exit(c, CLI_SERVE, argc, argv, EXIT_USAGE), sfd = -1;

	(void)start_ns;
	if (code >= 0)
		return code;
	log_init("serve", c->vm.log_level);
	if (seccomp_setup(c->no_seccomp))
		return RUN_EXIT_MAYFLY;
	/* Every thread from here inherits these blocked: the main loop takes
	 * them from its signalfd. A client that went away is an error to
	 * handle, not a death. */
	thread_stop_signals(&set);
	sigaddset(&set, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	x = calloc(1, sizeof(*x));
	if (!x) {
		log_say("out of memory");
		return RUN_EXIT_MAYFLY;
	}
	x->http.listen_fd = -1;
	x->e2b.listen_fd = -1;
	code = setup(x, c);
	if (code)
		goto out_free;
	sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0 || service_start(&x->svc)) {
		code = RUN_EXIT_MAYFLY;
		goto out_http;
	}
	if (http_start(&x->http, 0)) {
		log_say("serve: cannot start the HTTP server");
		code = RUN_EXIT_MAYFLY;
		service_stop(&x->svc, 0);
		goto out_service;
	}
	if (x->e2b.listen_fd >= 0 && e2b_start(&x->e2b)) {
		log_say("serve: cannot start E2B's HTTP server");
		code = RUN_EXIT_MAYFLY;
		http_quiesce(&x->http);
		service_stop(&x->svc, 0);
		goto out_service;
	}
	log_say("serve: listening on %s%s%s (template %s and %u more, pool %u each, state %s)",
		c->serve.listen ? c->serve.listen : x->socket, c->serve.e2b ? ", E2B's API on " : "",
		c->serve.e2b ? c->serve.e2b : "", x->svc.cfg.tmpl[0].id,
		x->svc.cfg.ntmpl - 1, x->svc.cfg.pool, x->state);
	loop(x, sfd);
	http_quiesce(&x->http);
	e2b_quiesce(&x->e2b);
	service_stop(&x->svc, SERVE_DRAIN_GRACE_MS);
	http_stop(&x->http);
	e2b_stop(&x->e2b);
	log_say("serve: drained");
	code = 0;
out_service:
	service_destroy(&x->svc);
out_http:
	http_stop(&x->http);
	e2b_stop(&x->e2b);
	if (sfd >= 0)
		close(sfd);
	gate_close(&x->svc.gate);
out_free:
	if (x->http.listen_fd >= 0)
		close(x->http.listen_fd);
	if (x->e2b.listen_fd >= 0)
		close(x->e2b.listen_fd);
	explicit_bzero(&x->tokens, sizeof(x->tokens));
	tls_front_free(&x->tls);
	free(x);
	return code;
}
