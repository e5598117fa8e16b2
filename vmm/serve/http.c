/* http.c - mayfly serve's HTTP/1.1 front end (libmicrohttpd): a Unix socket or a loopback port, bearer tokens, bodies bounded, each route to the service. */
#include "serve/http.h"
#include "serve/http_reply.h"
#include "serve/api.h"
#include "serve/calls.h"
#include "serve/live.h"
#include "lib/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define EXEC_READ_CHUNK 65536
#define FILE_READ_CHUNK 65536

/* One request, from its first callback to its completion. */
struct request {
	struct api_match m;
	const char *caller;
	struct http_body body;
	bool answered;             /* an error sent before the body */
	/* A PUT's body goes to the guest as it comes, never held whole. */
	bool put_started;
	struct sandbox *sb;        /* held while the PUT runs */
	struct file_put *put;      /* NULL: not open, or ended (res says how) */
	struct call_result res;
};

static enum metrics_failure cause_of(unsigned status, const char *code)
{
	if (code && !strcmp(code, "refused"))
		return F_REFUSED;
	if (code && !strcmp(code, "vm_start"))
		return F_RESTORE;
	switch (status) {
	case 401: return F_AUTH;
	case 404: return F_NOT_FOUND;
	case 409: return F_CONFLICT;
	case 502: case 504: return F_AGENT;
	}
	return status < 500 ? F_BAD_REQUEST : F_INTERNAL;
}

static const char *default_code(unsigned status)
{
	switch (status) {
	case 400: return "bad_request";
	case 401: return "unauthorized";
	case 403: return "forbidden";
	case 404: return "not_found";
	case 405: return "method_not_allowed";
	case 409: return "conflict";
	case 413: return "too_large";
	case 415: return "unsupported_media_type";
	case 503: return "unavailable";
	}
	return "internal";
}

/* {"error": msg, "code": code} with status, and the header hname: hvalue
 * if hname (405's Allow; Connection: close). */
static enum MHD_Result send_error_header(struct http_server *h, struct MHD_Connection *conn,
					 unsigned status, const char *code, const char *msg,
					 const char *hname, const char *hvalue)
{
	json_t *j = json_pack("{s:s, s:s}", "error", msg, "code", code ? code : default_code(status));
	struct MHD_Response *resp;

	metrics_fail(&h->svc->metrics, cause_of(status, code));
	resp = http_json_response(j);
	if (!resp)
		return MHD_NO;
	if (status == 401)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
	if (hname)
		MHD_add_response_header(resp, hname, hvalue);
	return http_send(conn, status, resp);
}

static enum MHD_Result send_error(struct http_server *h, struct MHD_Connection *conn,
				  unsigned status, const char *code, const char *msg)
{
	return send_error_header(h, conn, status, code, msg, NULL, NULL);
}

static enum MHD_Result send_result(struct http_server *h, struct MHD_Connection *conn,
				   const struct call_result *r)
{
	if (r->status >= 400)
		return send_error(h, conn, (unsigned)r->status, r->code, r->error);
	return http_send_empty(conn, (unsigned)r->status);
}

/* The exec's JSON lines, as the call writes them. */
static ssize_t exec_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	return http_reader_result(calls_exec_read(cls, buf, max < EXEC_READ_CHUNK ? max : EXEC_READ_CHUNK));
}

static void exec_free(void *cls)
{
	calls_exec_end(cls);
}

static enum MHD_Result do_exec(struct http_server *h, struct MHD_Connection *conn,
			       struct request *rq)
{
	struct call_result r = { 0 };
	struct exec_stream *s;
	struct MHD_Response *resp;
	struct sandbox *sb;
	struct api_exec req;
	char err[300], num[24];
	int st;

	if (api_parse_exec(rq->body.data, rq->body.len, &req, err, sizeof(err)))
		return send_error(h, conn, 400, NULL, err);
	st = service_get(h->svc, rq->m.id, &sb, err, sizeof(err));
	if (st) {
		api_exec_free(&req);
		return send_error(h, conn, (unsigned)st, NULL, err);
	}
	if (calls_exec_start(h->svc, sb, rq->caller, &req, &s, &r)) {
		service_put(h->svc, sb);
		return send_result(h, conn, &r);
	}
	calls_exec_watch(s, MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD)
				    ->connect_fd);
	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, EXEC_READ_CHUNK, exec_reader, s,
						 exec_free);
	if (!resp) {
		exec_free(s);
		return MHD_NO;
	}
	snprintf(num, sizeof(num), "%llu", (unsigned long long)calls_exec_id(s));
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-ndjson");
	MHD_add_response_header(resp, "X-Mayfly-Exec-Id", num);
	return http_send(conn, 200, resp);
}

static const char *query(struct MHD_Connection *conn, const char *key)
{
	return MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, key);
}

/* A GET's body, as the agent sends it. */
static ssize_t file_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	return http_reader_result(calls_get_read(cls, buf, max));
}

static void file_free(void *cls)
{
	calls_get_end(cls);
}

static void fail_with(struct call_result *r, int status, const char *msg)
{
	r->status = status;
	r->code = NULL;
	snprintf(r->error, sizeof(r->error), "%s", msg);
}

/* A PUT's first piece (or its end, for an empty body): the sandbox held,
 * the path and mode checked, the guest's replacing write opened. A
 * failure is kept in rq->res for the end of the body. */
static void put_open(struct http_server *h, struct MHD_Connection *conn, struct request *rq)
{
	const char *path = query(conn, "path"), *m = query(conn, "mode");
	char *end = NULL, err[300];
	unsigned long mode = m ? strtoul(m, &end, 8) : 0644;
	int st;

	rq->put_started = true;
	if (api_check_path(path, err, sizeof(err))) {
		fail_with(&rq->res, 400, err);
	} else if (m && (!*m || *end || mode > 07777)) {
		fail_with(&rq->res, 400, "mode must be octal, at most 7777");
	} else {
		st = service_get(h->svc, rq->m.id, &rq->sb, err, sizeof(err));
		if (st) {
			rq->sb = NULL;
			fail_with(&rq->res, st, err);
		} else {
			calls_put_begin(h->svc, rq->sb, rq->caller, path, (uint32_t)mode, &rq->put,
					&rq->res);
		}
	}
}

/* A PUT's end, or the connection's: the write committed (rc 0) or
 * dropped, the sandbox put back. */
static void put_close(struct http_server *h, struct request *rq, int rc)
{
	if (rq->put)
		calls_put_end(rq->put, rc, &rq->res);
	rq->put = NULL;
	if (rq->sb)
		service_put(h->svc, rq->sb);
	rq->sb = NULL;
}

/* PUT .../files: each piece of the body straight on to the guest. */
static enum MHD_Result on_put(struct http_server *h, struct MHD_Connection *conn,
			      struct request *rq, const char *data, size_t *size)
{
	if (!rq->put_started)
		put_open(h, conn, rq);
	if (*size) {
		int rc = rq->put ? calls_put_data(rq->put, data, *size) : 0;

		if (rc) {   /* the rest of the body is read and dropped */
			calls_put_end(rq->put, rc, &rq->res);
			rq->put = NULL;
		}
		*size = 0;
		return MHD_YES;
	}
	put_close(h, rq, 0);
	return send_result(h, conn, &rq->res);
}

static bool query_true(struct MHD_Connection *conn, const char *key)
{
	const char *v = query(conn, key);

	return v && (!strcmp(v, "1") || !strcmp(v, "true"));
}

/* The routes on a sandbox's files; sb held. */
static enum MHD_Result do_files(struct http_server *h, struct MHD_Connection *conn,
				struct request *rq, struct sandbox *sb)
{
	const char *path = query(conn, "path");
	struct call_result r = { 0 };
	char err[300], mkpath[API_MAX_PATH + 1];
	json_t *j = NULL;
	bool parents;

	if (rq->m.route == API_MKDIR) {
		if (api_parse_mkdir(rq->body.data, rq->body.len, mkpath, sizeof(mkpath), &parents, err,
				    sizeof(err)))
			return send_error(h, conn, 400, NULL, err);
		calls_mkdir(h->svc, sb, rq->caller, mkpath, parents, &r);
		return send_result(h, conn, &r);
	}
	if (api_check_path(path, err, sizeof(err)))
		return send_error(h, conn, 400, NULL, err);
	switch (rq->m.route) {
	case API_FILE_GET: {
		struct file_get *g;
		uint64_t size;

		if (calls_get_begin(h->svc, sb, rq->caller, path, &g, &size, &r))
			return send_result(h, conn, &r);
		return http_send_stream(conn, 200, size == UINT64_MAX ? MHD_SIZE_UNKNOWN : size,
					FILE_READ_CHUNK, file_reader, g, file_free,
					"application/octet-stream");
	}
	case API_FILE_REMOVE:
		calls_remove(h->svc, sb, rq->caller, path, query_true(conn, "recursive"), &r);
		return send_result(h, conn, &r);
	case API_FILE_LIST:
		calls_file_list(h->svc, sb, rq->caller, path, false, &j, &r);
		if (r.status != 200)
			return send_result(h, conn, &r);
		return http_send_json(conn, 200, json_pack("{s:s, s:o}", "path", path, "entries", j));
	case API_FILE_STAT:
		calls_file_stat(h->svc, sb, rq->caller, path, &j, &r);
		return r.status != 200 ? send_result(h, conn, &r) : http_send_json(conn, 200, j);
	default:
		break;
	}
	return send_error(h, conn, 500, NULL, "internal: unrouted");
}

/* POST .../pause, .../resume (an explicit one; any call resumes too), .../fork. */
static enum MHD_Result do_live(struct http_server *h, struct MHD_Connection *conn,
			       struct request *rq)
{
	struct service *svc = h->svc;
	struct sandbox *sb = NULL;
	json_t *children = NULL;
	unsigned count = 1;
	char err[600];
	enum MHD_Result ret;
	int st;

	if (rq->m.route == API_FORK &&
	    api_parse_fork(rq->body.data, rq->body.len, LIVE_MAX_FORK, &count, err, sizeof(err)))
		return send_error(h, conn, 400, NULL, err);
	if (rq->m.route == API_PAUSE) {
		st = service_begin_pause(svc, rq->m.id, &sb, err, sizeof(err));
		if (!st)
			st = live_pause(svc, sb, rq->caller, err, sizeof(err));
	} else {
		/* A paused sandbox is resumed by the get itself. */
		st = service_get(svc, rq->m.id, &sb, err, sizeof(err));
		if (!st && rq->m.route == API_FORK)
			st = live_fork(svc, sb, rq->caller, count, &children, err, sizeof(err));
	}
	if (st == 0 || st == 201) {
		ret = rq->m.route == API_FORK ?
		      http_send_json(conn, 201, json_pack("{s:s, s:o}", "parent", sb->id, "sandboxes",
						     children)) :
		      http_send_json(conn, 200, service_sandbox_json(sb));
	} else {
		ret = send_error(h, conn, (unsigned)st, NULL, err);
	}
	if (sb)
		service_put(svc, sb);
	return ret;
}

static enum MHD_Result dispatch(struct http_server *h, struct MHD_Connection *conn,
				struct request *rq)
{
	struct service *svc = h->svc;
	struct api_create create;
	struct metrics_gauges g;
	struct sandbox *sb;
	char err[400];
	enum MHD_Result ret;
	int st, signo;

	switch (rq->m.route) {
	case API_HEALTH:
		service_gauges(svc, &g);
		return http_send_json(conn, 200, json_pack("{s:s, s:i, s:i}", "status",
					      svc->stopping ? "draining" : "ok", "sandboxes",
					      g.starting + g.running + g.stopping + g.exited,
					      "pool_ready", g.pool_ready));
	case API_METRICS: {
		struct MHD_Response *resp;
		size_t len;
		char *text;

		service_gauges(svc, &g);
		text = metrics_render(&svc->metrics, &g, &len);
		if (!text)
			return send_error(h, conn, 500, NULL, "out of memory");
		resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
		if (!resp) {
			free(text);
			return MHD_NO;
		}
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
					"text/plain; version=0.0.4");
		return http_send(conn, 200, resp);
	}
	case API_CREATE:
		if (api_parse_create(rq->body.data, rq->body.len, &create, err, sizeof(err)))
			return send_error(h, conn, 400, NULL, err);
		st = service_create(svc, &create, &sb, err, sizeof(err));
		api_create_free(&create);
		if (st != 201)
			return send_error(h, conn, (unsigned)st, st == 500 ? "vm_start" : NULL, err);
		ret = http_send_json(conn, 201, service_sandbox_json(sb));
		service_put(svc, sb);
		return ret;
	case API_LIST:
		return http_send_json(conn, 200, json_pack("{s:o}", "sandboxes", service_list(svc)));
	case API_GET: {
		json_t *j = service_get_json(svc, rq->m.id);

		if (!j) {
			snprintf(err, sizeof(err), "no sandbox '%s'", rq->m.id);
			return send_error(h, conn, 404, NULL, err);
		}
		return http_send_json(conn, 200, j);
	}
	case API_DELETE:
		st = service_delete(svc, rq->m.id, err, sizeof(err));
		if (st)
			return send_error(h, conn, (unsigned)st, NULL, err);
		return http_send_empty(conn, 204);
	case API_EXEC:
		return do_exec(h, conn, rq);
	case API_PAUSE:
	case API_RESUME:
	case API_FORK:
		return do_live(h, conn, rq);
	default:
		break;
	}
	if (rq->m.route == API_SIGNAL && api_parse_signal(rq->body.data, rq->body.len, &signo, err, sizeof(err)))
		return send_error(h, conn, 400, NULL, err);
	st = service_get(svc, rq->m.id, &sb, err, sizeof(err));
	if (st)
		return send_error(h, conn, (unsigned)st, NULL, err);
	if (rq->m.route == API_SIGNAL) {
		struct call_result r = { 0 };

		calls_signal(svc, sb, rq->m.exec_id, signo, &r);
		ret = r.status == 202 ? http_send_json(conn, 202, json_pack("{s:i}", "signal", signo)) :
		      send_result(h, conn, &r);
	} else {
		ret = do_files(h, conn, rq, sb);
	}
	service_put(svc, sb);
	return ret;
}

/* Checks made before any body is read: route, token, type, size. */
static enum MHD_Result first_call(struct http_server *h, struct MHD_Connection *conn,
				  const char *url, const char *method, void **con_cls)
{
	struct request *rq = calloc(1, sizeof(*rq));
	const char *allow, *ct, *cl;
	char msg[200];
	int st;

	if (!rq)
		return MHD_NO;
	*con_cls = rq;
	rq->answered = true;       /* until every check below passed */
	metrics_request(&h->svc->metrics);
	http_guard_mark(&h->guard, conn, false);
	st = api_route(method, url, &rq->m, &allow);
	if (http_ambiguous_length(conn))
		/* Connection: close: what follows cannot be trusted to start a request. */
		return send_error_header(h, conn, 400, NULL, "two Content-Length headers, or one "
					 "with Transfer-Encoding: the body's length is ambiguous",
					 MHD_HTTP_HEADER_CONNECTION, "close");
	/* The token before the route: without one, no route is told apart. */
	if (st == 404 || rq->m.route != API_HEALTH) {
		rq->caller = h->tokens ? tokens_check(h->tokens,
						      MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
										  MHD_HTTP_HEADER_AUTHORIZATION)) : "local";
		if (!rq->caller)
			return send_error(h, conn, 401, NULL,
					  "missing or wrong token (Authorization: Bearer TOKEN)");
	}
	if (st == 404) {
		snprintf(msg, sizeof(msg), "no route %.100s", url);
		return send_error(h, conn, 404, NULL, msg);
	}
	if (st == 405) {
		snprintf(msg, sizeof(msg), "%s is not allowed on %.100s (allowed: %s)", method, url,
			 allow);
		return send_error_header(h, conn, 405, NULL, msg, MHD_HTTP_HEADER_ALLOW, allow);
	}
	rq->body.max = rq->m.route == API_FILE_PUT ? h->max_file : HTTP_MAX_JSON_BODY;
	cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (cl && strtoull(cl, NULL, 10) > rq->body.max) {
		snprintf(msg, sizeof(msg), "the body is larger than %zu bytes", rq->body.max);
		return send_error(h, conn, 413, NULL, msg);
	}
	ct = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
	if (api_wants_json(rq->m.route) && ct && strncasecmp(ct, "application/json", 16))
		return send_error(h, conn, 415, NULL, "the body must be application/json");
	rq->answered = false;
	return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *data,
				  size_t *size, void **con_cls)
{
	struct http_server *h = cls;
	struct request *rq = *con_cls;

	(void)version;
	if (!rq)
		return first_call(h, conn, url, method, con_cls);
	if (rq->answered) {
		*size = 0;
		return MHD_YES;
	}
	if (rq->m.route == API_FILE_PUT)
		return on_put(h, conn, rq, data, size);
	if (*size) {
		if (http_body_add(&rq->body, data, *size))
			return MHD_NO;
		*size = 0;
		return MHD_YES;
	}
	if (rq->body.too_large) {
		char msg[100];

		snprintf(msg, sizeof(msg), "the body is larger than %zu bytes", rq->body.max);
		return send_error(h, conn, 413, NULL, msg);
	}
	return dispatch(h, conn, rq);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct request *rq = *con_cls;

	(void)toe;
	/* Answered: the connection waits for its next request's head. */
	http_guard_mark(&((struct http_server *)cls)->guard, conn, true);
	if (!rq)
		return;
	/* A PUT cut short by its client: the guest's file stays as it was. */
	put_close(cls, rq, -ECONNABORTED);
	http_body_free(&rq->body);
	free(rq);
	*con_cls = NULL;
}

int http_listen_unix(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, rc;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "--socket %s: longer than %zu bytes", path, sizeof(sa.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	strcpy(sa.sun_path, path);
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "--socket %s exists and is not a socket", path);
			return -EEXIST;
		}
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			close(fd);
			snprintf(err, errlen, "--socket %s: another service listens there", path);
			return -EADDRINUSE;
		}
		if (fd >= 0)
			close(fd);
		unlink(path);   /* a stale socket of a service that was killed */
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	/* 0600 from the start: nobody else may connect between bind and chmod. */
	mode_t old = umask(0177);

	rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rc < 0 || listen(fd, 128) < 0)
		goto fail_close;
	return fd;
fail_close:
	rc = -errno;
	close(fd);
	unlink(path);
	snprintf(err, errlen, "cannot listen on %s: %s", path, strerror(-rc));
	return rc;
fail:
	rc = -errno;
	snprintf(err, errlen, "cannot listen on %s: %s", path, strerror(-rc));
	return rc;
}

int http_listen_tcp(const char *opt, const char *addr, bool any_addr, char *err, size_t errlen)
{
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6 };
	struct sockaddr_in s4 = { .sin_family = AF_INET };
	char host[64];
	const char *colon = strrchr(addr, ':');
	unsigned long port;
	char *end;
	bool v6;
	int fd, one = 1, rc;

	if (!colon || (size_t)(colon - addr) >= sizeof(host))
		goto bad;
	port = strtoul(colon + 1, &end, 10);
	if (!colon[1] || *end || port == 0 || port > 65535)
		goto bad;
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = '\0';
	v6 = host[0] == '[';
	if (v6) {
		size_t l = strlen(host);

		if (l < 3 || host[l - 1] != ']')
			goto bad;
		host[l - 1] = '\0';
		if (inet_pton(AF_INET6, host + 1, &s6.sin6_addr) != 1)
			goto bad;
		if (!any_addr && !IN6_IS_ADDR_LOOPBACK(&s6.sin6_addr))
			goto not_loopback;
		s6.sin6_port = htons((uint16_t)port);
	} else {
		if (inet_pton(AF_INET, host, &s4.sin_addr) != 1)
			goto bad;
		if (!any_addr && (ntohl(s4.sin_addr.s_addr) >> 24) != 127)
			goto not_loopback;
		s4.sin_port = htons((uint16_t)port);
	}
	fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if ((v6 ? bind(fd, (struct sockaddr *)&s6, sizeof(s6)) :
		  bind(fd, (struct sockaddr *)&s4, sizeof(s4))) < 0 || listen(fd, 128) < 0) {
		rc = -errno;
		close(fd);
		snprintf(err, errlen, "cannot listen on %s: %s", addr, strerror(-rc));
		return rc;
	}
	return fd;
fail:
	rc = -errno;
	snprintf(err, errlen, "cannot listen on %s: %s", addr, strerror(-rc));
	return rc;
bad:
	snprintf(err, errlen, "bad --%s '%s': want 127.0.0.1:PORT or [::1]:PORT", opt, addr);
	return -EINVAL;
not_loopback:
	snprintf(err, errlen, "--%s %s: only a loopback address (127.0.0.0/8, ::1); the API "
		 "is plain HTTP", opt, addr);
	return -EINVAL;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	http_guard_notify(&((struct http_server *)cls)->guard, conn, socket_context, toe);
}

int http_start(struct http_server *h, unsigned extra_flags)
{
	h->daemon = http_daemon_start(h->listen_fd, &h->guard, h->head_timeout_ms,
				      HTTP_MAX_CONNECTIONS, extra_flags, NULL, on_request, on_completed,
				      on_connection, h);
	return h->daemon ? 0 : -EIO;
}

void http_quiesce(struct http_server *h)
{
	http_daemon_quiesce(h->daemon, &h->listen_fd);
	if (h->daemon && h->unix_path[0])
		unlink(h->unix_path);
}

void http_stop(struct http_server *h)
{
	http_daemon_stop(&h->daemon, &h->guard, &h->listen_fd);
	if (h->unix_path[0])
		unlink(h->unix_path);
}
