/* e2b_envd.h - what E2B's in-sandbox daemon (envd) answers, served by mayfly for each sandbox through its guest agent: health, files up and down, and the process and filesystem RPCs of Connect's protocol. */
#ifndef MAYFLY_SERVE_E2B_ENVD_H
#define MAYFLY_SERVE_E2B_ENVD_H

#include <microhttpd.h>
#include <stddef.h>

#include "serve/e2b_http.h"

struct envd_call;

/* An envd request's head is in (its token checked, the sandbox id well
 * formed): *out set (NULL: out of memory, MHD_NO), and either a reply
 * already queued or the body to come through envd_body. */
enum MHD_Result envd_begin(struct e2b_server *e, struct MHD_Connection *conn, const char *url,
			   const char *method, const char *id, const char *caller,
			   struct envd_call **out);
/* A piece of its body (*size 0: the end, when the reply goes). */
enum MHD_Result envd_body(struct e2b_server *e, struct MHD_Connection *conn, struct envd_call *c,
			  const char *data, size_t *size);
/* The request is over (answered, or its client gone): what it holds
 * released, an upload not finished dropped (the guest's file as before). */
void envd_end(struct e2b_server *e, struct envd_call *c);

#endif
