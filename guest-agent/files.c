/* files.c - streamed file transfers and directory listings: FILE_WRITE/DATA/END, FILE_READ, LIST. */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One LIST_ENTRIES entry at most: name (NAME_MAX), type, mode, size. */
#define LIST_ENTRY_MAX (4 + 255 + 4 + 4 + 8)

static struct xfer *xfer_find(struct conn *c, uint32_t id)
{
	for (struct xfer *x = c->xfers; x; x = x->next)
		if (x->id == id && !x->done)
			return x;
	return NULL;
}

/* Close what x holds and mark it for the sweep. A replacing write not
 * committed by FILE_END leaves nothing: its temporary file goes. */
static void xfer_end(struct xfer *x)
{
	if (x->dir)
		closedir(x->dir);     /* closes x->fd too */
	else if (x->fd >= 0)
		close(x->fd);
	x->dir = NULL;
	x->fd = -1;
	x->done = true;
	if (x->tmp)
		unlink(x->tmp);
	free(x->tmp);
	free(x->final);
	x->tmp = x->final = NULL;
}

/* Room for another transfer under id, or an ERROR sent and false. */
static bool xfer_can_add(struct conn *c, uint32_t id)
{
	if (xfer_find(c, id)) {
		conn_send_error(c, id, EEXIST, "transfer id %u is in use", id);
		return false;
	}
	if (c->nxfers >= AGENT_MAX_XFERS) {
		conn_send_error(c, id, EAGAIN, "%d transfers already open on this connection",
				AGENT_MAX_XFERS);
		return false;
	}
	return true;
}

static struct xfer *xfer_add(struct conn *c, uint32_t id, enum xfer_kind kind, int fd, DIR *dir)
{
	struct xfer *x = calloc(1, sizeof(*x));

	if (!x) {
		if (dir)
			closedir(dir);
		else
			close(fd);
		conn_send_error(c, id, ENOMEM, "out of memory");
		return NULL;
	}
	*x = (struct xfer){ .next = c->xfers, .kind = kind, .id = id, .fd = fd, .dir = dir };
	c->xfers = x;
	c->nxfers++;
	return x;
}

/* Open path for a transfer, regular files only: O_NONBLOCK keeps a FIFO or a
 * device from blocking the agent in open(), and is cleared afterwards. */
static int open_regular(const char *path, int flags, mode_t mode)
{
	struct stat st;
	int fd = open(path, flags | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, mode);

	int err = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		err = errno;
	else if (S_ISDIR(st.st_mode))
		err = EISDIR;
	else if (!S_ISREG(st.st_mode))
		err = EINVAL;
	else if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0)
		err = errno;
	if (err) {
		close(fd);
		return -err;
	}
	return fd;
}

/* PROTO_WRITE_REPLACE: a new file beside path's target (a symbolic link
 * is followed, as open would), exactly `mode`. Its fd, or -errno; *tmp
 * and *final malloc'd. */
static int open_replacement(const char *path, uint32_t mode, char **tmp, char **final)
{
	char *dir, *slash;
	int fd, err;

	*tmp = NULL;
	*final = realpath(path, NULL);
	if (!*final && errno != ENOENT)
		return -errno;
	if (!*final)
		*final = strdup(path);
	if (!*final)
		return -ENOMEM;
	dir = strdup(*final);
	slash = dir ? strrchr(dir, '/') : NULL;
	if (slash)
		*slash = '\0';
	if (!dir || asprintf(tmp, "%s/.%s" REPLACE_TAG "XXXXXX", slash ? dir : ".",
			     slash ? slash + 1 : dir) < 0) {
		free(dir);
		free(*final);
		*final = *tmp = NULL;
		return -ENOMEM;
	}
	free(dir);
	fd = mkostemp(*tmp, O_CLOEXEC);
	if (fd >= 0 && fchmod(fd, mode & 07777) == 0)
		return fd;
	err = errno;
	if (fd >= 0) {
		close(fd);
		unlink(*tmp);
	}
	free(*tmp);
	free(*final);
	*tmp = *final = NULL;
	return -err;
}

int file_write_request(struct conn *c, const struct proto_frame *f)
{
	char path[PROTO_MAX_PATH], *tmp = NULL, *final = NULL;
	struct proto_reader r;
	uint32_t mode, flags;
	int oflags = O_WRONLY, fd;
	struct xfer *x;

	proto_reader_init(&r, f);
	if (!proto_get_str(&r, path, sizeof(path)) || !proto_get_u32(&r, &mode) ||
	    !proto_get_u32(&r, &flags) || !proto_done(&r))
		return -EPROTO;
	if (!xfer_can_add(c, f->id))
		return 0;
	if (flags & PROTO_WRITE_REPLACE) {
		fd = open_replacement(path, mode, &tmp, &final);
		if (fd < 0) {
			conn_send_error(c, f->id, -fd, "create beside %s: %s", path, strerror(-fd));
			return 0;
		}
		x = xfer_add(c, f->id, XFER_WRITE, fd, NULL);
		if (!x) {
			unlink(tmp);
			free(tmp);
			free(final);
			return 0;
		}
		x->tmp = tmp;
		x->final = final;
		conn_send_empty(c, PROTO_OK, f->id);
		return 0;
	}
	if (flags & PROTO_WRITE_CREATE)
		oflags |= O_CREAT;
	if (flags & PROTO_WRITE_TRUNC)
		oflags |= O_TRUNC;
	if (flags & PROTO_WRITE_APPEND)
		oflags |= O_APPEND;
	/* The agent's umask is 0: a new file gets exactly `mode`. */
	fd = open_regular(path, oflags, mode & 07777);
	if (fd < 0) {
		conn_send_error(c, f->id, -fd, "open %s: %s", path, strerror(-fd));
		return 0;
	}
	if (xfer_add(c, f->id, XFER_WRITE, fd, NULL))
		conn_send_empty(c, PROTO_OK, f->id);
	return 0;
}

int file_data_request(struct conn *c, const struct proto_frame *f)
{
	struct proto_reader r;
	const uint8_t *data;
	uint32_t len;
	struct xfer *x;
	ssize_t n;

	proto_reader_init(&r, f);
	if (!proto_get_bytes(&r, &data, &len) || !proto_done(&r))
		return -EPROTO;
	x = xfer_find(c, f->id);
	if (!x || x->kind != XFER_WRITE) {
		conn_send_error(c, f->id, EBADF, "no file write %u in progress", f->id);
		return 0;
	}
	/* After a failed write the rest is dropped; FILE_END reports the error. */
	while (len > 0 && !x->err) {
		n = write(x->fd, data, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			x->err = n < 0 ? errno : EIO;
			break;
		}
		data += n;
		len -= (uint32_t)n;
	}
	return 0;
}

int file_end_request(struct conn *c, const struct proto_frame *f)
{
	struct xfer *x;
	int err;

	if (f->payload_len)
		return -EPROTO;
	x = xfer_find(c, f->id);
	if (!x || x->kind != XFER_WRITE) {
		conn_send_error(c, f->id, EBADF, "no file write %u in progress", f->id);
		return 0;
	}
	/* OK means on the guest's disk: a host that copies a file in and then
	 * boots another VM from that disk must not lose it. */
	err = x->err;
	if (!err && fsync(x->fd) < 0)
		err = errno;
	if (close(x->fd) < 0 && !err)
		err = errno;
	x->fd = -1;
	if (!err && x->tmp && rename(x->tmp, x->final) < 0)
		err = errno;
	if (!err && x->tmp) {
		free(x->tmp);         /* committed: not removed by xfer_end */
		x->tmp = NULL;
	}
	xfer_end(x);
	if (err)
		conn_send_error(c, f->id, err, "write: %s", strerror(err));
	else
		conn_send_empty(c, PROTO_OK, f->id);
	return 0;
}

int file_read_request(struct conn *c, const struct proto_frame *f)
{
	char path[PROTO_MAX_PATH];
	struct proto_reader r;
	int fd;

	proto_reader_init(&r, f);
	if (!proto_get_str(&r, path, sizeof(path)) || !proto_done(&r))
		return -EPROTO;
	if (!xfer_can_add(c, f->id))
		return 0;
	fd = open_regular(path, O_RDONLY, 0);
	if (fd < 0) {
		conn_send_error(c, f->id, -fd, "open %s: %s", path, strerror(-fd));
		return 0;
	}
	/* The data follows from xfers_pump, as fast as the host reads it. */
	xfer_add(c, f->id, XFER_READ, fd, NULL);
	return 0;
}

int list_request(struct conn *c, const struct proto_frame *f)
{
	char path[PROTO_MAX_PATH];
	struct proto_reader r;
	DIR *dir;
	int fd;

	proto_reader_init(&r, f);
	if (!proto_get_str(&r, path, sizeof(path)) || !proto_done(&r))
		return -EPROTO;
	if (!xfer_can_add(c, f->id))
		return 0;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		conn_send_error(c, f->id, errno, "open %s: %s", path, strerror(errno));
		return 0;
	}
	dir = fdopendir(fd);
	if (!dir) {
		conn_send_error(c, f->id, errno, "opendir %s: %s", path, strerror(errno));
		close(fd);
		return 0;
	}
	xfer_add(c, f->id, XFER_LIST, fd, dir);
	return 0;
}

static void read_step(struct conn *c, struct xfer *x)
{
	static uint8_t chunk[PROTO_CHUNK];
	ssize_t n = read(x->fd, chunk, sizeof(chunk));

	if (n < 0 && errno == EINTR)
		return;
	if (n > 0) {
		conn_send_data(c, PROTO_FILE_DATA, x->id, chunk, (uint32_t)n);
		return;
	}
	if (n == 0)
		conn_send_empty(c, PROTO_FILE_END, x->id);
	else
		conn_send_error(c, x->id, errno, "read: %s", strerror(errno));
	xfer_end(x);
}

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* One LIST_ENTRIES frame of up to PROTO_CHUNK bytes; the last says more = 0. */
static void list_step(struct conn *c, struct xfer *x)
{
	struct proto_writer w;
	struct dirent *de;
	struct stat st;
	uint32_t count = 0, more = 1;
	size_t counts;

	conn_begin(c, &w, PROTO_LIST_ENTRIES, x->id);
	counts = w.len;
	proto_put_u32(&w, 0);          /* more and count, known at the end */
	proto_put_u32(&w, 0);
	while (!w.error && w.len - PROTO_HEADER_LEN + LIST_ENTRY_MAX <= PROTO_CHUNK) {
		errno = 0;
		de = readdir(x->dir);
		if (!de && errno) {
			/* The frame begun above is dropped: it was never committed. */
			conn_send_error(c, x->id, errno, "readdir: %s", strerror(errno));
			xfer_end(x);
			return;
		}
		if (!de) {
			more = 0;
			break;
		}
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd(x->dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;     /* removed since readdir saw it */
		proto_put_str(&w, de->d_name);
		proto_put_u32(&w, file_type_of(st.st_mode));
		proto_put_u32(&w, st.st_mode & 07777);
		proto_put_u64(&w, (uint64_t)st.st_size);
		count++;
	}
	if (!w.error) {
		put_le32(w.buf + counts, more);
		put_le32(w.buf + counts + 4, count);
	}
	conn_end(c, &w);
	if (!more)
		xfer_end(x);
}

bool xfers_pump(struct conn *c)
{
	bool pending = false;

	for (struct xfer *x = c->xfers; x; x = x->next) {
		if (x->done || x->kind == XFER_WRITE)
			continue;
		/* Paused: the socket's POLLOUT wakes the loop when the host reads. */
		if (c->dead || c->closing || conn_paused(c))
			return false;
		if (x->kind == XFER_READ)
			read_step(c, x);
		else
			list_step(c, x);
		pending |= !x->done;
	}
	return pending && !c->dead && !c->closing && !conn_paused(c);
}

void xfers_end_all(struct conn *c)
{
	for (struct xfer *x = c->xfers; x; x = x->next)
		if (!x->done)
			xfer_end(x);
}

void xfers_sweep(struct conn *c)
{
	struct xfer **xp, *x;

	for (xp = &c->xfers; (x = *xp);) {
		if (x->done) {
			*xp = x->next;
			c->nxfers--;
			free(x);
		} else {
			xp = &x->next;
		}
	}
}

bool file_is_replace_temp(const char *name)
{
	size_t n = strlen(name), tag = strlen(REPLACE_TAG);

	/* ".NAME" REPLACE_TAG "XXXXXX", NAME one byte at least. */
	return n >= 2 + tag + 6 && name[0] == '.' && !strncmp(name + n - 6 - tag, REPLACE_TAG, tag);
}
