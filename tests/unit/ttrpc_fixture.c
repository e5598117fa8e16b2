/* ttrpc_fixture.c - a ttrpc server on a socket in a fresh directory, and raw frames to and from it (tests only). */
#include "ttrpc_fixture.h"
#include "shim/ttrpc_client.h"
#include "lib/clock.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

void ttrpc_fixture_start(struct ttrpc_fixture *f, const struct ttrpc_server_config *cfg)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };

	snprintf(f->dir, sizeof(f->dir), "/tmp/mayfly-ttrpc.XXXXXX");
	cr_assert_not_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/ttrpc.sock", f->dir);
	cr_assert_lt(strlen(f->path), sizeof(a.sun_path));
	memcpy(a.sun_path, f->path, strlen(f->path) + 1);
	f->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(f->listen_fd, 0);
	cr_assert_eq(bind(f->listen_fd, (struct sockaddr *)&a, sizeof(a)), 0, "%s", strerror(errno));
	cr_assert_eq(listen(f->listen_fd, 16), 0);
	cr_assert_eq(ttrpc_server_start(&f->srv, f->listen_fd, cfg), 0);
}

void ttrpc_fixture_stop(struct ttrpc_fixture *f, unsigned grace_ms, int want)
{
	cr_assert_eq(ttrpc_server_stop(f->srv, grace_ms), want);
	close(f->listen_fd);
	unlink(f->path);
	rmdir(f->dir);
}

int ttrpc_fixture_connect(const struct ttrpc_fixture *f)
{
	int fd, rc = ttrpc_client_connect(f->path, &fd);

	cr_assert_eq(rc, 0, "connect %s: %s", f->path, strerror(-rc));
	return fd;
}

void ttrpc_fixture_send(int fd, uint32_t stream_id, const char *service, const char *method,
			const void *payload, size_t len)
{
	struct ttrpc_request r = {
		.service = service, .method = method, .payload = payload, .payload_len = len,
	};
	uint8_t *frame;
	size_t n;

	cr_assert_eq(ttrpc_request_encode(&r, stream_id, &frame, &n), 0);
	cr_assert_eq(ttrpc_send(fd, frame, n, 5000), 0);
	free(frame);
}

int ttrpc_fixture_recv(int fd, int timeout_ms, struct ttrpc_frame *fr)
{
	uint64_t deadline = clock_now_ns() + (uint64_t)timeout_ms * 1000000;
	struct ttrpc_reader rd;
	uint8_t byte;
	int rc = 0;

	/* A byte at a time: never a byte of the next frame. */
	ttrpc_reader_init(&rd);
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint64_t now = clock_now_ns();
		size_t used;
		ssize_t n;

		if (now >= deadline) {
			rc = -ETIMEDOUT;
			break;
		}
		if (poll(&p, 1, (int)((deadline - now) / 1000000) + 1) <= 0)
			continue;
		n = recv(fd, &byte, 1, 0);
		if (n <= 0) {
			rc = n < 0 ? -errno : 0;
			break;
		}
		rc = ttrpc_reader_feed(&rd, &byte, 1, &used, fr);
		if (rc)
			break;
	}
	ttrpc_reader_release(&rd);
	return rc;
}

uint32_t ttrpc_fixture_response(int fd, int timeout_ms, struct ttrpc_response *resp)
{
	struct ttrpc_frame fr;
	const char *why = "";
	int rc = ttrpc_fixture_recv(fd, timeout_ms, &fr);

	cr_assert_eq(rc, 1, "no response frame: %d", rc);
	cr_assert_eq(fr.h.type, TTRPC_TYPE_RESPONSE);
	rc = ttrpc_response_decode(resp, fr.body, fr.h.length, &why);
	free(fr.body);
	cr_assert_eq(rc, 0, "%s", why);
	return fr.h.stream_id;
}

void ttrpc_fixture_settle(struct ttrpc_fixture *f, unsigned conns, unsigned calls, int timeout_ms)
{
	struct ttrpc_server_stats st;

	for (int waited = 0;; waited += 5) {
		ttrpc_server_stats(f->srv, &st);
		if (st.conns == conns && st.calls == calls)
			return;
		cr_assert_lt(waited, timeout_ms, "the server holds %u connections and %u calls, "
			     "not %u and %u", st.conns, st.calls, conns, calls);
		usleep(5000);
	}
}
