/* e2b_codec.c - a Connect call's codec on envd's methods: envd's services as protobuf-c describes them (proto/), the binary codec's request decoded into the handlers' JSON and its replies encoded from it. */
#include "serve/e2b_codec.h"
#include "serve/e2b_reply.h"
#include "serve/http_reply.h"
#include "serve/proto_json.h"
#include "lib/log.h"

#include "envd_filesystem.pb-c.h"
#include "envd_process.pb-c.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const ProtobufCServiceDescriptor *const services[] = {
	&process__process__descriptor,
	&filesystem__filesystem__descriptor,
};

int e2b_codec_of(const char *method, const char *content_type, struct e2b_codec *c)
{
	const char *slash = strchr(method, '/');
	const ProtobufCMethodDescriptor *m = NULL;

	for (size_t i = 0; slash && !m && i < sizeof(services) / sizeof(services[0]); i++) {
		size_t n = strlen(services[i]->name);

		if ((size_t)(slash - method) == n && !strncmp(method, services[i]->name, n))
			m = protobuf_c_service_descriptor_get_method_by_name(services[i], slash + 1);
	}
	if (!m)
		return -ENOENT;
	c->in = m->input;
	c->out = m->output;
	/* Start, Connect and WatchDir are the server streams. */
	c->stream = !strcmp(m->name, "Start") || !strcmp(m->name, "Connect") ||
		    !strcmp(m->name, "WatchDir");
	return c->stream ? connect_stream_codec(content_type, &c->codec) :
	       connect_unary_codec(content_type, &c->codec);
}

int e2b_codec_request(const struct e2b_codec *c, const uint8_t *msg, size_t len,
		      const uint8_t **json, size_t *jsonlen, char **owned, char *err, size_t errlen)
{
	json_t *j;

	*owned = NULL;
	if (c->codec == CONNECT_CODEC_JSON) {
		*json = msg;
		*jsonlen = len;
		return 0;
	}
	j = proto_json_decode(c->in, msg, len, err, errlen);
	if (!j)
		return -EINVAL;
	*owned = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	if (!*owned) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	*json = (const uint8_t *)*owned;
	*jsonlen = strlen(*owned);
	return 0;
}

/* j (taken) in protobuf: *out and *len. A JSON our own handlers made that
 * does not fit its message is our bug, logged and answered internal. */
static int encode(const ProtobufCMessageDescriptor *d, json_t *j, uint8_t **out, size_t *len)
{
	static struct log_limit bad_reply;
	char err[300];
	int rc = proto_json_encode(d, j, out, len, err, sizeof(err));

	json_decref(j);
	if (rc == -EINVAL)
		log_limited(&bad_reply, LOG_ERROR, "e2b: a reply does not fit %s: %s", d->name, err);
	return rc;
}

enum MHD_Result e2b_codec_reply(struct MHD_Connection *conn, const struct e2b_codec *c, json_t *j)
{
	struct MHD_Response *resp;
	uint8_t *buf;
	size_t len;

	if (!j)
		return e2b_rpc_error(conn, CONNECT_INTERNAL, "out of memory");
	if (c->codec == CONNECT_CODEC_JSON)
		return http_send_json(conn, 200, j);
	if (encode(c->out, j, &buf, &len))
		return e2b_rpc_error(conn, CONNECT_INTERNAL, "the reply could not be encoded");
	resp = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(buf);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				connect_content_type(c->codec, false));
	return http_send(conn, 200, resp);
}

bool e2b_codec_push(const struct e2b_codec *c, struct connect_queue *q, uint8_t flags, char *msg)
{
	json_t *j;
	uint8_t *buf;
	size_t len;

	if (!msg || c->codec == CONNECT_CODEC_JSON || (flags & CONNECT_FLAG_END_STREAM))
		return connect_queue_push(q, flags, msg);
	j = json_loads(msg, 0, NULL);
	free(msg);
	if (!j || encode(c->out, j, &buf, &len))
		return false;
	return connect_queue_push_bytes(q, flags, buf, len);
}
