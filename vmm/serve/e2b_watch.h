/* e2b_watch.h - envd's directory watches: WatchDir's stream, and the watchers CreateWatcher makes for GetWatcherEvents to poll. */
#ifndef MAYFLY_SERVE_E2B_WATCH_H
#define MAYFLY_SERVE_E2B_WATCH_H

#include <microhttpd.h>
#include <stddef.h>
#include <stdint.h>

#include "serve/e2b_codec.h"
#include "serve/e2b_http.h"

#define E2B_MAX_WATCHERS   256         /* CreateWatcher's, all sandboxes */
#define E2B_SANDBOX_WATCHERS 16        /* one sandbox's: none fills the table for the rest */
#define E2B_WATCHER_IDLE_S 600         /* one not polled this long is removed */
#define E2B_WATCH_BATCH    1000        /* events one GetWatcherEvents gives at most */

/* The watchers' table (NULL: out of memory); freeing it closes them. */
struct e2b_watchers *e2b_watchers_new(void);
void e2b_watchers_free(struct e2b_watchers *t);

/* filesystem.Filesystem/WatchDir on sandbox id: a start event, then one
 * filesystem event per change and a keepalive each Keepalive-Ping-Interval
 * (seconds, default 50) without one, until the client goes or the watch
 * ends (its end-of-stream then says why). */
enum MHD_Result e2b_watch_dir(struct e2b_server *e, struct MHD_Connection *conn,
			      const struct e2b_codec *c, const char *id, const char *caller,
			      const uint8_t *json, size_t len);
/* CreateWatcher, GetWatcherEvents, RemoveWatcher (name) on sandbox id:
 * unary calls. For every call here and in e2b_proc.h: json is the request
 * message as JSON (e2b_codec_request), the replies go in c's codec. */
enum MHD_Result e2b_watcher_call(struct e2b_server *e, struct MHD_Connection *conn,
				 const struct e2b_codec *c, const char *name, const char *id,
				 const char *caller, const uint8_t *json, size_t len);

#endif
