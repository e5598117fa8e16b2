/* test_vsock_local.c - virtio-vsock host connections without the file system (virtio_vsock_connect_local), and a device with no socket file. */
#include "dir_count.h"
#include "vsock_guest.h"

#include <poll.h>
#include <pthread.h>

TestSuite(vsock_local, .init = vsock_setup, .fini = vsock_teardown, .timeout = 60);
TestSuite(vsock_nopath, .init = vsock_setup_nopath, .fini = vsock_teardown, .timeout = 60);

static int local_open(struct virtio_vsock *v)
{
	int fd = virtio_vsock_connect_local(v);

	cr_assert_geq(fd, 0, "virtio_vsock_connect_local: %s", strerror(-fd));
	return fd;
}

/* Entries in a directory, . and .. aside. */
/* A local connection is a hybrid-vsock client like any other: CONNECT and
 * OK, data both ways, and the guest hears RST when the caller closes. */
static void local_end_to_end(void)
{
	struct gconn gc;
	int fd;

	guest_init(FEAT_VERSION_1);
	rx_post(8, RX_DEFAULT);
	fd = local_open(vs);
	cr_assert_not(fcntl(fd, F_GETFL) & O_NONBLOCK, "the caller's end must block");
	cr_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	host_handshake(fd, &gc, 1024);
	cr_assert_eq(vs->conns_host, 1);
	client_say(fd, "hello guest");
	guest_expect(&gc, "hello guest", 11);
	gsend(&gc, OP_RW, 0, "hello host", 10);
	client_expect(fd, "hello host", 10);
	close(fd);
	spin();
	expect_rx(&p, OP_RST);
	cr_assert_eq(p.src_port, gc.hport);
	cr_assert_eq(vs->nr_conns, 0);
}

Test(vsock_local, end_to_end)
{
	local_end_to_end();
}

Test(vsock_local, before_the_driver_closed_at_once)
{
	int fd = local_open(vs);

	client_say(fd, "CONNECT 5\n");
	spin();
	expect_closed(fd);
	close(fd);
	cr_assert_eq(vs->nr_conns, 0);
}

/* Local connections and the listener's clients share the cap; local ones
 * beyond it wait in a bounded queue, as clients wait in the backlog. */
Test(vsock_local, respects_the_cap)
{
	int fds[4], queued[VSOCK_LOCAL_BACKLOG], extra, lc;

	vs->max_conns = 4;
	guest_init(FEAT_VERSION_1);
	rx_post(8, RX_DEFAULT);
	for (int i = 0; i < 4; i++) {
		fds[i] = local_open(vs);
		client_say(fds[i], "CONN");   /* held in the CONNECT line */
	}
	spin();
	cr_assert_eq(vs->nr_conns, 4);
	/* A client on the socket file waits in the backlog: one cap for both. */
	lc = client_open();
	spin();
	cr_assert_eq(vs->nr_conns, 4);
	close(lc);
	/* So does one more local connection, until a slot frees. */
	extra = local_open(vs);
	client_say(extra, "CONNECT 7\n");
	spin();
	expect_no_rx();
	expect_open(extra);
	cr_assert_eq(vs->nr_conns, 4);
	/* The waiting queue is bounded. */
	for (int i = 0; i < VSOCK_LOCAL_BACKLOG - 1; i++)
		queued[i] = local_open(vs);
	cr_assert_eq(virtio_vsock_connect_local(vs), -EAGAIN);
	close(fds[0]);
	spin();
	expect_rx(&p, OP_REQUEST);
	cr_assert_eq(p.dst_port, 7);
	cr_assert_eq(vs->nr_conns, 4);
	/* Everything closes; the REQUEST that went out is answered by RST. */
	for (int i = 1; i < 4; i++)
		close(fds[i]);
	for (int i = 0; i < VSOCK_LOCAL_BACKLOG - 1; i++)
		close(queued[i]);
	close(extra);
	spin();
	expect_rx(&p, OP_RST);
	cr_assert_eq(p.dst_port, 7);
	expect_no_rx();
	cr_assert_eq(vs->nr_conns, 0, "%u left", vs->nr_conns);
	cr_assert_eq(vs->local_len, 0);
}

/* ---- any thread, while the I/O thread runs ---- */

#define THREADS 4
#define PER_THREAD 25

static void *local_client_thread(void *arg)
{
	char buf[16];

	(void)arg;
	for (int i = 0; i < PER_THREAD; i++) {
		struct pollfd pf;
		int fd = virtio_vsock_connect_local(vs);

		if (fd < 0)
			return (void *)(intptr_t)fd;
		/* No driver yet: the device reads the line and closes. */
		if (send(fd, "CONNECT 5\n", 10, MSG_NOSIGNAL) != 10)
			return (void *)(intptr_t)-EIO;
		pf = (struct pollfd){ .fd = fd, .events = POLLIN };
		if (poll(&pf, 1, 10000) != 1 || recv(fd, buf, sizeof(buf), 0) != 0)
			return (void *)(intptr_t)-ETIMEDOUT;
		close(fd);
	}
	return NULL;
}

Test(vsock_local, from_other_threads_while_the_loop_runs)
{
	pthread_t t[THREADS];

	cr_assert_eq(event_loop_start(&loop, NULL), 0);
	for (int i = 0; i < THREADS; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, local_client_thread, NULL), 0);
	for (int i = 0; i < THREADS; i++) {
		void *rc;

		cr_assert_eq(pthread_join(t[i], &rc), 0);
		cr_assert_null(rc, "thread %d: %s", i, strerror(-(int)(intptr_t)rc));
	}
	event_loop_stop(&loop);
	cr_assert_eq(vs->nr_conns, 0);
	cr_assert_eq(vs->local_len, 0);
	cr_assert_eq(vs->conns_host, 0);
}

/* ---- nothing left behind ---- */

/* A device with local connections taken and still waiting, destroyed:
 * every one of its fds is closed (the callers see EOF). */
Test(vsock_local, no_fd_left_after_destroy)
{
	struct event_loop l2;
	struct virtio_vsock *w = calloc(1, sizeof(*w));
	const char *why = "";
	int before = open_fds(), fds[5];
	char b;

	cr_assert_not_null(w);
	cr_assert_eq(event_loop_init(&l2), 0);
	cr_assert_eq(virtio_vsock_init(w, NULL, GUEST_CID, &d.mem, &l2, &why), 0, "%s", why);
	for (int i = 0; i < 3; i++)
		fds[i] = local_open(w);
	while (event_loop_poll(&l2, 0) > 0)
		;
	cr_assert_eq(w->nr_conns, 3);
	for (int i = 3; i < 5; i++)
		fds[i] = local_open(w);
	cr_assert_eq(w->local_len, 2);
	virtio_vsock_destroy(w);
	event_loop_destroy(&l2);
	free(w);
	for (int i = 0; i < 5; i++) {
		cr_assert_eq(recv(fds[i], &b, 1, MSG_DONTWAIT), 0, "connection %d still open", i);
		close(fds[i]);
	}
	cr_assert_eq(open_fds(), before, "fds left behind");
}

/* ---- no socket file ---- */

Test(vsock_nopath, local_end_to_end_and_no_file)
{
	cr_assert_eq(dir_count(dir, ""), 0, "a file in %s without a path", dir);
	local_end_to_end();
	cr_assert_eq(dir_count(dir, ""), 0);
	virtio_vsock_log_stats(vs);
}

/* A guest connecting to the host has no PATH_<port> to reach: RST. */
Test(vsock_nopath, guest_connect_to_host_reset)
{
	struct gconn gc = { .gport = 40000, .hport = 5000, .buf_alloc = DEV_BUF };

	guest_init(FEAT_VERSION_1);
	rx_post(8, RX_DEFAULT);
	guest_conn_refused(&gc);
	cr_assert_eq(vs->conns_refused, 1);
	cr_assert_eq(vs->nr_conns, 0);
}
