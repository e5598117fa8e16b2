/* watch.c - WATCH: a host connection whose child (handover.c) reports what inotify sees in a directory (and, recursive, every directory under it), one WATCH_EVENT per event, until the host closes it. */
#include "agent.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

/* As Go's fsnotify watches (what envd reports from). */
#define WATCH_MASK (IN_CREATE | IN_MOVED_TO | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_ATTRIB | \
		    IN_DELETE_SELF | IN_MOVE_SELF)
#define EVENT_BUF  (64 * 1024)

int watch_request(struct conn *c, const struct proto_frame *f)
{
	char path[PROTO_MAX_PATH];
	struct proto_reader r;
	uint32_t recursive;
	struct stat st;

	proto_reader_init(&r, f);
	if (!proto_get_str(&r, path, sizeof(path)) || !proto_get_u32(&r, &recursive) ||
	    !proto_done(&r) || recursive > 1)
		return -EPROTO;
	if (path[0] != '/')
		return conn_send_error(c, f->id, EINVAL, "WATCH: %s is not an absolute path", path);
	if (stat(path, &st) < 0)
		return conn_send_error(c, f->id, errno, "WATCH: %s: %s", path, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return conn_send_error(c, f->id, ENOTDIR, "WATCH: %s is not a directory", path);
	if (handover_check(c, f->id, "WATCH"))
		return 0;
	c->watch_path = strdup(path);
	if (!c->watch_path)
		return conn_send_error(c, f->id, ENOMEM, "WATCH: out of memory");
	c->watch_recursive = recursive;
	c->handover = HANDOVER_WATCH;
	c->handover_id = f->id;
	return 0;
}

/* The child's state: the directories watched, each by its path relative
 * to the watched one ("" for it). */
struct watcher {
	int hfd, ifd;
	uint32_t id;
	const char *root;
	bool recursive;
	struct { int wd; char *rel; } dirs[AGENT_WATCH_DIRS];
	int ndirs;
};

/* OK (text NULL), or {u32, str text}: a WATCH_EVENT's kind or an ERROR's errno. */
static void send_frame(struct watcher *w, uint8_t type, uint32_t kind_or_errno, const char *text)
{
	static uint8_t frame[PROTO_HEADER_LEN + 8 + PROTO_MAX_PATH + 64];
	struct proto_writer pw;
	int n;

	proto_begin(&pw, frame, sizeof(frame), type, w->id);
	if (text) {
		proto_put_u32(&pw, kind_or_errno);
		proto_put_str(&pw, text);
	}
	n = proto_end(&pw);
	if (n < 0 || !handover_write(w->hfd, frame, (size_t)n))
		_exit(0);   /* the host went */
}

/* The watch ends: an ERROR saying why, then the connection's end. */
static void __attribute__((noreturn)) end(struct watcher *w, int err, const char *why)
{
	send_frame(w, PROTO_ERROR, (uint32_t)err, why);
	_exit(0);
}

/* "a/b" of rel and name ("" rel: name alone); false when too long. */
static bool join(char *out, size_t cap, const char *rel, const char *name)
{
	return (size_t)snprintf(out, cap, "%s%s%s", rel, rel[0] ? "/" : "", name) < cap;
}

static int dir_of(const struct watcher *w, int wd)
{
	for (int i = 0; i < w->ndirs; i++)
		if (w->dirs[i].wd == wd)
			return i;
	return -1;
}

/* Watch root/rel and, recursive, the directories under it. Directories
 * that went meanwhile are skipped; past AGENT_WATCH_DIRS the watch ends. */
static void add_tree(struct watcher *w, const char *rel)
{
	/* On the heap: a tree 2,000 deep must not take the stack with it. */
	char *path = malloc(2 * PROTO_MAX_PATH + 2), *sub = path + PROTO_MAX_PATH + 1;
	struct dirent *d;
	DIR *dir;
	int wd;

	if (!path)
		end(w, ENOMEM, "WATCH: out of memory");
	/* The directory named may be a symbolic link to one (/var/run); the
	 * tree under it is followed without links, so no loop. */
	wd = (size_t)snprintf(path, PROTO_MAX_PATH + 1, "%s%s%s", w->root, rel[0] ? "/" : "",
			      rel) > PROTO_MAX_PATH ? -1 :
	     inotify_add_watch(w->ifd, path, WATCH_MASK | IN_ONLYDIR |
			       (rel[0] ? IN_DONT_FOLLOW : 0));
	/* Gone meanwhile, or already watched (a directory moved within the tree). */
	if (wd < 0 || dir_of(w, wd) >= 0) {
		free(path);
		return;
	}
	if (w->ndirs == AGENT_WATCH_DIRS)
		end(w, E2BIG, "WATCH: more than 4096 directories to follow");
	w->dirs[w->ndirs].wd = wd;
	w->dirs[w->ndirs].rel = strdup(rel);
	if (!w->dirs[w->ndirs].rel)
		end(w, ENOMEM, "WATCH: out of memory");
	w->ndirs++;
	if (!w->recursive || !(dir = opendir(path))) {
		free(path);
		return;
	}
	while ((d = readdir(dir))) {
		struct stat st;

		if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
			continue;
		if (d->d_type == DT_UNKNOWN) {
			if (fstatat(dirfd(dir), d->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
			    !S_ISDIR(st.st_mode))
				continue;
		} else if (d->d_type != DT_DIR) {
			continue;
		}
		if (join(sub, PROTO_MAX_PATH, rel, d->d_name))
			add_tree(w, sub);
	}
	closedir(dir);
	free(path);
}

static uint32_t kind_of(uint32_t mask)
{
	if (mask & (IN_CREATE | IN_MOVED_TO))
		return PROTO_WATCH_CREATE;
	if (mask & IN_DELETE)
		return PROTO_WATCH_REMOVE;
	if (mask & IN_MOVED_FROM)
		return PROTO_WATCH_RENAME;
	if (mask & IN_MODIFY)
		return PROTO_WATCH_WRITE;
	if (mask & IN_ATTRIB)
		return PROTO_WATCH_CHMOD;
	return 0;
}

static void on_event(struct watcher *w, const struct inotify_event *ev)
{
	char name[PROTO_MAX_PATH];
	int i = dir_of(w, ev->wd);
	uint32_t kind;

	if (ev->mask & IN_Q_OVERFLOW)
		end(w, ENOBUFS, "WATCH: events were lost (more than the guest's inotify queue holds)");
	if (i < 0)
		return;
	/* The watched directory itself: its end is the watch's. A directory
	 * under it is reported by its parent; its own watch just goes. */
	if (!ev->len) {
		if (i == 0 && (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)))
			end(w, ENOENT, "WATCH: the watched directory was removed or moved");
		if (ev->mask & IN_IGNORED) {
			free(w->dirs[i].rel);
			w->dirs[i] = w->dirs[--w->ndirs];
		}
		return;
	}
	kind = kind_of(ev->mask);
	/* A file written through the agent: its temporary's events are
	 * mayfly's, the rename's arrival under its name is the user's. */
	if (!kind || file_is_replace_temp(ev->name) ||
	    !join(name, sizeof(name), w->dirs[i].rel, ev->name))
		return;
	/* A new directory is watched before it is reported: a client that
	 * saw it created and writes into it next has its events seen. */
	if (w->recursive && (ev->mask & IN_ISDIR) && kind == PROTO_WATCH_CREATE)
		add_tree(w, name);
	send_frame(w, PROTO_WATCH_EVENT, kind, name);
}

void watch_main(int hfd, const char *path, bool recursive, uint32_t id)
{
	static struct watcher w;
	static uint8_t buf[EVENT_BUF] __attribute__((aligned(__alignof__(struct inotify_event))));
	struct pollfd p[2];

	w = (struct watcher){ .hfd = hfd, .id = id, .root = path, .recursive = recursive };
	w.ifd = inotify_init1(IN_CLOEXEC);
	if (w.ifd < 0) {
		char why[128];
		int err = errno;

		snprintf(why, sizeof(why), "WATCH: no inotify in the guest: %s", strerror(err));
		end(&w, err, why);
	}
	add_tree(&w, "");
	if (!w.ndirs)
		end(&w, ENOENT, "WATCH: the directory went before it could be watched");
	send_frame(&w, PROTO_OK, 0, NULL);
	p[0] = (struct pollfd){ .fd = hfd, .events = POLLIN };
	p[1] = (struct pollfd){ .fd = w.ifd, .events = POLLIN };
	for (;;) {
		ssize_t n;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		/* The host sends nothing after WATCH: readable is its end. */
		if (p[0].revents)
			_exit(0);
		n = read(w.ifd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			end(&w, errno ? errno : EIO, "WATCH: reading inotify failed");
		for (ssize_t off = 0; off + (ssize_t)sizeof(struct inotify_event) <= n; ) {
			const struct inotify_event *ev = (const void *)(buf + off);

			on_event(&w, ev);
			off += (ssize_t)(sizeof(*ev) + ev->len);
		}
	}
}
