/* task_api.c - the Task service on ttrpc: each method's request unpacked and checked, task.c's call, its answer packed; and the events forwarded to containerd. */
#include "shim/task_api.h"
#include "lib/log.h"
#include "shim/ttrpc_client.h"

#include "shim/cgroups2_metrics.pb-c.h"
#include "shim/containerd_events.pb-c.h"
#include "shim/events_ttrpc.pb-c.h"
#include "shim/task.pb-c.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SERVICE           "containerd.task.v2.Task"
#define PROCESS_SPEC_URL  "types.containerd.io/opencontainers/runtime-spec/1/Process"
#define METRICS_URL       "io.containerd.cgroups.v2.Metrics"
#define FORWARD_TIMEOUT_MS 5000
#define MAX_PIDS          (TASK_MAX_EXECS + 1)

/* ---- helpers ---- */

/* A failed call: the code containerd's errdefs read back, and why. */
static int32_t fail(struct ttrpc_reply *r, int rc, const char *why)
{
	snprintf(r->message, sizeof(r->message), "%s", why && *why ? why : strerror(-rc));
	return rc == -ESRCH ? TTRPC_NOT_FOUND : ttrpc_code_from_errno(rc);
}

/* The request's message, or INVALID_ARGUMENT. */
static int32_t unpack(const struct ttrpc_call *call, const ProtobufCMessageDescriptor *d,
		      void *out, struct ttrpc_reply *r)
{
	const char *why = "";

	if (ttrpc_unpack(d, call->req->payload, call->req->payload_len, (ProtobufCMessage **)out,
			 &why)) {
		snprintf(r->message, sizeof(r->message), "a malformed %s: %s", d->short_name, why);
		return TTRPC_INVALID_ARGUMENT;
	}
	return TTRPC_OK;
}

static int32_t answer(struct ttrpc_reply *r, const void *m)
{
	if (ttrpc_pack(m, &r->payload, &r->len)) {
		snprintf(r->message, sizeof(r->message), "cannot encode the answer");
		return TTRPC_INTERNAL;
	}
	return TTRPC_OK;
}

static void stamp(Google__Protobuf__Timestamp *t, const struct timespec *at)
{
	google__protobuf__timestamp__init(t);
	t->seconds = at->tv_sec;
	t->nanos = (int32_t)at->tv_nsec;
}

#define HANDLER(name) \
	static int32_t name(void *opaque, const struct ttrpc_call *call, struct ttrpc_reply *reply)

/* ---- the methods ---- */

HANDLER(h_create)
{
	struct task_service *s = opaque;
	Containerd__Task__V2__CreateTaskRequest *q;
	Containerd__Task__V2__CreateTaskResponse a = CONTAINERD__TASK__V2__CREATE_TASK_RESPONSE__INIT;
	struct rootfs_mount mounts[ROOTFS_MAX_MOUNTS];
	struct task_create c;
	char err[TTRPC_REPLY_TEXT_MAX];
	uint32_t pid = 0;
	int32_t code = unpack(call, &containerd__task__v2__create_task_request__descriptor, &q, reply);
	int rc;

	if (code)
		return code;
	if (q->checkpoint[0] || q->parent_checkpoint[0]) {
		ttrpc_unpacked_free(&q->base);
		return fail(reply, -ENOTSUP, "restoring a checkpoint is not supported");
	}
	if (q->n_rootfs > ROOTFS_MAX_MOUNTS) {
		ttrpc_unpacked_free(&q->base);
		return fail(reply, -EINVAL, "too many rootfs mounts");
	}
	for (size_t i = 0; i < q->n_rootfs; i++)
		mounts[i] = (struct rootfs_mount){ q->rootfs[i]->type, q->rootfs[i]->source,
						   (const char **)q->rootfs[i]->options,
						   (int)q->rootfs[i]->n_options };
	c = (struct task_create){ .id = q->id, .bundle = q->bundle, .mounts = mounts,
				  .nmounts = (int)q->n_rootfs, .terminal = q->terminal,
				  .stdin_path = q->stdin, .stdout_path = q->stdout,
				  .stderr_path = q->stderr };
	rc = task_create(s, &c, &pid, err, sizeof(err));
	ttrpc_unpacked_free(&q->base);
	if (rc)
		return fail(reply, rc, err);
	a.pid = pid;
	return answer(reply, &a);
}

HANDLER(h_start)
{
	struct task_service *s = opaque;
	Containerd__Task__V2__StartRequest *q;
	Containerd__Task__V2__StartResponse a = CONTAINERD__TASK__V2__START_RESPONSE__INIT;
	char err[TTRPC_REPLY_TEXT_MAX];
	uint32_t pid = 0;
	int32_t code = unpack(call, &containerd__task__v2__start_request__descriptor, &q, reply);
	int rc;

	if (code)
		return code;
	rc = task_start(s, q->id, q->exec_id, &pid, err, sizeof(err));
	ttrpc_unpacked_free(&q->base);
	if (rc)
		return fail(reply, rc, err);
	a.pid = pid;
	return answer(reply, &a);
}

/* A task_proc_state as State's answer. */
static int32_t answer_state(struct ttrpc_reply *reply, const char *id, const char *exec_id,
			    const struct task_proc_state *st, const char *bundle)
{
	Containerd__Task__V2__StateResponse a = CONTAINERD__TASK__V2__STATE_RESPONSE__INIT;
	Google__Protobuf__Timestamp t;

	stamp(&t, &st->exited_at);
	a.id = (char *)id;
	a.exec_id = (char *)exec_id;
	a.bundle = (char *)bundle;
	a.pid = st->pid;
	a.status = (Containerd__V1__Types__Status)st->status;
	a.stdin = (char *)st->stdin_path;
	a.stdout = (char *)st->stdout_path;
	a.stderr = (char *)st->stderr_path;
	a.terminal = st->terminal;
	a.exit_status = st->exit_status;
	a.exited_at = &t;
	return answer(reply, &a);
}

HANDLER(h_state)
{
	struct task_service *s = opaque;
	Containerd__Task__V2__StateRequest *q;
	struct task_proc_state st;
	char err[TTRPC_REPLY_TEXT_MAX], bundle[TASK_PATH_MAX];
	int32_t code = unpack(call, &containerd__task__v2__state_request__descriptor, &q, reply);
	int rc;

	if (code)
		return code;
	rc = task_state(s, q->id, q->exec_id, &st, bundle, sizeof(bundle), err, sizeof(err));
	code = rc ? fail(reply, rc, err) : answer_state(reply, q->id, q->exec_id, &st, bundle);
	ttrpc_unpacked_free(&q->base);
	return code;
}

HANDLER(h_delete)
{
	struct task_service *s = opaque;
	Containerd__Task__V2__DeleteRequest *q;
	Containerd__Task__V2__DeleteResponse a = CONTAINERD__TASK__V2__DELETE_RESPONSE__INIT;
	Google__Protobuf__Timestamp t;
	struct task_proc_state st;
	char err[TTRPC_REPLY_TEXT_MAX];
	int32_t code = unpack(call, &containerd__task__v2__delete_request__descriptor, &q, reply);
	int rc;

	if (code)
		return code;
	rc = task_delete(s, q->id, q->exec_id, &st, err, sizeof(err));
	ttrpc_unpacked_free(&q->base);
	if (rc)
		return fail(reply, rc, err);
	stamp(&t, &st.exited_at);
	a.pid = st.pid;
	a.exit_status = st.exit_status;
	a.exited_at = &t;
	return answer(reply, &a);
}

HANDLER(h_pids)
{
	struct task_service *s = opaque;
	Containerd__Task__V2__PidsRequest *q;
	Containerd__Task__V2__PidsResponse a = CONTAINERD__TASK__V2__PIDS_RESPONSE__INIT;
	Containerd__V1__Types__ProcessInfo info[MAX_PIDS], *ptrs[MAX_PIDS];
	char exec_ids[MAX_PIDS][PROC_ID_MAX + 1], err[TTRPC_REPLY_TEXT_MAX];
	uint32_t pids[MAX_PIDS];
	int32_t code = unpack(call, &containerd__task__v2__pids_request__descriptor, &q, reply);
	int n = 0, rc;

	if (code)
		return code;
	rc = task_pids(s, q->id, pids, exec_ids, MAX_PIDS, &n, err, sizeof(err));
	ttrpc_unpacked_free(&q->base);
	if (rc)
		return fail(reply, rc, err);
	for (int i = 0; i < n; i++) {
		containerd__v1__types__process_info__init(&info[i]);
		info[i].pid = pids[i];
		ptrs[i] = &info[i];
	}
	a.n_processes = (size_t)n;
	a.processes = ptrs;
	return answer(reply, &a);
}

/* Pause and Resume take the same request shape. */
static int32_t pause_or_resume(void *opaque, const struct ttrpc_call *call,
			       struct ttrpc_reply *reply, bool pause)
{
	struct task_service *s = opaque;
	Containerd__Task__V2__PauseRequest *q;
	char err[TTRPC_REPLY_TEXT_MAX];
	int32_t code = unpack(call, pause ? &containerd__task__v2__pause_request__descriptor :
			      &containerd__task__v2__resume_request__descriptor, &q, reply);
	int rc;

	if (code)
		return code;
	rc = task_pause(s, q->id, pause, err, sizeof(err));
	ttrpc_unpacked_free(&q->base);
	return rc ? fail(reply, rc, err) : TTRPC_OK;
}

HANDLER(h_pause)
{
	return pause_or_resume(opaque, call, reply, true);
}

HANDLER(h_resume)
{
	return pause_or_resume(opaque, call, reply, false);
}

HANDLER(h_kill)
{
	struct task_service *s = opaque;
	Containerd__Task__V2__KillRequest *q;
	char err[TTRPC_REPLY_TEXT_MAX];
	int32_t code = unpack(call, &containerd__task__v2__kill_request__descriptor, &q, reply);
	int rc;

	if (code)
		return code;
	rc = q->signal < 1 || q->signal > 64 ? -EINVAL :
	     task_kill(s, q->id, q->exec_id, (int)q->signal, q->all, err, sizeof(err));
	if (rc == -EINVAL && (q->signal < 1 || q->signal > 64))
		snprintf(err, sizeof(err), "signal %u is not a signal", q->signal);
	ttrpc_unpacked_free(&q->base);
	return rc ? fail(reply, rc, err) : TTRPC_OK;
}

HANDLER(h_exec)
{
	struct task_service *s = opaque;
	Containerd__Task__V2__ExecProcessRequest *q;
	char err[TTRPC_REPLY_TEXT_MAX];
	int32_t code = unpack(call, &containerd__task__v2__exec_process_request__descriptor, &q, reply);
	int rc;

	if (code)
		return code;
	if (!q->spec || strcmp(q->spec->type_url, PROCESS_SPEC_URL)) {
		ttrpc_unpacked_free(&q->base);
		return fail(reply, -EINVAL, "the exec's spec is not an OCI process (" PROCESS_SPEC_URL ")");
	}
	rc = task_exec(s, q->id, q->exec_id, (const char *)q->spec->value.data, q->spec->value.len,
		       q->terminal, q->stdin, q->stdout, q->stderr, err, sizeof(err));
	ttrpc_unpacked_free(&q->base);
	return rc ? fail(reply, rc, err) : TTRPC_OK;
}

HANDLER(h_resize)
{
	struct task_service *s = opaque;
	Containerd__Task__V2__ResizePtyRequest *q;
	char err[TTRPC_REPLY_TEXT_MAX];
	int32_t code = unpack(call, &containerd__task__v2__resize_pty_request__descriptor, &q, reply);
	int rc;

	if (code)
		return code;
	rc = task_resize(s, q->id, q->exec_id, q->width, q->height, err, sizeof(err));
	ttrpc_unpacked_free(&q->base);
	return rc ? fail(reply, rc, err) : TTRPC_OK;
}

HANDLER(h_close_io)
{
	struct task_service *s = opaque;
	Containerd__Task__V2__CloseIORequest *q;
	char err[TTRPC_REPLY_TEXT_MAX];
	int32_t code = unpack(call, &containerd__task__v2__close_iorequest__descriptor, &q, reply);
	int rc = 0;

	if (code)
		return code;
	if (q->stdin)
		rc = task_close_io(s, q->id, q->exec_id, err, sizeof(err));
	ttrpc_unpacked_free(&q->base);
	return rc ? fail(reply, rc, err) : TTRPC_OK;
}

HANDLER(h_wait)
{
	struct task_service *s = opaque;
	Containerd__Task__V2__WaitRequest *q;
	Containerd__Task__V2__WaitResponse a = CONTAINERD__TASK__V2__WAIT_RESPONSE__INIT;
	Google__Protobuf__Timestamp t;
	struct task_proc_state st;
	char err[TTRPC_REPLY_TEXT_MAX];
	int32_t code = unpack(call, &containerd__task__v2__wait_request__descriptor, &q, reply);
	int rc;

	if (code)
		return code;
	rc = task_wait(s, q->id, q->exec_id, call->cancel_fd, &st, err, sizeof(err));
	ttrpc_unpacked_free(&q->base);
	if (rc)
		return fail(reply, rc, err);
	stamp(&t, &st.exited_at);
	a.exit_status = st.exit_status;
	a.exited_at = &t;
	return answer(reply, &a);
}

/* A cgroup v2 file's number, 0 when missing ("max" too). */
static uint64_t cg_number(const char *dir, const char *file)
{
	char path[4200], buf[64];
	unsigned long long v = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	sscanf(buf, "%llu", &v);
	return v;
}

/* "key value" lines of a cgroup v2 stat file, into fields by name. */
static void cg_keyed(const char *dir, const char *file, const char *const *keys, uint64_t **vals,
		     int n)
{
	char path[4200], key[64];
	unsigned long long v;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	f = fopen(path, "re");
	if (!f)
		return;
	while (fscanf(f, "%63s %llu", key, &v) == 2)
		for (int i = 0; i < n; i++)
			if (!strcmp(key, keys[i]))
				*vals[i] = v;
	fclose(f);
}

HANDLER(h_stats)
{
	struct task_service *s = opaque;
	Containerd__Task__V2__StatsRequest *q;
	Containerd__Task__V2__StatsResponse a = CONTAINERD__TASK__V2__STATS_RESPONSE__INIT;
	Io__Containerd__Cgroups__V2__Metrics m = IO__CONTAINERD__CGROUPS__V2__METRICS__INIT;
	Io__Containerd__Cgroups__V2__PidsStat pids = IO__CONTAINERD__CGROUPS__V2__PIDS_STAT__INIT;
	Io__Containerd__Cgroups__V2__CPUStat cpu = IO__CONTAINERD__CGROUPS__V2__CPUSTAT__INIT;
	Io__Containerd__Cgroups__V2__MemoryStat mem = IO__CONTAINERD__CGROUPS__V2__MEMORY_STAT__INIT;
	Google__Protobuf__Any any = GOOGLE__PROTOBUF__ANY__INIT;
	static const char *const cpu_keys[] = { "usage_usec", "user_usec", "system_usec",
						"nr_periods", "nr_throttled", "throttled_usec" };
	static const char *const mem_keys[] = { "anon", "file", "kernel_stack", "slab", "sock",
						"shmem", "file_mapped", "file_dirty", "pgfault",
						"pgmajfault" };
	uint64_t *cpu_vals[] = { &cpu.usage_usec, &cpu.user_usec, &cpu.system_usec,
				 &cpu.nr_periods, &cpu.nr_throttled, &cpu.throttled_usec };
	uint64_t *mem_vals[] = { &mem.anon, &mem.file, &mem.kernel_stack, &mem.slab, &mem.sock,
				 &mem.shmem, &mem.file_mapped, &mem.file_dirty, &mem.pgfault,
				 &mem.pgmajfault };
	char err[TTRPC_REPLY_TEXT_MAX], dir[4096];
	int32_t code = unpack(call, &containerd__task__v2__stats_request__descriptor, &q, reply);
	uint8_t *packed = NULL;
	size_t len = 0;
	int rc;

	if (code)
		return code;
	rc = task_cgroup(s, q->id, dir, sizeof(dir), err, sizeof(err));
	ttrpc_unpacked_free(&q->base);
	if (rc)
		return fail(reply, rc, err);
	/* The VM's cgroup: its guest's memory and vCPUs, the VMM's own. */
	pids.current = cg_number(dir, "pids.current");
	pids.limit = cg_number(dir, "pids.max");
	cg_keyed(dir, "cpu.stat", cpu_keys, cpu_vals, 6);
	cg_keyed(dir, "memory.stat", mem_keys, mem_vals, 10);
	mem.usage = cg_number(dir, "memory.current");
	mem.usage_limit = cg_number(dir, "memory.max");
	mem.swap_usage = cg_number(dir, "memory.swap.current");
	mem.swap_limit = cg_number(dir, "memory.swap.max");
	m.pids = &pids;
	m.cpu = &cpu;
	m.memory = &mem;
	if (ttrpc_pack(&m.base, &packed, &len))
		return fail(reply, -ENOMEM, "cannot encode the metrics");
	any.type_url = METRICS_URL;
	any.value.data = packed;
	any.value.len = len;
	a.stats = &any;
	code = answer(reply, &a);
	free(packed);
	return code;
}

HANDLER(h_connect)
{
	struct task_service *s = opaque;
	Containerd__Task__V2__ConnectRequest *q;
	Containerd__Task__V2__ConnectResponse a = CONTAINERD__TASK__V2__CONNECT_RESPONSE__INIT;
	char err[TTRPC_REPLY_TEXT_MAX];
	uint32_t pid = 0;
	int32_t code = unpack(call, &containerd__task__v2__connect_request__descriptor, &q, reply);
	int rc;

	if (code)
		return code;
	rc = task_pid(s, q->id, &pid, err, sizeof(err));
	ttrpc_unpacked_free(&q->base);
	if (rc)
		return fail(reply, rc, err);
	a.shim_pid = (uint32_t)getpid();
	a.task_pid = pid;
	a.version = (char *)s->version;
	return answer(reply, &a);
}

HANDLER(h_shutdown)
{
	struct task_service *s = opaque;
	Containerd__Task__V2__ShutdownRequest *q;
	int32_t code = unpack(call, &containerd__task__v2__shutdown_request__descriptor, &q, reply);
	bool now;

	if (code)
		return code;
	now = q->now;
	ttrpc_unpacked_free(&q->base);
	/* Only once no task is left (or asked to, now): the group's other
	 * containers may still be running in this shim. */
	if (now || task_service_empty(s))
		task_api_request_exit(s);
	return TTRPC_OK;
}

HANDLER(h_unimplemented)
{
	(void)opaque;
	snprintf(reply->message, sizeof(reply->message), "%s is not supported by mayfly",
		 call->req->method);
	return TTRPC_UNIMPLEMENTED;
}

static const struct ttrpc_method methods[] = {
	{ SERVICE, "Create", h_create }, { SERVICE, "Start", h_start },
	{ SERVICE, "State", h_state }, { SERVICE, "Delete", h_delete },
	{ SERVICE, "Pids", h_pids }, { SERVICE, "Pause", h_pause },
	{ SERVICE, "Resume", h_resume }, { SERVICE, "Kill", h_kill },
	{ SERVICE, "Exec", h_exec }, { SERVICE, "ResizePty", h_resize },
	{ SERVICE, "CloseIO", h_close_io }, { SERVICE, "Wait", h_wait },
	{ SERVICE, "Stats", h_stats }, { SERVICE, "Connect", h_connect },
	{ SERVICE, "Shutdown", h_shutdown },
	{ SERVICE, "Checkpoint", h_unimplemented }, { SERVICE, "Update", h_unimplemented },
};

const struct ttrpc_method *task_api_methods(size_t *n)
{
	*n = sizeof(methods) / sizeof(methods[0]);
	return methods;
}

/* ---- events to containerd ---- */

/* The event's message, packed into *value. */
static int pack_event(const struct shim_event *e, uint8_t **value, size_t *len)
{
	Google__Protobuf__Timestamp t;
	const char *id = e->exec_id[0] ? e->exec_id : e->container_id;
	char *cid = (char *)e->container_id, *eid = (char *)e->exec_id;

	stamp(&t, &e->at);
	switch (e->kind) {
	case EV_TASK_CREATE: {
		Containerd__Events__TaskCreate m = CONTAINERD__EVENTS__TASK_CREATE__INIT;

		m.container_id = cid;
		m.bundle = (char *)e->bundle;
		m.pid = e->pid;
		return ttrpc_pack(&m.base, value, len);
	}
	case EV_TASK_START: {
		Containerd__Events__TaskStart m = CONTAINERD__EVENTS__TASK_START__INIT;

		m.container_id = cid;
		m.pid = e->pid;
		return ttrpc_pack(&m.base, value, len);
	}
	case EV_TASK_EXIT: {
		Containerd__Events__TaskExit m = CONTAINERD__EVENTS__TASK_EXIT__INIT;

		m.container_id = cid;
		m.id = (char *)id;
		m.pid = e->pid;
		m.exit_status = e->exit_status;
		m.exited_at = &t;
		return ttrpc_pack(&m.base, value, len);
	}
	case EV_TASK_DELETE: {
		Containerd__Events__TaskDelete m = CONTAINERD__EVENTS__TASK_DELETE__INIT;

		m.container_id = cid;
		m.id = (char *)id;
		m.pid = e->pid;
		m.exit_status = e->exit_status;
		m.exited_at = &t;
		return ttrpc_pack(&m.base, value, len);
	}
	case EV_EXEC_ADDED: {
		Containerd__Events__TaskExecAdded m = CONTAINERD__EVENTS__TASK_EXEC_ADDED__INIT;

		m.container_id = cid;
		m.exec_id = eid;
		return ttrpc_pack(&m.base, value, len);
	}
	case EV_EXEC_STARTED: {
		Containerd__Events__TaskExecStarted m = CONTAINERD__EVENTS__TASK_EXEC_STARTED__INIT;

		m.container_id = cid;
		m.exec_id = eid;
		m.pid = e->pid;
		return ttrpc_pack(&m.base, value, len);
	}
	case EV_TASK_PAUSED: {
		Containerd__Events__TaskPaused m = CONTAINERD__EVENTS__TASK_PAUSED__INIT;

		m.container_id = cid;
		return ttrpc_pack(&m.base, value, len);
	}
	case EV_TASK_RESUMED: {
		Containerd__Events__TaskResumed m = CONTAINERD__EVENTS__TASK_RESUMED__INIT;

		m.container_id = cid;
		return ttrpc_pack(&m.base, value, len);
	}
	case EV_TASK_OOM: {
		Containerd__Events__TaskOOM m = CONTAINERD__EVENTS__TASK_OOM__INIT;

		m.container_id = cid;
		return ttrpc_pack(&m.base, value, len);
	}
	default:
		return -EINVAL;
	}
}

int task_api_forward(void *opaque, const char *namespace, const struct shim_event *e)
{
	struct task_api_forwarder *f = opaque;
	Containerd__Services__Events__Ttrpc__V1__ForwardRequest fr =
		CONTAINERD__SERVICES__EVENTS__TTRPC__V1__FORWARD_REQUEST__INIT;
	Containerd__Services__Events__Ttrpc__V1__Envelope env =
		CONTAINERD__SERVICES__EVENTS__TTRPC__V1__ENVELOPE__INIT;
	Google__Protobuf__Any any = GOOGLE__PROTOBUF__ANY__INIT;
	Google__Protobuf__Timestamp t;
	struct ttrpc_kv md = { TTRPC_NS_KEY, namespace };
	struct ttrpc_request req = { .service = TTRPC_EVENTS_SERVICE, .method = TTRPC_EVENTS_FORWARD,
				     .md = &md, .n_md = 1 };
	struct ttrpc_response resp;
	uint8_t *value = NULL, *payload = NULL;
	size_t vlen = 0, plen = 0;
	int rc;

	if (pack_event(e, &value, &vlen))
		return -EINVAL;   /* dropped: it would never encode */
	stamp(&t, &e->at);
	any.type_url = (char *)events_type_url(e->kind);
	any.value.data = value;
	any.value.len = vlen;
	env.timestamp = &t;
	env.namespace_ = (char *)namespace;
	env.topic = (char *)events_topic(e->kind);
	env.event = &any;
	fr.envelope = &env;
	rc = ttrpc_pack(&fr.base, &payload, &plen);
	free(value);
	if (rc)
		return -EINVAL;
	req.payload = payload;
	req.payload_len = plen;
	if (f->fd < 0 && ttrpc_client_connect(f->address, &f->fd))
		f->fd = -1;
	rc = f->fd < 0 ? -ECONNREFUSED : ttrpc_client_call(f->fd, &req, FORWARD_TIMEOUT_MS, &resp);
	free(payload);
	if (rc) {
		/* containerd away (restarting): connect again next time. */
		if (f->fd >= 0)
			close(f->fd);
		f->fd = -1;
		return rc == -EINVAL ? -EIO : rc;
	}
	rc = resp.code == TTRPC_OK ? 0 : -EINVAL;
	if (rc)
		log_warn("containerd refused the event %s: %s %s", events_topic(e->kind),
			 ttrpc_code_name(resp.code), resp.message);
	ttrpc_response_release(&resp);
	return rc;
}

void task_api_request_exit(struct task_service *s)
{
	uint64_t one = 1;

	if (write(s->exit_fd, &one, sizeof(one)) < 0)
		log_warn("cannot ask the shim to end: %s", strerror(errno));
}
