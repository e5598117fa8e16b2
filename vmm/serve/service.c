/* service.c - mayfly serve's sandboxes: each a supervised VM process restored from a template, kept in memory and on disk, with a warm pool per template. */
#include "serve/service.h"
#include "serve/adopt.h"
#include "serve/live.h"
#include "serve/pool.h"
#include "launch/vm_agent.h"
#include "control/ctl_client.h"
#include "lib/atomic_file.h"
#include "lib/clock.h"
#include "lib/fs_tree.h"
#include "lib/log.h"
#include "lib/procfs.h"
#include "net/rules.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


static const char *const state_names[] = {
	[SB_STARTING] = "starting", [SB_POOL] = "pool", [SB_RUNNING] = "running",
	[SB_STOPPING] = "stopping", [SB_EXITED] = "exited", [SB_PAUSING] = "pausing",
	[SB_PAUSED] = "paused", [SB_RESUMING] = "resuming", [SB_DAMAGED] = "damaged",
};

const char *service_state_name(enum sb_state st)
{
	return state_names[st];
}

static void new_id(char *id)
{
	uint8_t r[8];

	if (getrandom(r, sizeof(r), 0) != sizeof(r)) {
		/* Never expected; a clock-based id is still unique per host. */
		uint64_t t = clock_now_ns() ^ ((uint64_t)getpid() << 40);

		memcpy(r, &t, sizeof(r));
	}
	for (int i = 0; i < 8; i++)
		sprintf(id + 2 * i, "%02x", r[i]);
}

/* The VM process makes its socket once restored: on a loaded host that
 * may take longer than a client's short wait for a missing socket (a
 * copied snapshot is hashed first). Wait for it while the process lives,
 * until the boot deadline or the drain; the connect then says why. */
static void wait_vm_socket(const struct service *svc, const struct sandbox *sb,
			   uint64_t deadline_ns)
{
	struct pollfd stop = { .fd = svc->stop_fd, .events = POLLIN };

	while (access(sb->vsock, F_OK) < 0 && registry_pid_alive(sb->pid) && clock_now_ns() < deadline_ns)
		if (poll(&stop, 1, 20) != 0)
			return;
}

static void record_of(struct sandbox *sb, const char *state);

void service_record(struct sandbox *sb, const char *state)
{
	int rc;

	record_of(sb, state);
	rc = registry_write(sb->dir, &sb->rec);
	if (rc)
		log_warn("serve: cannot update %s's record: %s", sb->id, strerror(-rc));
}

static void record_of(struct sandbox *sb, const char *state)
{
	snprintf(sb->rec.id, sizeof(sb->rec.id), "%s", sb->id);
	snprintf(sb->rec.state, sizeof(sb->rec.state), "%s", state);
	sb->rec.pid = sb->pid;
	sb->rec.pid_start = sb->pid_start;
	sb->rec.created = sb->created;
}

int service_copy_env(struct sandbox *sb, char *const *env, int n)
{
	sb->env = calloc((size_t)n + 1, sizeof(*sb->env));
	for (int i = 0; sb->env && i < n; i++)
		if ((sb->env[sb->nenv] = strdup(env[i])))
			sb->nenv++;
	return sb->env && sb->nenv == n ? 0 : -ENOMEM;
}

int service_save_spec(const struct sandbox *sb)
{
	char path[CONFIG_PATH_MAX + 16];
	json_t *o = json_object(), *env = json_object(), *allow = json_array(), *res = json_array();
	char *text = NULL;
	bool ok = o && env && allow && res;
	int rc = -ENOMEM;

	for (int i = 0; ok && i < sb->nenv; i++) {
		const char *eq = strchr(sb->env[i], '=');
		char *key = eq ? strndup(sb->env[i], (size_t)(eq - sb->env[i])) : NULL;

		/* api.c made every "K=V": only memory can fail here. */
		ok = key && !json_object_set_new(env, key, json_string(eq + 1));
		free(key);
	}
	for (int i = 0; ok && i < sb->net.nallow; i++)
		ok = !json_array_append_new(allow, json_string(sb->net.allow[i]));
	for (int i = 0; ok && i < sb->net.nresolve; i++)
		ok = !json_array_append_new(res, json_string(sb->net.resolve[i]));
	/* Members as a create has them (adopt.c parses it as one): no empty
	 * rule lists. */
	if (ok && !json_object_set(o, "env", env) &&
	    (!sb->meta || !json_object_set(o, "metadata", sb->meta)) &&
	    (!sb->net.nallow || !json_object_set(o, "allow_net", allow)) &&
	    (!sb->net.nresolve || !json_object_set(o, "resolve", res)))
		text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	json_decref(env);
	json_decref(allow);
	json_decref(res);
	if (text) {
		snprintf(path, sizeof(path), "%s/" SERVICE_SPEC, sb->dir);
		rc = atomic_file_write(path, text, strlen(text));
		free(text);
	}
	return rc;
}

bool service_vm_ended(struct sandbox *sb)
{
	if (sb->adopted)
		return supervise_poll_fd(sb->pidfd) == 1;
	return supervise_poll(sb->pid, &sb->status) == 1;
}

void service_vm_stop(struct sandbox *sb, unsigned grace_ms)
{
	if (!sb->adopted) {
		supervise_stop(sb->pid, grace_ms, &sb->status);
		return;
	}
	supervise_stop_fd(sb->pid, sb->pidfd, grace_ms);
	service_vm_forget(sb);
}

void service_vm_forget(struct sandbox *sb)
{
	if (sb->adopted)
		close(sb->pidfd);
	sb->adopted = false;
	sb->pidfd = -1;
	sb->pid = 0;
	sb->pid_start = 0;
}

static void free_sandbox(struct sandbox *sb)
{
	if (sb->adopted)
		close(sb->pidfd);
	for (int i = 0; i < sb->nenv; i++)
		free(sb->env[i]);
	free(sb->env);
	api_net_free(&sb->net);
	json_decref(sb->meta);
	free(sb);
}

void service_discard(struct service *svc, struct sandbox *sb)
{
	if (sb->state != SB_EXITED && sb->state != SB_PAUSED && sb->pid > 0)
		service_vm_stop(sb, SUPERVISE_TERM_GRACE_MS);
	service_clean_vm(svc, sb->id);
	if (fs_remove_tree(sb->dir))
		log_warn("serve: cannot remove %s", sb->dir);
	free_sandbox(sb);
}

/* Start sb's VM process and wait for its agent. 0, or an HTTP status
 * (500, 503) with err; nothing left on failure but sb itself. */
int service_start_vm(struct service *svc, struct sandbox *sb, const struct api_create *req,
		     const char *snap, char *err, size_t errlen)
{
	char *argv[32 + SERVICE_MAX_EXTRA_ARGS + 2 * (NET_MAX_RULES + NET_MAX_RESOLVE)], log[CONFIG_PATH_MAX + 8], vmdir[CONFIG_PATH_MAX + 8];
	char cpus[16], mem[24], quota[24];
	const char *why = "";
	uint64_t t0 = clock_now_ns(), deadline;
	int argc = 0, rc, status;
	bool fresh;

	argv[argc++] = svc->cfg.exe;
	argv[argc++] = "boot";
	argv[argc++] = "--snapshot";
	argv[argc++] = (char *)(snap ? snap : sb->tmpl->dir);
	argv[argc++] = "--vsock";
	argv[argc++] = sb->vsock;
	argv[argc++] = "--id";
	argv[argc++] = sb->id;
	if (req && req->cpus) {
		snprintf(cpus, sizeof(cpus), "%u", req->cpus);
		argv[argc++] = "--cpus";
		argv[argc++] = cpus;
	}
	if (req && req->mem_mib) {
		snprintf(mem, sizeof(mem), "%llu", (unsigned long long)req->mem_mib);
		argv[argc++] = "--mem";
		argv[argc++] = mem;
	}
	if (req && req->disk_quota) {
		snprintf(quota, sizeof(quota), "%llu", (unsigned long long)req->disk_quota);
		argv[argc++] = "--disk-quota";
		argv[argc++] = quota;
	}
	for (int i = 0; i < svc->cfg.nextra; i++)
		argv[argc++] = svc->cfg.extra[i];
	/* It outlives the service, for the next one to take over (adopt.c). */
	if (!svc->cfg.ephemeral)
		argv[argc++] = "--detached";
	/* Each run's own rules (a snapshot holds none): api_parse_create
	 * checked them with boot's parser and limits. */
	for (int i = 0; i < sb->net.nallow; i++) {
		argv[argc++] = "--allow-net";
		argv[argc++] = sb->net.allow[i];
	}
	/* Its connection attempts; without rules it makes none (no log opened). */
	if (svc->cfg.audit && sb->net.nallow) {
		argv[argc++] = "--audit";
		argv[argc++] = (char *)svc->cfg.audit;
	}
	for (int i = 0; i < sb->net.nresolve; i++) {
		argv[argc++] = "--resolve";
		argv[argc++] = sb->net.resolve[i];
	}
	argv[argc] = NULL;
	snprintf(log, sizeof(log), "%s/log", sb->dir);
	snprintf(vmdir, sizeof(vmdir), "%s/vm", sb->dir);
	/* A resume reuses the sandbox's directory (its paused snapshot is
	 * there): only what this call made goes on a failure. */
	fresh = mkdir(sb->dir, 0700) == 0;
	if ((!fresh && errno != EEXIST) || (mkdir(vmdir, 0700) < 0 && errno != EEXIST)) {
		snprintf(err, errlen, "cannot create %s: %s", vmdir, strerror(errno));
		fs_remove_tree(fresh ? sb->dir : vmdir);
		return 500;
	}
	/* Recorded before its VM exists: a restart then knows the directory
	 * is an unfinished one whatever the moment of a kill (adopt.c), and
	 * its VM's cgroup is found by the id. */
	sb->adopted = false;
	sb->pid = 0;
	sb->pid_start = 0;
	record_of(sb, sb->state == SB_RESUMING ? "resuming" : "starting");
	rc = registry_write(sb->dir, &sb->rec);
	if (rc) {
		snprintf(err, errlen, "cannot write the sandbox's record: %s", strerror(-rc));
		goto out_remove;
	}
	sb->pid = supervise_spawn(&svc->sup, argv, log);
	if (sb->pid < 0) {
		rc = -sb->pid;
		sb->pid = 0;
		snprintf(err, errlen, "cannot start the VM process: %s", strerror(rc));
		goto out_remove;
	}
	sb->pid_start = registry_pid_start(sb->pid);
	/* A resume's record says so: a restart then knows its snapshot the
	 * sandbox's until the resume ends (live_resume). */
	record_of(sb, sb->state == SB_RESUMING ? "resuming" : "starting");
	rc = registry_write(sb->dir, &sb->rec);
	if (rc) {
		snprintf(err, errlen, "cannot write the sandbox's record: %s", strerror(-rc));
		goto out_stop;
	}
	deadline = clock_now_ns() + AGENT_BOOT_TIMEOUT_S * NS_PER_S;
	wait_vm_socket(svc, sb, deadline);
	/* The VM's own FRESHEN proves its agent up: asked over the control
	 * socket, no connection of ours costs the guest its buffers (a
	 * forked child's pages). serve's --state check keeps room for it. */
	rc = ctl_client_ready(sb->vsock, deadline, svc->stop_fd, &why);
	if (rc) {
		char tail[300];

		supervise_stop(sb->pid, 0, &status);
		registry_log_tail(sb->dir, tail, sizeof(tail));
		snprintf(err, errlen, "the sandbox's VM did not start: %s%s%s", why,
			 tail[0] ? ": " : "", tail);
		goto out_clean;
	}
	metrics_observe(&svc->metrics, M_RESTORE, clock_now_ns() - t0);
	return 0;
out_stop:
	supervise_stop(sb->pid, 0, &status);
out_clean:
	service_clean_vm(svc, sb->id);
out_remove:
	fs_remove_tree(fresh ? sb->dir : vmdir);
	return rc == -ECANCELED ? 503 : 500;
}

struct sandbox *service_new_sandbox(struct service *svc, struct service_template *t)
{
	char id[API_ID_MAX + 1];

	new_id(id);
	return service_sandbox_named(svc, t, id);
}

struct sandbox *service_sandbox_named(struct service *svc, struct service_template *t,
				      const char *id)
{
	struct sandbox *sb = calloc(1, sizeof(*sb));

	if (!sb)
		return NULL;
	snprintf(sb->id, sizeof(sb->id), "%s", id);
	snprintf(sb->dir, sizeof(sb->dir), "%s/sb/%s", svc->cfg.state, sb->id);
	/* The VM's sockets in a directory of their own: the jail bind-mounts
	 * the socket's directory, and the record and the log stay outside. */
	snprintf(sb->vsock, sizeof(sb->vsock), "%s/sb/%s/vm/vsock", svc->cfg.state, sb->id);
	sb->pidfd = -1;
	sb->created = (int64_t)time(NULL);
	sb->created_ns = sb->last_used_ns = clock_now_ns();
	sb->tmpl = t;
	snprintf(sb->rec.template, sizeof(sb->rec.template), "%s", t->id);
	return sb;
}

static void link_sandbox(struct service *svc, struct sandbox *sb)
{
	sb->next = svc->list;
	svc->list = sb;
}

int service_link(struct service *svc, struct sandbox **sbs, unsigned n)
{
	int rc;

	pthread_mutex_lock(&svc->lock);
	rc = svc->stopping ? -ESHUTDOWN : 0;   /* the drain swept the list, or is about to */
	for (unsigned i = 0; !rc && i < n; i++) {
		sbs[i]->state = SB_RUNNING;
		link_sandbox(svc, sbs[i]);
	}
	pthread_mutex_unlock(&svc->lock);
	return rc;
}

void service_link_locked(struct service *svc, struct sandbox *sb)
{
	link_sandbox(svc, sb);
}

void service_adopt_link(struct service *svc, struct sandbox *sb)
{
	pthread_mutex_lock(&svc->lock);
	link_sandbox(svc, sb);
	svc->count++;
	pthread_mutex_unlock(&svc->lock);
}

static void unlink_sandbox(struct service *svc, struct sandbox *sb)
{
	for (struct sandbox **p = &svc->list; *p; p = &(*p)->next)
		if (*p == sb) {
			*p = sb->next;
			return;
		}
}

struct service_template *service_template_find(struct service *svc, const char *name)
{
	for (unsigned i = 0; i < svc->cfg.ntmpl; i++) {
		struct service_template *t = &svc->cfg.tmpl[i];

		if (!strcmp(name, t->name) || !strcmp(name, t->id))
			return t;
	}
	return !name[0] && svc->cfg.ntmpl ? &svc->cfg.tmpl[0] : NULL;
}

/* A restored VM keeps its snapshot's vCPUs and memory: a request for
 * others is the caller's mistake (400), said before any VM starts. */
static bool shape_ok(const struct service_template *t, const struct api_create *req, char *err,
		     size_t errlen)
{
	if (req->cpus && req->cpus != t->cpus)
		snprintf(err, errlen, "cpus %u differs from template '%s''s %u (a sandbox keeps its "
			 "template's; omit cpus)", req->cpus, t->name, t->cpus);
	else if (req->mem_mib && req->mem_mib != t->mem_mib)
		snprintf(err, errlen, "mem %llu differs from template '%s''s %llu MiB (a sandbox "
			 "keeps its template's; omit mem)", (unsigned long long)req->mem_mib,
			 t->name, (unsigned long long)t->mem_mib);
	else
		return true;
	return false;
}

/* MemAvailable in /proc/meminfo's format, in MiB; -1 when unknown. */
static long long mem_available_mib(const char *path)
{
	long long kib = procfs_number(path, "MemAvailable");

	return kib < 0 ? -1 : kib / 1024;
}

int service_memory_ok(struct service *svc, char *err, size_t errlen)
{
	long long avail;

	if (!svc->cfg.meminfo || !svc->cfg.memory_reserve_mib)
		return 0;
	avail = mem_available_mib(svc->cfg.meminfo);
	if (avail < 0 || avail >= svc->cfg.memory_reserve_mib)
		return 0;
	snprintf(err, errlen, "the host has %lld MiB of memory available, under the service's "
		 "reserve of %u MiB (--memory-reserve): no new VM until some is freed", avail,
		 svc->cfg.memory_reserve_mib);
	return 503;
}

int service_create(struct service *svc, const struct api_create *req, struct sandbox **out,
		   char *err, size_t errlen)
{
	uint64_t t0 = clock_now_ns();
	struct service_template *t = service_template_find(svc, req->template);
	/* A pooled VM's broker was forked, and its rules fixed, before the
	 * jail: a create with rules boots its own (docs/security.md). */
	bool fits = !req->disk_quota && !req->net.nallow;
	struct sandbox *sb = NULL;
	int rc;

	if (!t) {
		int n = snprintf(err, errlen, "no template '%s' (this service has:", req->template);

		for (unsigned i = 0; i < svc->cfg.ntmpl && n > 0 && (size_t)n < errlen; i++)
			n += snprintf(err + n, errlen - (size_t)n, " %s", svc->cfg.tmpl[i].name);
		if (n > 0 && (size_t)n < errlen)
			snprintf(err + n, errlen - (size_t)n, ")");
		return 400;
	}
	if (!shape_ok(t, req, err, errlen))
		return 400;
	rc = service_memory_ok(svc, err, errlen);
	if (rc)
		return rc;
	pthread_mutex_lock(&svc->lock);
	if (svc->stopping || svc->count >= svc->cfg.max_sandboxes) {
		pthread_mutex_unlock(&svc->lock);
		snprintf(err, errlen, svc->stopping ? "the service is shutting down" :
			 "too many sandboxes (at most %u): delete some first", svc->cfg.max_sandboxes);
		return 503;
	}
	svc->count++;
	if (fits)
		sb = pool_take(svc, t);
	pthread_mutex_unlock(&svc->lock);
	if (!sb) {
		sb = service_new_sandbox(svc, t);
		if (!sb || api_net_copy(&sb->net, &req->net)) {
			snprintf(err, errlen, "out of memory");
			rc = 500;
		} else {
			rc = service_start_vm(svc, sb, req, NULL, err, errlen);
		}
		if (rc) {
			if (sb)
				api_net_free(&sb->net);
			free(sb);
			pthread_mutex_lock(&svc->lock);
			svc->count--;
			pthread_mutex_unlock(&svc->lock);
			return rc;
		}
		pthread_mutex_lock(&svc->lock);
		link_sandbox(svc, sb);
		pthread_mutex_unlock(&svc->lock);
	}
	/* The environment and labels: the sandbox's own, copied out of the request. */
	service_copy_env(sb, req->env, req->nenv);
	sb->meta = req->metadata ? json_deep_copy(req->metadata) : NULL;
	sb->rec.cpus = req->cpus;
	sb->rec.mem_mib = req->mem_mib;
	sb->rec.disk_quota = req->disk_quota;
	sb->rec.ttl_s = req->ttl_s;
	sb->rec.idle_s = req->idle_s;
	sb->created = (int64_t)time(NULL);
	sb->created_ns = sb->last_used_ns = clock_now_ns();
	/* Its spec before the record that says it runs: a restart never
	 * finds a running sandbox without one. */
	rc = service_save_spec(sb);
	if (!rc) {
		record_of(sb, "running");
		rc = registry_write(sb->dir, &sb->rec);
	}
	pthread_mutex_lock(&svc->lock);
	sb->state = SB_RUNNING;
	sb->calls = 1;
	pthread_mutex_unlock(&svc->lock);
	if (rc)
		log_warn("serve: cannot update %s's record: %s", sb->id, strerror(-rc));
	metrics_observe(&svc->metrics, M_CREATE, clock_now_ns() - t0);
	*out = sb;
	return 201;
}

static struct sandbox *find(struct service *svc, const char *id)
{
	for (struct sandbox *sb = svc->list; sb; sb = sb->next)
		if (sb->state != SB_POOL && !strcmp(sb->id, id))
			return sb;
	return NULL;
}

int service_get(struct service *svc, const char *id, struct sandbox **out, char *err,
		size_t errlen)
{
	struct sandbox *sb;
	int rc = 0;

	pthread_mutex_lock(&svc->lock);
	for (;;) {
		sb = find(svc, id);
		/* Another call is pausing or resuming it: wait for that to end. */
		if (!sb || (sb->state != SB_PAUSING && sb->state != SB_RESUMING))
			break;
		pthread_cond_wait(&svc->changed, &svc->lock);
	}
	if (!sb) {
		snprintf(err, errlen, "no sandbox '%s'", id);
		rc = 404;
	} else if (sb->state == SB_PAUSED) {
		/* The next call resumes it. */
		sb->state = SB_RESUMING;
		sb->calls++;
		pthread_mutex_unlock(&svc->lock);
		rc = live_resume(svc, sb, err, errlen);
		pthread_mutex_lock(&svc->lock);
		if (rc) {
			sb->calls--;
		} else {
			sb->last_used_ns = clock_now_ns();
			*out = sb;
		}
		pthread_cond_broadcast(&svc->changed);
	} else if (sb->state != SB_RUNNING) {
		snprintf(err, errlen, "sandbox '%s' is %s%s%s", id, state_names[sb->state],
			 sb->reason[0] ? ": " : "", sb->reason);
		rc = 409;
	} else {
		sb->calls++;
		sb->last_used_ns = clock_now_ns();
		*out = sb;
	}
	pthread_mutex_unlock(&svc->lock);
	return rc;
}

int service_begin_pause(struct service *svc, const char *id, struct sandbox **out, char *err,
			size_t errlen)
{
	struct sandbox *sb;
	int rc = 0;

	pthread_mutex_lock(&svc->lock);
	sb = find(svc, id);
	if (!sb) {
		snprintf(err, errlen, "no sandbox '%s'", id);
		rc = 404;
	} else if (sb->state != SB_RUNNING) {
		snprintf(err, errlen, "sandbox '%s' is %s", id, state_names[sb->state]);
		rc = 409;
	} else if (sb->calls) {
		snprintf(err, errlen, "sandbox '%s' is busy (%d call%s in flight): try again when "
			 "it ends", id, sb->calls, sb->calls == 1 ? "" : "s");
		rc = 409;
	} else {
		sb->state = SB_PAUSING;
		sb->calls++;
		*out = sb;
	}
	pthread_mutex_unlock(&svc->lock);
	return rc;
}

void service_hold(struct service *svc, struct sandbox *sb)
{
	pthread_mutex_lock(&svc->lock);
	sb->calls++;
	pthread_mutex_unlock(&svc->lock);
}

void service_put(struct service *svc, struct sandbox *sb)
{
	char path[CONFIG_PATH_MAX + 16];

	/* The record's time is its last use: idle_timeout counts on across a
	 * restart (adopt.c). */
	snprintf(path, sizeof(path), "%s/" REGISTRY_RECORD, sb->dir);
	utimensat(AT_FDCWD, path, NULL, AT_SYMLINK_NOFOLLOW);
	pthread_mutex_lock(&svc->lock);
	sb->calls--;
	sb->last_used_ns = clock_now_ns();
	pthread_cond_broadcast(&svc->changed);
	pthread_mutex_unlock(&svc->lock);
}

int service_delete(struct service *svc, const char *id, char *err, size_t errlen)
{
	struct sandbox *sb;

	pthread_mutex_lock(&svc->lock);
	sb = find(svc, id);
	if (!sb) {
		pthread_mutex_unlock(&svc->lock);
		snprintf(err, errlen, "no sandbox '%s'", id);
		return 404;
	}
	if (sb->calls || sb->state == SB_STOPPING || sb->state == SB_STARTING ||
	    sb->state == SB_PAUSING || sb->state == SB_RESUMING) {
		int calls = sb->calls;

		pthread_mutex_unlock(&svc->lock);
		snprintf(err, errlen, "sandbox '%s' is busy (%d call%s in flight): try again when "
			 "it ends", id, calls, calls == 1 ? "" : "s");
		return 409;
	}
	if (sb->state != SB_EXITED && sb->state != SB_PAUSED && sb->state != SB_DAMAGED)
		sb->state = SB_STOPPING;
	unlink_sandbox(svc, sb);
	pthread_mutex_unlock(&svc->lock);
	/* Deleted by request from here: a restart finishes it, never lists it. */
	service_record(sb, "deleting");
	service_discard(svc, sb);
	pthread_mutex_lock(&svc->lock);
	svc->count--;
	pthread_mutex_unlock(&svc->lock);
	return 0;
}

/* SIGKILL to each of sb's commands (the lock held): how many. A full
 * signal pipe already holds a signal the command will get. */
static int end_commands_locked(struct sandbox *sb)
{
	uint8_t kill_sig = SIGKILL;
	int n = 0;

	for (struct exec_slot *e = sb->execs; e; e = e->next, n++)
		if (write(e->sig_w, &kill_sig, 1) < 0 && errno != EAGAIN)
			log_warn("serve: sandbox %s: cannot signal exec %llu: %s", sb->id,
				 (unsigned long long)e->id, strerror(errno));
	return n;
}

int service_end_commands(struct service *svc, const char *id)
{
	struct sandbox *sb;
	int n;

	pthread_mutex_lock(&svc->lock);
	sb = find(svc, id);
	n = sb ? end_commands_locked(sb) : -404;
	pthread_mutex_unlock(&svc->lock);
	return n;
}

json_t *service_sandbox_json(const struct sandbox *sb)
{
	json_t *allow = json_array();

	for (int i = 0; allow && i < sb->net.nallow; i++)
		json_array_append_new(allow, json_string(sb->net.allow[i]));
	return json_pack("{s:s, s:s, s:s*, s:s, s:I, s:I, s:I, s:I, s:I, s:i, s:I, s:o*, s:O*}",
			 "id", sb->id, "state", state_names[sb->state],
			 "reason", sb->reason[0] ? sb->reason : NULL, "template", sb->rec.template,
			 "created", (json_int_t)sb->created, "cpus", (json_int_t)sb->rec.cpus,
			 "mem", (json_int_t)sb->rec.mem_mib, "ttl", (json_int_t)sb->rec.ttl_s,
			 "idle_timeout", (json_int_t)sb->rec.idle_s, "calls", sb->calls,
			 "idle_s", (json_int_t)((clock_now_ns() - sb->last_used_ns) / NS_PER_S),
			 "allow_net", allow, "metadata", sb->meta);
}

int service_set_timeout(struct service *svc, const char *id, unsigned timeout_s, char *err,
			size_t errlen)
{
	struct sandbox *sb;
	uint64_t ttl;
	int st = 0;

	pthread_mutex_lock(&svc->lock);
	sb = find(svc, id);
	if (!sb) {
		snprintf(err, errlen, "no sandbox '%s'", id);
		st = 404;
	} else if (sb->state != SB_RUNNING && sb->state != SB_PAUSED) {
		snprintf(err, errlen, "sandbox %s is %s", id, state_names[sb->state]);
		st = 409;
	} else {
		ttl = (clock_now_ns() - sb->created_ns) / NS_PER_S + timeout_s;
		if (ttl > API_MAX_TTL_S) {
			snprintf(err, errlen, "a sandbox lives at most %u s from its creation",
				 API_MAX_TTL_S);
			st = 400;
		} else {
			sb->rec.ttl_s = (unsigned)ttl;
			sb->ending = false;   /* a new ttl: its commands are told again at its end */
			/* Under the lock: no pause or resume (each rewrites the
			 * record) begins meanwhile. */
			service_record(sb, sb->state == SB_PAUSED ? "paused" : "running");
		}
	}
	pthread_mutex_unlock(&svc->lock);
	return st;
}

json_t *service_get_json(struct service *svc, const char *id)
{
	struct sandbox *sb;
	json_t *j = NULL;

	pthread_mutex_lock(&svc->lock);
	sb = find(svc, id);
	if (sb)
		j = service_sandbox_json(sb);
	pthread_mutex_unlock(&svc->lock);
	return j;
}

json_t *service_list(struct service *svc)
{
	json_t *a = json_array();

	pthread_mutex_lock(&svc->lock);
	for (struct sandbox *sb = svc->list; a && sb; sb = sb->next)
		if (sb->state != SB_POOL && sb->state != SB_STARTING)
			json_array_append_new(a, service_sandbox_json(sb));
	pthread_mutex_unlock(&svc->lock);
	return a;
}

void service_gauges(struct service *svc, struct metrics_gauges *g)
{
	memset(g, 0, sizeof(*g));
	pthread_mutex_lock(&svc->lock);
	for (struct sandbox *sb = svc->list; sb; sb = sb->next)
		switch (sb->state) {
		case SB_STARTING: g->starting++; break;
		case SB_RUNNING: g->running++; break;
		case SB_STOPPING: g->stopping++; break;
		case SB_EXITED: g->exited++; break;
		case SB_PAUSED: g->paused++; break;
		case SB_PAUSING: g->running++; break;
		case SB_RESUMING: g->starting++; break;
		case SB_DAMAGED: g->exited++; break;
		case SB_POOL: break;
		}
	g->pool_target = svc->cfg.pool;
	g->ntmpl = svc->cfg.ntmpl;
	for (unsigned i = 0; i < svc->cfg.ntmpl; i++) {
		g->tmpl_name[i] = svc->cfg.tmpl[i].name;
		g->tmpl_ready[i] = svc->cfg.tmpl[i].pool_ready;
		g->pool_ready += svc->cfg.tmpl[i].pool_ready;
	}
	pthread_mutex_unlock(&svc->lock);
}

/* sb's VM process ended by itself: paused, when a pause it was given
 * before a restart finished (adopt.c), else exited, with why: its wait
 * status and its last line (the jail's "killed by its memory limit"),
 * counted in /metrics and recorded in the audit log. */
static void vm_ended(struct service *svc, struct sandbox *sb)
{
	char dir[CONFIG_PATH_MAX + 16], tail[160], what[48], why[300];
	enum metrics_vm_exit cause;
	struct stat st;
	json_t *rec;

	snprintf(dir, sizeof(dir), "%s/" SERVICE_PAUSED, sb->dir);
	if (sb->adopted && sb->state == SB_RUNNING && !stat(dir, &st) && S_ISDIR(st.st_mode)) {
		log_info("serve: sandbox %s was paused", sb->id);
		service_vm_forget(sb);
		sb->state = SB_PAUSED;
		service_record(sb, "paused");
		return;
	}
	registry_log_tail(sb->dir, tail, sizeof(tail));
	if (sb->adopted)
		snprintf(what, sizeof(what), "ended");
	else if (WIFSIGNALED(sb->status))
		snprintf(what, sizeof(what), "was killed by signal %d", WTERMSIG(sb->status));
	else
		snprintf(what, sizeof(what), "exited %d", WEXITSTATUS(sb->status));
	snprintf(sb->reason, sizeof(sb->reason), "its VM process %s%s%s", what, tail[0] ? ": " : "",
		 tail);
	cause = strstr(tail, "memory limit") ? VMX_MEMORY :
		WIFSIGNALED(sb->status) || (WIFEXITED(sb->status) && WEXITSTATUS(sb->status) > 128) ?
		VMX_SIGNAL : VMX_EXIT;
	metrics_vm_exit(&svc->metrics, cause);
	log_warn("serve: sandbox %s: %s", sb->id, sb->reason);
	sb->state = SB_EXITED;
	rec = json_pack("{s:s, s:s, s:s}", "event", "vm_exit", "sandbox", sb->id, "reason", sb->reason);
	if (rec && svc->gate.audit && audit_append(svc->gate.audit, rec, why, sizeof(why)))
		log_warn("serve: %s", why);
	json_decref(rec);
}

/* The first wait for a VM's cgroup to empty, on the caller's thread. */
#define CLEAN_FIRST_WAIT_MS 1000
/* The drain's wait for the cgroups still busy, all together. */
#define CLEAN_DRAIN_WAIT_MS 30000

void service_clean_vm(struct service *svc, const char *id)
{
	char busy[4][REGISTRY_CGROUP_NAME_MAX];
	int nbusy = (int)(sizeof(busy) / sizeof(busy[0]));
	int n = registry_clean_vm(&svc->cfg.paths, id, CLEAN_FIRST_WAIT_MS, busy, nbusy);

	if (!n)
		return;
	pthread_mutex_lock(&svc->linger_lock);
	for (int i = 0; i < n; i++)
		if (i < nbusy && svc->nlinger < SERVICE_LINGER_MAX)
			memcpy(svc->linger[svc->nlinger++], busy[i], sizeof(busy[i]));
		else
			log_warn("serve: VM %s: a cgroup is still busy; the next jail's sweep removes it",
				 id);
	pthread_mutex_unlock(&svc->linger_lock);
}

/* One more try at each busy cgroup (by its own name: a VM started since
 * for the same sandbox has another). How many are still busy. */
static unsigned retry_lingering(struct service *svc)
{
	unsigned left;

	pthread_mutex_lock(&svc->linger_lock);
	for (unsigned i = 0; i < svc->nlinger;)
		if (!registry_retry_cgroup(&svc->cfg.paths, svc->linger[i]))
			i++;
		else
			memcpy(svc->linger[i], svc->linger[--svc->nlinger], sizeof(svc->linger[0]));
	left = svc->nlinger;
	pthread_mutex_unlock(&svc->linger_lock);
	return left;
}

void service_tick(struct service *svc)
{
	uint64_t now = clock_now_ns();
	struct sandbox *doomed = NULL;

	pthread_mutex_lock(&svc->lock);
	for (struct sandbox **p = &svc->list; *p;) {
		struct sandbox *sb = *p;
		bool pooled = sb->state == SB_POOL;

		if ((sb->state == SB_RUNNING || pooled) && service_vm_ended(sb)) {
			if (!pooled)
				vm_ended(svc, sb);
			if (pooled) {
				/* Nobody knows it yet: gone, and the pool refills. */
				log_warn("serve: a pooled VM of template %s ended (wait status %#x)",
					 sb->tmpl->name, sb->status);
				sb->state = SB_EXITED;
				sb->tmpl->pool_ready--;
				pthread_cond_broadcast(&svc->changed);
				*p = sb->next;
				sb->next = doomed;
				doomed = sb;
				continue;
			}
		}
		if (sb->state == SB_RUNNING && !sb->calls && sb->rec.idle_s && !svc->stopping &&
		    now - sb->last_used_ns >= sb->rec.idle_s * NS_PER_S) {
			/* Idle: paused on a thread of its own (the main loop goes on). */
			sb->state = SB_PAUSING;
			sb->calls++;
			if (live_pause_async(svc, sb)) {
				sb->state = SB_RUNNING;
				sb->calls--;
			}
		}
		/* Past its ttl with commands running (a stream nobody ends, an
		 * E2B process no client reads): they are told to end once, and
		 * the sandbox goes when its calls have. */
		if (sb->state == SB_RUNNING && sb->calls && sb->execs && !sb->ending &&
		    sb->rec.ttl_s && now - sb->created_ns >= sb->rec.ttl_s * NS_PER_S) {
			log_info("serve: sandbox %s reached its ttl: ending its %d command%s", sb->id,
				 end_commands_locked(sb), sb->execs->next ? "s" : "");
			sb->ending = true;
		}
		if ((sb->state == SB_RUNNING || sb->state == SB_PAUSED) && !sb->calls && sb->rec.ttl_s &&
		    now - sb->created_ns >= sb->rec.ttl_s * NS_PER_S) {
			log_info("serve: sandbox %s reached its ttl", sb->id);
			*p = sb->next;
			sb->state = SB_STOPPING;
			sb->next = doomed;
			doomed = sb;
			svc->count--;
			continue;
		}
		p = &sb->next;
	}
	pthread_mutex_unlock(&svc->lock);
	while (doomed) {
		struct sandbox *sb = doomed;

		doomed = sb->next;
		service_discard(svc, sb);
	}
	retry_lingering(svc);
}

/* The service holds every sandbox: under memory pressure the kernel's OOM
 * killer should take a VM (SUPERVISE_VM_OOM_ADJ) long before it. Lowering
 * needs CAP_SYS_RESOURCE (root); without it the service stays at 0. */
static void protect_from_oom(void)
{
	int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	if (write(fd, "-500", 4) != 4)
		log_debug("serve: cannot lower our oom_score_adj: %s", strerror(errno));
	close(fd);
}

int service_start(struct service *svc)
{
	char sbdir[CONFIG_PATH_MAX];
	int killed, cleaned, rc;

	pthread_mutex_init(&svc->lock, NULL);
	pthread_mutex_init(&svc->linger_lock, NULL);
	pthread_cond_init(&svc->changed, NULL);
	metrics_init(&svc->metrics);
	svc->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	rc = svc->stop_fd < 0 ? -errno : supervise_init(&svc->sup);
	if (rc) {
		log_say("serve: cannot set up: %s", strerror(-rc));
		return rc;
	}
	svc->sup.outlive = !svc->cfg.ephemeral;
	protect_from_oom();
	snprintf(sbdir, sizeof(sbdir), "%s/sb", svc->cfg.state);
	if (svc->cfg.ephemeral) {
		cleaned = registry_cleanup(svc->cfg.state, &svc->cfg.paths, &killed);
		if (cleaned)
			log_say("serve: cleaned %d sandbox%s left by a previous run (%d VM process%s "
				"killed)", cleaned, cleaned == 1 ? "" : "es", killed,
				killed == 1 ? "" : "es");
	} else {
		adopt_all(svc, sbdir);
	}
	if (mkdir(sbdir, 0700) < 0 && errno != EEXIST) {
		rc = -errno;
		log_say("serve: cannot create %s: %s", sbdir, strerror(-rc));
		return rc;
	}
	return pool_start(svc);
}

/* Wait until no call holds a sandbox, or until `until`. The lock held. */
static int wait_calls(struct service *svc, const struct timespec *until)
{
	for (;;) {
		int busy = 0;

		for (struct sandbox *sb = svc->list; sb; sb = sb->next)
			busy += sb->calls;
		if (!busy || pthread_cond_timedwait(&svc->changed, &svc->lock, until) == ETIMEDOUT)
			return busy;
	}
}

/* What a drain stops: every VM when ephemeral, else only the pool's. */
static bool drain_ends(const struct service *svc, const struct sandbox *sb)
{
	return svc->cfg.ephemeral || sb->state == SB_POOL;
}

void service_stop(struct service *svc, unsigned grace_ms)
{
	struct timespec until;
	uint64_t one = 1;
	struct sandbox *all;

	/* No new VM from here: a create or refill waiting for one fails now. */
	supervise_close(&svc->sup);
	pthread_mutex_lock(&svc->lock);
	svc->stopping = true;
	pthread_cond_broadcast(&svc->changed);
	until = clock_realtime_after_ms(grace_ms);
	wait_calls(svc, &until);
	pthread_mutex_unlock(&svc->lock);
	/* Calls still in flight give up now. */
	if (write(svc->stop_fd, &one, sizeof(one)) < 0)
		log_warn("serve: cannot signal the drain: %s", strerror(errno));
	pool_join(svc);
	/* Every VM that ends told to stop at once; a call still on one then fails. */
	pthread_mutex_lock(&svc->lock);
	for (struct sandbox *sb = svc->list; sb; sb = sb->next)
		if (drain_ends(svc, sb) && sb->state != SB_EXITED && sb->state != SB_PAUSED &&
		    sb->pid > 0)
			kill(sb->pid, SIGTERM);
	until = clock_realtime_after_ms(SUPERVISE_TERM_GRACE_MS + 10000);
	if (wait_calls(svc, &until))
		log_warn("serve: calls still in flight after the drain");
	all = svc->list;
	svc->list = NULL;
	pthread_mutex_unlock(&svc->lock);
	while (all) {
		struct sandbox *sb = all;

		all = sb->next;
		if (!drain_ends(svc, sb)) {
			/* Its VM and record stay for the next service (adopt.c). */
			if (!sb->calls)
				free_sandbox(sb);
			continue;
		}
		if (sb->calls) {
			/* Still held by a call: its VM and files go, its memory stays. */
			int status;

			supervise_stop(sb->pid, 0, &status);
			service_clean_vm(svc, sb->id);
			fs_remove_tree(sb->dir);
			sb->state = SB_EXITED;
			continue;
		}
		service_discard(svc, sb);
	}
	/* Nothing of a stopped VM outlives the service: its cgroup neither. */
	for (uint64_t end = clock_now_ns() + CLEAN_DRAIN_WAIT_MS * 1000000ULL;
	     retry_lingering(svc) && clock_now_ns() < end;)
		usleep(50000);
	for (unsigned i = 0; i < svc->nlinger; i++)
		log_warn("serve: cgroup %s is still busy after %d s; the next jail's sweep removes it",
			 svc->linger[i], CLEAN_DRAIN_WAIT_MS / 1000);
}

void service_destroy(struct service *svc)
{
	supervise_destroy(&svc->sup);
	if (svc->stop_fd >= 0)
		close(svc->stop_fd);
	svc->stop_fd = -1;
}
