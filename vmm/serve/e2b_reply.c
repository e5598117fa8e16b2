/* e2b_reply.c - envd's Connect replies: a unary call's error, a stream's (200, then its end-of-stream message), and a service call's HTTP status as Connect's code. */
#include "serve/e2b_reply.h"
#include "serve/http_reply.h"

#include <stdlib.h>
#include <string.h>

enum MHD_Result e2b_rpc_error(struct MHD_Connection *conn, enum connect_code code, const char *msg)
{
	char *text = connect_error_json(code, msg);
	struct MHD_Response *resp;

	if (!text)
		return MHD_NO;
	resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	return http_send(conn, (unsigned)connect_code_status(code), resp);
}

enum MHD_Result e2b_stream_error(struct MHD_Connection *conn, enum connect_code code,
				 const char *msg)
{
	char *text = connect_end_stream_json(code, msg);
	enum connect_codec codec;
	struct MHD_Response *resp;
	uint8_t *body;
	size_t len;

	if (!text)
		return MHD_NO;
	len = strlen(text);
	body = malloc(CONNECT_ENVELOPE_LEN + len);
	if (!body) {
		free(text);
		return MHD_NO;
	}
	connect_envelope(body, CONNECT_FLAG_END_STREAM, (uint32_t)len);
	memcpy(body + CONNECT_ENVELOPE_LEN, text, len);
	free(text);
	resp = MHD_create_response_from_buffer(CONNECT_ENVELOPE_LEN + len, body,
					       MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(body);
		return MHD_NO;
	}
	/* The request's codec, as a client checks the reply's type against
	 * it; the end-stream message itself is JSON in both. */
	if (connect_stream_codec(MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
							     MHD_HTTP_HEADER_CONTENT_TYPE), &codec))
		codec = CONNECT_CODEC_JSON;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, connect_content_type(codec, true));
	return http_send(conn, 200, resp);
}

enum connect_code e2b_code_of_status(int status)
{
	switch (status) {
	case 400: return CONNECT_INVALID_ARGUMENT;
	case 403: return CONNECT_PERMISSION_DENIED;
	case 404: return CONNECT_NOT_FOUND;
	case 409: return CONNECT_FAILED_PRECONDITION;
	case 413: case 507: return CONNECT_RESOURCE_EXHAUSTED;
	case 503: return CONNECT_UNAVAILABLE;
	case 504: return CONNECT_DEADLINE_EXCEEDED;
	}
	return CONNECT_INTERNAL;
}
