/* fake_agent.c - a guest agent that lies, on the other end of a socket pair, for the host side's unit tests. */
#include "fake_agent.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

void fake_init(struct fake_agent *a)
{
	int sv[2];

	memset(a, 0, sizeof(*a));
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	a->client = calloc(1, sizeof(*a->client));
	cr_assert_not_null(a->client);
	a->client->fd = sv[0];
	a->client->cancel_fd = -1;
	a->client->next_id = 1;
	a->fd = sv[1];
}

static void *fake_thread(void *arg)
{
	struct fake_agent *a = arg;

	a->script(a);
	return NULL;
}

void fake_start(struct fake_agent *a, void (*script)(struct fake_agent *), void *arg)
{
	a->script = script;
	a->arg = arg;
	cr_assert_eq(pthread_create(&a->thread, NULL, fake_thread, a), 0);
	a->started = true;
}

void fake_fini(struct fake_agent *a)
{
	atomic_store(&a->stop, true);
	if (a->fd >= 0)
		shutdown(a->fd, SHUT_RDWR);
	if (a->started)
		pthread_join(a->thread, NULL);
	if (a->fd >= 0)
		close(a->fd);
	agent_client_close(a->client);
	free(a->client);
	a->fd = -1;
	a->client = NULL;
}

bool fake_send(struct fake_agent *a, uint8_t type, uint32_t id,
	       void (*fill)(struct proto_writer *, void *), void *opaque)
{
	static _Thread_local uint8_t buf[PROTO_HEADER_LEN + PROTO_MAX_PAYLOAD];
	struct proto_writer w;
	const uint8_t *p = buf;
	int len;

	proto_begin(&w, buf, sizeof(buf), type, id);
	if (fill)
		fill(&w, opaque);
	len = proto_end(&w);
	if (len < 0)
		return false;
	while (len > 0) {
		ssize_t n = send(a->fd, p, (size_t)len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= (int)n;
	}
	return true;
}

struct raw { const void *p; uint32_t n; };

static void fill_raw(struct proto_writer *w, void *opaque)
{
	struct raw *r = opaque;

	proto_put_bytes(w, r->p, r->n);
}

bool fake_send_bytes(struct fake_agent *a, uint8_t type, uint32_t id, const void *p, uint32_t n)
{
	struct raw r = { p, n };

	return fake_send(a, type, id, fill_raw, &r);
}

static void count_stdin(struct fake_agent *a, const struct proto_frame *f)
{
	struct proto_reader r;
	const uint8_t *data;
	uint32_t len;

	proto_reader_init(&r, f);
	if (!proto_get_bytes(&r, &data, &len))
		return;
	if (!len) {
		atomic_store(&a->stdin_ended, true);
		return;
	}
	atomic_fetch_add(&a->stdin_frames, 1);
	atomic_fetch_add(&a->stdin_bytes, len);
}

bool fake_read_frames(struct fake_agent *a, int timeout_ms)
{
	static _Thread_local uint8_t buf[1 << 20];
	static _Thread_local size_t len;
	struct pollfd p = { .fd = a->fd, .events = POLLIN };
	struct proto_frame f;
	ssize_t n;
	int r;

	if (poll(&p, 1, timeout_ms) <= 0)
		return true;
	n = recv(a->fd, buf + len, sizeof(buf) - len, MSG_DONTWAIT);
	if (n == 0)
		return false;
	if (n < 0)
		return errno == EAGAIN || errno == EINTR;
	len += (size_t)n;
	while ((r = proto_frame_decode(buf, len, &f)) > 0) {
		if (f.type == PROTO_SIGNAL && f.payload_len == 4) {
			atomic_store(&a->last_signal, (uint32_t)f.payload[0] | (uint32_t)f.payload[1] << 8);
			atomic_fetch_add(&a->signals, 1);
		}
		if (f.type == PROTO_STDIN)
			count_stdin(a, &f);
		memmove(buf, buf + r, len - (size_t)r);
		len -= (size_t)r;
	}
	return true;
}
