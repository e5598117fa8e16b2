/* e2b_reply.h - envd's Connect replies: a unary call's error, a stream's, and a service call's HTTP status as Connect's code. */
#ifndef MAYFLY_SERVE_E2B_REPLY_H
#define MAYFLY_SERVE_E2B_REPLY_H

#include <microhttpd.h>

#include "serve/connect.h"

/* A unary error: Connect's status and {"code","message"}. */
enum MHD_Result e2b_rpc_error(struct MHD_Connection *conn, enum connect_code code, const char *msg);
/* A stream's error: Connect's streams answer 200 and end with it (the
 * SDK reads a stream's body only then). */
enum MHD_Result e2b_stream_error(struct MHD_Connection *conn, enum connect_code code,
				 const char *msg);
/* An HTTP status of a failed service call as Connect's code. */
enum connect_code e2b_code_of_status(int status);

#endif
