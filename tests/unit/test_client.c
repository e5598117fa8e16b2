/* test_client.c - the host's agent connection: the handshake can be cancelled, frames are read in place, numbers checked. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/client.h"
#include "clock.h"
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
