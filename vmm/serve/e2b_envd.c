/* e2b_envd.c - E2B's envd served for a sandbox: /health, GET and POST /files (streamed both ways, multipart or raw), and the Connect RPCs handed to e2b_rpc.c; every call through the service's own, so approved, audited and bounded as they are. */
#include "serve/e2b_envd.h"
#include "serve/calls.h"
#include "serve/connect.h"
#include "serve/e2b_msg.h"
#include "serve/e2b_reply.h"
#include "serve/e2b_rpc.h"
#include "serve/http_reply.h"
#include "lib/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define FILE_CHUNK      65536
#define POST_BUFFER     65536   /* the multipart parser's buffer */
#define MAX_UPLOADS     64      /* files in one multipart POST */
#define RPC_PREFIX_PROC "/process.Process/"
#define RPC_PREFIX_FS   "/filesystem.Filesystem/"

enum envd_kind { ENVD_DONE, ENVD_UPLOAD, ENVD_RPC };

struct envd_call {
	enum envd_kind kind;
	struct e2b_server *e;
	char id[API_ID_MAX + 1];
	const char *caller;
	struct sandbox *sb;            /* held while an upload runs */
	/* An upload: one file at a time into the guest, never held whole. */
	struct MHD_PostProcessor *pp;  /* multipart; NULL: the body is the file */
	struct file_put *put;          /* the file being written, or NULL */
	char path[API_MAX_PATH + 1];   /* its guest path */
	char query_path[API_MAX_PATH + 1];   /* ?path=, "" none */
	unsigned nfiles;
	char part_name[API_MAX_PATH + 1];    /* the multipart part in progress */
	uint64_t part_next;            /* its offset the next piece has */
	json_t *written;               /* [{name, type, path}] */
	struct call_result res;        /* the first failure (status 0: none) */
	/* An RPC: its method and body. */
	char method[64];
	struct http_body body;
};

/* envd's error body, as the SDK reads it: {"code": status, "message"}. */
static enum MHD_Result send_error(struct MHD_Connection *conn, unsigned status, const char *msg)
{
	return http_send_json(conn, status, e2b_error_json((int)status, msg));
}

static enum MHD_Result send_result(struct MHD_Connection *conn, const struct call_result *r)
{
	return send_error(conn, (unsigned)r->status, r->error);
}

/* e2b_guest_path with its refusal in err (out: API_MAX_PATH + 1 bytes). */
static int guest_path(const char *given, char *out, char *err, size_t errlen)
{
	int rc = e2b_guest_path(given, out, API_MAX_PATH + 1);

	if (rc)
		snprintf(err, errlen, rc == -EINVAL ? "a path is required" :
			 "the path is longer than %d bytes", API_MAX_PATH);
	return rc;
}

static const char *arg(struct MHD_Connection *conn, const char *key)
{
	return MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, key);
}

/* GET /health: 204 while the sandbox runs, 502 (the SDK's "not running")
 * otherwise. */
static enum MHD_Result health(struct e2b_server *e, struct MHD_Connection *conn, const char *id)
{
	json_t *j = service_get_json(e->svc, id);
	const char *state = j ? json_string_value(json_object_get(j, "state")) : NULL;
	bool running = state && !strcmp(state, "running");

	json_decref(j);
	return running ? http_send_empty(conn, 204) : send_error(conn, 502, "the sandbox is not running");
}

static ssize_t download_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	return http_reader_result(calls_get_read(cls, buf, max));
}

static void download_free(void *cls)
{
	calls_get_end(cls);
}

/* GET /files?path=: the file streamed from the guest. */
static enum MHD_Result download(struct e2b_server *e, struct MHD_Connection *conn,
				struct envd_call *c)
{
	char path[API_MAX_PATH + 1], err[300];
	struct call_result r = { 0 };
	struct file_get *g;
	struct sandbox *sb;
	uint64_t size;
	int st;

	if (guest_path(arg(conn, "path"), path, err, sizeof(err)))
		return send_error(conn, 400, err);
	st = service_get(e->svc, c->id, &sb, err, sizeof(err));
	if (st)
		return send_error(conn, st == 409 ? 502 : (unsigned)st, err);
	st = calls_get_begin(e->svc, sb, c->caller, path, &g, &size, &r);
	service_put(e->svc, sb);   /* the stream holds its own */
	if (st)
		return send_result(conn, &r);
	return http_send_stream(conn, 200, size == UINT64_MAX ? MHD_SIZE_UNKNOWN : size, FILE_CHUNK,
				download_reader, g, download_free, "application/octet-stream");
}

static void fail(struct envd_call *c, int status, const char *msg)
{
	if (c->res.status)
		return;   /* the first failure is the one told */
	c->res.status = status;
	snprintf(c->res.error, sizeof(c->res.error), "%s", msg);
}

/* The file in progress written (commit true) or dropped. */
static void upload_close(struct envd_call *c, bool commit)
{
	struct call_result r = { 0 };
	const char *slash;

	if (!c->put)
		return;
	calls_put_end(c->put, commit ? 0 : -ECONNABORTED, &r);
	c->put = NULL;
	if (!commit)
		return;
	if (r.status >= 400) {
		fail(c, r.status, r.error);
		return;
	}
	slash = strrchr(c->path, '/');
	json_array_append_new(c->written, json_pack("{s:s, s:s, s:s}", "name", slash ? slash + 1 : c->path,
						    "type", "file", "path", c->path));
}

/* The next file of an upload, to given (a path as E2B gives it): its
 * parent made (E2B's write makes it), the guest's replacing write open. */
static void upload_open(struct envd_call *c, const char *given)
{
	struct call_result r = { 0 };
	char err[300], parent[API_MAX_PATH + 1];
	char *slash;

	upload_close(c, true);
	if (c->res.status)
		return;
	if (++c->nfiles > MAX_UPLOADS) {
		fail(c, 400, "more than 64 files in one upload");
		return;
	}
	if (guest_path(given, c->path, err, sizeof(err))) {
		fail(c, 400, err);
		return;
	}
	snprintf(parent, sizeof(parent), "%s", c->path);
	slash = strrchr(parent, '/');
	if (slash && slash != parent) {
		*slash = '\0';
		calls_mkdir(c->e->svc, c->sb, c->caller, parent, true, &r);
		if (r.status >= 400) {
			fail(c, r.status, r.error);
			return;
		}
	}
	if (calls_put_begin(c->e->svc, c->sb, c->caller, c->path, 0644, &c->put, &r))
		fail(c, r.status, r.error);
}

static void upload_data(struct envd_call *c, const char *data, size_t n)
{
	int rc;

	if (!c->put || !n)
		return;
	rc = calls_put_data(c->put, data, n);
	if (rc) {
		struct call_result r = { 0 };

		calls_put_end(c->put, rc, &r);   /* the guest's file stays as it was */
		c->put = NULL;
		fail(c, r.status ? r.status : 500, r.error);
	}
}

/* A multipart part: each "file" part is a file, written to ?path= (one
 * file) or, several at once, to its filename, as the SDK sends them. */
static enum MHD_Result on_part(void *cls, enum MHD_ValueKind kind, const char *key,
			       const char *filename, const char *content_type,
			       const char *transfer_encoding, const char *data, uint64_t off,
			       size_t size)
{
	struct envd_call *c = cls;

	(void)kind;
	(void)content_type;
	(void)transfer_encoding;
	if (strcmp(key, "file"))
		return MHD_YES;
	/* libmicrohttpd may hand a part's start over twice (no bytes, then
	 * some): a part goes on where its last piece ended. */
	if (off == 0 && !(c->nfiles && off == c->part_next &&
			  !strcmp(c->part_name, filename ? filename : ""))) {
		snprintf(c->part_name, sizeof(c->part_name), "%s", filename ? filename : "");
		if (c->query_path[0] && c->nfiles)
			fail(c, 400, "?path= names one file: several were sent");
		else
			upload_open(c, c->query_path[0] ? c->query_path : filename);
	}
	c->part_next = off + size;
	upload_data(c, data, size);
	return MHD_YES;
}

/* POST /files: multipart/form-data (the SDK's default) or the raw bytes
 * of one file (application/octet-stream, ?path=). */
static enum MHD_Result upload_begin(struct e2b_server *e, struct MHD_Connection *conn,
				    struct envd_call *c)
{
	const char *ct = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
						     MHD_HTTP_HEADER_CONTENT_TYPE);
	const char *ce = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
						     MHD_HTTP_HEADER_CONTENT_ENCODING);
	const char *path = arg(conn, "path");
	char err[300];
	int st;

	c->kind = ENVD_DONE;
	if (ce && strcasecmp(ce, "identity"))
		return send_error(conn, 415, "a compressed upload (Content-Encoding) is not "
				  "supported: send it as it is");
	if (path && strlen(path) >= sizeof(c->query_path))
		return send_error(conn, 400, "the path is too long");
	snprintf(c->query_path, sizeof(c->query_path), "%s", path ? path : "");
	if (ct && !strncasecmp(ct, "multipart/form-data", 19)) {
		c->pp = MHD_create_post_processor(conn, POST_BUFFER, on_part, c);
		if (!c->pp)
			return send_error(conn, 400, "a malformed multipart/form-data (no boundary?)");
	} else if (!ct || strncasecmp(ct, "application/octet-stream", 24)) {
		return send_error(conn, 415, "the body must be multipart/form-data or "
				  "application/octet-stream");
	} else if (!path) {
		return send_error(conn, 400, "an application/octet-stream upload needs ?path=");
	}
	c->written = json_array();
	if (!c->written)
		return MHD_NO;
	st = service_get(e->svc, c->id, &c->sb, err, sizeof(err));
	if (st) {
		c->sb = NULL;
		return send_error(conn, st == 409 ? 502 : (unsigned)st, err);
	}
	if (!c->pp)
		upload_open(c, c->query_path);
	c->kind = ENVD_UPLOAD;
	return MHD_YES;
}

static enum MHD_Result upload_end(struct MHD_Connection *conn, struct envd_call *c)
{
	json_t *w;

	upload_close(c, !c->res.status);
	c->kind = ENVD_DONE;
	if (!c->res.status && !json_array_size(c->written))
		fail(c, 400, "no file in the upload (a multipart part named \"file\")");
	if (c->res.status)
		return send_result(conn, &c->res);
	w = c->written;
	c->written = NULL;
	return http_send_json(conn, 200, w);
}

enum MHD_Result envd_begin(struct e2b_server *e, struct MHD_Connection *conn, const char *url,
			   const char *method, const char *id, const char *caller,
			   struct envd_call **out)
{
	struct envd_call *c = calloc(1, sizeof(*c));

	*out = c;
	if (!c)
		return MHD_NO;
	c->e = e;
	c->caller = caller;
	snprintf(c->id, sizeof(c->id), "%s", id);
	if (!strcmp(url, "/health"))
		return strcmp(method, "GET") ? send_error(conn, 405, "GET only") : health(e, conn, id);
	if (!strcmp(url, "/files")) {
		if (!strcmp(method, "GET"))
			return download(e, conn, c);
		if (!strcmp(method, "POST"))
			return upload_begin(e, conn, c);
		return send_error(conn, 405, "GET or POST only");
	}
	if ((!strncmp(url, RPC_PREFIX_PROC, strlen(RPC_PREFIX_PROC)) ||
	     !strncmp(url, RPC_PREFIX_FS, strlen(RPC_PREFIX_FS))) &&
	    strlen(url + 1) < sizeof(c->method)) {
		if (strcmp(method, "POST"))
			return send_error(conn, 405, "Connect's calls are POSTs");
		snprintf(c->method, sizeof(c->method), "%s", url + 1);
		c->body.max = CONNECT_MAX_MESSAGE + CONNECT_ENVELOPE_LEN;
		c->kind = ENVD_RPC;
		return MHD_YES;
	}
	return send_error(conn, 404, "no such envd route");
}

enum MHD_Result envd_body(struct e2b_server *e, struct MHD_Connection *conn, struct envd_call *c,
			  const char *data, size_t *size)
{
	size_t n = *size;

	*size = 0;
	switch (c->kind) {
	case ENVD_UPLOAD:
		if (n) {
			if (c->pp) {
				if (MHD_post_process(c->pp, data, n) != MHD_YES)
					fail(c, 400, "a malformed multipart/form-data body");
			} else {
				upload_data(c, data, n);
			}
			return MHD_YES;
		}
		return upload_end(conn, c);
	case ENVD_RPC:
		if (n)
			return http_body_add(&c->body, data, n) ? MHD_NO : MHD_YES;
		c->kind = ENVD_DONE;
		if (c->body.too_large)
			return e2b_rpc_error(conn, CONNECT_RESOURCE_EXHAUSTED, "the request is too large");
		return e2b_rpc(e, conn, c->method, c->id, c->caller, (const uint8_t *)c->body.data,
			       c->body.len);
	default:
		return MHD_YES;   /* answered: the rest is dropped */
	}
}

void envd_end(struct e2b_server *e, struct envd_call *c)
{
	if (!c)
		return;
	/* An upload cut short by its client: the guest's file stays as it was. */
	upload_close(c, false);
	if (c->pp)
		MHD_destroy_post_processor(c->pp);
	if (c->sb)
		service_put(e->svc, c->sb);
	json_decref(c->written);
	http_body_free(&c->body);
	free(c);
}
