/* test_ttrpc_go.c - the C ttrpc against containerd's own Go ttrpc (ttrpc_peer.go): a Go client calling the C server's Task service, and the C client forwarding events to a Go server. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/clock.h"
#include "shim/cgroups2_metrics.pb-c.h"
#include "shim/containerd_events.pb-c.h"
#include "shim/events_ttrpc.pb-c.h"
#include "shim/task.pb-c.h"
#include "shim/ttrpc_client.h"
#include "ttrpc_fixture.h"

#define TASK "containerd.task.v2.Task"

extern char **environ;

/* The Go peer built by meson, or why there is none. */
static const char *peer_or_skip(void)
{
	const char *peer = getenv("TTRPC_GO_PEER"), *why = getenv("TTRPC_GO_SKIP");

	if (!peer || !peer[0])
		cr_skip_test("no Go ttrpc peer: %s", why ? why : "TTRPC_GO_PEER is unset (run through meson test)");
	return peer;
}

/* Start the peer with `mode` on path: its stdin's write end in *in, its
 * stdout's read end in *out. */
static pid_t spawn_peer(const char *peer, const char *mode, const char *path, int *in, int *out)
{
	char *argv[] = { (char *)peer, (char *)mode, (char *)path, NULL };
	posix_spawn_file_actions_t fa;
	int pin[2], pout[2];
	pid_t pid;

	cr_assert_eq(pipe2(pin, O_CLOEXEC), 0);
	cr_assert_eq(pipe2(pout, O_CLOEXEC), 0);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pin[0], 0);
	posix_spawn_file_actions_adddup2(&fa, pout[1], 1);
	cr_assert_eq(posix_spawn(&pid, peer, &fa, NULL, argv, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	close(pin[0]);
	close(pout[1]);
	*in = pin[1];
	*out = pout[0];
	return pid;
}

/* What fd gives until its end, or until timeout_ms, into buf. */
static void read_all(int fd, char *buf, size_t len, int timeout_ms)
{
	uint64_t end = clock_now_ns() + (uint64_t)timeout_ms * 1000000;
	size_t got = 0;

	while (got < len - 1 && clock_now_ns() < end) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, 100) <= 0)
			continue;
		n = read(fd, buf + got, len - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
}

/* One line from fd (without its newline). */
static void read_line(int fd, char *buf, size_t len, int timeout_ms)
{
	uint64_t end = clock_now_ns() + (uint64_t)timeout_ms * 1000000;
	size_t got = 0;

	while (got < len - 1) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		cr_assert_lt(clock_now_ns(), end, "no line from the Go peer (so far: '%.*s')", (int)got, buf);
		if (poll(&p, 1, 100) <= 0)
			continue;
		cr_assert_eq(read(fd, buf + got, 1), 1, "the Go peer ended");
		if (buf[got] == '\n')
			break;
		got++;
	}
	buf[got] = '\0';
}

/* The C server's Task service, as a test shim: Wait parks until Kill. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int parked_waits, killed;

static int32_t reply_msg(struct ttrpc_reply *reply, const ProtobufCMessage *m)
{
	return ttrpc_pack(m, &reply->payload, &reply->len) ? TTRPC_INTERNAL : TTRPC_OK;
}

static int32_t on_connect(void *o, const struct ttrpc_call *call, struct ttrpc_reply *reply)
{
	Containerd__Task__V2__ConnectResponse r = CONTAINERD__TASK__V2__CONNECT_RESPONSE__INIT;

	(void)o;
	(void)call;
	r.shim_pid = (uint32_t)getpid();
	r.task_pid = 42;
	r.version = "mayfly-test";
	return reply_msg(reply, &r.base);
}

static int32_t on_state(void *o, const struct ttrpc_call *call, struct ttrpc_reply *reply)
{
	Containerd__Task__V2__StateResponse r = CONTAINERD__TASK__V2__STATE_RESPONSE__INIT;
	Google__Protobuf__Timestamp ts = GOOGLE__PROTOBUF__TIMESTAMP__INIT;
	Containerd__Task__V2__StateRequest *req;
	ProtobufCMessage *m;
	const char *ns = ttrpc_request_namespace(call->req), *why;
	char bundle[64];
	int32_t code;

	(void)o;
	if (ttrpc_unpack(&containerd__task__v2__state_request__descriptor, call->req->payload,
			 call->req->payload_len, &m, &why))
		return TTRPC_INVALID_ARGUMENT;
	req = (Containerd__Task__V2__StateRequest *)m;
	snprintf(bundle, sizeof(bundle), "ns=%s deadline=%d", ns ? ns : "-", call->deadline_ns != 0);
	r.id = req->id;
	r.exec_id = req->exec_id;
	r.bundle = bundle;
	r.pid = 4242;
	r.status = CONTAINERD__V1__TYPES__STATUS__RUNNING;
	r.terminal = 1;
	ts.seconds = 1767225600;
	r.exited_at = &ts;
	code = reply_msg(reply, &r.base);
	ttrpc_unpacked_free(m);
	return code;
}

static int32_t on_delete(void *o, const struct ttrpc_call *call, struct ttrpc_reply *reply)
{
	(void)o;
	(void)call;
	snprintf(reply->message, sizeof(reply->message), "container missing: not found");
	return ttrpc_code_from_errno(-ENOENT);
}

static int32_t on_wait(void *o, const struct ttrpc_call *call, struct ttrpc_reply *reply)
{
	Containerd__Task__V2__WaitResponse r = CONTAINERD__TASK__V2__WAIT_RESPONSE__INIT;
	Google__Protobuf__Timestamp ts = GOOGLE__PROTOBUF__TIMESTAMP__INIT;
	bool gone = false;

	(void)o;
	pthread_mutex_lock(&lock);
	parked_waits++;
	while (!killed && !gone) {
		struct pollfd p = { .fd = call->cancel_fd, .events = POLLIN };

		pthread_mutex_unlock(&lock);
		gone = poll(&p, 1, 5) == 1;
		pthread_mutex_lock(&lock);
	}
	parked_waits--;
	pthread_mutex_unlock(&lock);
	if (gone)
		return TTRPC_CANCELLED;
	r.exit_status = 137;
	ts.seconds = 1767225601;
	r.exited_at = &ts;
	return reply_msg(reply, &r.base);
}

static int32_t on_pids(void *o, const struct ttrpc_call *call, struct ttrpc_reply *reply)
{
	Containerd__Task__V2__PidsResponse r = CONTAINERD__TASK__V2__PIDS_RESPONSE__INIT;
	Containerd__V1__Types__ProcessInfo pi[4], *pp[4];
	size_t n;

	(void)o;
	(void)call;
	pthread_mutex_lock(&lock);
	n = parked_waits < 4 ? (size_t)parked_waits : 4;   /* one process per parked Wait */
	pthread_mutex_unlock(&lock);
	for (size_t i = 0; i < n; i++) {
		containerd__v1__types__process_info__init(&pi[i]);
		pi[i].pid = (uint32_t)(100 + i);
		pp[i] = &pi[i];
	}
	r.n_processes = n;
	r.processes = pp;
	return reply_msg(reply, &r.base);
}

static int32_t on_start(void *o, const struct ttrpc_call *call, struct ttrpc_reply *reply)
{
	Containerd__Task__V2__StartResponse r = CONTAINERD__TASK__V2__START_RESPONSE__INIT;
	Containerd__Task__V2__StartRequest *req;
	ProtobufCMessage *m;
	const char *why;

	(void)o;
	if (ttrpc_unpack(&containerd__task__v2__start_request__descriptor, call->req->payload,
			 call->req->payload_len, &m, &why))
		return TTRPC_INVALID_ARGUMENT;
	req = (Containerd__Task__V2__StartRequest *)m;
	r.pid = req->id[0] == 'p' ? 1000 + (uint32_t)atoi(req->id + 1) : 4242;
	ttrpc_unpacked_free(m);
	return reply_msg(reply, &r.base);
}

static int32_t on_kill(void *o, const struct ttrpc_call *call, struct ttrpc_reply *reply)
{
	(void)o;
	(void)call;
	(void)reply;
	pthread_mutex_lock(&lock);
	killed = 1;
	pthread_mutex_unlock(&lock);
	return TTRPC_OK;   /* google.protobuf.Empty: no bytes */
}

static int32_t on_stats(void *o, const struct ttrpc_call *call, struct ttrpc_reply *reply)
{
	Io__Containerd__Cgroups__V2__Metrics met = IO__CONTAINERD__CGROUPS__V2__METRICS__INIT;
	Io__Containerd__Cgroups__V2__PidsStat pids = IO__CONTAINERD__CGROUPS__V2__PIDS_STAT__INIT;
	Io__Containerd__Cgroups__V2__MemoryStat mem = IO__CONTAINERD__CGROUPS__V2__MEMORY_STAT__INIT;
	Containerd__Task__V2__StatsResponse r = CONTAINERD__TASK__V2__STATS_RESPONSE__INIT;
	Google__Protobuf__Any any = GOOGLE__PROTOBUF__ANY__INIT;
	int32_t code;

	(void)o;
	(void)call;
	pids.current = 3;
	mem.usage = 5242880;
	met.pids = &pids;
	met.memory = &mem;
	any.type_url = "io.containerd.cgroups.v2.Metrics";
	if (ttrpc_pack(&met.base, &any.value.data, &any.value.len))
		return TTRPC_INTERNAL;
	r.stats = &any;
	code = reply_msg(reply, &r.base);
	free(any.value.data);
	return code;
}

static int32_t on_echo(void *o, const struct ttrpc_call *call, struct ttrpc_reply *reply)
{
	(void)o;
	reply->payload = malloc(call->req->payload_len);
	memcpy(reply->payload, call->req->payload, call->req->payload_len);
	reply->len = call->req->payload_len;
	return TTRPC_OK;
}

static const struct ttrpc_method task_methods[] = {
	{ TASK, "Connect", on_connect }, { TASK, "State", on_state }, { TASK, "Delete", on_delete },
	{ TASK, "Wait", on_wait }, { TASK, "Pids", on_pids }, { TASK, "Start", on_start },
	{ TASK, "Kill", on_kill }, { TASK, "Stats", on_stats }, { "mayfly.test.v1.Echo", "Echo", on_echo },
};

/* The Go client's lines, one per scenario (ttrpc_peer.go). */
static const char *const scenarios[] = {
	"ok connect\n", "ok state with metadata and deadline\n", "ok error status\n",
	"ok unimplemented\n", "ok a parked Wait blocks neither Start nor Kill, on one connection or two\n",
	"ok 64 concurrent calls\n", "ok stats as cgroups v2 metrics\n", "ok 3 MiB each way\n",
	"ok over 4 MiB refused",
};

Test(ttrpc_go, go_client_calls_the_c_server, .timeout = 170)
{
	const char *peer = peer_or_skip();
	struct ttrpc_server_config cfg = { .methods = task_methods, .n_methods = 9 };
	struct ttrpc_fixture f;
	static char out[8192];
	int in, rd, status;
	pid_t pid;

	ttrpc_fixture_start(&f, &cfg);
	pid = spawn_peer(peer, "client", f.path, &in, &rd);
	read_all(rd, out, sizeof(out), 120000);
	if (waitpid(pid, &status, WNOHANG) == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
	close(in);
	close(rd);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the Go client failed:\n%s", out);
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
		cr_assert_neq(strstr(out, scenarios[i]), NULL, "no '%s' in:\n%s", scenarios[i], out);
	ttrpc_fixture_settle(&f, 0, 0, 5000);
	ttrpc_fixture_stop(&f, 2000, 0);
}

/* A TaskExit in its envelope, forwarded to the Go server. */
static int forward(int fd, const char *topic, int timeout_ms, struct ttrpc_response *resp)
{
	static const struct ttrpc_kv md[] = { { TTRPC_NS_KEY, "k8s.io" } };
	Containerd__Services__Events__Ttrpc__V1__ForwardRequest req =
		CONTAINERD__SERVICES__EVENTS__TTRPC__V1__FORWARD_REQUEST__INIT;
	Containerd__Services__Events__Ttrpc__V1__Envelope env =
		CONTAINERD__SERVICES__EVENTS__TTRPC__V1__ENVELOPE__INIT;
	Containerd__Events__TaskExit ex = CONTAINERD__EVENTS__TASK_EXIT__INIT;
	Google__Protobuf__Timestamp ts = GOOGLE__PROTOBUF__TIMESTAMP__INIT;
	Google__Protobuf__Any any = GOOGLE__PROTOBUF__ANY__INIT;
	struct ttrpc_request r = {
		.service = TTRPC_EVENTS_SERVICE, .method = TTRPC_EVENTS_FORWARD, .md = md, .n_md = 1,
	};
	uint8_t *payload;
	int rc;

	ex.container_id = "c1";
	ex.id = "c1";
	ex.pid = 4242;
	ex.exit_status = 137;
	cr_assert_eq(ttrpc_pack(&ex.base, &any.value.data, &any.value.len), 0);
	any.type_url = "containerd.events.TaskExit";
	ts.seconds = 1767225600;
	ts.nanos = 5;
	env.timestamp = &ts;
	env.namespace_ = "k8s.io";
	env.topic = (char *)topic;
	env.event = &any;
	req.envelope = &env;
	cr_assert_eq(ttrpc_pack(&req.base, &payload, &r.payload_len), 0);
	r.payload = payload;
	rc = ttrpc_client_call(fd, &r, timeout_ms, resp);
	free(payload);
	free(any.value.data);
	return rc;
}

Test(ttrpc_go, c_client_forwards_to_a_go_server, .timeout = 170)
{
	const char *peer = peer_or_skip();
	struct ttrpc_request nope = { .service = TTRPC_EVENTS_SERVICE, .method = "Publish" };
	struct ttrpc_response resp;
	char dir[] = "/tmp/mayfly-ttrpc-go.XXXXXX", path[128], line[512];
	int in, rd, fd, status;
	pid_t pid;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/containerd.sock.ttrpc", dir);
	pid = spawn_peer(peer, "serve", path, &in, &rd);
	read_line(rd, line, sizeof(line), 120000);
	cr_assert_str_eq(line, "ready");
	cr_assert_eq(ttrpc_client_connect(path, &fd), 0);

	cr_assert_eq(forward(fd, "/tasks/exit", 5000, &resp), 0);
	cr_assert_eq(resp.code, TTRPC_OK, "%s", resp.message);
	cr_assert_eq(resp.payload_len, 0, "google.protobuf.Empty");
	ttrpc_response_release(&resp);
	read_line(rd, line, sizeof(line), 5000);
	cr_assert_str_eq(line, "forward ns=k8s.io md-ns=[k8s.io] deadline=true topic=/tasks/exit "
			       "type=containerd.events.TaskExit ts=1767225600.000000005 exit=c1/c1/4242/137");

	cr_assert_eq(forward(fd, "/fail", 5000, &resp), 0, "a second call on the connection");
	cr_assert_eq(resp.code, TTRPC_FAILED_PRECONDITION);
	cr_assert_str_eq(resp.message, "refused /fail");
	ttrpc_response_release(&resp);
	read_line(rd, line, sizeof(line), 5000);

	cr_assert_eq(ttrpc_client_call(fd, &nope, 5000, &resp), 0);
	cr_assert_eq(resp.code, TTRPC_UNIMPLEMENTED);
	cr_assert_str_eq(resp.message, "method Publish", "ttrpc's Go server's words");
	ttrpc_response_release(&resp);
	nope.service = "containerd.services.events.v1.Events";
	cr_assert_eq(ttrpc_client_call(fd, &nope, 5000, &resp), 0);
	cr_assert_str_eq(resp.message, "service containerd.services.events.v1.Events");
	ttrpc_response_release(&resp);

	cr_assert_eq(forward(fd, "/slow", 300, &resp), -ETIMEDOUT, "bounded by its timeout");
	close(fd);

	close(in);   /* the peer's end */
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(rd);
	unlink(path);
	rmdir(dir);
}
