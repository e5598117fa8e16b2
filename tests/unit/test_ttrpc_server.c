/* test_ttrpc_server.c - the ttrpc server and client of vmm/shim/: calls side by side, a parked call that blocks nothing, a peer that lies, floods or leaves, a stop that waits within its bound. */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dir_count.h"
#include "lib/clock.h"
#include "shim/ttrpc_client.h"
#include "ttrpc_fixture.h"

#define SVC "mayfly.test.v1.T"

/* What the handlers share with the test. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int parked, released, cancelled;

static void state_reset(void)
{
	pthread_mutex_lock(&lock);
	parked = released = cancelled = 0;
	pthread_mutex_unlock(&lock);
}

static int32_t echo(void *opaque, const struct ttrpc_call *call, struct ttrpc_reply *reply)
{
	(void)opaque;
	if (call->req->payload_len) {
		reply->payload = malloc(call->req->payload_len);
		memcpy(reply->payload, call->req->payload, call->req->payload_len);
		reply->len = call->req->payload_len;
	}
	return TTRPC_OK;
}

/* Parks until the test releases it or the call is cancelled (the peer
 * gone, the server stopping), as Task.Wait parks until a process exits. */
static int32_t park(void *opaque, const struct ttrpc_call *call, struct ttrpc_reply *reply)
{
	bool gone = false;

	(void)opaque;
	pthread_mutex_lock(&lock);
	parked++;
	pthread_cond_broadcast(&cond);
	while (!released && !gone) {
		struct pollfd p = { .fd = call->cancel_fd, .events = POLLIN };

		pthread_mutex_unlock(&lock);
		gone = poll(&p, 1, 5) == 1;
		pthread_mutex_lock(&lock);
	}
	cancelled += gone;
	parked--;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	if (gone) {
		snprintf(reply->message, sizeof(reply->message), "cancelled");
		return TTRPC_CANCELLED;
	}
	reply->payload = (uint8_t *)strdup("woke");
	reply->len = 4;
	return TTRPC_OK;
}

static int32_t fail(void *opaque, const struct ttrpc_call *call, struct ttrpc_reply *reply)
{
	(void)opaque;
	(void)call;
	reply->payload = malloc(8);   /* dropped: not sent with an error */
	reply->len = 8;
	snprintf(reply->message, sizeof(reply->message), "no such thing");
	return TTRPC_NOT_FOUND;
}

static int32_t meta(void *opaque, const struct ttrpc_call *call, struct ttrpc_reply *reply)
{
	const char *ns = ttrpc_request_namespace(call->req);
	char text[128];

	(void)opaque;
	snprintf(text, sizeof(text), "ns=%s deadline=%d", ns ? ns : "-", call->deadline_ns != 0);
	reply->payload = (uint8_t *)strdup(text);
	reply->len = strlen(text);
	return TTRPC_OK;
}

static int32_t not_a_code(void *opaque, const struct ttrpc_call *call, struct ttrpc_reply *reply)
{
	(void)opaque;
	(void)call;
	(void)reply;
	return 77;
}

static int32_t too_big(void *opaque, const struct ttrpc_call *call, struct ttrpc_reply *reply)
{
	(void)opaque;
	(void)call;
	reply->len = TTRPC_MESSAGE_MAX + 1;
	reply->payload = calloc(1, reply->len);
	return TTRPC_OK;
}

/* Ignores its cancel_fd: the stop's bound must hold anyway. */
static int32_t stubborn(void *opaque, const struct ttrpc_call *call, struct ttrpc_reply *reply)
{
	(void)opaque;
	(void)call;
	(void)reply;
	usleep(400 * 1000);
	return TTRPC_OK;
}

static const struct ttrpc_method methods[] = {
	{ SVC, "Echo", echo }, { SVC, "Park", park }, { SVC, "Fail", fail }, { SVC, "Meta", meta },
	{ SVC, "Bad", not_a_code }, { SVC, "Big", too_big }, { SVC, "Stubborn", stubborn },
};

static struct ttrpc_server_config config(void)
{
	return (struct ttrpc_server_config){ .methods = methods, .n_methods = 7 };
}

static void wait_parked(int n)
{
	uint64_t end = clock_now_ns() + 5000000000ULL;

	pthread_mutex_lock(&lock);
	while (parked != n) {
		pthread_mutex_unlock(&lock);
		cr_assert_lt(clock_now_ns(), end, "%d calls parked, not %d", parked, n);
		usleep(2000);
		pthread_mutex_lock(&lock);
	}
	pthread_mutex_unlock(&lock);
}

static void release_parked(void)
{
	pthread_mutex_lock(&lock);
	released = 1;
	pthread_mutex_unlock(&lock);
}

/* One call through the C client: its code, the payload as a string. */
static int32_t call(int fd, const char *method, const char *payload, const struct ttrpc_kv *md,
		    size_t n_md, char *out, size_t outlen)
{
	struct ttrpc_request r = {
		.service = SVC, .method = method, .payload = (const uint8_t *)payload,
		.payload_len = payload ? strlen(payload) : 0, .md = md, .n_md = n_md,
	};
	struct ttrpc_response resp;
	int32_t code;

	cr_assert_eq(ttrpc_client_call(fd, &r, 5000, &resp), 0, "%s", method);
	code = resp.code;
	snprintf(out, outlen, "%.*s", code ? (int)strlen(resp.message) : (int)resp.payload_len,
		 code ? resp.message : (const char *)resp.payload);
	ttrpc_response_release(&resp);
	return code;
}

Test(ttrpc_server, unary_calls)
{
	static const struct ttrpc_kv md[] = { { TTRPC_NS_KEY, "k8s.io" } };
	struct ttrpc_fixture f;
	struct ttrpc_request r = { .service = "nope.v1.X", .method = "Echo" };
	struct ttrpc_response resp;
	char out[256];
	int fd;

	ttrpc_fixture_start(&f, &(struct ttrpc_server_config){ .methods = methods, .n_methods = 7 });
	fd = ttrpc_fixture_connect(&f);
	cr_assert_eq(call(fd, "Echo", "hello", NULL, 0, out, sizeof(out)), TTRPC_OK);
	cr_assert_str_eq(out, "hello");
	cr_assert_eq(call(fd, "Echo", NULL, NULL, 0, out, sizeof(out)), TTRPC_OK);
	cr_assert_str_eq(out, "");
	cr_assert_eq(call(fd, "Fail", NULL, NULL, 0, out, sizeof(out)), TTRPC_NOT_FOUND);
	cr_assert_str_eq(out, "no such thing");
	cr_assert_eq(call(fd, "Meta", NULL, md, 1, out, sizeof(out)), TTRPC_OK);
	cr_assert_str_eq(out, "ns=k8s.io deadline=1", "the client's timeout is the call's deadline");
	cr_assert_eq(call(fd, "Nope", NULL, NULL, 0, out, sizeof(out)), TTRPC_UNIMPLEMENTED);
	cr_assert_str_eq(out, "method Nope");
	cr_assert_eq(ttrpc_client_call(fd, &r, 5000, &resp), 0);
	cr_assert_eq(resp.code, TTRPC_UNIMPLEMENTED);
	cr_assert_str_eq(resp.message, "service nope.v1.X");
	ttrpc_response_release(&resp);
	cr_assert_eq(call(fd, "Bad", NULL, NULL, 0, out, sizeof(out)), TTRPC_INTERNAL);
	cr_assert_eq(call(fd, "Big", NULL, NULL, 0, out, sizeof(out)), TTRPC_RESOURCE_EXHAUSTED);
	cr_assert_eq(call(fd, "Echo", "still here", NULL, 0, out, sizeof(out)), TTRPC_OK);
	close(fd);
	ttrpc_fixture_settle(&f, 0, 0, 2000);
	ttrpc_fixture_stop(&f, 1000, 0);
}

Test(ttrpc_server, a_parked_call_blocks_nothing)
{
	struct ttrpc_fixture f;
	struct ttrpc_response resp;
	struct ttrpc_server_config cfg = config();
	int a, b;

	state_reset();
	ttrpc_fixture_start(&f, &cfg);
	a = ttrpc_fixture_connect(&f);
	b = ttrpc_fixture_connect(&f);
	ttrpc_fixture_send(a, 1, SVC, "Park", NULL, 0);
	ttrpc_fixture_send(b, 1, SVC, "Park", NULL, 0);
	wait_parked(2);
	/* The same connection and another: answered while both park. */
	ttrpc_fixture_send(a, 3, SVC, "Echo", "x", 1);
	cr_assert_eq(ttrpc_fixture_response(a, 2000, &resp), 3);
	cr_assert_eq(resp.code, TTRPC_OK);
	ttrpc_response_release(&resp);
	ttrpc_fixture_send(b, 5, SVC, "Echo", "y", 1);
	cr_assert_eq(ttrpc_fixture_response(b, 2000, &resp), 5);
	ttrpc_response_release(&resp);
	release_parked();
	cr_assert_eq(ttrpc_fixture_response(a, 2000, &resp), 1);
	cr_assert_eq(resp.payload_len, 4, "woke");
	ttrpc_response_release(&resp);
	cr_assert_eq(ttrpc_fixture_response(b, 2000, &resp), 1);
	ttrpc_response_release(&resp);
	close(a);
	close(b);
	ttrpc_fixture_stop(&f, 1000, 0);
}

Test(ttrpc_server, stream_ids_reused_and_even)
{
	struct ttrpc_fixture f;
	struct ttrpc_response resp;
	struct ttrpc_server_config cfg = config();
	int fd, seen = 0;

	ttrpc_fixture_start(&f, &cfg);
	fd = ttrpc_fixture_connect(&f);
	ttrpc_fixture_send(fd, 5, SVC, "Echo", "one", 3);
	ttrpc_fixture_send(fd, 5, SVC, "Echo", "two", 3);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(ttrpc_fixture_response(fd, 2000, &resp), 5);
		cr_assert_eq(resp.payload_len, 3);
		seen |= resp.payload[0] == 'o' ? 1 : 2;
		ttrpc_response_release(&resp);
	}
	cr_assert_eq(seen, 3, "each request answered once, on its stream id");
	ttrpc_fixture_send(fd, 4, SVC, "Echo", "even", 4);
	cr_assert_eq(ttrpc_fixture_response(fd, 2000, &resp), 4);
	cr_assert_eq(resp.code, TTRPC_INVALID_ARGUMENT);
	cr_assert_str_eq(resp.message, "StreamID must be odd for client initiated streams");
	ttrpc_response_release(&resp);
	ttrpc_fixture_send(fd, 7, SVC, "Echo", "z", 1);
	cr_assert_eq(ttrpc_fixture_response(fd, 2000, &resp), 7, "the connection goes on");
	ttrpc_response_release(&resp);
	close(fd);
	ttrpc_fixture_stop(&f, 1000, 0);
}

/* What a broken or hostile peer sends: each connection ends (with an
 * answer where one is owed), the server serves the next. */
static void ends_connection(struct ttrpc_fixture *f, const uint8_t *bytes, size_t n,
			    int32_t want_code, uint32_t want_stream)
{
	struct ttrpc_frame fr;
	struct ttrpc_response resp;
	const char *why;
	char out[16];
	int fd = ttrpc_fixture_connect(f), rc;

	cr_assert_eq(ttrpc_send(fd, bytes, n, 2000), 0);
	/* Our end comes after an answer we wait for: the server drops the
	 * calls of a peer that has gone, as ttrpc's Go server does. */
	if (want_code != TTRPC_OK)
		shutdown(fd, SHUT_WR);
	rc = ttrpc_fixture_recv(fd, 3000, &fr);
	if (want_code >= 0) {
		cr_assert_eq(rc, 1, "an answer before the end");
		cr_assert_eq(fr.h.stream_id, want_stream);
		cr_assert_eq(ttrpc_response_decode(&resp, fr.body, fr.h.length, &why), 0);
		cr_assert_eq(resp.code, want_code, "%s", resp.message);
		ttrpc_response_release(&resp);
		free(fr.body);
		shutdown(fd, SHUT_WR);
		rc = ttrpc_fixture_recv(fd, 3000, &fr);
	}
	cr_assert_eq(rc, 0, "the end of the stream, not %d", rc);
	close(fd);
	ttrpc_fixture_settle(f, 0, 0, 2000);
	fd = ttrpc_fixture_connect(f);
	cr_assert_eq(call(fd, "Echo", "ok", NULL, 0, out, sizeof(out)), TTRPC_OK);
	close(fd);
}

Test(ttrpc_server, hostile_frames)
{
	struct ttrpc_fixture f;
	struct ttrpc_server_config cfg = config();
	struct ttrpc_request r = { .service = SVC, .method = "Echo", .payload = (const uint8_t *)"abcdef",
				   .payload_len = 6 };
	struct ttrpc_header h = { .length = TTRPC_MESSAGE_MAX + 1, .stream_id = 9, .type = 1 };
	uint8_t buf[4096], *frame;
	uint32_t seed = 12345;
	size_t len;
	int fds = open_fds();

	ttrpc_fixture_start(&f, &cfg);
	/* A length over 4 MiB: RESOURCE_EXHAUSTED on its stream, then the end. */
	ttrpc_header_encode(&h, buf);
	ends_connection(&f, buf, TTRPC_HEADER_LEN, TTRPC_RESOURCE_EXHAUSTED, 9);
	/* Half a header, then the peer's end. */
	ends_connection(&f, buf, 5, -1, 0);
	/* A whole frame whose body is a truncated Request. */
	cr_assert_eq(ttrpc_request_encode(&r, 11, &frame, &len), 0);
	h = (struct ttrpc_header){ .length = (uint32_t)(len - TTRPC_HEADER_LEN - 3), .stream_id = 11,
				   .type = 1 };
	ttrpc_header_encode(&h, frame);
	ends_connection(&f, frame, len - 3, TTRPC_INVALID_ARGUMENT, 11);
	/* A header promising more than comes. */
	h.length += 3;
	ttrpc_header_encode(&h, frame);
	ends_connection(&f, frame, len - 3, -1, 0);
	free(frame);
	/* Garbage, with a length a header may have. */
	for (size_t i = 0; i < sizeof(buf); i++) {
		seed = seed * 1103515245 + 12345;
		buf[i] = (uint8_t)(seed >> 16);
	}
	buf[0] = buf[1] = buf[2] = 0;   /* a body under 256 bytes, all of it sent */
	buf[8] = 1;
	ends_connection(&f, buf, sizeof(buf), TTRPC_INVALID_ARGUMENT,
			(uint32_t)buf[4] << 24 | buf[5] << 16 | buf[6] << 8 | buf[7]);
	/* Frames of other types are skipped, a request after them answered. */
	memset(buf, 0, 3 * TTRPC_HEADER_LEN);
	for (int i = 0; i < 3; i++)
		buf[i * TTRPC_HEADER_LEN + 8] = (uint8_t)(i + 2);   /* 2, 3, 4 */
	cr_assert_eq(ttrpc_request_encode(&r, 13, &frame, &len), 0);
	memcpy(buf + 3 * TTRPC_HEADER_LEN, frame, len);
	free(frame);
	ends_connection(&f, buf, 3 * TTRPC_HEADER_LEN + len, TTRPC_OK, 13);
	ttrpc_fixture_stop(&f, 1000, 0);
	cr_assert_eq(open_fds(), fds, "every descriptor closed");
}

struct flood {
	int fd, n;
};

static void *flood_writer(void *arg)
{
	struct flood *fl = arg;

	for (int i = 0; i < fl->n; i++) {
		char p[16];

		snprintf(p, sizeof(p), "%d", i);
		ttrpc_fixture_send(fl->fd, 2u * i + 1, SVC, "Echo", p, strlen(p));
	}
	return NULL;
}

Test(ttrpc_server, a_flood_of_frames)
{
	enum { N = 5000, INFLIGHT = 8 };
	struct ttrpc_fixture f;
	struct ttrpc_server_config cfg = config();
	struct ttrpc_server_stats st;
	struct ttrpc_response resp;
	struct flood fl = { .n = N };
	static bool seen[N];
	unsigned most = 0;
	pthread_t t;

	cfg.max_inflight = INFLIGHT;
	cfg.max_workers = 4;
	ttrpc_fixture_start(&f, &cfg);
	fl.fd = ttrpc_fixture_connect(&f);
	cr_assert_eq(pthread_create(&t, NULL, flood_writer, &fl), 0);
	for (int i = 0; i < N; i++) {
		uint32_t id = ttrpc_fixture_response(fl.fd, 5000, &resp);
		int k = (int)(id - 1) / 2;

		cr_assert_lt(k, N);
		cr_assert_not(seen[k], "stream %u answered twice", id);
		seen[k] = true;
		cr_assert_eq(resp.code, TTRPC_OK);
		char text[16];

		snprintf(text, sizeof(text), "%.*s", (int)resp.payload_len, (const char *)resp.payload);
		cr_assert_eq(atoi(text), k);
		ttrpc_response_release(&resp);
		ttrpc_server_stats(f.srv, &st);
		most = st.calls > most ? st.calls : most;
		cr_assert_leq(st.workers, 4);
	}
	pthread_join(t, NULL);
	cr_assert_leq(most, INFLIGHT, "at most %d calls held for one connection", INFLIGHT);
	close(fl.fd);
	ttrpc_fixture_settle(&f, 0, 0, 2000);
	ttrpc_server_stats(f.srv, &st);
	cr_assert_eq(st.served, N);
	ttrpc_fixture_stop(&f, 1000, 0);
}

Test(ttrpc_server, a_peer_that_leaves_mid_call)
{
	struct ttrpc_fixture f;
	struct ttrpc_server_config cfg = config();
	int fds = open_fds(), fd;

	state_reset();
	ttrpc_fixture_start(&f, &cfg);
	fd = ttrpc_fixture_connect(&f);
	ttrpc_fixture_send(fd, 1, SVC, "Park", NULL, 0);
	wait_parked(1);
	close(fd);
	wait_parked(0);
	cr_assert_eq(cancelled, 1, "the handler heard of it through cancel_fd");
	ttrpc_fixture_settle(&f, 0, 0, 2000);
	ttrpc_fixture_stop(&f, 1000, 0);
	cr_assert_eq(open_fds(), fds);
}

Test(ttrpc_server, stop_cancels_and_answers_calls_in_flight)
{
	struct ttrpc_fixture f;
	struct ttrpc_server_config cfg = config();
	struct ttrpc_response resp;
	uint64_t t0;
	int fd;

	state_reset();
	ttrpc_fixture_start(&f, &cfg);
	fd = ttrpc_fixture_connect(&f);
	ttrpc_fixture_send(fd, 1, SVC, "Park", NULL, 0);
	wait_parked(1);
	t0 = clock_now_ns();
	ttrpc_fixture_stop(&f, 5000, 0);
	cr_assert_lt(clock_now_ns() - t0, 1000000000ULL, "the parked call heard the stop");
	cr_assert_eq(ttrpc_fixture_response(fd, 1000, &resp), 1);
	cr_assert_eq(resp.code, TTRPC_CANCELLED, "its answer went out before the close");
	ttrpc_response_release(&resp);
	close(fd);
}

Test(ttrpc_server, stop_is_bounded)
{
	struct ttrpc_fixture f;
	struct ttrpc_server_config cfg = config();
	uint64_t t0;
	int fd;

	ttrpc_fixture_start(&f, &cfg);
	fd = ttrpc_fixture_connect(&f);
	ttrpc_fixture_send(fd, 1, SVC, "Stubborn", NULL, 0);
	usleep(50 * 1000);
	t0 = clock_now_ns();
	ttrpc_fixture_stop(&f, 100, -ETIMEDOUT);
	cr_assert_lt(clock_now_ns() - t0, 300000000ULL);
	close(fd);
	usleep(600 * 1000);   /* its worker ends and frees the rest: LeakSanitizer sees nothing */
}

Test(ttrpc_server, deadline_passed_before_the_call_ran)
{
	struct ttrpc_fixture f;
	struct ttrpc_server_config cfg = config();
	struct ttrpc_request r = { .service = SVC, .method = "Echo", .timeout_ns = -1 };
	struct ttrpc_response resp;
	uint8_t *frame;
	size_t len;
	int fd;

	ttrpc_fixture_start(&f, &cfg);
	fd = ttrpc_fixture_connect(&f);
	cr_assert_eq(ttrpc_request_encode(&r, 1, &frame, &len), 0);
	cr_assert_eq(ttrpc_send(fd, frame, len, 1000), 0);
	free(frame);
	cr_assert_eq(ttrpc_fixture_response(fd, 2000, &resp), 1);
	cr_assert_eq(resp.code, TTRPC_DEADLINE_EXCEEDED);
	ttrpc_response_release(&resp);
	close(fd);
	ttrpc_fixture_stop(&f, 1000, 0);
}

Test(ttrpc_server, connections_beyond_the_cap_wait)
{
	struct ttrpc_fixture f;
	struct ttrpc_server_config cfg = config();
	struct ttrpc_response resp;
	struct ttrpc_frame fr;
	int a, b, c;

	cfg.max_conns = 2;
	ttrpc_fixture_start(&f, &cfg);
	a = ttrpc_fixture_connect(&f);
	b = ttrpc_fixture_connect(&f);
	ttrpc_fixture_settle(&f, 2, 0, 2000);
	c = ttrpc_fixture_connect(&f);   /* in the backlog */
	ttrpc_fixture_send(c, 1, SVC, "Echo", "c", 1);
	cr_assert_eq(ttrpc_fixture_recv(c, 200, &fr), -ETIMEDOUT, "not served while two are open");
	close(a);
	cr_assert_eq(ttrpc_fixture_response(c, 2000, &resp), 1);
	ttrpc_response_release(&resp);
	close(b);
	close(c);
	ttrpc_fixture_stop(&f, 1000, 0);
}

/* As another user (root only): refused, unless any_user. */
static int as_nobody(const char *path)
{
	pid_t pid = fork();
	int status;

	cr_assert_geq(pid, 0);
	if (!pid) {
		struct ttrpc_request r = { .service = SVC, .method = "Echo" };
		struct ttrpc_response resp;
		int fd;

		if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534) ||
		    ttrpc_client_connect(path, &fd))
			_exit(2);
		_exit(ttrpc_client_call(fd, &r, 2000, &resp) == 0 ? 0 : 1);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status));
	return WEXITSTATUS(status);
}

Test(ttrpc_server, peers_of_another_user)
{
	struct ttrpc_fixture f;
	struct ttrpc_server_config cfg = config();

	if (geteuid() != 0)
		cr_skip_test("needs root to connect as another user");
	ttrpc_fixture_start(&f, &cfg);
	chmod(f.dir, 0755);
	chmod(f.path, 0777);
	cr_assert_eq(as_nobody(f.path), 1, "uid 65534 refused");
	ttrpc_fixture_stop(&f, 1000, 0);
	cfg.any_user = true;
	ttrpc_fixture_start(&f, &cfg);
	chmod(f.dir, 0755);
	chmod(f.path, 0777);
	cr_assert_eq(as_nobody(f.path), 0, "any_user: served");
	ttrpc_fixture_stop(&f, 1000, 0);
}

Test(ttrpc_client, errors)
{
	struct ttrpc_fixture f;
	struct ttrpc_server_config cfg = config();
	struct ttrpc_request r = { .service = SVC, .method = "Park" };
	struct ttrpc_response resp;
	char longpath[200], addr[160];
	uint64_t t0;
	int fd;

	memset(longpath, 'a', sizeof(longpath) - 1);
	longpath[sizeof(longpath) - 1] = '\0';
	cr_assert_eq(ttrpc_client_connect(longpath, &fd), -ENAMETOOLONG);
	cr_assert_eq(ttrpc_client_connect("", &fd), -EINVAL);
	cr_assert_eq(ttrpc_client_connect("unix://", &fd), -EINVAL);
	cr_assert_eq(ttrpc_client_connect("/nonexistent/ttrpc.sock", &fd), -ENOENT);
	cr_assert_eq(fd, -1);
	state_reset();
	ttrpc_fixture_start(&f, &cfg);
	snprintf(addr, sizeof(addr), "unix://%s", f.path);
	cr_assert_eq(ttrpc_client_connect(addr, &fd), 0);
	t0 = clock_now_ns();
	cr_assert_eq(ttrpc_client_call(fd, &r, 200, &resp), -ETIMEDOUT);
	cr_assert_lt(clock_now_ns() - t0, 1000000000ULL);
	close(fd);
	r.service = "bad name";
	cr_assert_eq(ttrpc_client_call(fd, &r, 200, &resp), -EINVAL);
	ttrpc_fixture_stop(&f, 1000, 0);
}

/* A server that answers another stream first, then ours, then leaves. */
static void *odd_server(void *arg)
{
	int fd = *(int *)arg;
	struct ttrpc_frame fr;
	struct ttrpc_response r = { .code = TTRPC_OK, .payload = (const uint8_t *)"mine",
				    .payload_len = 4 };
	uint8_t *frame;
	size_t len;

	cr_assert_eq(ttrpc_fixture_recv(fd, 2000, &fr), 1);
	free(fr.body);
	cr_assert_eq(ttrpc_response_encode(&r, fr.h.stream_id + 2, &frame, &len), 0);
	frame[TTRPC_HEADER_LEN + 3] = 'X';   /* not for us: "XXne" */
	cr_assert_eq(ttrpc_send(fd, frame, len, 1000), 0);
	free(frame);
	cr_assert_eq(ttrpc_response_encode(&r, fr.h.stream_id, &frame, &len), 0);
	cr_assert_eq(ttrpc_send(fd, frame, len, 1000), 0);
	free(frame);
	cr_assert_eq(ttrpc_fixture_recv(fd, 2000, &fr), 1);
	free(fr.body);
	cr_assert_eq(ttrpc_send(fd, "\0\0\0\x09\0\0", 6, 1000), 0);   /* half a header, then the end */
	shutdown(fd, SHUT_RDWR);
	return NULL;
}

Test(ttrpc_client, skips_other_streams_and_sees_the_end)
{
	struct ttrpc_request r = { .service = SVC, .method = "Echo" };
	struct ttrpc_response resp;
	int sv[2];
	pthread_t t;

	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	cr_assert_eq(pthread_create(&t, NULL, odd_server, &sv[1]), 0);
	cr_assert_eq(ttrpc_client_call(sv[0], &r, 2000, &resp), 0);
	cr_assert_eq(resp.payload_len, 4);
	cr_assert_arr_eq(resp.payload, "mine", 4);
	ttrpc_response_release(&resp);
	cr_assert_eq(ttrpc_client_call(sv[0], &r, 2000, &resp), -ECONNRESET);
	pthread_join(t, NULL);
	close(sv[0]);
	close(sv[1]);
}
