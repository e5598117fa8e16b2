/* adopt.c - mayfly serve's restart: the sandboxes a previous service left in the state directory taken over as they were, or listed with why not. */
#include "serve/adopt.h"
#include "serve/service.h"
#include "control/ctl_client.h"
#include "lib/clock.h"
#include "lib/fs_tree.h"
#include "lib/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ADOPT_READY_S   30          /* for an adopted VM's agent to answer */
#define ADOPT_ENDING_MS 10000       /* for a VM whose pause was committed to end */
#define SPEC_MAX        (4u << 20)  /* a spec.json: a create's env and rules */

struct adopted {
	unsigned running, paused, lost, removed;
};

static bool is_dir(const char *dir, const char *name)
{
	char path[CONFIG_PATH_MAX + 32];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return !lstat(path, &st) && S_ISDIR(st.st_mode);
}

/* What a pause or resume cut short leaves beside SERVICE_PAUSED:
 * `mayfly pause`'s paused.tmp-XXXXXX, a resume's paused.done. */
static void remove_half_done(const char *dir)
{
	char path[CONFIG_PATH_MAX + 300];
	struct dirent *e;
	DIR *d = opendir(dir);

	if (!d)
		return;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, SERVICE_PAUSED ".", sizeof(SERVICE_PAUSED)) &&
		    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) < (int)sizeof(path))
			fs_remove_tree(path);
	closedir(d);
}

/* The process r names, if it still is that one (pid and start time) and
 * alive: a pidfd for it, else -1. */
static int take_pid(const struct registry_record *r)
{
	int fd;

	if (!r->pid || !r->pid_start || registry_pid_start(r->pid) != r->pid_start)
		return -1;
	fd = supervise_pidfd(r->pid);
	if (fd >= 0 && (registry_pid_start(r->pid) != r->pid_start || !registry_pid_alive(r->pid))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* SERVICE_SPEC: the create members it was made with (env, metadata,
 * allow_net, resolve), parsed as a create is. 0, or -errno with *why. */
static int load_spec(struct sandbox *sb, char *why, size_t whylen)
{
	char path[CONFIG_PATH_MAX + 16], *text = NULL;
	struct api_create c = { 0 };
	struct stat st;
	ssize_t n = -1;
	int fd, rc;

	snprintf(path, sizeof(path), "%s/" SERVICE_SPEC, sb->dir);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > SPEC_MAX) {
		rc = fd < 0 ? errno : EINVAL;
		snprintf(why, whylen, SERVICE_SPEC ": %s", fd < 0 ? strerror(rc) :
			 "not a regular file of at most 4 MiB");
		if (fd >= 0)
			close(fd);
		return -rc;
	}
	text = malloc((size_t)st.st_size + 1);
	if (text)
		n = read(fd, text, (size_t)st.st_size);
	close(fd);
	if (n != st.st_size) {
		free(text);
		snprintf(why, whylen, SERVICE_SPEC ": cannot read it");
		return -EIO;
	}
	rc = api_parse_create(text, (size_t)n, &c, why, whylen);
	free(text);
	if (rc)
		return rc;
	rc = service_copy_env(sb, c.env, c.nenv) || api_net_copy(&sb->net, &c.net) ? -ENOMEM : 0;
	if (!rc && c.metadata && !(sb->meta = json_deep_copy(c.metadata)))
		rc = -ENOMEM;
	api_create_free(&c);
	if (rc)
		snprintf(why, whylen, "out of memory");
	return rc;
}

/* Monotonic time of the Unix time t (now at most). */
static uint64_t mono_of(int64_t t)
{
	int64_t ago = (int64_t)time(NULL) - t;
	uint64_t now = clock_now_ns();

	if (ago <= 0)
		return now;
	return (uint64_t)ago * NS_PER_S < now ? now - (uint64_t)ago * NS_PER_S : 0;
}

static void set_paused(struct sandbox *sb)
{
	sb->state = SB_PAUSED;
	service_record(sb, "paused");
}

/* The VM of a sandbox with a snapshot in SERVICE_PAUSED (its pause was
 * committed, or its resume did not finish): ended, and the sandbox paused. */
static void end_vm_paused(struct sandbox *sb)
{
	if (sb->adopted)
		service_vm_stop(sb, ADOPT_ENDING_MS);
	set_paused(sb);
}

__attribute__((format(printf, 3, 4)))
static void lost(struct sandbox *sb, enum sb_state st, const char *fmt, ...)
{
	va_list ap;

	sb->state = st;
	va_start(ap, fmt);
	vsnprintf(sb->reason, sizeof(sb->reason), fmt, ap);
	va_end(ap);
}

/* A running (or resuming) sandbox, its record read: see adopt.h. */
static void take_running(struct service *svc, struct sandbox *sb, bool resuming)
{
	const char *why = "";

	if (is_dir(sb->dir, SERVICE_PAUSED)) {
		/* A pause that finished (its VM ending, or gone while no
		 * service watched), or a resume that did not. */
		end_vm_paused(sb);
		return;
	}
	if (!sb->adopted) {
		lost(sb, SB_EXITED, "its VM process ended while the service was down");
		return;
	}
	if (!ctl_client_ready(sb->vsock, clock_now_ns() + ADOPT_READY_S * NS_PER_S, svc->stop_fd,
			      &why)) {
		sb->state = SB_RUNNING;
		if (resuming)
			service_record(sb, "running");
		return;
	}
	/* A pause in flight answers nothing, then ends the VM. */
	if (is_dir(sb->dir, SERVICE_PAUSED)) {
		end_vm_paused(sb);
		return;
	}
	service_vm_stop(sb, 0);
	lost(sb, SB_EXITED, "its VM did not answer after the restart (%s): stopped", why);
}

static void adopt_one(struct service *svc, const char *sbdir, const char *name, struct adopted *n)
{
	char dir[CONFIG_PATH_MAX], why[300];
	struct registry_record r;
	struct service_template *t = NULL;
	struct sandbox *sb;
	struct stat st;
	int rc, fd;

	if (snprintf(dir, sizeof(dir), "%s/%s", sbdir, name) >= (int)sizeof(dir))
		return;
	if (!config_id_valid(name)) {
		log_warn("serve: %s is no sandbox's directory: left alone", dir);
		return;
	}
	rc = registry_read(dir, &r);
	if (rc == -ENOENT) {
		/* Killed before its first record (written beside, then renamed):
		 * nobody was told of it. */
		registry_remove(dir, name, &svc->cfg.paths);
		n->removed++;
		return;
	}
	if (!rc && strcmp(r.id, name))
		rc = -EINVAL;
	if (!rc && (!strcmp(r.state, "starting") || !strcmp(r.state, "pool") ||
		    !strcmp(r.state, "deleting"))) {
		/* Never given to a caller, or deleted by one. */
		registry_remove(dir, name, &svc->cfg.paths);
		n->removed++;
		return;
	}
	if (!rc)
		t = service_template_find(svc, r.template);
	sb = service_sandbox_named(svc, t ? t : &svc->cfg.tmpl[0], name);
	if (!sb) {
		log_warn("serve: out of memory adopting %s", name);
		return;
	}
	remove_half_done(dir);
	if (rc) {
		lost(sb, SB_DAMAGED, "its " REGISTRY_RECORD " is %s", rc == -EINVAL ?
		     "out of shape" : strerror(-rc));
		goto out_link;
	}
	sb->rec = r;
	sb->created = r.created;
	sb->created_ns = mono_of(r.created);
	snprintf(dir + strlen(dir), sizeof(dir) - strlen(dir), "/" REGISTRY_RECORD);
	sb->last_used_ns = stat(dir, &st) ? clock_now_ns() : mono_of(st.st_mtim.tv_sec);
	fd = take_pid(&r);
	if (fd >= 0) {
		sb->adopted = true;
		sb->pidfd = fd;
		sb->pid = r.pid;
		sb->pid_start = r.pid_start;
	}
	if (!t)
		lost(sb, SB_DAMAGED, "its template %s is not one of this service's (give it "
		     "with --template NAME=DIR)", r.template);
	else if (load_spec(sb, why, sizeof(why)))
		lost(sb, SB_DAMAGED, "%s", why);
	else if (!strcmp(r.state, "paused") && is_dir(sb->dir, SERVICE_PAUSED))
		end_vm_paused(sb);
	else if (!strcmp(r.state, "paused"))
		lost(sb, SB_DAMAGED, "its paused snapshot is missing");
	else if (!strcmp(r.state, "running") || !strcmp(r.state, "resuming"))
		take_running(svc, sb, !strcmp(r.state, "resuming"));
	else
		lost(sb, SB_DAMAGED, "its record's state '%s' is none of a sandbox's", r.state);
out_link:
	/* No VM of its own from here: one a kill left unrecorded (spawned for
	 * a resume before its pid was written) is killed in its cgroup. */
	if (!sb->adopted && sb->state != SB_RUNNING)
		service_clean_vm(svc, sb->id);
	if (sb->state == SB_RUNNING)
		n->running++;
	else if (sb->state == SB_PAUSED)
		n->paused++;
	else
		n->lost++;
	if (sb->state != SB_RUNNING && sb->state != SB_PAUSED)
		log_warn("serve: sandbox %s is %s: %s", sb->id, service_state_name(sb->state),
			 sb->reason);
	service_adopt_link(svc, sb);
}

void adopt_all(struct service *svc, const char *sbdir)
{
	struct adopted n = { 0 };
	struct dirent *e;
	DIR *d;

	registry_remove_forks(svc->cfg.state);
	d = opendir(sbdir);
	if (!d)
		return;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			adopt_one(svc, sbdir, e->d_name, &n);
	closedir(d);
	if (n.running + n.paused + n.lost + n.removed)
		log_say("serve: took over %u sandbox%s left by a previous service: %u running, "
			"%u paused, %u exited or damaged; %u unfinished removed",
			n.running + n.paused + n.lost, n.running + n.paused + n.lost == 1 ? "" : "es",
			n.running, n.paused, n.lost, n.removed);
}
