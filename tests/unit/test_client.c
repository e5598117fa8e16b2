/* test_client.c - the host's agent connection: the handshake can be cancelled, frames are read in place, numbers checked; a watch event as a lying guest would send it. */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent_client/client.h"
#include "agent_client/watch.h"
#include "lib/clock.h"
#include "fake_agent.h"

#define MS 1000000ULL

/* A "VMM" that accepts the CONNECT line and never answers it. */
struct mute_vmm {
	int peer;
};

static int dial_mute(void *opaque)
{
	struct mute_vmm *m = opaque;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	if (m->peer >= 0)
		close(m->peer);
	m->peer = sv[1];
	return sv[0];
}

static void *cancel_later(void *arg)
{
	uint64_t one = 1;

	usleep(200 * 1000);
	cr_assert_eq(write(*(int *)arg, &one, sizeof(one)), (ssize_t)sizeof(one));
	return NULL;
}

/* Finding 9: the VM ended while connect waits for "OK": it returns now,
 * not at its 60 s deadline. */
Test(client, cancel_ends_a_connect_waiting_for_ok)
{
	struct agent_client *c = calloc(1, sizeof(*c));
	struct mute_vmm m = { .peer = -1 };
	int cancel = eventfd(0, EFD_CLOEXEC);
	uint64_t t0 = clock_now_ns();
	const char *why = "";
	pthread_t t;
	int rc;

	cr_assert_geq(cancel, 0);
	cr_assert_eq(pthread_create(&t, NULL, cancel_later, &cancel), 0);
	rc = agent_client_connect(c, dial_mute, &m, 1024, t0 + 60000 * MS, cancel, &why);
	pthread_join(t, NULL);
	cr_assert_eq(rc, -ECANCELED, "%d: %s", rc, why);
	cr_assert_lt(clock_now_ns() - t0, 5000 * MS);
	close(cancel);
	close(m.peer);
	free(c);
}

Test(client, a_silent_vmm_meets_the_deadline)
{
	struct agent_client *c = calloc(1, sizeof(*c));
	struct mute_vmm m = { .peer = -1 };
	uint64_t t0 = clock_now_ns();
	const char *why = "";

	cr_assert_eq(agent_client_connect(c, dial_mute, &m, 1024, t0 + 300 * MS, -1, &why),
		     -ETIMEDOUT, "%s", why);
	cr_assert_lt(clock_now_ns() - t0, 5000 * MS);
	close(m.peer);
	free(c);
}

/* A "VMM" whose stream holds `len` bytes of `reply` (its OK line and the
 * agent's answer to HELLO), then ends. */
struct canned_vmm {
	const void *reply;
	size_t len;
	int peer;          /* its end, shut for writing, open for our CONNECT */
};

static int dial_canned(void *opaque)
{
	struct canned_vmm *v = opaque;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	cr_assert_eq(write(sv[1], v->reply, v->len), (ssize_t)v->len);
	shutdown(sv[1], SHUT_WR);
	v->peer = sv[1];
	return sv[0];
}

/* Found by fuzz-agent: an answer to HELLO that is no frame at all (another
 * protocol version, or a length no frame has) was reported from the
 * undecoded frame's type ("answered HELLO with HELLO_OK, not HELLO_OK",
 * or from uninitialised bytes). It must say what it is. */
Test(client, a_hello_answer_that_is_no_frame_says_so)
{
	static const uint8_t other_version[] = {
		'O', 'K', ' ', '5', '\n', 8, 0, 0, 0, 2, 64, 0, 0, 0, 0, 0, 0,
	};
	static const uint8_t too_long[] = { 'O', 'K', ' ', '5', '\n', 0xff, 0xff, 0xff, 0x7f, 1, 64 };
	struct canned_vmm cases[] = {
		{ other_version, sizeof(other_version), -1 }, { too_long, sizeof(too_long), -1 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct agent_client *c = calloc(1, sizeof(*c));
		const char *why = "";
		int rc = agent_client_connect(c, dial_canned, &cases[i], 1024,
					      clock_now_ns() + 5000 * MS, -1, &why);

		cr_assert_eq(rc, -EPROTO, "case %zu: %d %s", i, rc, why);
		cr_assert_str_eq(why, "the guest agent answered HELLO with a malformed frame or "
			         "another protocol version", "case %zu: %s", i, why);
		cr_assert_eq(c->fd, -1, "case %zu: the stream was not closed", i);
		close(cases[i].peer);
		free(c);
	}
}

/* One dial of a "VMM" that reads the client's first write whole (the
 * CONNECT line, HELLO, the caller's first frames) before it answers
 * anything; with no reply it hangs up instead (its RST while no agent
 * listens), and the client tries again. */
struct first_try {
	int fd;
	size_t want;
	const uint8_t *reply;
	size_t reply_len;
	uint8_t got[256];
	size_t got_len;
	pthread_t thread;
};

struct first_vmm {
	int tries;
	struct first_try t[2];
	int builds;
	uint32_t ids[2];
};

static void *first_try_serve(void *arg)
{
	struct first_try *t = arg;

	while (t->got_len < t->want) {
		struct pollfd p = { .fd = t->fd, .events = POLLIN };
		ssize_t r;

		if (poll(&p, 1, 5000) != 1)
			break;
		r = read(t->fd, t->got + t->got_len, sizeof(t->got) - t->got_len);
		if (r <= 0)
			break;
		t->got_len += (size_t)r;
	}
	if (t->reply && t->got_len == t->want) {
		cr_assert_eq(write(t->fd, t->reply, t->reply_len), (ssize_t)t->reply_len);
		return NULL;
	}
	close(t->fd);
	t->fd = -1;
	return NULL;
}

static int dial_first(void *opaque)
{
	struct first_vmm *v = opaque;
	struct first_try *t;
	int sv[2];

	if (v->tries == 2 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -ECONNREFUSED;
	t = &v->t[v->tries++];
	t->fd = sv[1];
	cr_assert_eq(pthread_create(&t->thread, NULL, first_try_serve, t), 0);
	return sv[0];
}

/* agent_first's builder: a PING. */
static int build_ping(struct agent_client *c, uint8_t *buf, size_t cap, void *opaque)
{
	struct first_vmm *v = opaque;
	struct proto_writer w;

	v->ids[v->builds++ % 2] = agent_client_id(c);
	proto_begin(&w, buf, cap, PROTO_PING, v->ids[(v->builds - 1) % 2]);
	return proto_end(&w);
}

/* The first frames ride in the connect's one write, behind HELLO: the VMM
 * has them all before it says OK (the old client sent HELLO only after the
 * OK: this VMM would wait for it until the deadline). A retry builds them
 * again, ids from 1 again. */
Test(client, first_frames_go_in_the_connects_one_write)
{
	struct agent_client *c = calloc(1, sizeof(*c));
	struct first_vmm v = { 0 };
	struct agent_first first = { build_ping, &v };
	uint8_t expect[128], reply[128];
	struct proto_writer w;
	struct proto_frame f;
	size_t n = 13, r = 5;
	const char *why = "";
	int rc;

	memcpy(expect, "CONNECT 1024\n", n);
	proto_begin(&w, expect + n, sizeof(expect) - n, PROTO_HELLO, 0);
	proto_put_u32(&w, PROTO_VERSION);
	n += (size_t)proto_end(&w);
	proto_begin(&w, expect + n, sizeof(expect) - n, PROTO_PING, 1);
	n += (size_t)proto_end(&w);
	memcpy(reply, "OK 1\n", r);
	proto_begin(&w, reply + r, sizeof(reply) - r, PROTO_HELLO_OK, 0);
	proto_put_u32(&w, PROTO_VERSION);
	r += (size_t)proto_end(&w);
	proto_begin(&w, reply + r, sizeof(reply) - r, PROTO_OK, 1);
	r += (size_t)proto_end(&w);
	for (int i = 0; i < 2; i++)
		v.t[i].want = n;
	v.t[1].reply = reply;
	v.t[1].reply_len = r;

	rc = agent_client_connect_first(c, dial_first, &v, 1024, &first,
					clock_now_ns() + 5000 * MS, -1, &why);
	for (int i = 0; i < v.tries; i++)
		pthread_join(v.t[i].thread, NULL);
	cr_assert_eq(rc, 0, "%d: %s", rc, why);
	cr_assert_eq(v.tries, 2);
	cr_assert_eq(v.builds, 2);
	cr_assert(v.ids[0] == 1 && v.ids[1] == 1, "ids %u %u", v.ids[0], v.ids[1]);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(v.t[i].got_len, n, "try %d: %zu bytes before any answer", i,
			     v.t[i].got_len);
		cr_assert_eq(memcmp(v.t[i].got, expect, n), 0, "try %d", i);
	}
	cr_assert_eq(agent_client_next(c, 1, &f, clock_now_ns() + 5000 * MS), 0);
	cr_assert_eq(f.type, PROTO_OK);
	cr_assert_eq(agent_client_id(c), 2);
	agent_client_close(c);
	close(v.t[1].fd);
	free(c);
}

static void fill_error(struct proto_writer *w, void *v)
{
	proto_put_u32(w, *(uint32_t *)v);
	proto_put_str(w, "msg");
}

Test(client, an_errno_is_checked_before_it_is_used)
{
	static const uint32_t bad[] = { 0, 0x80000000u, 0xffffffffu, 4096 };
	struct fake_agent a;
	struct proto_frame f;
	char why[64];
	uint32_t ok = EACCES;

	fake_init(&a);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert(fake_send(&a, PROTO_ERROR, 1, fill_error, (void *)&bad[i]));
		cr_assert_eq(agent_client_recv(a.client, &f, clock_now_ns() + 5000 * MS), 1);
		cr_assert_eq(agent_client_error(&f, why, sizeof(why)), -EPROTO, "errno %u", bad[i]);
	}
	cr_assert(fake_send(&a, PROTO_ERROR, 1, fill_error, &ok));
	cr_assert_eq(agent_client_recv(a.client, &f, clock_now_ns() + 5000 * MS), 1);
	cr_assert_eq(agent_client_error(&f, why, sizeof(why)), -EACCES);
	cr_assert_str_eq(why, "msg");
	fake_fini(&a);
}

#define SMALL_FRAMES 1000000

static void small_frames(struct fake_agent *a)
{
	static uint8_t block[64 * 1024];
	size_t len = 0;

	/* Many 13-byte frames per write, as a chatty agent sends them. */
	for (int i = 0; i < SMALL_FRAMES && !atomic_load(&a->stop); i++) {
		struct proto_writer w;
		int n;

		proto_begin(&w, block + len, sizeof(block) - len, PROTO_STDOUT, 1);
		proto_put_u32(&w, 0);
		n = proto_end(&w);
		len += (size_t)n;
		if (len + 64 > sizeof(block) || i == SMALL_FRAMES - 1) {
			for (size_t off = 0; off < len;) {
				ssize_t s = send(a->fd, block + off, len - off, MSG_NOSIGNAL);

				if (s <= 0)
					return;
				off += (size_t)s;
			}
			len = 0;
		}
	}
}

/* Finding 8: a frame costs its own bytes, not a move of the whole buffer:
 * a million 16-byte frames in far less time than a memmove of 256 KiB
 * each would take (about 250 GB moved). */
Test(client, a_million_small_frames_are_read_in_place, .timeout = 120)
{
	struct fake_agent a;
	struct proto_frame f;
	uint64_t t0 = clock_now_ns();
	int n = 0;

	fake_init(&a);
	fake_start(&a, small_frames, NULL);
	while (n < SMALL_FRAMES && agent_client_recv(a.client, &f, clock_now_ns() + 5000 * MS) == 1) {
		cr_assert_eq(f.type, PROTO_STDOUT);
		n++;
	}
	cr_assert_eq(n, SMALL_FRAMES);
	cr_log_info("%d frames in %.0f ms", n, (double)(clock_now_ns() - t0) / 1e6);
	cr_assert_lt(clock_now_ns() - t0, 60000 * MS);
	fake_fini(&a);
}

Test(client, a_malformed_frame_breaks_the_connection_for_good)
{
	uint8_t hdr[PROTO_HEADER_LEN] = { 0xff, 0xff, 0xff, 0x7f, PROTO_VERSION, PROTO_STDOUT };
	struct fake_agent a;
	struct proto_frame f;

	fake_init(&a);
	cr_assert_eq(write(a.fd, hdr, sizeof(hdr)), (ssize_t)sizeof(hdr));
	cr_assert_eq(agent_client_recv(a.client, &f, clock_now_ns() + 5000 * MS), -EPROTO);
	cr_assert(a.client->broken);
	cr_assert_eq(agent_client_recv(a.client, &f, clock_now_ns() + 5000 * MS), -EPROTO);
	cr_assert_eq(agent_client_send(a.client, 0, 0), -EPROTO);
	fake_fini(&a);
}

/* A WATCH_EVENT of kind with the name's n bytes, and more bytes after. */
static int watch_event(unsigned kind, const char *name, uint32_t n, const char *more,
		       unsigned *got_kind, char *got, size_t cap)
{
	static uint8_t buf[PROTO_HEADER_LEN + 8 + 8192];
	struct proto_writer w;
	struct proto_frame f;
	int len;

	proto_begin(&w, buf, sizeof(buf), PROTO_WATCH_EVENT, 1);
	proto_put_u32(&w, kind);
	proto_put_bytes(&w, name, n);
	if (more)
		proto_put_u32(&w, 0);
	len = proto_end(&w);
	cr_assert_gt(len, 0);
	cr_assert_eq(proto_frame_decode(buf, (size_t)len, &f), len);
	return agent_watch_event(&f, got_kind, got, cap);
}

Test(client, a_watch_event_is_checked_as_a_lying_guest_would_send_it)
{
	char name[64], big[5000];
	unsigned kind = 0;

	cr_assert_eq(watch_event(PROTO_WATCH_RENAME, "sub/a", 5, NULL, &kind, name, sizeof(name)), 0);
	cr_assert_eq(kind, PROTO_WATCH_RENAME);
	cr_assert_str_eq(name, "sub/a");
	/* Kinds outside 1..5, no name, a NUL inside it, bytes after it, a
	 * name longer than the caller takes. */
	cr_assert_eq(watch_event(0, "a", 1, NULL, &kind, name, sizeof(name)), -EPROTO);
	cr_assert_eq(watch_event(6, "a", 1, NULL, &kind, name, sizeof(name)), -EPROTO);
	cr_assert_eq(watch_event(1, "", 0, NULL, &kind, name, sizeof(name)), -EPROTO);
	cr_assert_eq(watch_event(1, "a\0b", 3, NULL, &kind, name, sizeof(name)), -EPROTO);
	cr_assert_eq(watch_event(1, "a", 1, "more", &kind, name, sizeof(name)), -EPROTO);
	memset(big, 'x', sizeof(big));
	cr_assert_eq(watch_event(1, big, sizeof(big), NULL, &kind, name, sizeof(name)), -EPROTO);
}
