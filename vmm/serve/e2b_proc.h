/* e2b_proc.h - envd's process streams (Start, Connect) and the keeper of the commands whose client went: in E2B a process outlives its stream. */
#ifndef MAYFLY_SERVE_E2B_PROC_H
#define MAYFLY_SERVE_E2B_PROC_H

#include <microhttpd.h>
#include <stddef.h>
#include <stdint.h>

#include "serve/connect.h"
#include "serve/e2b_codec.h"
#include "serve/e2b_http.h"

/* The keeper: a thread that drains the commands no client reads (their
 * output dropped) until they end or a Connect takes one. NULL: out of
 * memory or threads. Stopping it ends the commands it keeps. */
struct e2b_keeper *e2b_keeper_start(void);
void e2b_keeper_stop(struct e2b_keeper *k);

/* process.Process/Start on sandbox id: the command's ProcessEvents as a
 * Connect stream; kept running when its client goes. */
enum MHD_Result e2b_proc_start(struct e2b_server *e, struct MHD_Connection *conn,
			       const struct e2b_codec *c, const char *id, const char *caller,
			       const uint8_t *json, size_t len);
/* process.Process/Connect: a kept command of sandbox id, by pid, streamed
 * again (a start event, then its events from now on). */
enum MHD_Result e2b_proc_connect(struct e2b_server *e, struct MHD_Connection *conn,
				 const struct e2b_codec *c, const char *id, const uint8_t *json,
				 size_t len);

#endif
