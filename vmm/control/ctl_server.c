/* ctl_server.c - a booted VM's control socket: mayfly pause and fork save the running VM, quiesced, into files the client opened and passed. */
#include "control/ctl_server.h"
#include "lib/errmsg.h"
#include "control/ctl_msg.h"
#include "agent_client/client.h"
#include "agent_client/lifecycle.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "seccomp/seccomp.h"
#include "snapshot/codec.h"
#include "lib/thread.h"
#include "vm/vm.h"
#include "vm/devices.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define REQUEST_WAIT_MS 10000    /* a client says what it wants at once */
#define COMMIT_WAIT_MS  120000   /* a paused VM waits this long for the rename */
#define AGENT_WAIT_S    10
#define HOLD_PATIENCE_MS 500     /* a finished call's connection closing */
#define IDLE_WAIT_MS    15000    /* a closing connection may linger (VSOCK_LINGER_MS) */
#define NS              1000000000ULL

/* A socket file nobody listens on is a leftover of a VM that died: replace
 * it. Anything else at the path is not ours. */
static int clear_path(const char *path)
{
	struct sockaddr_un a;
	struct stat st;
	int fd, rc;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	if (ctl_sockaddr(path, &a))
		return -ENAMETOOLONG;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	rc = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 ? -EADDRINUSE :
	     errno == ECONNREFUSED ? 0 : -errno;
	close(fd);
	if (!rc && unlink(path) < 0)
		rc = -errno;
	return rc;
}

static int listen_on(struct ctl_server *s)
{
	struct sockaddr_un a;
	struct stat st;
	mode_t old;
	int rc = clear_path(s->path);

	if (rc)
		return rc;
	s->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s->listen_fd < 0)
		return -errno;
	if (ctl_sockaddr(s->path, &a))
		return -ENAMETOOLONG;
	/* Mode 0600 from the start: only our user (or root) may connect. */
	old = umask(0177);
	rc = bind(s->listen_fd, (struct sockaddr *)&a, sizeof(a)) < 0 ? -errno : 0;
	umask(old);
	if (!rc && (listen(s->listen_fd, 8) < 0 || lstat(s->path, &st) < 0))
		rc = -errno;
	if (rc)
		return rc;
	s->sock_dev = st.st_dev;
	s->sock_ino = st.st_ino;
	return 0;
}

int ctl_server_open(struct ctl_server *s, const struct vm_config *cfg, const struct snapshot *snap)
{
	int rc;

	memset(s, 0, sizeof(*s));
	s->listen_fd = s->stop_fd = s->ready_fd = s->kernel_fd = s->rootfs_fd = s->kept_fd = -1;
	if (!cfg->vsock_path[0])
		return 0;
	if (ctl_socket_path(cfg->vsock_path, s->path, sizeof(s->path))) {
		s->path[0] = '\0';
		log_warn("--vsock path too long for its control socket (PATH" CTL_SUFFIX "): no "
			 "mayfly pause or fork for this VM");
		return 0;
	}
	rc = listen_on(s);
	if (rc) {
		log_say("cannot listen on the control socket '%s': %s", s->path,
			rc == -EEXIST ? "a file that is not a socket is there" :
			rc == -EADDRINUSE ? "another process listens on it" : strerror(-rc));
		goto err;
	}
	if (snap) {
		s->ids.kernel = snap->files.kernel;
		s->ids.has_rootfs = snap->files.has_rootfs;
		s->ids.rootfs = snap->files.rootfs;
		s->ids_known = true;
	} else {
		s->kernel_fd = open(cfg->kernel, O_RDONLY | O_CLOEXEC);
		s->rootfs_fd = cfg->rootfs[0] ? open(cfg->rootfs, O_RDONLY | O_CLOEXEC) : -1;
		if (s->kernel_fd < 0 || (cfg->rootfs[0] && s->rootfs_fd < 0)) {
			rc = -errno;
			log_say("cannot open the kernel or root image for the control socket: %s",
				strerror(errno));
			goto err;
		}
		/* Hashed before (the default snapshot did): no hashing at the save. */
		s->ids.has_rootfs = s->rootfs_fd >= 0;
		s->ids_known = !image_id_remembered(s->kernel_fd, &s->ids.kernel) &&
			       (s->rootfs_fd < 0 || !image_id_remembered(s->rootfs_fd, &s->ids.rootfs));
	}
	s->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	s->ready_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	s->client = calloc(1, sizeof(*s->client));   /* large: its frame buffers */
	if (s->stop_fd < 0 || s->ready_fd < 0 || !s->client) {
		rc = -ENOMEM;
		log_say("cannot set up the control socket: out of memory or fds");
		goto err;
	}
	s->client->fd = -1;
	return 0;

err:
	ctl_server_stop(s);
	return rc;
}

/* ---- one live save ---- */

static int dial_vm(void *opaque)
{
	return vm_connect_vsock(opaque);
}

static void reply(int fd, struct ctl_reply *r, uint32_t status, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void reply(int fd, struct ctl_reply *r, uint32_t status, const char *fmt, ...)
{
	uint8_t buf[CTL_REPLY_LEN];
	va_list ap;

	r->status = status;
	va_start(ap, fmt);
	vsnprintf(r->text, sizeof(r->text), fmt, ap);
	va_end(ap);
	ctl_reply_encode(r, buf);
	if (ctl_send(fd, buf, sizeof(buf), NULL, 0))
		log_info("control socket: the client left before the reply");
}

/* The kernel's and root image's identities, hashed once through the fds
 * opened before the jail. */
static int ensure_ids(struct ctl_server *s, const char **why)
{
	int rc;

	if (s->ids_known)
		return 0;
	rc = image_id_fd(s->kernel_fd, &s->ids.kernel, why);
	if (!rc && s->rootfs_fd >= 0) {
		s->ids.has_rootfs = true;
		rc = image_id_fd(s->rootfs_fd, &s->ids.rootfs, why);
	}
	s->ids_known = !rc;
	return rc;
}

/* No new host client gets in, and none is in the middle of a call. A
 * client that just hung up (its call over) is only seen closed once the
 * I/O thread has read its end: give that a moment before calling it busy. */
static int hold_door(struct ctl_server *s)
{
	int rc = vm_vsock_hold(s->vm);

	for (int waited = 0; rc == -EBUSY && waited < HOLD_PATIENCE_MS; waited += 10) {
		poll(NULL, 0, 10);
		rc = vm_vsock_hold(s->vm);
	}
	return rc;
}

/* The agent syncs and drops its connections (ours last), and the device
 * holds none: nothing in flight. */
static int quiesce(struct ctl_server *s, bool *reached, const char **why)
{
	uint64_t deadline = clock_now_ns() + AGENT_WAIT_S * NS;
	int rc = agent_client_connect(s->client, dial_vm, s->vm, PROTO_AGENT_PORT, deadline,
				      s->stop_fd, why);

	*reached = !rc;
	if (!rc)
		rc = agent_quiesce(s->client, why);
	agent_client_close(s->client);
	if (!rc)
		rc = vm_devices_wait_idle(s->vm, IDLE_WAIT_MS, why);
	return rc;
}

/* The VM runs again: vCPUs, the I/O thread, the listener; the agent takes
 * a new clock and entropy (after QUIESCE it refuses work until FRESHEN). */
static void go_on(struct ctl_server *s, bool quiesced)
{
	uint64_t deadline = clock_now_ns() + AGENT_WAIT_S * NS;
	const char *why = "";
	int rc;

	vm_unquiesce(s->vm);
	vm_vsock_release(s->vm);
	if (!quiesced)
		return;
	rc = agent_connect_fresh(s->client, dial_vm, s->vm, deadline, s->stop_fd, &why);
	agent_client_close(s->client);
	if (rc)
		log_warn("control socket: the guest agent was not freshened after the save: %s", why);
}

/* The client's files: regular, empty, open for reading and writing. */
static int check_fds(const int *fds, const char **why)
{
	for (int i = 0; i < CTL_NFDS; i++) {
		struct stat st;
		int fl = fcntl(fds[i], F_GETFL);

		if (fstat(fds[i], &st) < 0 || !S_ISREG(st.st_mode) || st.st_size != 0 ||
		    fl < 0 || (fl & O_ACCMODE) != O_RDWR)
			return errmsg_why(why, -EBADMSG, "control request file %d is not an empty "
					"regular file open read-write", i);
	}
	return 0;
}

/* A pause waits for the client's COMMIT (the snapshot is in place) before
 * the VM ends; anything else and it runs on. */
static bool committed(struct ctl_server *s, int fd)
{
	uint8_t buf[CTL_REQUEST_LEN];
	struct ctl_request req;
	const char *why = "";
	int fds[CTL_NFDS], nfds;
	int n = ctl_recv(fd, buf, sizeof(buf), fds, CTL_NFDS, &nfds, COMMIT_WAIT_MS, s->stop_fd);

	if (n <= 0)
		return false;
	if (ctl_request_decode(&req, buf, (size_t)n, nfds, &why)) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		return false;
	}
	return req.op == CTL_OP_COMMIT;
}

/* Returns true when the VM ends (a committed pause). */
static bool live_save(struct ctl_server *s, int fd, const struct ctl_request *req,
		      const struct snapshot_fds *fds)
{
	uint64_t t0 = clock_now_ns(), t_paused;
	struct ctl_reply r = { 0 };
	struct snapshot_stats st = { 0 };
	struct snapshot_files f;
	struct snap_writer w;
	const char *why = "";
	bool reached, running;
	int rc = ensure_ids(s, &why);

	if (rc) {
		reply(fd, &r, CTL_ST_FAILED, "%s", why);
		return false;
	}
	if (hold_door(s)) {
		reply(fd, &r, CTL_ST_BUSY, "a call is in flight (a connection to the guest is "
		      "open): try again once it ends");
		return false;
	}
	rc = quiesce(s, &reached, &why);
	if (rc) {
		go_on(s, reached);
		reply(fd, &r, CTL_ST_REFUSED, "the guest agent could not be quiesced: %s", why);
		return false;
	}
	if (vm_quiesce(s->vm)) {
		vm_vsock_release(s->vm);
		reply(fd, &r, CTL_ST_FAILED, "the VM ended");
		return false;
	}
	t_paused = clock_now_ns();
	f = s->ids;
	snap_writer_init(&w);
	rc = vm_snapshot_capture(s->vm, fds, &w, &f, &st, &why);
	/* What a fork's guest waits for: memory and overlay copied. */
	r.paused_us = (clock_now_ns() - t_paused) / 1000;
	running = rc || req->op == CTL_OP_FORK;
	if (running)
		go_on(s, true);
	if (!rc)
		rc = vm_snapshot_finish(&w, fds, &f, &st, &why);
	snap_writer_free(&w);
	if (rc && !running)
		go_on(s, true);
	log_info("control socket: %s: quiesced in %.1f ms, memory and overlay in %.1f ms, "
		 "hashed and state written in %.1f ms", req->op == CTL_OP_FORK ? "fork" : "pause",
		 (double)(t_paused - t0) / 1e6, (double)r.paused_us / 1e3,
		 (double)(clock_now_ns() - t_paused) / 1e6 - (double)r.paused_us / 1e3);
	r.flags = f.has_overlay ? CTL_FLAG_OVERLAY : 0;
	r.memory_bytes = st.memory_bytes;
	r.overlay_bytes = st.overlay_bytes;
	r.state_bytes = st.state_bytes;
	r.total_us = (clock_now_ns() - t0) / 1000;
	if (rc) {
		/* -ENOTSUP: this VM cannot be in a snapshot (a writable raw disk). */
		reply(fd, &r, rc == -ENOTSUP ? CTL_ST_REFUSED : CTL_ST_FAILED, "%s", why);
		return false;
	}
	reply(fd, &r, CTL_ST_OK, "saved");
	if (req->op == CTL_OP_FORK)
		return false;
	if (!committed(s, fd)) {
		go_on(s, true);
		log_warn("control socket: the pause was not committed: the VM goes on");
		return false;
	}
	/* The reason is the VM's one closing line ("vm stopped: ..."). */
	vm_stop(s->vm, 0, "paused into '%s'", req->dir);
	return true;
}

/* READY: whether the guest agent answers, without a connection of the
 * asker's own into the guest (each one costs the guest's agent its
 * buffers: a forked child's pages). The agent thread's FRESHEN is the
 * proof; until it comes, wait (the VM ends, and with it this socket, if it
 * never does), bounded like the agent thread's own wait. */
static void answer_ready(struct ctl_server *s, int fd)
{
	struct pollfd p[2] = { { .fd = s->ready_fd, .events = POLLIN },
			       { .fd = s->stop_fd, .events = POLLIN } };
	struct ctl_reply r = { 0 };
	int n;

	do
		n = poll(p, 2, AGENT_BOOT_TIMEOUT_S * 1000);
	while (n < 0 && errno == EINTR);
	if (n > 0 && (p[0].revents & POLLIN))
		reply(fd, &r, CTL_ST_OK, "the guest agent is ready");
	else
		reply(fd, &r, CTL_ST_FAILED, "the guest agent is not ready");
}

/* SUSPEND, RESUME (a container's pause): the guest stops where it is, its
 * devices' work with it, and later goes on. Twice is the same as once. */
static void suspend(struct ctl_server *s, int fd, bool stop)
{
	struct ctl_reply r = { 0 };

	if (stop && !s->suspended) {
		if (vm_quiesce(s->vm)) {
			reply(fd, &r, CTL_ST_FAILED, "the VM ended");
			return;
		}
		s->suspended = true;
		log_info("control socket: suspended");
	} else if (!stop && s->suspended) {
		vm_unquiesce(s->vm);
		s->suspended = false;
		log_info("control socket: resumed");
	}
	reply(fd, &r, CTL_ST_OK, stop ? "suspended" : "running");
}

/* DISK_INSERT (a pod's next container): the image the client opened goes
 * into a spare slot. */
static void insert_disk(struct ctl_server *s, int fd, const struct ctl_request *req, int image_fd)
{
	struct ctl_reply r = { 0 };
	const char *why = "";

	if (vm_devices_insert_disk(s->vm, req->slot, image_fd, req->dir, &why))
		reply(fd, &r, CTL_ST_REFUSED, "%s", why);
	else
		reply(fd, &r, CTL_ST_OK, "inserted");
}

/* DISK_USAGE: why a guest's write failed, asked by the VM's owner. */
static void disk_usage(struct ctl_server *s, int fd)
{
	struct ctl_reply r = { 0 };
	bool full = vm_devices_disk_full(s->vm, &r.overlay_bytes);

	r.flags = full ? CTL_FLAG_DISK_FULL : 0;
	reply(fd, &r, CTL_ST_OK, full ? "a disk holds its quota" : "room left");
}

/* One client: one request. True when the VM ends. */
static bool serve(struct ctl_server *s, int fd)
{
	uint8_t buf[CTL_REQUEST_LEN];
	struct ctl_request req;
	struct ctl_reply r = { 0 };
	struct snapshot_fds fds = { -1, -1, -1 };
	const char *why = "";
	int got[CTL_NFDS], nfds, n, bad;
	bool ended;

	n = ctl_recv(fd, buf, sizeof(buf), got, CTL_NFDS, &nfds, REQUEST_WAIT_MS, s->stop_fd);
	if (n <= 0) {
		if (n != 0 && n != -ECANCELED && n != -ETIMEDOUT)
			reply(fd, &r, CTL_ST_BAD_REQUEST, "malformed control message: %s",
			      strerror(-n));
		return false;
	}
	bad = ctl_request_decode(&req, buf, (size_t)n, nfds, &why);
	if (!bad && req.op == CTL_OP_READY) {
		answer_ready(s, fd);
		return false;
	}
	if (!bad && (req.op == CTL_OP_SUSPEND || req.op == CTL_OP_RESUME)) {
		suspend(s, fd, req.op == CTL_OP_SUSPEND);
		return false;
	}
	if (!bad && req.op == CTL_OP_DISK_INSERT) {
		insert_disk(s, fd, &req, got[0]);
		return false;
	}
	if (!bad && req.op == CTL_OP_DISK_USAGE) {
		disk_usage(s, fd);
		return false;
	}
	if (!bad && req.op == CTL_OP_STOP) {
		/* A container's VM at its task's end: a normal end, exit 0. */
		reply(fd, &r, CTL_ST_OK, "stopping");
		vm_stop(s->vm, 0, "stopped through its control socket");
		return false;
	}
	if (bad ||
	    (req.op != CTL_OP_PAUSE && req.op != CTL_OP_FORK &&
	     errmsg_why(&why, -EINVAL, "no pause to commit or abort")) ||
	    check_fds(got, &why)) {
		for (int i = 0; i < nfds; i++)
			close(got[i]);
		reply(fd, &r, CTL_ST_BAD_REQUEST, "%s", why);
		return false;
	}
	fds.memory = got[0];
	fds.overlay = got[1];
	fds.state = got[2];
	if (s->suspended) {
		/* Its agent cannot be quiesced: nothing in the guest runs. */
		snapshot_fds_close(&fds);
		reply(fd, &r, CTL_ST_BUSY, "the VM is suspended: resume it first");
		return false;
	}
	ended = live_save(s, fd, &req, &fds);
	snapshot_fds_close(&fds);
	return ended;
}

static void *ctl_thread(void *arg)
{
	struct ctl_server *s = arg;

	thread_set_name("ctl");
	seccomp_enter(SECCOMP_ROLE_SNAPSHOT);
	for (;;) {
		struct pollfd p[2] = { { .fd = s->listen_fd, .events = POLLIN },
				       { .fd = s->stop_fd, .events = POLLIN } };
		int fd;

		if (poll(p, 2, -1) < 0)
			continue;
		if (p[1].revents)
			break;
		fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			poll(NULL, 0, 10);   /* out of fds: do not spin */
			continue;
		}
		if (serve(s, fd)) {
			/* Open until the process ends: the client's EOF says the VM is gone. */
			s->kept_fd = fd;
			break;
		}
		close(fd);
	}
	return NULL;
}

int ctl_server_start(struct ctl_server *s, struct vm *vm)
{
	int rc;

	if (s->listen_fd < 0)
		return 0;
	s->vm = vm;
	rc = thread_start(&s->thread, ctl_thread, s);
	if (rc) {
		log_say("cannot start the control socket's thread: %s", strerror(-rc));
		return rc;
	}
	s->started = true;
	return 0;
}

void ctl_server_ready(struct ctl_server *s)
{
	uint64_t one = 1;

	if (s->ready_fd >= 0 && write(s->ready_fd, &one, sizeof(one)) < 0)
		log_warn("cannot mark the control socket ready: %s", strerror(errno));
}

void ctl_server_stop(struct ctl_server *s)
{
	uint64_t one = 1;
	struct stat st;

	if (s->started) {
		if (write(s->stop_fd, &one, sizeof(one)) < 0)
			log_warn("cannot stop the control socket's thread: %s", strerror(errno));
		pthread_join(s->thread, NULL);
		s->started = false;
	}
	if (s->listen_fd >= 0) {
		close(s->listen_fd);
		/* Only the file we bound; a jailed VM may not (its supervisor does). */
		if (lstat(s->path, &st) == 0 && st.st_dev == s->sock_dev && st.st_ino == s->sock_ino)
			unlink(s->path);
	}
	if (s->stop_fd >= 0)
		close(s->stop_fd);
	if (s->ready_fd >= 0)
		close(s->ready_fd);
	if (s->kernel_fd >= 0)
		close(s->kernel_fd);
	if (s->rootfs_fd >= 0)
		close(s->rootfs_fd);
	free(s->client);
	s->client = NULL;
	s->listen_fd = s->stop_fd = s->ready_fd = s->kernel_fd = s->rootfs_fd = -1;
	/* kept_fd stays open: the process is about to end. */
}
