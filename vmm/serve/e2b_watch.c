/* e2b_watch.c - envd's directory watches through the guest agent's WATCH: WatchDir's stream, and the watchers CreateWatcher makes for GetWatcherEvents to poll (a table of E2B_MAX_WATCHERS, the idle ones removed). */
#include "serve/e2b_watch.h"
#include "serve/calls.h"
#include "serve/e2b_msg.h"
#include "serve/e2b_reply.h"
#include "serve/http_reply.h"
#include "lib/clock.h"
#include "lib/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define STREAM_BLOCK      4096
#define KEEPALIVE_S       50          /* the SDK's Keepalive-Ping-Interval */
#define KEEPALIVE_MAX_S   600

/* A watch's request: path and recursive, the path E2B's (relative: in its
 * home). 0, or the Connect code with err. */
static enum connect_code watch_request(const uint8_t *json, size_t len, char *path, size_t cap,
				       bool *recursive, char *err, size_t errlen)
{
	char given[API_MAX_PATH + 1];

	if (e2b_parse_watch_dir(json, len, given, sizeof(given), recursive, err, errlen))
		return CONNECT_INVALID_ARGUMENT;
	if (e2b_guest_path(given, path, cap)) {
		snprintf(err, errlen, "the path is too long");
		return CONNECT_INVALID_ARGUMENT;
	}
	return CONNECT_OK;
}

/* A watch on sandbox id opened (the sandbox held only meanwhile): 0, or
 * the Connect code with err. */
static enum connect_code open_watch(struct e2b_server *e, const char *id, const char *caller,
				    const char *path, bool recursive, struct watch_conn **w,
				    char *err, size_t errlen)
{
	struct call_result r = { 0 };
	struct sandbox *sb;
	int rc = service_get(e->svc, id, &sb, err, errlen);

	if (rc)
		return rc == 404 ? CONNECT_NOT_FOUND : CONNECT_UNAVAILABLE;
	rc = calls_watch_open(e->svc, sb, caller, path, recursive, w, &r);
	service_put(e->svc, sb);
	if (rc)
		snprintf(err, errlen, "%s", r.error);
	return rc ? e2b_code_of_status(r.status) : CONNECT_OK;
}

/* A watch's end (rc < 0 from calls_watch_next) as a Connect code. */
static enum connect_code code_of_end(int rc)
{
	switch (-rc) {
	case ENOENT: return CONNECT_NOT_FOUND;
	case ENOBUFS: case E2BIG: return CONNECT_RESOURCE_EXHAUSTED;
	case EPROTO: return CONNECT_INTERNAL;
	}
	return CONNECT_UNAVAILABLE;
}

/* ---- WatchDir's stream ---- */

struct watch_stream {
	struct watch_conn *w;
	int client_fd;
	int keepalive_ms;
	bool ended;
	struct connect_queue q;
	struct e2b_codec codec;        /* its call's */
	char end_why[300];            /* the watch's end, for its record; "" none */
	char name[E2B_MAX_NAME + 1];
};

static ssize_t watch_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct watch_stream *ws = cls;
	size_t n;

	(void)pos;
	while (!(n = connect_queue_take(&ws->q, buf, max))) {
		unsigned kind = 0;
		int rc;

		if (ws->ended)
			return MHD_CONTENT_READER_END_OF_STREAM;
		rc = calls_watch_next(ws->w, ws->keepalive_ms, ws->client_fd, &kind, ws->name,
				      sizeof(ws->name), ws->end_why, sizeof(ws->end_why));
		if (rc == -ECONNRESET) {
			ws->end_why[0] = '\0';
			return MHD_CONTENT_READER_END_WITH_ERROR;   /* the client went */
		}
		if (rc < 0) {
			e2b_codec_push(&ws->codec, &ws->q, CONNECT_FLAG_END_STREAM,
				       connect_end_stream_json(code_of_end(rc), ws->end_why));
			ws->ended = true;
		} else if (!e2b_codec_push(&ws->codec, &ws->q, 0, rc ? e2b_watch_event(kind, ws->name) :
					   e2b_watch_keepalive())) {
			return MHD_CONTENT_READER_END_WITH_ERROR;   /* out of memory */
		}
	}
	return (ssize_t)n;
}

static void watch_free(void *cls)
{
	struct watch_stream *ws = cls;

	calls_watch_close(ws->w, ws->end_why[0] ? ws->end_why : NULL);
	connect_queue_free(&ws->q);
	free(ws);
}

/* Keepalive-Ping-Interval: 1..KEEPALIVE_MAX_S seconds, else the SDK's. */
static int keepalive_ms(struct MHD_Connection *conn)
{
	const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Keepalive-Ping-Interval");
	char *end;
	long s = h ? strtol(h, &end, 10) : 0;

	if (!h || end == h || *end || s < 1 || s > KEEPALIVE_MAX_S)
		s = KEEPALIVE_S;
	return (int)s * 1000;
}

enum MHD_Result e2b_watch_dir(struct e2b_server *e, struct MHD_Connection *conn,
			      const struct e2b_codec *c, const char *id, const char *caller,
			      const uint8_t *json, size_t len)
{
	char path[API_MAX_PATH + 1], err[400];
	struct watch_stream *ws;
	enum connect_code code;
	bool recursive;

	code = watch_request(json, len, path, sizeof(path), &recursive, err, sizeof(err));
	if (code)
		return e2b_stream_error(conn, code, err);
	ws = calloc(1, sizeof(*ws));
	if (!ws)
		return e2b_stream_error(conn, CONNECT_INTERNAL, "out of memory");
	code = open_watch(e, id, caller, path, recursive, &ws->w, err, sizeof(err));
	if (code) {
		free(ws);
		return e2b_stream_error(conn, code, err);
	}
	ws->client_fd = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD)->connect_fd;
	ws->keepalive_ms = keepalive_ms(conn);
	ws->codec = *c;
	if (!e2b_codec_push(&ws->codec, &ws->q, 0, e2b_watch_start())) {
		watch_free(ws);
		return e2b_stream_error(conn, CONNECT_INTERNAL, "out of memory");
	}
	return http_send_stream(conn, 200, MHD_SIZE_UNKNOWN, STREAM_BLOCK, watch_reader, ws,
				watch_free, connect_content_type(c->codec, true));
}

/* ---- the watchers GetWatcherEvents polls ---- */

struct watcher {
	char id[33];                   /* 128 random bits in hex; "" a free entry */
	char sandbox[API_ID_MAX + 1];
	struct watch_conn *w;
	bool busy;                     /* a call has it (out of the lock) */
	uint64_t used_ns;
};

struct e2b_watchers {
	pthread_mutex_t lock;
	struct watcher list[E2B_MAX_WATCHERS];
};

struct e2b_watchers *e2b_watchers_new(void)
{
	struct e2b_watchers *t = calloc(1, sizeof(*t));

	if (t)
		pthread_mutex_init(&t->lock, NULL);
	return t;
}

void e2b_watchers_free(struct e2b_watchers *t)
{
	if (!t)
		return;
	for (int i = 0; i < E2B_MAX_WATCHERS; i++)
		if (t->list[i].id[0])
			calls_watch_close(t->list[i].w, NULL);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

/* A free entry for sandbox sb (idle ones past E2B_WATCHER_IDLE_S freed
 * first), marked busy and sb's, the lock held; NULL: none, or sb has
 * E2B_SANDBOX_WATCHERS already (*sb_full). */
static struct watcher *free_entry_locked(struct e2b_watchers *t, const char *sb, bool *sb_full)
{
	uint64_t now = clock_now_ns();
	struct watcher *free_one = NULL;
	int of_sb = 0;

	for (int i = 0; i < E2B_MAX_WATCHERS; i++) {
		struct watcher *x = &t->list[i];

		if (x->id[0] && !x->busy && now - x->used_ns > E2B_WATCHER_IDLE_S * NS_PER_S) {
			log_info("e2b: watcher %s of sandbox %s not polled for %d s: removed", x->id,
				 x->sandbox, E2B_WATCHER_IDLE_S);
			calls_watch_close(x->w, "not polled");
			x->id[0] = '\0';
		}
		if ((x->id[0] || x->busy) && !strcmp(x->sandbox, sb))
			of_sb++;
		else if (!x->id[0] && !x->busy && !free_one)
			free_one = x;
	}
	*sb_full = of_sb >= E2B_SANDBOX_WATCHERS;
	if (*sb_full || !free_one)
		return NULL;
	free_one->busy = true;
	snprintf(free_one->sandbox, sizeof(free_one->sandbox), "%s", sb);
	return free_one;
}

/* The watcher id of sandbox sb, marked busy; NULL: none (or in use). */
static struct watcher *take(struct e2b_watchers *t, const char *sb, const char *id)
{
	struct watcher *found = NULL;

	pthread_mutex_lock(&t->lock);
	for (int i = 0; i < E2B_MAX_WATCHERS && !found; i++)
		if (t->list[i].id[0] && !strcmp(t->list[i].id, id) &&
		    !strcmp(t->list[i].sandbox, sb) && !t->list[i].busy)
			found = &t->list[i];
	if (found)
		found->busy = true;
	pthread_mutex_unlock(&t->lock);
	return found;
}

/* Give x back (used now), or free it (its watch closed first, err its end). */
static void give_back(struct e2b_watchers *t, struct watcher *x, bool remove, const char *err)
{
	if (remove)
		calls_watch_close(x->w, err);
	pthread_mutex_lock(&t->lock);
	if (remove)
		x->id[0] = '\0';
	x->busy = false;
	x->used_ns = clock_now_ns();
	pthread_mutex_unlock(&t->lock);
}

static enum MHD_Result create_watcher(struct e2b_server *e, struct MHD_Connection *conn,
				      const struct e2b_codec *c, const char *id, const char *caller,
				      const uint8_t *body, size_t len)
{
	char path[API_MAX_PATH + 1], err[400], wid[sizeof(((struct watcher *)0)->id)];
	uint8_t rnd[16];
	struct watcher *x;
	enum connect_code code;
	bool recursive, sb_full;

	code = watch_request(body, len, path, sizeof(path), &recursive, err, sizeof(err));
	if (code)
		return e2b_rpc_error(conn, code, err);
	pthread_mutex_lock(&e->watchers->lock);
	x = free_entry_locked(e->watchers, id, &sb_full);
	pthread_mutex_unlock(&e->watchers->lock);
	if (!x) {
		snprintf(err, sizeof(err), "%d watchers exist already%s: remove one (RemoveWatcher)",
			 sb_full ? E2B_SANDBOX_WATCHERS : E2B_MAX_WATCHERS,
			 sb_full ? " in this sandbox" : "");
		return e2b_rpc_error(conn, CONNECT_RESOURCE_EXHAUSTED, err);
	}
	code = getrandom(rnd, sizeof(rnd), 0) == (ssize_t)sizeof(rnd) ? CONNECT_OK :
	       CONNECT_INTERNAL;
	if (code)
		snprintf(err, sizeof(err), "no random bytes for its id");
	else
		code = open_watch(e, id, caller, path, recursive, &x->w, err, sizeof(err));
	pthread_mutex_lock(&e->watchers->lock);
	if (!code)
		for (size_t i = 0; i < sizeof(rnd); i++)
			snprintf(x->id + 2 * i, 3, "%02x", rnd[i]);
	/* Once given back, another call may remove it: its id copied first. */
	snprintf(wid, sizeof(wid), "%s", x->id);
	x->busy = false;
	x->used_ns = clock_now_ns();
	pthread_mutex_unlock(&e->watchers->lock);
	if (code)
		return e2b_rpc_error(conn, code, err);
	return e2b_codec_reply(conn, c, json_pack("{s:s}", "watcherId", wid));
}

/* GetWatcherEvents: what has come, E2B_WATCH_BATCH at most, none waited for. */
static enum MHD_Result watcher_events(struct e2b_server *e, struct MHD_Connection *conn,
				      const struct e2b_codec *c, struct watcher *x)
{
	char name[E2B_MAX_NAME + 1], why[300];
	json_t *events = json_array();
	unsigned kind = 0;
	int rc = 0;

	for (int i = 0; events && i < E2B_WATCH_BATCH; i++) {
		rc = calls_watch_next(x->w, 0, -1, &kind, name, sizeof(name), why, sizeof(why));
		if (rc <= 0)
			break;
		json_array_append_new(events, e2b_fs_event(kind, name));
	}
	if (rc < 0) {
		/* The watch ended: the watcher goes, the call says why. */
		give_back(e->watchers, x, true, why);
		json_decref(events);
		return e2b_rpc_error(conn, code_of_end(rc), why);
	}
	give_back(e->watchers, x, false, NULL);
	if (!events)
		return e2b_rpc_error(conn, CONNECT_INTERNAL, "out of memory");
	return e2b_codec_reply(conn, c, json_pack("{s:o}", "events", events));
}

enum MHD_Result e2b_watcher_call(struct e2b_server *e, struct MHD_Connection *conn,
				 const struct e2b_codec *c, const char *name, const char *id,
				 const char *caller, const uint8_t *body, size_t len)
{
	char wid[64], err[300];
	struct watcher *x;

	if (!strcmp(name, "CreateWatcher"))
		return create_watcher(e, conn, c, id, caller, body, len);
	if (e2b_parse_watcher_id(body, len, wid, sizeof(wid), err, sizeof(err)))
		return e2b_rpc_error(conn, CONNECT_INVALID_ARGUMENT, err);
	x = take(e->watchers, id, wid);
	if (!x) {
		snprintf(err, sizeof(err), "no watcher %s in this sandbox (or a call on it is in "
			 "progress)", wid);
		return e2b_rpc_error(conn, CONNECT_NOT_FOUND, err);
	}
	if (!strcmp(name, "GetWatcherEvents"))
		return watcher_events(e, conn, c, x);
	give_back(e->watchers, x, true, NULL);
	return e2b_codec_reply(conn, c, json_object());
}
