/* ctl_client.c - mayfly pause and mayfly fork: the snapshot's files created here, passed to the VM over its control socket, renamed into place once whole. */
#include "control/ctl_client.h"
#include "control/ctl_msg.h"
#include "lib/clock.h"
#include "lib/errmsg.h"
#include "lib/log.h"
#include "lib/thread.h"
#include "vm/snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define REPLY_WAIT_MS  (600 * 1000)   /* a save of a large guest in an emulated harness */
#define GONE_WAIT_MS   (30 * 1000)    /* the VM process and its jail after a commit */

struct job {
	const char *vsock;
	char out[CONFIG_PATH_MAX];
	char ctl[128];
	char tmp[CONFIG_PATH_MAX + 32];
	bool tmp_made;
	int sock, sig_fd;
	struct snapshot_fds fds;
};

/* DIR must be new, or an empty directory (rename replaces one). */
static int check_out(const char *out)
{
	struct dirent *e;
	struct stat st;
	DIR *d;
	int n = 0;

	if (lstat(out, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return -EEXIST;
	d = opendir(out);
	if (!d)
		return -errno;
	while ((e = readdir(d)) != NULL)
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n ? -EEXIST : 0;
}

static int dial(struct job *j)
{
	struct sockaddr_un a;
	struct stat st;

	if (ctl_socket_path(j->vsock, j->ctl, sizeof(j->ctl))) {
		log_say("--vsock path too long for a control socket");
		return CTL_EXIT_USAGE;
	}
	if (lstat(j->ctl, &st) < 0) {
		log_say("no control socket '%s': no VM runs with mayfly boot --vsock %s", j->ctl,
			j->vsock);
		return CTL_EXIT_NO_VM;
	}
	j->sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (j->sock < 0) {
		log_say("cannot create a socket: %s", strerror(errno));
		return CTL_EXIT_INTERNAL;
	}
	if (ctl_sockaddr(j->ctl, &a)) {
		log_say("--vsock path too long for a control socket");
		return CTL_EXIT_USAGE;
	}
	if (connect(j->sock, (struct sockaddr *)&a, sizeof(a)) == 0)
		return 0;
	if (errno == EPROTOTYPE || errno == ENOTSOCK || !S_ISSOCK(st.st_mode))
		log_say("'%s' is not a mayfly control socket", j->ctl);
	else if (errno == ECONNREFUSED)
		log_say("nobody listens on '%s': its VM has ended", j->ctl);
	else
		log_say("cannot connect to '%s': %s", j->ctl, strerror(errno));
	return errno == EACCES ? CTL_EXIT_INTERNAL : CTL_EXIT_NO_VM;
}

/* The temporary directory beside DIR and its three empty files. */
static int make_files(struct job *j)
{
	const char *names[3] = { SNAPSHOT_MEMORY, SNAPSHOT_OVERLAY_ROOT, SNAPSHOT_STATE };
	int *fds[3] = { &j->fds.memory, &j->fds.overlay, &j->fds.state };
	char path[CONFIG_PATH_MAX + 64];

	if (snprintf(j->tmp, sizeof(j->tmp), "%s.tmp-XXXXXX", j->out) >= (int)sizeof(j->tmp) ||
	    !mkdtemp(j->tmp)) {
		log_say("cannot create a directory beside '%s': %s", j->out,
			errno ? strerror(errno) : "name too long");
		return CTL_EXIT_INTERNAL;
	}
	j->tmp_made = true;
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/%s", j->tmp, names[i]);
		*fds[i] = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (*fds[i] < 0) {
			log_say("cannot create '%s': %s", path, strerror(errno));
			return CTL_EXIT_INTERNAL;
		}
	}
	return 0;
}

static void remove_tmp(struct job *j)
{
	const char *names[3] = { SNAPSHOT_MEMORY, SNAPSHOT_OVERLAY_ROOT, SNAPSHOT_STATE };
	char path[CONFIG_PATH_MAX + 64];

	if (!j->tmp_made)
		return;
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/%s", j->tmp, names[i]);
		unlink(path);
	}
	rmdir(j->tmp);
	j->tmp_made = false;
}

/* The exit code of a wait a signal ended: 128 + its number, as mayfly run's. */
static int interrupted_code(int sig_fd)
{
	struct signalfd_siginfo si;

	if (read(sig_fd, &si, sizeof(si)) != sizeof(si))
		return CTL_EXIT_INTERNAL;
	return 128 + (int)si.ssi_signo;
}

/* Wait for a reply; a signal (SIGINT, SIGTERM, SIGHUP) gives up. */
static int wait_reply(struct job *j, struct ctl_reply *r)
{
	uint8_t buf[CTL_REPLY_LEN];
	const char *why = "";
	int fds[1], nfds;
	int n = ctl_recv(j->sock, buf, sizeof(buf), fds, 0, &nfds, REPLY_WAIT_MS, j->sig_fd);

	if (n == -ECANCELED) {
		log_say("interrupted: nothing saved (the VM goes on)");
		return interrupted_code(j->sig_fd);
	}
	if (n == -ETIMEDOUT) {
		log_say("no answer from '%s' in %d s", j->ctl, REPLY_WAIT_MS / 1000);
		return CTL_EXIT_INTERNAL;
	}
	if (n <= 0 || ctl_reply_decode(r, buf, (size_t)n, &why)) {
		log_say("'%s' is not a mayfly control socket (%s)", j->ctl,
			n == 0 ? "it closed without an answer" : n < 0 ? strerror(-n) : why);
		return CTL_EXIT_NO_VM;
	}
	switch (r->status) {
	case CTL_ST_OK:
		return 0;
	case CTL_ST_BUSY:
		log_say("busy: %s", r->text);
		return CTL_EXIT_BUSY;
	case CTL_ST_REFUSED:
		log_say("cannot save this VM: %s", r->text);
		return CTL_EXIT_REFUSED;
	default:
		log_say("the save failed (the VM goes on): %s", r->text);
		return CTL_EXIT_INTERNAL;
	}
}

static void send_op(struct job *j, uint32_t op)
{
	struct ctl_request req = { .op = op };
	uint8_t buf[CTL_REQUEST_LEN];

	ctl_request_encode(&req, buf);
	if (ctl_send(j->sock, buf, sizeof(buf), NULL, 0))
		log_warn("cannot reach the VM again: %s", strerror(errno));
}

static void sync_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

/* After a committed pause: the VM process ends (our connection closes) and
 * its supervisor removes the jail and the sockets (PATH.ctl last). */
static void wait_gone(struct job *j)
{
	uint64_t until = clock_now_ns() + (uint64_t)GONE_WAIT_MS * 1000000;
	struct pollfd p = { .fd = j->sock, .events = POLLIN };
	struct stat st;
	char c;

	while (poll(&p, 1, GONE_WAIT_MS) > 0 && recv(j->sock, &c, 1, MSG_DONTWAIT) > 0)
		;
	while (lstat(j->ctl, &st) == 0 && clock_now_ns() < until)
		poll(NULL, 0, 5);
	if (lstat(j->ctl, &st) == 0)
		log_warn("'%s' is still there %d s after the pause", j->ctl, GONE_WAIT_MS / 1000);
}

static int run_job(struct job *j, bool fork)
{
	struct ctl_request req = { .op = fork ? CTL_OP_FORK : CTL_OP_PAUSE };
	const int fds[CTL_NFDS] = { j->fds.memory, j->fds.overlay, j->fds.state };
	uint8_t buf[CTL_REQUEST_LEN];
	struct ctl_reply r;
	char path[CONFIG_PATH_MAX + 64];
	int code;

	snprintf(req.dir, sizeof(req.dir), "%s", j->out);
	ctl_request_encode(&req, buf);
	if (ctl_send(j->sock, buf, sizeof(buf), fds, CTL_NFDS)) {
		log_say("'%s' is not a mayfly control socket (it took no request)", j->ctl);
		return CTL_EXIT_NO_VM;
	}
	snapshot_fds_close(&j->fds);   /* the VM has its own copies */
	code = wait_reply(j, &r);
	if (code)
		return code;
	if (!(r.flags & CTL_FLAG_OVERLAY)) {
		snprintf(path, sizeof(path), "%s/%s", j->tmp, SNAPSHOT_OVERLAY_ROOT);
		unlink(path);
	}
	sync_dir(j->tmp);
	if (rename(j->tmp, j->out) < 0) {
		log_say("cannot put the snapshot in '%s': %s%s", j->out, strerror(errno),
			fork ? "" : " (the VM goes on)");
		if (!fork)
			send_op(j, CTL_OP_ABORT);
		return errno == EEXIST || errno == ENOTEMPTY ? CTL_EXIT_EXISTS : CTL_EXIT_INTERNAL;
	}
	j->tmp_made = false;
	snprintf(path, sizeof(path), "%s/..", j->out);
	sync_dir(path);
	if (!fork) {
		send_op(j, CTL_OP_COMMIT);
		wait_gone(j);
	}
	log_info("%s into '%s': %llu KiB of memory, %llu KiB of disk overlay, %llu bytes of "
		 "state; the guest was paused %.1f ms, the save took %.1f ms",
		 fork ? "forked" : "paused", j->out, (unsigned long long)r.memory_bytes >> 10,
		 (unsigned long long)r.overlay_bytes >> 10, (unsigned long long)r.state_bytes,
		 (double)r.paused_us / 1000, (double)r.total_us / 1000);
	return 0;
}

int ctl_client_save(const char *vsock, const char *out, bool fork)
{
	struct job j = { .sock = -1, .sig_fd = -1, .fds = { -1, -1, -1 } };
	sigset_t set;
	int code, rc;

	j.vsock = vsock;
	/* DIR/ names DIR: the temporary directory goes beside it, not in it. */
	if (snprintf(j.out, sizeof(j.out), "%s", out) >= (int)sizeof(j.out)) {
		log_say("--out path too long");
		return CTL_EXIT_USAGE;
	}
	for (size_t len = strlen(j.out); len > 1 && j.out[len - 1] == '/'; len--)
		j.out[len - 1] = '\0';
	rc = check_out(j.out);
	if (rc) {
		log_say(rc == -EEXIST ? "'%s' exists and is not an empty directory" :
			"cannot look at '%s': %s", j.out, strerror(-rc));
		return rc == -EEXIST ? CTL_EXIT_EXISTS : CTL_EXIT_INTERNAL;
	}
	/* A signal removes what we made instead of leaving it behind. */
	thread_stop_signals(&set);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	j.sig_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	code = dial(&j);
	if (!code)
		code = make_files(&j);
	if (!code)
		code = run_job(&j, fork);
	snapshot_fds_close(&j.fds);
	remove_tmp(&j);
	if (j.sock >= 0)
		close(j.sock);
	if (j.sig_fd >= 0)
		close(j.sig_fd);
	return code;
}

int ctl_client_ready(const char *vsock, uint64_t deadline_ns, int cancel_fd, const char **why)
{
	return ctl_client_call(vsock, CTL_OP_READY, deadline_ns, cancel_fd, why);
}

/* One request, with fd (>= 0) alongside, answered as ctl_client_ready is;
 * the reply in *r. */
static int request(const char *vsock, const struct ctl_request *req, int fd, uint64_t deadline_ns,
		   int cancel_fd, struct ctl_reply *r, const char **why)
{
	static _Thread_local char msg[CTL_TEXT_MAX + 64];
	uint8_t out[CTL_REQUEST_LEN], in[CTL_REPLY_LEN];
	uint64_t now = clock_now_ns();
	struct sockaddr_un a;
	char path[128];
	int sock, n, nfds, fds[1];

	if (ctl_socket_path(vsock, path, sizeof(path)) || ctl_sockaddr(path, &a))
		return -ENAMETOOLONG;
	sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (sock < 0)
		return -errno;
	ctl_request_encode(req, out);
	n = connect(sock, (struct sockaddr *)&a, sizeof(a)) < 0 ? -errno :
	    ctl_send(sock, out, sizeof(out), fd >= 0 ? &fd : NULL, fd >= 0 ? 1 : 0);
	if (!n)
		n = ctl_recv(sock, in, sizeof(in), fds, 0, &nfds,
			     now < deadline_ns ? (int)((deadline_ns - now) / 1000000) : 0, cancel_fd);
	close(sock);
	if (n > 0 && ctl_reply_decode(r, in, (size_t)n, why) == 0) {
		if (r->status == CTL_ST_OK)
			return 0;
		snprintf(msg, sizeof(msg), "%s", r->text);
		*why = msg;
		return -EIO;
	}
	if (n > 0)
		return -EBADMSG;   /* *why says how */
	snprintf(msg, sizeof(msg), "no answer from its control socket: %s",
		 n == 0 ? "the VM ended" : n == -ETIMEDOUT ? "timed out" : strerror(-n));
	*why = msg;
	return n == 0 ? -ECONNRESET : n;
}

int ctl_client_call(const char *vsock, enum ctl_op op, uint64_t deadline_ns, int cancel_fd,
		    const char **why)
{
	struct ctl_request req = { .op = op };
	struct ctl_reply r;

	return request(vsock, &req, -1, deadline_ns, cancel_fd, &r, why);
}

int ctl_client_disk_usage(const char *vsock, uint64_t deadline_ns, int cancel_fd, bool *full,
			  uint64_t *used, const char **why)
{
	struct ctl_request req = { .op = CTL_OP_DISK_USAGE };
	struct ctl_reply r;
	int rc = request(vsock, &req, -1, deadline_ns, cancel_fd, &r, why);

	*full = !rc && (r.flags & CTL_FLAG_DISK_FULL);
	*used = rc ? 0 : r.overlay_bytes;
	return rc;
}

int ctl_client_disk_insert(const char *vsock, unsigned slot, int fd, const char *id,
			   uint64_t deadline_ns, int cancel_fd, const char **why)
{
	struct ctl_request req = { .op = CTL_OP_DISK_INSERT, .slot = slot };
	struct ctl_reply r;

	if (strlen(id) > CTL_DISK_ID_MAX)
		return errmsg_why(why, -EINVAL, "a disk id longer than %d bytes", CTL_DISK_ID_MAX);
	snprintf(req.dir, sizeof(req.dir), "%s", id);
	return request(vsock, &req, fd, deadline_ns, cancel_fd, &r, why);
}
