/* watch.c - WATCH: a directory's events from the guest agent, each frame checked as coming from a hostile guest. */
#include "agent_client/watch.h"
#include "agent_client/lifecycle.h"
#include "lib/clock.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#define FRAME_WAIT_MS 5000   /* a frame begun arrives whole within this */

struct watch_first {
	const char *path;
	bool recursive;
	uint32_t id;
};

/* agent_first's builder: WATCH {path, recursive}. */
static int watch_frame(struct agent_client *c, uint8_t *buf, size_t cap, void *opaque)
{
	struct watch_first *wf = opaque;
	struct proto_writer w;

	wf->id = agent_client_id(c);
	proto_begin(&w, buf, cap, PROTO_WATCH, wf->id);
	proto_put_str(&w, wf->path);
	proto_put_u32(&w, wf->recursive);
	return proto_end(&w);
}

int agent_open_watch(struct agent_client *c, agent_dial_fn dial, void *dial_opaque,
		     const char *path, bool recursive, uint64_t deadline_ns, int cancel_fd,
		     const char **why)
{
	struct watch_first wf = { .path = path, .recursive = recursive };
	struct agent_first first = { watch_frame, &wf };

	if (strlen(path) >= PROTO_MAX_PATH) {
		*why = "the path is too long";
		return -ENAMETOOLONG;
	}
	return agent_open_with(c, dial, dial_opaque, &first, &wf.id, "WATCH", deadline_ns, cancel_fd,
			       why);
}

int agent_watch_event(const struct proto_frame *f, unsigned *kind, char *name, size_t cap)
{
	struct proto_reader r;
	uint32_t k;

	proto_reader_init(&r, f);
	if (!proto_get_u32(&r, &k) || !proto_get_str(&r, name, cap) || !proto_done(&r) ||
	    k < PROTO_WATCH_CREATE || k > PROTO_WATCH_CHMOD || !name[0])
		return -EPROTO;
	/* proto_get_str stops at no NUL: one inside is a lie about the length. */
	if (strlen(name) + 4 + 4 != f->payload_len)
		return -EPROTO;
	*kind = k;
	return 0;
}

int agent_watch_next(struct agent_client *c, int timeout_ms, int watch_fd, unsigned *kind,
		     char *name, size_t cap, char *why, size_t whylen)
{
	struct proto_frame f;
	int rc;

	why[0] = '\0';
	if (!agent_client_has_frame(c)) {
		/* POLLRDHUP only on the watcher: its going, not a byte it sends. */
		struct pollfd p[2] = { { .fd = c->fd, .events = POLLIN },
				       { .fd = watch_fd, .events = POLLRDHUP } };

		do
			rc = poll(p, 2, timeout_ms);
		while (rc < 0 && errno == EINTR);
		if (rc < 0)
			return -errno;
		if (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR))
			return -ECONNRESET;
		if (!rc)
			return 0;
	}
	rc = agent_client_recv(c, &f, clock_now_ns() + FRAME_WAIT_MS * 1000000ULL);
	if (rc <= 0)
		return agent_client_lost(rc ? rc : -ETIMEDOUT, why, whylen);
	if (f.type == PROTO_ERROR)
		return agent_client_error(&f, why, whylen);
	if (f.type != PROTO_WATCH_EVENT || agent_watch_event(&f, kind, name, cap)) {
		c->broken = true;
		snprintf(why, whylen, "the guest agent sent a malformed %s on a watch",
			 proto_type_name(f.type));
		return -EPROTO;
	}
	return 1;
}
