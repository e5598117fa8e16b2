/* test_ttrpc_vectors.c - bytes made by a tool we did not write: protoc --encode of fixtures/ttrpc/ text messages decoded by the C, and the C's bytes read back by protoc --decode. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "protoc_run.h"
#include "shim/cgroups2_metrics.pb-c.h"
#include "shim/containerd_events.pb-c.h"
#include "shim/events_ttrpc.pb-c.h"
#include "shim/task.pb-c.h"
#include "shim/ttrpc.h"

/* TTRPC_VECTORS/ttrpc-NAME.bin, made at build time by
 * protoc --encode=TYPE < fixtures/ttrpc/NAME.txt (tests/unit/meson.build). */
static uint8_t *vector(const char *name, size_t *len)
{
	const char *dir = getenv("TTRPC_VECTORS");
	char path[512];
	uint8_t *p;
	FILE *f;
	long n;

	cr_assert_not_null(dir, "TTRPC_VECTORS is unset: run through meson test");
	snprintf(path, sizeof(path), "%s/ttrpc-%s.bin", dir, name);
	f = fopen(path, "rb");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	p = malloc(n ? (size_t)n : 1);
	cr_assert_eq(fread(p, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return p;
}

/* The vector, unpacked as descriptor d, must pack back to its very bytes
 * (protoc and protobuf-c both write fields in number order). */
static ProtobufCMessage *unpack_vector(const char *name, const ProtobufCMessageDescriptor *d)
{
	ProtobufCMessage *m;
	const char *why = "";
	uint8_t *p, *again;
	size_t n, n2;

	p = vector(name, &n);
	cr_assert_eq(ttrpc_unpack(d, p, n, &m, &why), 0, "%s: %s", name, why);
	cr_assert_eq(ttrpc_pack(m, &again, &n2), 0);
	cr_assert_eq(n2, n, "%s: %zu bytes packed, protoc made %zu", name, n2, n);
	cr_assert_arr_eq(again, p, n);
	free(again);
	free(p);
	return m;
}

Test(ttrpc_vectors, request_from_protoc)
{
	Containerd__Task__V2__StartRequest *start;
	struct ttrpc_request r;
	ProtobufCMessage *m;
	const char *why = "";
	uint8_t *p, *frame;
	size_t n, len;

	p = vector("request_start", &n);
	cr_assert_eq(ttrpc_request_decode(&r, p, n, &why), 0, "%s", why);
	cr_assert_str_eq(r.service, "containerd.task.v2.Task");
	cr_assert_str_eq(r.method, "Start");
	cr_assert_eq(r.timeout_ns, 5000000000);
	cr_assert_eq(r.n_md, 2);
	cr_assert_str_eq(ttrpc_request_namespace(&r), "k8s.io");
	cr_assert_str_eq(r.md[1].key, "x-trace");
	cr_assert_str_eq(r.md[1].value, "");
	cr_assert_eq(ttrpc_unpack(&containerd__task__v2__start_request__descriptor, r.payload,
				  r.payload_len, &m, &why), 0);
	start = (Containerd__Task__V2__StartRequest *)m;
	cr_assert_str_eq(start->id, "c1");
	cr_assert_str_eq(start->exec_id, "e1");
	ttrpc_unpacked_free(m);
	/* The C's encoding of the same request: protoc's bytes exactly. */
	cr_assert_eq(ttrpc_request_encode(&r, 1, &frame, &len), 0);
	cr_assert_eq(len - TTRPC_HEADER_LEN, n);
	cr_assert_arr_eq(frame + TTRPC_HEADER_LEN, p, n);
	free(frame);
	ttrpc_request_release(&r);
	free(p);

	p = vector("request_minimal", &n);
	cr_assert_eq(ttrpc_request_decode(&r, p, n, &why), 0, "%s", why);
	cr_assert_str_eq(r.method, "Connect");
	cr_assert_eq(r.payload_len, 0);
	cr_assert_null(r.payload);
	cr_assert_eq(r.n_md, 0);
	cr_assert_eq(r.timeout_ns, 0);
	cr_assert_null(ttrpc_request_namespace(&r));
	ttrpc_request_release(&r);
	free(p);

	p = vector("request_nul", &n);
	cr_assert_eq(ttrpc_request_decode(&r, p, n, &why), -EBADMSG, "a NUL in the method");
	free(p);
}

Test(ttrpc_vectors, responses_from_protoc)
{
	struct ttrpc_response r, ok = { .code = TTRPC_OK, .payload = (const uint8_t *)"\x08*",
					.payload_len = 2 };
	const char *why = "";
	uint8_t *p, *frame;
	size_t n, len;

	p = vector("response_ok", &n);
	cr_assert_eq(ttrpc_response_decode(&r, p, n, &why), 0, "%s", why);
	cr_assert_eq(r.code, TTRPC_OK);
	cr_assert_eq(r.payload_len, 2);
	cr_assert_eq(r.payload[1], 42);
	ttrpc_response_release(&r);
	cr_assert_eq(ttrpc_response_encode(&ok, 3, &frame, &len), 0);
	cr_assert_eq(len - TTRPC_HEADER_LEN, n);
	cr_assert_arr_eq(frame + TTRPC_HEADER_LEN, p, n, "the C's OK is protoc's");
	free(frame);
	free(p);

	p = vector("response_error", &n);
	cr_assert_eq(ttrpc_response_decode(&r, p, n, &why), 0, "%s", why);
	cr_assert_eq(r.code, TTRPC_NOT_FOUND);
	cr_assert_str_eq(r.message, "container c9: not found");
	cr_assert_eq(r.payload_len, 0);
	ttrpc_response_release(&r);
	free(p);

	p = vector("response_bad_code", &n);
	cr_assert_eq(ttrpc_response_decode(&r, p, n, &why), 0, "%s", why);
	cr_assert_eq(r.code, TTRPC_UNKNOWN, "99 is no code");
	cr_assert_str_eq(r.message, "from the future");
	ttrpc_response_release(&r);
	free(p);
}

Test(ttrpc_vectors, task_messages)
{
	Containerd__Task__V2__CreateTaskRequest *c;
	Containerd__Task__V2__StateResponse *st;
	Containerd__Task__V2__UpdateTaskRequest *u;
	Containerd__Task__V2__PidsResponse *pids;
	ProtobufCMessage *m;

	m = unpack_vector("create_task_request", &containerd__task__v2__create_task_request__descriptor);
	c = (Containerd__Task__V2__CreateTaskRequest *)m;
	cr_assert_str_eq(c->id, "c1");
	cr_assert_str_eq(c->bundle, "/run/containerd/io.containerd.runtime.v2.task/k8s.io/c1");
	cr_assert_eq(c->n_rootfs, 1);
	cr_assert_str_eq(c->rootfs[0]->type, "overlay");
	cr_assert_eq(c->rootfs[0]->n_options, 4);
	cr_assert_str_eq(c->rootfs[0]->options[3], "lowerdir=/var/lib/containerd/snapshots/6/fs");
	cr_assert_eq(c->terminal, 0);
	cr_assert_str_eq(c->stdin, "");
	cr_assert_str_eq(c->stderr, "/run/containerd/fifo/1/c1-stderr");
	cr_assert_not_null(c->options);
	cr_assert_str_eq(c->options->type_url, "containerd.runc.v1.Options");
	cr_assert_eq(c->options->value.len, 2);
	ttrpc_unpacked_free(m);

	m = unpack_vector("state_response", &containerd__task__v2__state_response__descriptor);
	st = (Containerd__Task__V2__StateResponse *)m;
	cr_assert_eq(st->pid, 4242);
	cr_assert_eq(st->status, CONTAINERD__V1__TYPES__STATUS__RUNNING);
	cr_assert_eq(st->status, 2, "task.proto: RUNNING = 2");
	cr_assert_eq(st->terminal, 1);
	cr_assert_eq(st->exited_at->seconds, -62135596800, "Go's zero time");
	cr_assert_str_eq(st->exec_id, "e1");
	ttrpc_unpacked_free(m);

	m = unpack_vector("update_task_request", &containerd__task__v2__update_task_request__descriptor);
	u = (Containerd__Task__V2__UpdateTaskRequest *)m;
	cr_assert_eq(u->n_annotations, 2);
	cr_assert_str_eq(u->annotations[1]->key, "io.mayfly.allow-net");
	cr_assert_str_eq(u->annotations[1]->value, "pypi.org");
	cr_assert_str_eq(u->resources->type_url, "opencontainers.runtime-spec.1.LinuxResources");
	ttrpc_unpacked_free(m);

	m = unpack_vector("pids_response", &containerd__task__v2__pids_response__descriptor);
	pids = (Containerd__Task__V2__PidsResponse *)m;
	cr_assert_eq(pids->n_processes, 2);
	cr_assert_eq(pids->processes[1]->pid, 77);
	cr_assert_null(pids->processes[0]->info);
	cr_assert_str_eq(pids->processes[1]->info->type_url, "x");
	ttrpc_unpacked_free(m);
}

Test(ttrpc_vectors, events_and_metrics)
{
	Containerd__Services__Events__Ttrpc__V1__ForwardRequest *fwd;
	Containerd__Events__TaskExit *exit_ev;
	Io__Containerd__Cgroups__V2__Metrics *met;
	ProtobufCMessage *m, *ev;
	const char *why = "";
	uint8_t *bare;
	size_t n;

	m = unpack_vector("task_exit", &containerd__events__task_exit__descriptor);
	exit_ev = (Containerd__Events__TaskExit *)m;
	cr_assert_str_eq(exit_ev->container_id, "c1");
	cr_assert_eq(exit_ev->pid, 4242);
	cr_assert_eq(exit_ev->exit_status, 137);
	cr_assert_eq(exit_ev->exited_at->seconds, 1767225600);
	cr_assert_eq(exit_ev->exited_at->nanos, 5);
	ttrpc_unpacked_free(m);

	m = unpack_vector("forward_request",
			  &containerd__services__events__ttrpc__v1__forward_request__descriptor);
	fwd = (Containerd__Services__Events__Ttrpc__V1__ForwardRequest *)m;
	cr_assert_str_eq(fwd->envelope->namespace_, "k8s.io");
	cr_assert_str_eq(fwd->envelope->topic, "/tasks/exit");
	cr_assert_eq(fwd->envelope->timestamp->nanos, 123456789);
	cr_assert_str_eq(fwd->envelope->event->type_url, "containerd.events.TaskExit");
	/* The hand-escaped event is protoc's own TaskExit. */
	bare = vector("task_exit_bare", &n);
	cr_assert_eq(fwd->envelope->event->value.len, n);
	cr_assert_arr_eq(fwd->envelope->event->value.data, bare, n);
	free(bare);
	cr_assert_eq(ttrpc_unpack(&containerd__events__task_exit__descriptor,
				  fwd->envelope->event->value.data, fwd->envelope->event->value.len,
				  &ev, &why), 0, "%s", why);
	cr_assert_eq(((Containerd__Events__TaskExit *)ev)->exit_status, 137);
	cr_assert_null(((Containerd__Events__TaskExit *)ev)->exited_at);
	ttrpc_unpacked_free(ev);
	ttrpc_unpacked_free(m);

	m = unpack_vector("metrics", &io__containerd__cgroups__v2__metrics__descriptor);
	met = (Io__Containerd__Cgroups__V2__Metrics *)m;
	cr_assert_eq(met->pids->current, 3);
	cr_assert_eq(met->pids->limit, 128);
	cr_assert_eq(met->cpu->usage_usec, 1500000);
	cr_assert_eq(met->cpu->throttled_usec, 3000);
	cr_assert_eq(met->memory->usage, 5242880);
	cr_assert_eq(met->memory->usage_limit, 268435456);
	cr_assert_eq(met->memory->max_usage, 6291456);
	ttrpc_unpacked_free(m);
}

/* protoc --decode=TYPE of n bytes: its text, malloc'd. */
static char *protoc_decode(const char *type, const uint8_t *p, size_t n)
{
	static const char *const dirs[] = { "SHIM_PROTO_DIR", "COMMON_PROTO_DIR", NULL };
	size_t len;

	return (char *)protoc_run("decode", type, dirs, p, n, &len);
}

Test(ttrpc_vectors, protoc_reads_the_c)
{
	static const struct ttrpc_kv md[] = { { TTRPC_NS_KEY, "k8s.io" } };
	struct ttrpc_request req = {
		.service = "containerd.task.v2.Task", .method = "Wait",
		.payload = (const uint8_t *)"\n\002c1", .payload_len = 4, .timeout_ns = 250, .md = md,
		.n_md = 1,
	};
	struct ttrpc_response resp = { .code = TTRPC_ALREADY_EXISTS, .message = "task c1 exists" };
	Containerd__Events__TaskOOM oom = CONTAINERD__EVENTS__TASK_OOM__INIT;
	uint8_t *frame, *p;
	size_t len;
	char *text;

	cr_assert_eq(ttrpc_request_encode(&req, 1, &frame, &len), 0);
	text = protoc_decode("ttrpc.Request", frame + TTRPC_HEADER_LEN, len - TTRPC_HEADER_LEN);
	cr_assert_str_eq(text, "service: \"containerd.task.v2.Task\"\n"
			       "method: \"Wait\"\n"
			       "payload: \"\\n\\002c1\"\n"
			       "timeout_nano: 250\n"
			       "metadata {\n"
			       "  key: \"containerd-namespace-ttrpc\"\n"
			       "  value: \"k8s.io\"\n"
			       "}\n");
	free(text);
	free(frame);

	cr_assert_eq(ttrpc_response_encode(&resp, 1, &frame, &len), 0);
	text = protoc_decode("ttrpc.Response", frame + TTRPC_HEADER_LEN, len - TTRPC_HEADER_LEN);
	cr_assert_str_eq(text, "status {\n  code: 6\n  message: \"task c1 exists\"\n}\n");
	free(text);
	free(frame);

	oom.container_id = "c1";
	cr_assert_eq(ttrpc_pack(&oom.base, &p, &len), 0);
	text = protoc_decode("containerd.events.TaskOOM", p, len);
	cr_assert_str_eq(text, "container_id: \"c1\"\n");
	free(text);
	free(p);
}
