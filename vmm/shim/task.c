/* task.c - containerd's Task service, the logic: each container a microVM, its processes run by the guest agent, the events in containerd's order. Protocol-free: task_api.c speaks ttrpc for it. */
#include "shim/task.h"
#include "lib/clock.h"
#include "lib/errmsg.h"
#include "lib/log.h"
#include "net/rules.h"
#include "vm/config.h"
#include "shim/runtime.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIN_MEM_MIB     128
#define DEFAULT_MEM_MIB 256
#define MAX_CPUS        16

void task_service_init(struct task_service *s, const char *self, const char *kernel,
		       const char *initrd, const char *run_dir, bool debug, struct events *events,
		       const char *version, int exit_fd)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->changed, NULL);
	s->self = self;
	s->kernel = kernel;
	s->initrd = initrd;
	s->run_dir = run_dir;
	s->debug = debug;
	s->events = events;
	s->version = version;
	s->exit_fd = exit_fd;
}

/* ---- finding things (under s->lock) ---- */

static struct shim_task *find(struct task_service *s, const char *id)
{
	for (struct shim_task *t = s->tasks; t; t = t->next)
		if (!strcmp(t->id, id))
			return t;
	return NULL;
}

static struct shim_proc *find_proc(struct shim_task *t, const char *exec_id)
{
	if (!exec_id || !*exec_id)
		return &t->init;
	for (int i = 0; i < t->nexecs; i++)
		if (!strcmp(t->execs[i]->exec_id, exec_id))
			return t->execs[i];
	return NULL;
}

/* The task whose VM t's processes run in: its pod's sandbox, or t. */
static struct shim_task *owner(const struct shim_task *t)
{
	return (struct shim_task *)(t->pod ? t->pod : t);
}

/* A task's init pid, as containerd sees it: its VM's host process. */
static uint32_t init_pid(const struct shim_task *t)
{
	return (uint32_t)owner(t)->vm.pid;
}

/* The task (and process) a call names, or -ENOENT with err. */
static int lookup(struct task_service *s, const char *id, const char *exec_id,
		  struct shim_task **t, struct shim_proc **p, char *err, size_t errlen)
{
	*t = find(s, id);
	if (!*t) {
		snprintf(err, errlen, "task %.80s not found", id);
		return -ENOENT;
	}
	if (p) {
		*p = find_proc(*t, exec_id);
		if (!*p) {
			snprintf(err, errlen, "process %.80s of task %.80s not found", exec_id, id);
			return -ENOENT;
		}
	}
	return 0;
}

static bool id_ok(const char *id)
{
	return config_name_valid(id, PROC_ID_MAX);
}

static void publish(struct task_service *s, enum shim_event_kind kind, const struct shim_task *t,
		    const struct shim_proc *p)
{
	struct shim_event e = { .kind = kind };

	snprintf(e.container_id, sizeof(e.container_id), "%s", t->id);
	if (p) {
		snprintf(e.exec_id, sizeof(e.exec_id), "%s", p->exec_id);
		e.pid = p == &t->init ? init_pid(t) : p->pid;
		e.exit_status = p->exit_status;
		e.at = p->exited_at;
	}
	if (kind == EV_TASK_CREATE)
		snprintf(e.bundle, sizeof(e.bundle), "%s", t->bundle);
	if (!e.at.tv_sec)
		clock_gettime(CLOCK_REALTIME, &e.at);
	events_publish(s->events, &e);
}

/* ---- create ---- */

/* The VM's id: the container's if it fits mayfly's rule, else a hash of it. */
static void vm_id(const char *id, char out[33])
{
	size_t n = strlen(id);
	uint32_t h = 2166136261u;

	if (n <= 32) {
		snprintf(out, 33, "%s", id);
		return;
	}
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)id[i]) * 16777619u;
	snprintf(out, 33, "%.23s-%08x", id, h);
}

/* Every io.mayfly.allow-net rule must parse, as --allow-net's would. */
static int check_rules(const struct oci_config *cfg, char *err, size_t errlen)
{
	for (int i = 0; i < cfg->nallow_net; i++) {
		struct net_rule r;
		char why[200];

		if (net_rule_parse(cfg->allow_net[i], &r, why, sizeof(why)))
			return errmsg_invalid(err, errlen, OCI_ANN_ALLOW_NET ": %s", why);
	}
	return 0;
}

/* The container's root as an ext4 image (rootfs.c): from containerd's
 * mounts, or the bundle's root.path. */
static int make_image(struct shim_task *t, const struct task_create *c, char *err, size_t errlen)
{
	char origin[8 * 1024];
	bool built = false, by_content = true;
	int rc;

	if (c->nmounts > 0) {
		rc = rootfs_mount(c->mounts, c->nmounts, t->rootfs, err, errlen);
		if (rc)
			return rc;
		t->rootfs_mounted = true;
		by_content = rootfs_origin(c->mounts, c->nmounts, origin, sizeof(origin));
	} else {
		/* No mounts: the tree at root.path (ctr run --rootfs DIR). */
		const char *rp = t->cfg.root_path;

		if (!rp)
			return errmsg_invalid(err, errlen, "no root file system: no mounts and no root.path");
		if ((size_t)snprintf(t->rootfs, sizeof(t->rootfs), "%s%s%s", rp[0] == '/' ? "" : t->bundle,
				     rp[0] == '/' ? "" : "/", rp) >= sizeof(t->rootfs))
			return errmsg_invalid(err, errlen, "root.path is too long");
		origin[0] = '\0';
	}
	rc = rootfs_image(t->rootfs, origin, by_content, t->image, sizeof(t->image), &built, err,
			  errlen);
	if (!rc && built)
		log_info("task %s: built its root image %s", t->id, t->image);
	return rc;
}

/* For `delete`, should this shim be killed: what to clean up. */
static void save_state(struct shim_task *t)
{
	struct runtime_state st = { .rootfs_mounted = t->rootfs_mounted };

	if (t->vm_started) {
		st.vm_pid = t->vm.pid;
		st.vm_start_time = runtime_start_time(t->vm.pid);
		snprintf(st.vm_dir, sizeof(st.vm_dir), "%s", t->vm_dir);
	}
	if (runtime_state_save(t->bundle, &st))
		log_warn("task %s: cannot save the shim's state in the bundle", t->id);
}

/* A VM of t's own, restored from the snapshot of its image's VM booted
 * (made by the first container of that image; cold if there can be
 * none). A pod's sandbox gets the spare disk slots its members use. */
static int boot_vm(struct task_service *s, struct shim_task *t, char *err, size_t errlen)
{
	char id[33], snapshot[TASK_PATH_MAX];
	struct sandbox_config sc;
	int rc;

	if ((size_t)snprintf(t->vm_dir, sizeof(t->vm_dir), "%s/%08x%04x", s->run_dir,
			     (unsigned)getpid(), (unsigned)(uintptr_t)t & 0xffff) >= sizeof(t->vm_dir) - 16)
		return errmsg_invalid(err, errlen, "the shim's run directory is too long");
	if (mkdir(t->vm_dir, 0700) < 0 && errno != EEXIST)
		return errmsg_invalid(err, errlen, "cannot create '%s': %s", t->vm_dir, strerror(errno));
	vm_id(t->id, id);
	sc = (struct sandbox_config){
		.self = s->self, .id = id, .dir = t->vm_dir, .kernel = s->kernel, .initrd = s->initrd,
		.image = t->image, .mem_mib = oci_config_mem_mib(&t->cfg, MIN_MEM_MIB, DEFAULT_MEM_MIB),
		.cpus = oci_config_cpus(&t->cfg, MAX_CPUS),
		/* Without one of its own, the container's id (docker's habit), if it is one. */
		.hostname = t->cfg.hostname ? t->cfg.hostname : oci_hostname_valid(t->id) ? t->id : NULL,
		.allow_net = t->cfg.allow_net, .nallow_net = t->cfg.nallow_net, .verbose = s->debug,
		.spare_disks = t->cfg.is_sandbox ? TASK_POD_SLOTS : 0,
	};
	if (sandbox_snapshot(&sc, snapshot, sizeof(snapshot), err, errlen) == 0)
		sc.snapshot = snapshot;
	else
		log_warn("task %s: booting cold: %s", t->id, err);
	rc = sandbox_start(&t->vm, &sc, err, errlen);
	if (!rc)
		t->vm_started = true;
	return rc;
}

/* A member of a pod whose sandbox task this shim serves: its image into
 * a spare slot of the sandbox's VM, mounted there by the guest's init at
 * a root of its own. -ENOENT (nothing done) when there is no such
 * sandbox running here. */
static int join_pod(struct task_service *s, struct shim_task *t, char *err, size_t errlen)
{
	char serial[16];
	char *argv[6] = { "/init", "--add-container", serial, t->root_in_guest, NULL, NULL };
	struct shim_task *pod;
	int rc, argc = 4;

	pthread_mutex_lock(&s->lock);
	pod = find(s, t->cfg.sandbox_id);
	if (!pod || !pod->cfg.is_sandbox || !pod->vm_started || pod->vm_stopping) {
		pthread_mutex_unlock(&s->lock);
		return -ENOENT;
	}
	if (pod->slots_used >= TASK_POD_SLOTS) {
		pthread_mutex_unlock(&s->lock);
		snprintf(err, errlen, "pod %.80s has had %d containers: no disk slot is left in its VM",
			 pod->id, TASK_POD_SLOTS);
		return -EBUSY;
	}
	t->slot = pod->slots_used++;
	pod->members++;
	t->pod = pod;
	pthread_mutex_unlock(&s->lock);
	snprintf(serial, sizeof(serial), "ctr-%u", t->slot);
	snprintf(t->root_in_guest, sizeof(t->root_in_guest), "/run/mayfly/c/%u", t->slot);
	if (t->cfg.hostname)
		argv[argc++] = t->cfg.hostname;
	rc = sandbox_insert_disk(&pod->vm, t->slot, t->image, serial, err, errlen);
	if (!rc)
		rc = sandbox_guest_run(&pod->vm, argv, argc, "mounting the container's root", err,
				       errlen);
	if (!rc)
		log_info("task %s: in pod %s's VM, its root on disk slot %u", t->id, pod->id, t->slot);
	return rc;
}

/* Everything Create makes, unlocked (the task is in the list, marked
 * busy): the image, then a VM of its own or a place in its pod's. */
static int make_vm(struct task_service *s, struct shim_task *t, const struct task_create *c,
		   char *err, size_t errlen)
{
	int rc = make_image(t, c, err, errlen);

	if (rc)
		return rc;
	rc = -ENOENT;
	if (t->cfg.sandbox_id && !t->cfg.is_sandbox) {
		rc = join_pod(s, t, err, errlen);
		if (rc == -ENOENT)
			log_info("task %s: its pod's sandbox %.80s is not running in this shim: a VM of "
				 "its own", t->id, t->cfg.sandbox_id);
	}
	if (rc == -ENOENT)
		rc = boot_vm(s, t, err, errlen);
	if (!rc)
		save_state(t);
	return rc;
}

/* End t's VM once, whoever asks first (the init's end, Delete, the
 * shim's); the others wait for it. Called with s->lock held; drops it
 * while the VM ends. */
static void stop_vm(struct task_service *s, struct shim_task *t)
{
	if (!t->vm_started)
		return;
	if (t->vm_stopping) {
		while (!t->vm_stopped)
			pthread_cond_wait(&s->changed, &s->lock);
		return;
	}
	t->vm_stopping = true;
	pthread_mutex_unlock(&s->lock);
	sandbox_stop(&t->vm);
	pthread_mutex_lock(&s->lock);
	t->vm_stopped = true;
	pthread_cond_broadcast(&s->changed);
}

/* Undo make_vm (any part of it); its own VM is stopped already. A
 * member's root is unmounted in the pod's VM if that still runs. */
static void unmake_vm(struct shim_task *t)
{
	char state[TASK_PATH_MAX + 32], err[256];
	char *argv[] = { "/init", "--remove-container", t->root_in_guest, NULL };

	if (t->pod && !sandbox_ended(&t->pod->vm) &&
	    sandbox_guest_run(&t->pod->vm, argv, 3, "unmounting the container's root", err,
			      sizeof(err)))
		log_warn("task %s: %s", t->id, err);

	snprintf(state, sizeof(state), "%s/" RUNTIME_STATE_FILE, t->bundle);
	unlink(state);
	if (t->vm_dir[0]) {
		rmdir(t->vm_dir);
		t->vm_dir[0] = '\0';
	}
	if (t->rootfs_mounted && rootfs_unmount(t->rootfs) == 0)
		t->rootfs_mounted = false;
}

static void free_task(struct shim_task *t)
{
	proc_destroy(&t->init);
	for (int i = 0; i < t->nexecs; i++) {
		proc_destroy(t->execs[i]);
		free(t->execs[i]);
	}
	oci_config_free(&t->cfg);
	free(t);
}

/* Undo and free a task taken out of the list (unlocked). A sandbox whose
 * members are still there stays until the last of them goes. */
static void release_task(struct task_service *s, struct shim_task *t)
{
	struct shim_task *pod = t->pod;
	bool free_t, free_pod = false;

	unmake_vm(t);
	pthread_mutex_lock(&s->lock);
	if (pod && --pod->members == 0 && pod->orphaned)
		free_pod = true;
	free_t = t->members == 0;
	t->orphaned = !free_t;
	pthread_mutex_unlock(&s->lock);
	if (free_t)
		free_task(t);
	if (free_pod)
		free_task(pod);
}

int task_create(struct task_service *s, const struct task_create *c, uint32_t *pid, char *err,
		size_t errlen)
{
	struct shim_task *t;
	int rc;

	if (!id_ok(c->id))
		return errmsg_invalid(err, errlen, "task id '%.80s' is not 1-76 of [A-Za-z0-9._-]", c->id);
	t = calloc(1, sizeof(*t));
	if (!t)
		return errmsg_invalid(err, errlen, "out of memory");
	snprintf(t->id, sizeof(t->id), "%s", c->id);
	if ((size_t)snprintf(t->bundle, sizeof(t->bundle), "%s", c->bundle) >= sizeof(t->bundle) - 8 ||
	    c->bundle[0] != '/') {
		free(t);
		return errmsg_invalid(err, errlen, "the bundle path is not absolute or too long");
	}
	snprintf(t->rootfs, sizeof(t->rootfs), "%s/rootfs", t->bundle);
	snprintf(t->root_in_guest, sizeof(t->root_in_guest), "%s", SANDBOX_ROOT_IN_GUEST);
	rc = oci_config_load(&t->cfg, t->bundle, err, errlen);
	if (rc) {
		free(t);
		return rc == -EINVAL ? rc : -EINVAL;
	}
	if (!rc && c->terminal != t->cfg.process.terminal)
		rc = errmsg_invalid(err, errlen, "the request's terminal (%d) and config.json's (%d) "
				    "differ", c->terminal, t->cfg.process.terminal);
	if (!rc)
		rc = check_rules(&t->cfg, err, errlen);
	if (!rc)
		rc = proc_init(&t->init, "", &t->cfg.process, c->stdin_path, c->stdout_path,
			       c->stderr_path, c->terminal, t->root_in_guest, &s->lock, &s->changed);
	if (rc) {
		oci_config_free(&t->cfg);
		free(t);
		return rc == -ENOMEM ? errmsg_invalid(err, errlen, "out of memory") : rc;
	}
	pthread_mutex_lock(&s->lock);
	if (find(s, c->id) || s->shutting_down) {
		pthread_mutex_unlock(&s->lock);
		free_task(t);
		snprintf(err, errlen, "task %.80s %s", c->id, s->shutting_down ? "cannot be created: the "
			 "shim is shutting down" : "already exists");
		return -EEXIST;
	}
	/* In the list, busy (no init pid yet: the other calls see CREATED). */
	t->next = s->tasks;
	s->tasks = t;
	pthread_mutex_unlock(&s->lock);
	rc = make_vm(s, t, c, err, errlen);
	pthread_mutex_lock(&s->lock);
	if (rc) {
		struct shim_task **pp = &s->tasks;

		while (*pp != t)
			pp = &(*pp)->next;
		*pp = t->next;
		stop_vm(s, t);
		pthread_mutex_unlock(&s->lock);
		release_task(s, t);
		return rc;
	}
	*pid = init_pid(t);
	publish(s, EV_TASK_CREATE, t, &t->init);
	pthread_mutex_unlock(&s->lock);
	log_info("task %s: created, its VM is process %u", t->id, *pid);
	return 0;
}

/* ---- start, exec ---- */

/* A process's exit event, after its start's: the start's is queued by
 * task_start once proc_start returned, which may be after the process
 * already ended. Under s->lock. */
static void exit_event(struct task_service *s, struct shim_task *t, struct shim_proc *p)
{
	if (p->start_published)
		publish(s, EV_TASK_EXIT, t, p);
	else
		p->exit_pending = true;
}

/* The init ended: the container did. Its VM goes, and with it every exec
 * (each reported killed, 137), as a container's processes die with its
 * init. Runs on the init's thread. */
static void init_exited(struct shim_proc *p, void *opaque)
{
	struct task_service *s = opaque;
	struct shim_task *t = (struct shim_task *)((char *)p - offsetof(struct shim_task, init));

	log_info("task %s: its process exited with %u", t->id, p->exit_status);
	pthread_mutex_lock(&s->lock);
	exit_event(s, t, p);
	stop_vm(s, t);   /* a pod member's VM is its sandbox's: nothing to stop here */
	pthread_mutex_unlock(&s->lock);
}

static void exec_exited(struct shim_proc *p, void *opaque)
{
	struct task_service *s = opaque;

	pthread_mutex_lock(&s->lock);
	for (struct shim_task *t = s->tasks; t; t = t->next)
		for (int i = 0; i < t->nexecs; i++)
			if (t->execs[i] == p)
				exit_event(s, t, p);
	pthread_mutex_unlock(&s->lock);
}

int task_start(struct task_service *s, const char *id, const char *exec_id, uint32_t *pid,
	       char *err, size_t errlen)
{
	struct shim_task *t;
	struct shim_proc *p;
	bool init;
	int rc;

	pthread_mutex_lock(&s->lock);
	rc = lookup(s, id, exec_id, &t, &p, err, errlen);
	if (rc)
		goto out;
	init = p == &t->init;
	if (!owner(t)->vm_started || owner(t)->vm_stopping) {
		snprintf(err, errlen, "task %.80s has no running VM", id);
		rc = -EBUSY;
	} else if (p->state != PROC_CREATED || p->starting) {
		snprintf(err, errlen, "process %.80s of %.80s was started already", exec_id, id);
		rc = -EBUSY;
	} else if (!init && t->init.state != PROC_RUNNING) {
		snprintf(err, errlen, "task %.80s is not running", id);
		rc = -EBUSY;
	}
	if (rc)
		goto out;
	p->starting = true;
	pthread_mutex_unlock(&s->lock);
	rc = proc_start(p, &owner(t)->vm, init ? init_exited : exec_exited, s, err, errlen);
	pthread_mutex_lock(&s->lock);
	if (!rc) {
		*pid = init ? init_pid(t) : p->pid;
		publish(s, init ? EV_TASK_START : EV_EXEC_STARTED, t, p);
		p->start_published = true;
		if (p->exit_pending)
			publish(s, EV_TASK_EXIT, t, p);
	}
out:
	pthread_mutex_unlock(&s->lock);
	/* A program the agent could not run is the request's fault. */
	return rc == -ENOEXEC ? -EINVAL : rc;
}

int task_exec(struct task_service *s, const char *id, const char *exec_id, const char *spec_json,
	      size_t spec_len, bool terminal, const char *stdin_path, const char *stdout_path,
	      const char *stderr_path, char *err, size_t errlen)
{
	struct oci_process spec;
	struct shim_task *t;
	struct shim_proc *p;
	int rc;

	if (!exec_id || !id_ok(exec_id))
		return errmsg_invalid(err, errlen, "exec id '%.80s' is not 1-76 of [A-Za-z0-9._-]",
				      exec_id ? exec_id : "");
	rc = oci_process_parse(&spec, spec_json, spec_len, err, errlen);
	if (rc)
		return rc;
	p = calloc(1, sizeof(*p));
	pthread_mutex_lock(&s->lock);
	rc = lookup(s, id, NULL, &t, NULL, err, errlen);
	if (!rc && !p)
		rc = errmsg_invalid(err, errlen, "out of memory");
	if (!rc && find_proc(t, exec_id)) {
		snprintf(err, errlen, "exec %.80s of %.80s already exists", exec_id, id);
		rc = -EEXIST;
	}
	if (!rc && t->init.state != PROC_RUNNING) {
		snprintf(err, errlen, "task %.80s is not running", id);
		rc = -EBUSY;
	}
	if (!rc && t->nexecs >= TASK_MAX_EXECS) {
		snprintf(err, errlen, "task %.80s has %d execs already", id, TASK_MAX_EXECS);
		rc = -EBUSY;
	}
	if (!rc && proc_init(p, exec_id, &spec, stdin_path, stdout_path, stderr_path, terminal,
			     t->root_in_guest, &s->lock, &s->changed))
		rc = errmsg_invalid(err, errlen, "out of memory");
	if (rc) {
		pthread_mutex_unlock(&s->lock);
		oci_process_free(&spec);
		free(p);
		return rc;
	}
	t->execs[t->nexecs++] = p;
	publish(s, EV_EXEC_ADDED, t, p);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* ---- kill, wait, state, delete ---- */

int task_kill(struct task_service *s, const char *id, const char *exec_id, int signo, bool all,
	      char *err, size_t errlen)
{
	struct shim_task *t;
	struct shim_proc *p;
	int rc;

	pthread_mutex_lock(&s->lock);
	rc = lookup(s, id, exec_id, &t, &p, err, errlen);
	if (!rc && p->state == PROC_CREATED && p == &t->init && owner(t)->vm_started &&
	    !owner(t)->vm_stopped) {
		/* Killed before it started: there is nothing in the VM to signal;
		 * the task is stopped, as runc's would be. */
		p->state = PROC_STOPPED;
		p->exit_status = 128u + (uint32_t)signo;
		clock_gettime(CLOCK_REALTIME, &p->exited_at);
		pthread_cond_broadcast(&s->changed);
		p->start_published = true;
		publish(s, EV_TASK_EXIT, t, p);
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	pthread_mutex_unlock(&s->lock);
	if (rc)
		return rc;
	rc = proc_signal(p, signo);
	if (!rc && all && p == &t->init) {
		pthread_mutex_lock(&s->lock);
		for (int i = 0; i < t->nexecs; i++) {
			struct shim_proc *e = t->execs[i];

			pthread_mutex_unlock(&s->lock);
			proc_signal(e, signo);
			pthread_mutex_lock(&s->lock);
		}
		pthread_mutex_unlock(&s->lock);
	}
	if (rc == -ESRCH)
		snprintf(err, errlen, "process %.80s of %.80s is not running", exec_id ? exec_id : "", id);
	else if (rc)
		snprintf(err, errlen, "cannot signal the process: %s", strerror(-rc));
	return rc;
}

static void fill_state(const struct shim_task *t, const struct shim_proc *p,
		       struct task_proc_state *st)
{
	memset(st, 0, sizeof(*st));
	st->status = p->state == PROC_CREATED ? TASK_CREATED :
		     p->state == PROC_STOPPED ? TASK_STOPPED :
		     t->paused ? TASK_PAUSED : TASK_RUNNING;
	st->pid = p == &t->init ? init_pid(t) : p->pid;
	st->exit_status = p->exit_status;
	st->exited_at = p->exited_at;
	st->terminal = p->terminal;
	snprintf(st->stdin_path, sizeof(st->stdin_path), "%s", p->stdin_path ? p->stdin_path : "");
	snprintf(st->stdout_path, sizeof(st->stdout_path), "%s", p->stdout_path ? p->stdout_path : "");
	snprintf(st->stderr_path, sizeof(st->stderr_path), "%s", p->stderr_path ? p->stderr_path : "");
}

/* Whether fd is readable now. */
static bool readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return fd >= 0 && poll(&p, 1, 0) > 0;
}

int task_wait(struct task_service *s, const char *id, const char *exec_id, int cancel_fd,
	      struct task_proc_state *st, char *err, size_t errlen)
{
	struct shim_task *t;
	struct shim_proc *p;
	int rc;

	pthread_mutex_lock(&s->lock);
	rc = lookup(s, id, exec_id, &t, &p, err, errlen);
	/* The lookup again after each wake: a Delete may have taken it. */
	while (!rc && p->state != PROC_STOPPED) {
		struct timespec until = clock_realtime_after_ms(200);

		if (readable(cancel_fd)) {
			snprintf(err, errlen, "the caller left");
			rc = -ECANCELED;
			break;
		}
		pthread_cond_timedwait(&s->changed, &s->lock, &until);
		rc = lookup(s, id, exec_id, &t, &p, err, errlen);
	}
	if (!rc)
		fill_state(t, p, st);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int task_state(struct task_service *s, const char *id, const char *exec_id,
	       struct task_proc_state *st, char *bundle, size_t bundle_len, char *err,
	       size_t errlen)
{
	struct shim_task *t;
	struct shim_proc *p;
	int rc;

	pthread_mutex_lock(&s->lock);
	rc = lookup(s, id, exec_id, &t, &p, err, errlen);
	if (!rc) {
		fill_state(t, p, st);
		snprintf(bundle, bundle_len, "%s", t->bundle);
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int task_delete(struct task_service *s, const char *id, const char *exec_id,
		struct task_proc_state *st, char *err, size_t errlen)
{
	struct shim_task *t, **pp;
	struct shim_proc *p;
	int rc;

	pthread_mutex_lock(&s->lock);
	rc = lookup(s, id, exec_id, &t, &p, err, errlen);
	if (!rc && p->state == PROC_RUNNING) {
		snprintf(err, errlen, "process %.80s of %.80s is running: kill it first",
			 exec_id ? exec_id : "", id);
		rc = -EBUSY;
	}
	if (rc) {
		pthread_mutex_unlock(&s->lock);
		return rc;
	}
	fill_state(t, p, st);
	if (p != &t->init) {
		for (int i = 0; i < t->nexecs; i++)
			if (t->execs[i] == p)
				t->execs[i] = t->execs[--t->nexecs];
		publish(s, EV_TASK_DELETE, t, p);
		pthread_mutex_unlock(&s->lock);
		proc_destroy(p);
		free(p);
		return 0;
	}
	for (pp = &s->tasks; *pp != t; pp = &(*pp)->next)
		;
	*pp = t->next;
	publish(s, EV_TASK_DELETE, t, p);
	/* The VM first: its end stops every exec still running. A pod
	 * member's VM goes on: its execs are killed instead. */
	stop_vm(s, t);
	pthread_mutex_unlock(&s->lock);
	for (int i = 0; t->pod && i < t->nexecs; i++)
		proc_signal(t->execs[i], SIGKILL);
	release_task(s, t);
	log_info("task %s: deleted", id);
	return 0;
}

/* ---- pause, resize, close io, pids ---- */

int task_pause(struct task_service *s, const char *id, bool pause, char *err, size_t errlen)
{
	struct shim_task *t;
	int rc;

	pthread_mutex_lock(&s->lock);
	rc = lookup(s, id, NULL, &t, NULL, err, errlen);
	if (!rc && t->pod) {
		snprintf(err, errlen, "task %.80s shares its pod's VM: pause the pod's sandbox %.80s",
			 id, t->pod->id);
		rc = -ENOTSUP;
	} else if (!rc && (!t->vm_started || t->vm_stopped || t->init.state != PROC_RUNNING)) {
		snprintf(err, errlen, "task %.80s is not running", id);
		rc = -EBUSY;
	}
	if (!rc)
		rc = sandbox_suspend(&t->vm, pause, err, errlen);
	if (!rc) {
		t->paused = pause;
		publish(s, pause ? EV_TASK_PAUSED : EV_TASK_RESUMED, t, NULL);
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int task_resize(struct task_service *s, const char *id, const char *exec_id, uint32_t width,
		uint32_t height, char *err, size_t errlen)
{
	struct shim_task *t;
	struct shim_proc *p;
	int rc;

	if (!width || !height || width > 65535 || height > 65535)
		return errmsg_invalid(err, errlen, "a terminal of %ux%u", width, height);
	pthread_mutex_lock(&s->lock);
	rc = lookup(s, id, exec_id, &t, &p, err, errlen);
	pthread_mutex_unlock(&s->lock);
	if (!rc)
		rc = proc_resize(p, (uint16_t)height, (uint16_t)width);
	if (rc == -EINVAL)
		snprintf(err, errlen, "the process has no terminal");
	else if (rc == -ESRCH)
		snprintf(err, errlen, "the process is not running");
	return rc;
}

int task_close_io(struct task_service *s, const char *id, const char *exec_id, char *err,
		  size_t errlen)
{
	struct shim_task *t;
	struct shim_proc *p;
	int rc;

	pthread_mutex_lock(&s->lock);
	rc = lookup(s, id, exec_id, &t, &p, err, errlen);
	pthread_mutex_unlock(&s->lock);
	if (!rc && proc_close_stdin(p) == -ESRCH) {
		snprintf(err, errlen, "the process is not running");
		rc = -ESRCH;
	}
	return rc;
}

int task_pids(struct task_service *s, const char *id, uint32_t *pids,
	      char (*exec_ids)[PROC_ID_MAX + 1], int max, int *n, char *err, size_t errlen)
{
	struct shim_task *t;
	int rc;

	*n = 0;
	pthread_mutex_lock(&s->lock);
	rc = lookup(s, id, NULL, &t, NULL, err, errlen);
	if (!rc && t->init.state == PROC_RUNNING && *n < max) {
		exec_ids[*n][0] = '\0';
		pids[(*n)++] = init_pid(t);
	}
	for (int i = 0; !rc && i < t->nexecs && *n < max; i++)
		if (t->execs[i]->state == PROC_RUNNING) {
			snprintf(exec_ids[*n], PROC_ID_MAX + 1, "%s", t->execs[i]->exec_id);
			pids[(*n)++] = t->execs[i]->pid;
		}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int task_cgroup(struct task_service *s, const char *id, char *path, size_t len, char *err,
		size_t errlen)
{
	struct shim_task *t;
	int rc;

	pthread_mutex_lock(&s->lock);
	rc = lookup(s, id, NULL, &t, NULL, err, errlen);
	if (!rc && (!owner(t)->vm_started || owner(t)->vm_stopped))
		rc = -ESRCH;
	if (!rc)   /* a pod member's figures are its pod's VM's */
		rc = sandbox_cgroup(&owner(t)->vm, path, len);
	if (rc && rc != -ENOENT)
		snprintf(err, errlen, "the VM of %.80s has no cgroup: %s", id, strerror(-rc));
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int task_pid(struct task_service *s, const char *id, uint32_t *pid, char *err, size_t errlen)
{
	struct shim_task *t;
	int rc;

	pthread_mutex_lock(&s->lock);
	rc = lookup(s, id, NULL, &t, NULL, err, errlen);
	if (!rc)
		*pid = init_pid(t);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

bool task_service_empty(struct task_service *s)
{
	bool empty;

	pthread_mutex_lock(&s->lock);
	empty = s->tasks == NULL;
	pthread_mutex_unlock(&s->lock);
	return empty;
}

void task_service_close(struct task_service *s)
{
	struct shim_task *t, *all;

	pthread_mutex_lock(&s->lock);
	s->shutting_down = true;
	all = s->tasks;   /* ours alone from here: no call finds them */
	s->tasks = NULL;
	/* Every VM ends first: a pod member's processes end with its pod's. */
	for (t = all; t; t = t->next)
		stop_vm(s, t);
	t = all;
	while (t) {
		struct shim_task *next = t->next;

		pthread_mutex_unlock(&s->lock);
		release_task(s, t);
		pthread_mutex_lock(&s->lock);
		t = next;
	}
	pthread_mutex_unlock(&s->lock);
}
