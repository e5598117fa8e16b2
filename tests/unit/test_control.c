/* test_control.c - the control socket of mayfly pause and fork (vmm/control/): the message codec, descriptors passed and refused, and a server refusing bad requests before it touches the VM. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "lib/clock.h"
#include "control/ctl_client.h"
#include "control/ctl_msg.h"
#include "control/ctl_server.h"
#include "dir_count.h"
#include "disk/disk.h"
#include "virtio/blk.h"
#include "vm/vm.h"

static void encode_req(uint32_t op, const char *dir, uint8_t *buf)
{
	struct ctl_request r = { .op = op };

	snprintf(r.dir, sizeof(r.dir), "%s", dir);
	ctl_request_encode(&r, buf);
}

Test(ctl_msg, request_round_trip)
{
	uint8_t buf[CTL_REQUEST_LEN];
	struct ctl_request r;
	const char *why = "";

	encode_req(CTL_OP_PAUSE, "/srv/snaps/a b", buf);
	cr_assert_eq(ctl_request_decode(&r, buf, sizeof(buf), CTL_NFDS, &why), 0, "%s", why);
	cr_assert_eq(r.op, CTL_OP_PAUSE);
	cr_assert_str_eq(r.dir, "/srv/snaps/a b");
	encode_req(CTL_OP_COMMIT, "", buf);
	cr_assert_eq(ctl_request_decode(&r, buf, sizeof(buf), 0, &why), 0, "%s", why);
	cr_assert_eq(r.op, CTL_OP_COMMIT);
	/* A container's pause, resume and end: no descriptors. */
	for (uint32_t op = CTL_OP_SUSPEND; op <= CTL_OP_STOP; op++) {
		encode_req(op, "", buf);
		cr_assert_eq(ctl_request_decode(&r, buf, sizeof(buf), 0, &why), 0, "%s", why);
		cr_assert_eq(r.op, op);
		cr_assert_eq(ctl_request_decode(&r, buf, sizeof(buf), 1, &why), -EBADMSG);
	}
}

Test(ctl_msg, request_refusals)
{
	uint8_t buf[CTL_REQUEST_LEN], bad[CTL_REQUEST_LEN];
	struct ctl_request r;
	const char *why = "";

	encode_req(CTL_OP_FORK, "d", buf);
	/* Every length but the one. */
	cr_assert_eq(ctl_request_decode(&r, buf, sizeof(buf) - 1, CTL_NFDS, &why), -EBADMSG);
	cr_assert_eq(ctl_request_decode(&r, buf, 0, CTL_NFDS, &why), -EBADMSG);
	/* Descriptors: a save needs exactly three, the rest none. */
	for (int n = 0; n <= 5; n++)
		cr_assert_eq(ctl_request_decode(&r, buf, sizeof(buf), n, &why),
			     n == CTL_NFDS ? 0 : -EBADMSG, "%d fds", n);
	encode_req(CTL_OP_ABORT, "", bad);
	cr_assert_eq(ctl_request_decode(&r, bad, sizeof(bad), 1, &why), -EBADMSG);
	/* Magic, op, dir length, a control byte, padding. */
	memcpy(bad, buf, sizeof(bad));
	bad[0] ^= 1;
	cr_assert_eq(ctl_request_decode(&r, bad, sizeof(bad), CTL_NFDS, &why), -EBADMSG);
	for (uint32_t op = 0; op <= CTL_OP_MAX + 1; op += CTL_OP_MAX + 1) {   /* unknown ops */
		memcpy(bad, buf, sizeof(bad));
		bad[8] = (uint8_t)op;
		cr_assert_eq(ctl_request_decode(&r, bad, sizeof(bad), CTL_NFDS, &why), -EBADMSG);
	}
	memcpy(bad, buf, sizeof(bad));
	bad[12] = 0xff;
	bad[13] = 0x01;   /* 511: bytes past the name are zero, so not printable */
	cr_assert_eq(ctl_request_decode(&r, bad, sizeof(bad), CTL_NFDS, &why), -EBADMSG);
	bad[12] = 0x01;
	bad[13] = 0x02;   /* 513: past CTL_DIR_MAX */
	cr_assert_eq(ctl_request_decode(&r, bad, sizeof(bad), CTL_NFDS, &why), -EBADMSG);
	memcpy(bad, buf, sizeof(bad));
	bad[16] = '\n';
	cr_assert_eq(ctl_request_decode(&r, bad, sizeof(bad), CTL_NFDS, &why), -EBADMSG);
	memcpy(bad, buf, sizeof(bad));
	bad[sizeof(bad) - 1] = 'x';
	cr_assert_eq(ctl_request_decode(&r, bad, sizeof(bad), CTL_NFDS, &why), -EBADMSG);
}

/* DISK_INSERT: one descriptor, a slot, a serial of at most 20 bytes; no
 * other request carries a slot. */
Test(ctl_msg, disk_insert)
{
	struct ctl_request r = { .op = CTL_OP_DISK_INSERT, .slot = 6 }, back;
	uint8_t buf[CTL_REQUEST_LEN];
	const char *why = "";

	snprintf(r.dir, sizeof(r.dir), "ctr-6");
	ctl_request_encode(&r, buf);
	cr_assert_eq(ctl_request_decode(&back, buf, sizeof(buf), 1, &why), 0, "%s", why);
	cr_assert_eq(back.op, CTL_OP_DISK_INSERT);
	cr_assert_eq(back.slot, 6);
	cr_assert_str_eq(back.dir, "ctr-6");
	for (int n = 0; n <= CTL_NFDS; n++)
		if (n != 1)
			cr_assert_eq(ctl_request_decode(&back, buf, sizeof(buf), n, &why), -EBADMSG);
	snprintf(r.dir, sizeof(r.dir), "%s", "123456789012345678901");   /* 21 bytes */
	ctl_request_encode(&r, buf);
	cr_assert_eq(ctl_request_decode(&back, buf, sizeof(buf), 1, &why), -EBADMSG);
	cr_assert(strstr(why, "disk id"), "%s", why);
	r.op = CTL_OP_STOP;
	r.dir[0] = '\0';
	ctl_request_encode(&r, buf);
	cr_assert_eq(ctl_request_decode(&back, buf, sizeof(buf), 0, &why), -EBADMSG);
	cr_assert(strstr(why, "slot"), "%s", why);
}

Test(ctl_msg, reply_round_trip_and_refusals)
{
	struct ctl_reply r = { .status = CTL_ST_BUSY, .flags = CTL_FLAG_OVERLAY,
			       .memory_bytes = 1ULL << 40, .overlay_bytes = 7, .state_bytes = 9,
			       .paused_us = 11, .total_us = 13 }, back;
	uint8_t buf[CTL_REPLY_LEN], bad[CTL_REPLY_LEN];
	const char *why = "";

	snprintf(r.text, sizeof(r.text), "a call is in flight");
	ctl_reply_encode(&r, buf);
	cr_assert_eq(ctl_reply_decode(&back, buf, sizeof(buf), &why), 0, "%s", why);
	cr_assert_eq(back.status, CTL_ST_BUSY);
	cr_assert_eq(back.flags, CTL_FLAG_OVERLAY);
	cr_assert_eq(back.memory_bytes, 1ULL << 40);
	cr_assert_eq(back.total_us, 13);
	cr_assert_str_eq(back.text, "a call is in flight");
	cr_assert_eq(ctl_reply_decode(&back, buf, sizeof(buf) + 0 - 1, &why), -EBADMSG);
	memcpy(bad, buf, sizeof(bad));
	bad[8] = CTL_ST_MAX + 1;
	cr_assert_eq(ctl_reply_decode(&back, bad, sizeof(bad), &why), -EBADMSG);
	memcpy(bad, buf, sizeof(bad));
	bad[12] = CTL_FLAG_DISK_FULL;
	cr_assert_eq(ctl_reply_decode(&back, bad, sizeof(bad), &why), 0, "%s", why);
	cr_assert_eq(back.flags, CTL_FLAG_DISK_FULL);
	bad[12] = 4;
	cr_assert_eq(ctl_reply_decode(&back, bad, sizeof(bad), &why), -EBADMSG);
	memcpy(bad, buf, sizeof(bad));
	bad[56] = CTL_TEXT_MAX + 1;
	cr_assert_eq(ctl_reply_decode(&back, bad, sizeof(bad), &why), -EBADMSG);
	memcpy(bad, buf, sizeof(bad));
	bad[60] = 0x1b;   /* an escape sequence would reach the terminal */
	cr_assert_eq(ctl_reply_decode(&back, bad, sizeof(bad), &why), -EBADMSG);
}

Test(ctl_msg, socket_path)
{
	char out[128], longer[200];

	cr_assert_eq(ctl_socket_path("/tmp/vm.sock", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "/tmp/vm.sock.ctl");
	memset(longer, 'a', 104);
	longer[104] = '\0';
	cr_assert_eq(ctl_socket_path(longer, out, sizeof(out)), -ENAMETOOLONG);
}

Test(ctl_msg, descriptors_pass_and_extra_ones_are_closed)
{
	int sv[2], fds[CTL_NFDS + 2], got[CTL_NFDS], nfds, before;
	uint8_t msg[16] = "hello", in[32];

	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	for (int i = 0; i < CTL_NFDS; i++)
		fds[i] = eventfd((unsigned)i + 1, EFD_CLOEXEC);
	cr_assert_eq(ctl_send(sv[0], msg, sizeof(msg), fds, CTL_NFDS), 0);
	cr_assert_eq(ctl_recv(sv[1], in, sizeof(in), got, CTL_NFDS, &nfds, 1000, -1),
		     (int)sizeof(msg));
	cr_assert_eq(nfds, CTL_NFDS);
	for (int i = 0; i < CTL_NFDS; i++) {
		uint64_t v;

		cr_assert_eq(read(got[i], &v, sizeof(v)), (ssize_t)sizeof(v));
		cr_assert_eq(v, (uint64_t)i + 1, "descriptor %d is the one sent", i);
		cr_assert(fcntl(got[i], F_GETFD) & FD_CLOEXEC);
		close(got[i]);
	}
	/* More than the receiver takes: every one closed, the message refused. */
	before = open_fds();
	cr_assert_eq(ctl_send(sv[0], msg, sizeof(msg), fds, CTL_NFDS), 0);
	cr_assert_eq(ctl_recv(sv[1], in, sizeof(in), got, 1, &nfds, 1000, -1), -EBADMSG);
	cr_assert_eq(nfds, 0);
	cr_assert_eq(open_fds(), before, "no descriptor of a refused message stays open");
	/* A message longer than the buffer. */
	cr_assert_eq(ctl_send(sv[0], msg, sizeof(msg), fds, 1), 0);
	cr_assert_eq(ctl_recv(sv[1], in, 4, got, CTL_NFDS, &nfds, 1000, -1), -EMSGSIZE);
	cr_assert_eq(open_fds(), before);
	/* Silence times out; a cancel ends the wait; the peer's end is 0. */
	cr_assert_eq(ctl_recv(sv[1], in, sizeof(in), got, CTL_NFDS, &nfds, 20, -1), -ETIMEDOUT);
	{
		int cancel = eventfd(1, EFD_CLOEXEC);

		cr_assert_eq(ctl_recv(sv[1], in, sizeof(in), got, CTL_NFDS, &nfds, 1000, cancel),
			     -ECANCELED);
		close(cancel);
	}
	close(sv[0]);
	cr_assert_eq(ctl_recv(sv[1], in, sizeof(in), got, CTL_NFDS, &nfds, 1000, -1), 0);
	close(sv[1]);
	for (int i = 0; i < CTL_NFDS; i++)
		close(fds[i]);
}

/* ---- the server's refusals, before it ever touches the VM ---- */

struct served {
	char dir[64], vsock[80], ctl[96];
	struct ctl_server s;
};

static void serve_start_vm(struct served *t, struct vm *vm)
{
	struct vm_config cfg;

	snprintf(t->dir, sizeof(t->dir), "/tmp/mayfly-ctl-XXXXXX");
	cr_assert_not_null(mkdtemp(t->dir));
	snprintf(t->vsock, sizeof(t->vsock), "%s/vm.sock", t->dir);
	snprintf(t->ctl, sizeof(t->ctl), "%s/vm.sock.ctl", t->dir);
	config_init(&cfg);
	snprintf(cfg.vsock_path, sizeof(cfg.vsock_path), "%s", t->vsock);
	cr_assert_eq(CONFIG_SET_PATH(cfg.kernel, "/proc/self/exe"), 0);
	cr_assert_eq(ctl_server_open(&t->s, &cfg, NULL), 0);
	config_free(&cfg);
	cr_assert_eq(ctl_server_start(&t->s, vm), 0);
}

/* Bad requests are answered before the VM is looked at: none here. */
static void serve_start(struct served *t)
{
	serve_start_vm(t, NULL);
}

static int dial(const struct served *t)
{
	struct sockaddr_un a;
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	cr_assert_eq(ctl_sockaddr(t->ctl, &a), 0);
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0, "%s", strerror(errno));
	return fd;
}

static uint32_t ask(const struct served *t, const void *msg, size_t len, const int *fds, int nfds)
{
	uint8_t buf[CTL_REPLY_LEN];
	struct ctl_reply r;
	const char *why = "";
	int got[1], ngot, fd = dial(t), n;

	cr_assert_eq(ctl_send(fd, msg, len, fds, nfds), 0);
	n = ctl_recv(fd, buf, sizeof(buf), got, 0, &ngot, 5000, -1);
	cr_assert_eq(n, CTL_REPLY_LEN, "a reply, not %d", n);
	cr_assert_eq(ctl_reply_decode(&r, buf, (size_t)n, &why), 0, "%s", why);
	close(fd);
	return r.status;
}

Test(ctl_server, refuses_bad_requests_and_cleans_up)
{
	struct served t;
	uint8_t req[CTL_REQUEST_LEN];
	struct stat st;
	char path[200];
	int files[CTL_NFDS];

	serve_start(&t);
	cr_assert_eq(stat(t.ctl, &st), 0);
	cr_assert(S_ISSOCK(st.st_mode));
	cr_assert_eq(st.st_mode & 0777, 0600, "only its owner may connect");
	cr_assert_eq(ask(&t, "garbage", 7, NULL, 0), CTL_ST_BAD_REQUEST);
	encode_req(CTL_OP_COMMIT, "", req);
	cr_assert_eq(ask(&t, req, sizeof(req), NULL, 0), CTL_ST_BAD_REQUEST, "no pause to commit");
	encode_req(CTL_OP_PAUSE, "x", req);
	cr_assert_eq(ask(&t, req, sizeof(req), NULL, 0), CTL_ST_BAD_REQUEST, "no files");
	/* Files that are not empty, not read-write, not regular. */
	for (int i = 0; i < CTL_NFDS; i++) {
		snprintf(path, sizeof(path), "%s/f%d", t.dir, i);
		files[i] = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	}
	cr_assert_eq(write(files[1], "x", 1), 1);
	cr_assert_eq(ask(&t, req, sizeof(req), files, CTL_NFDS), CTL_ST_BAD_REQUEST, "not empty");
	cr_assert_eq(ftruncate(files[1], 0), 0);
	close(files[2]);
	files[2] = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_eq(ask(&t, req, sizeof(req), files, CTL_NFDS), CTL_ST_BAD_REQUEST, "read-only");
	close(files[2]);
	files[2] = open(t.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_eq(ask(&t, req, sizeof(req), files, CTL_NFDS), CTL_ST_BAD_REQUEST, "a directory");
	/* Still serving; stopping removes the socket. */
	cr_assert_eq(ask(&t, "x", 1, NULL, 0), CTL_ST_BAD_REQUEST);
	ctl_server_stop(&t.s);
	cr_assert_eq(stat(t.ctl, &st), -1, "the control socket is removed");
	for (int i = 0; i < CTL_NFDS; i++) {
		close(files[i]);
		snprintf(path, sizeof(path), "%s/f%d", t.dir, i);
		unlink(path);
	}
	cr_assert_eq(rmdir(t.dir), 0, "nothing else left in the directory");
}

/* READY: answered once the agent thread says so (no connection into the
 * guest); a VM ending first answers FAILED; no control socket is ENAMETOOLONG
 * (the service then asks the agent) and a missing one an error. */
Test(ctl_server, ready_after_the_agent_and_failed_when_the_vm_ends)
{
	uint64_t soon = clock_now_ns() + 5000000000ULL;
	uint8_t req[CTL_REQUEST_LEN], buf[CTL_REPLY_LEN];
	struct ctl_reply r;
	struct served t;
	const char *why = "";
	char longer[120];
	int fd, got[1], ngot;

	serve_start(&t);
	encode_req(CTL_OP_READY, "", req);
	/* Not ready yet: the VM ends meanwhile. */
	fd = dial(&t);
	cr_assert_eq(ctl_send(fd, req, sizeof(req), NULL, 0), 0);
	cr_assert_eq(ctl_recv(fd, buf, sizeof(buf), got, 0, &ngot, 200, -1), -ETIMEDOUT,
		     "no answer before the agent is ready");
	ctl_server_stop(&t.s);
	cr_assert_eq(ctl_recv(fd, buf, sizeof(buf), got, 0, &ngot, 5000, -1), CTL_REPLY_LEN);
	cr_assert_eq(ctl_reply_decode(&r, buf, sizeof(buf), &why), 0, "%s", why);
	cr_assert_eq(r.status, CTL_ST_FAILED);
	close(fd);
	cr_assert_neq(ctl_client_ready(t.vsock, soon, -1, &why), 0, "no VM: not ready");
	cr_assert_eq(rmdir(t.dir), 0);

	serve_start(&t);
	ctl_server_ready(&t.s);
	cr_assert_eq(ask(&t, req, sizeof(req), NULL, 0), CTL_ST_OK);
	cr_assert_eq(ctl_client_ready(t.vsock, soon, -1, &why), 0, "%s", why);
	cr_assert_eq(ctl_client_ready(t.vsock, soon, -1, &why), 0, "asked again: still ready");
	memset(longer, 'a', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	cr_assert_eq(ctl_client_ready(longer, soon, -1, &why), -ENAMETOOLONG);
	ctl_server_stop(&t.s);
	cr_assert_eq(rmdir(t.dir), 0);
}

/* DISK_USAGE: what the VM's copy-on-write disks hold, and whether one
 * holds its quota (why a guest's write failed, for the service). */
Test(ctl_server, disk_usage_says_when_the_quota_is_used_up)
{
	uint64_t soon = clock_now_ns() + 5000000000ULL, used = 1;
	struct virtio_blk blk = { 0 };
	struct vm vm = { .blks = &blk, .nr_blks = 1 };
	uint8_t block[4096] = { 1 };
	struct iovec iov = { block, sizeof(block) };
	char image[] = "/tmp/mayfly-ctl-disk-XXXXXX";
	const char *why = "";
	struct served t;
	bool full = true;
	int fd = mkstemp(image);

	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, 4 * 4096), 0);
	close(fd);
	cr_assert_eq(disk_open_cow(&blk.disk, image, &why), 0, "%s", why);
	cr_assert_eq(disk_cow_set_quota(&blk.disk, 2 * 4096), 0);
	serve_start_vm(&t, &vm);
	cr_assert_eq(ctl_client_disk_usage(t.vsock, soon, -1, &full, &used, &why), 0, "%s", why);
	cr_assert_not(full);
	cr_assert_eq(used, 0);
	cr_assert_eq(blk.disk.ops->writev(&blk.disk, &iov, 1, 0), 0);
	cr_assert_eq(ctl_client_disk_usage(t.vsock, soon, -1, &full, &used, &why), 0, "%s", why);
	cr_assert_not(full, "one block of two");
	cr_assert_eq(used, 4096);
	cr_assert_eq(blk.disk.ops->writev(&blk.disk, &iov, 1, 3 * 4096), 0);
	cr_assert_eq(blk.disk.ops->writev(&blk.disk, &iov, 1, 2 * 4096), -ENOSPC);
	cr_assert_eq(ctl_client_disk_usage(t.vsock, soon, -1, &full, &used, &why), 0, "%s", why);
	cr_assert(full, "the quota is used up");
	cr_assert_eq(used, 2 * 4096);
	ctl_server_stop(&t.s);
	cr_assert_neq(ctl_client_disk_usage(t.vsock, soon, -1, &full, &used, &why), 0, "no VM");
	cr_assert_not(full);
	disk_close(&blk.disk);
	unlink(image);
	cr_assert_eq(rmdir(t.dir), 0);
}

Test(ctl_server, stale_socket_replaced_other_file_refused)
{
	struct served t;
	struct vm_config cfg;
	struct ctl_server s2;
	int fd;

	serve_start(&t);
	ctl_server_stop(&t.s);
	/* A socket file nobody listens on (a VM that died) is replaced. */
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	{
		struct sockaddr_un a;

		cr_assert_eq(ctl_sockaddr(t.ctl, &a), 0);
		cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	}
	close(fd);
	config_init(&cfg);
	snprintf(cfg.vsock_path, sizeof(cfg.vsock_path), "%s", t.vsock);
	cr_assert_eq(CONFIG_SET_PATH(cfg.kernel, "/proc/self/exe"), 0);
	cr_assert_eq(ctl_server_open(&s2, &cfg, NULL), 0);
	/* A second server on a live one is refused. */
	{
		struct ctl_server s3;

		cr_assert_neq(ctl_server_open(&s3, &cfg, NULL), 0);
	}
	ctl_server_stop(&s2);
	/* A regular file there is not ours to replace. */
	fd = open(t.ctl, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	close(fd);
	cr_assert_neq(ctl_server_open(&s2, &cfg, NULL), 0);
	config_free(&cfg);
	unlink(t.ctl);
	rmdir(t.dir);
}
