/* e2b_port.h - E2B's published ports: a request for PORT-ID.DOMAIN passed to that TCP port inside the sandbox through its guest agent, the answer streamed back. */
#ifndef MAYFLY_SERVE_E2B_PORT_H
#define MAYFLY_SERVE_E2B_PORT_H

#include <microhttpd.h>
#include <stddef.h>

#include "serve/e2b_http.h"

struct port_call;

/* A request whose Host names port of sandbox id (port_parse_host):
 * authorised by the sandbox's traffic token (e2b-traffic-access-token) or
 * an API key (X-API-KEY), then its head sent to the guest's server. *out
 * set (NULL: out of memory, MHD_NO); a reply queued already, or the body
 * to come through port_body. uri: the request target as the client sent
 * it, query and escapes kept. */
enum MHD_Result port_begin(struct e2b_server *e, struct MHD_Connection *conn, const char *method,
			   const char *uri, unsigned port, const char *id, struct port_call **out);
/* A piece of its body; *size 0: the end, when the guest's answer is read
 * and streamed back. */
enum MHD_Result port_body(struct e2b_server *e, struct MHD_Connection *conn, struct port_call *p,
			  const char *data, size_t *size);
/* The request is over: what it holds that no reply took, released. */
void port_end(struct port_call *p);

#endif
