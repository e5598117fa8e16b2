/* e2b_rpc.h - envd's Connect RPCs for a sandbox: process.Process's Start and Connect (streams, e2b_proc.c), List, SendSignal, SendInput, CloseStdin and Update; filesystem.Filesystem's Stat, ListDir, MakeDir, Remove and Move; the rest answered unimplemented. */
#ifndef MAYFLY_SERVE_E2B_RPC_H
#define MAYFLY_SERVE_E2B_RPC_H

#include <microhttpd.h>
#include <stddef.h>
#include <stdint.h>

#include "serve/connect.h"
#include "serve/e2b_http.h"

/* The reply to method ("process.Process/Start") called on sandbox id by
 * caller with body[0..len) (a unary call's JSON; a stream's one envelope). */
enum MHD_Result e2b_rpc(struct e2b_server *e, struct MHD_Connection *conn, const char *method,
			const char *id, const char *caller, const uint8_t *body, size_t len);

#endif
