/* e2b_port.c - published ports: a request for PORT-ID.DOMAIN sent, as HTTP/1.0 with Connection: close, to that port inside the sandbox over the agent's PORT relay; the guest server's response head checked (port_msg.c) and its body streamed back. */
#include "serve/e2b_port.h"
#include "serve/calls.h"
#include "serve/e2b_msg.h"
#include "serve/http_reply.h"
#include "serve/port_msg.h"
#include "serve/tokens.h"
#include "lib/clock.h"
#include "pump.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define PORT_MAX_BUFFERED (1u << 20)   /* a body without Content-Length, held to count it */
#define PORT_READ_CHUNK   (64u << 10)
#define PORT_MAX_INTERIM  8            /* 1xx heads before the response's own */

struct port_call {
	struct port_conn *pc;
	const char *method;
	char *uri;                     /* the request target, for a held body's head */
	char *head;                    /* the request head, until sent */
	size_t head_len;
	bool buffered;                 /* no Content-Length: the body held, then sent counted */
	struct http_body body;
	uint64_t sent;
	int send_err;                  /* the guest's server took no more (-errno) */
	int client_fd;
	bool upgrade;                  /* a WebSocket (Upgrade) request */
	bool replied;                  /* refused before its body: the rest is dropped */
	struct ws_relay *ws;           /* its relay, until on_upgraded takes it */
};

/* An upgraded connection's two ends, joined by a thread of their own. */
struct ws_relay {
	struct e2b_server *e;
	struct port_stream *s;         /* the guest's end, and what it sent after its 101 */
	bool taken;                    /* on_upgraded ran: the relay's thread owns this */
	MHD_socket sock;
	struct MHD_UpgradeResponseHandle *urh;
	char *extra;                   /* what the client sent after its request */
	size_t extra_len;
};

/* The response's body, owned by libmicrohttpd's response. */
struct port_stream {
	struct port_conn *pc;
	int fd, stop_fd, client_fd;
	char *buf;                     /* what came with the head: [off, len) */
	size_t off, len;
	int64_t left;                  /* Content-Length still to come; -1: to the close */
	uint64_t in, out;
	const char *err;
};

static enum MHD_Result send_error(struct MHD_Connection *conn, unsigned status, const char *msg)
{
	return http_send_json(conn, status, e2b_error_json((int)status, msg));
}

static const char *header(struct MHD_Connection *conn, const char *name)
{
	return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
}

/* Wait for ev on fd up to timeout_ms (-1: no end): 1 ready, 0 timed out,
 * -ECANCELED the service is draining, -ECONNRESET the client went. */
static int wait_for(int fd, short ev, int stop_fd, int client_fd, int timeout_ms)
{
	uint64_t end = timeout_ms < 0 ? 0 : clock_now_ns() + (uint64_t)timeout_ms * 1000000;

	for (;;) {
		/* POLLRDHUP only on the client: a byte it sends (the next request)
		 * must not wake us, its hang-up must. */
		struct pollfd p[3] = { { .fd = fd, .events = ev }, { .fd = stop_fd, .events = POLLIN },
				       { .fd = client_fd, .events = POLLRDHUP } };
		int ms = -1, n;

		if (end) {
			uint64_t now = clock_now_ns();

			if (now >= end)
				return 0;
			ms = (int)((end - now) / 1000000) + 1;
		}
		n = poll(p, 3, ms);
		if (n < 0 && errno != EINTR)
			return -errno;
		if (p[1].revents)
			return -ECANCELED;
		if (p[2].revents & (POLLRDHUP | POLLHUP | POLLERR))
			return -ECONNRESET;
		if (p[0].revents)
			return 1;
	}
}

static int send_all(struct port_call *p, int stop_fd, const void *data, size_t len)
{
	const char *q = data;
	int fd = calls_port_fd(p->pc);

	while (len && !p->send_err) {
		ssize_t n = send(fd, q, len, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n > 0) {
			q += n;
			len -= (size_t)n;
			p->sent += (uint64_t)n;
		} else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			int w = wait_for(fd, POLLOUT, stop_fd, p->client_fd, 30000);

			if (w <= 0)
				p->send_err = w ? w : -ETIMEDOUT;
		} else {
			p->send_err = n < 0 ? -errno : -EPIPE;
		}
	}
	return p->send_err;
}

struct head_builder {
	char *buf;
	size_t len, cap;
	bool failed;
};

static void add(struct head_builder *b, const char *s, size_t len)
{
	if (b->failed)
		return;
	if (b->len + len + 1 > b->cap) {
		size_t cap = (b->cap ? b->cap * 2 : 4096) + len;
		char *n = realloc(b->buf, cap);

		if (!n) {
			b->failed = true;
			return;
		}
		b->buf = n;
		b->cap = cap;
	}
	memcpy(b->buf + b->len, s, len);
	b->len += len;
	b->buf[b->len] = '\0';
}

static void add_str(struct head_builder *b, const char *s)
{
	add(b, s, strlen(s));
}

/* The client's headers, but the hop-by-hop ones and the credentials
 * meant for mayfly: the guest's server never sees a key or a token. */
static enum MHD_Result copy_header(void *cls, enum MHD_ValueKind kind, const char *key,
				   const char *value)
{
	static const char *const ours[] = { "e2b-traffic-access-token", "X-API-KEY",
					    "X-Access-Token", "Authorization" };
	struct head_builder *b = cls;

	(void)kind;
	if (!value || port_hop_header(key, strlen(key)))
		return MHD_YES;
	for (size_t i = 0; i < sizeof(ours) / sizeof(ours[0]); i++)
		if (!strcasecmp(key, ours[i]))
			return MHD_YES;
	add_str(b, key);
	add_str(b, ": ");
	add_str(b, value);
	add_str(b, "\r\n");
	return MHD_YES;
}

/* "METHOD URI HTTP/1.0", the client's headers, Host as the client gave
 * it, Connection: close (or, for an upgrade, Connection: Upgrade and
 * Upgrade: upgrade over HTTP/1.1), and the body's length unless it is
 * still to be counted (length -1). NULL when out of memory. */
static char *request_head(struct MHD_Connection *conn, const char *method, const char *uri,
			  const char *host, int64_t length, const char *upgrade, size_t *len)
{
	struct head_builder b = { 0 };
	char n[48];

	add_str(&b, method);
	add_str(&b, " ");
	add_str(&b, uri);
	/* An upgrade is HTTP/1.1's; everything else ends with its response. */
	add_str(&b, upgrade ? " HTTP/1.1\r\nHost: " : " HTTP/1.0\r\nHost: ");
	add_str(&b, host);
	if (upgrade) {
		add_str(&b, "\r\nConnection: Upgrade\r\nUpgrade: ");
		add_str(&b, upgrade);
		add_str(&b, "\r\n");
	} else {
		add_str(&b, "\r\nConnection: close\r\n");
	}
	MHD_get_connection_values(conn, MHD_HEADER_KIND, copy_header, &b);
	if (length >= 0) {
		snprintf(n, sizeof(n), "Content-Length: %lld\r\n", (long long)length);
		add_str(&b, n);
	}
	add_str(&b, "\r\n");
	if (b.failed) {
		free(b.buf);
		return NULL;
	}
	*len = b.len;
	return b.buf;
}

/* Who may use the port: the sandbox's own traffic token, or an API key.
 * The caller's name for the audit log; NULL with *status 401 (none
 * given) or 403 (a wrong one). */
static const char *authorise(struct e2b_server *e, struct MHD_Connection *conn, const char *id,
			     unsigned *status)
{
	const char *traffic = header(conn, "e2b-traffic-access-token");
	const char *key = header(conn, "X-API-KEY");
	char want[PORT_TOKEN_LEN + 1];
	const char *caller;

	if (traffic) {
		port_traffic_token(e->traffic_key, id, want);
		if (port_token_equal(traffic, want))
			return "traffic-token";
	}
	caller = key && e->tokens ? tokens_find(e->tokens, key) : NULL;
	if (caller)
		return caller;
	*status = traffic || key ? 403 : 401;
	return NULL;
}

/* An answer before the body: what comes of it is dropped (port_body). */
static enum MHD_Result refuse(struct port_call *p, struct MHD_Connection *conn, unsigned status,
			      const char *msg)
{
	p->replied = true;
	return send_error(conn, status, msg);
}

enum MHD_Result port_begin(struct e2b_server *e, struct MHD_Connection *conn, const char *method,
			   const char *uri, unsigned port, const char *id, struct port_call **out)
{
	const char *length = header(conn, MHD_HTTP_HEADER_CONTENT_LENGTH);
	const char *te = header(conn, MHD_HTTP_HEADER_TRANSFER_ENCODING);
	struct call_result r = { 0 };
	struct port_call *p = calloc(1, sizeof(*p));
	unsigned status = 0;
	const char *caller, *state;
	struct sandbox *sb;
	char err[400];
	json_t *j;
	int st;

	*out = p;
	if (!p)
		return MHD_NO;
	p->method = method;
	p->uri = strdup(uri);
	if (!p->uri)
		return MHD_NO;
	p->client_fd = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD)->connect_fd;
	caller = authorise(e, conn, id, &status);
	if (!caller)
		return refuse(p, conn, status, status == 401 ?
				  "a published port needs the sandbox's e2b-traffic-access-token "
				  "or an X-API-KEY" : "wrong traffic token or API key for this sandbox");
	p->upgrade = header(conn, MHD_HTTP_HEADER_UPGRADE) != NULL;
	if (p->upgrade && (strcmp(method, "GET") || te || (length && strcmp(length, "0"))))
		return refuse(p, conn, 400, "an Upgrade (WebSocket) request is a GET without a body");
	j = service_get_json(e->svc, id);
	state = j ? json_string_value(json_object_get(j, "state")) : NULL;
	if (!state) {
		snprintf(err, sizeof(err), "sandbox %s not found", id);
		st = 404;
	} else if (strcmp(state, "running")) {
		snprintf(err, sizeof(err), "sandbox %s is %s: its ports answer while it runs%s", id,
			 state, !strcmp(state, "paused") ? " (connect to it to resume it)" : "");
		st = 409;
	} else {
		st = service_get(e->svc, id, &sb, err, sizeof(err));
	}
	json_decref(j);
	if (st)
		return refuse(p, conn, (unsigned)st, err);
	st = calls_port_open(e->svc, sb, caller, port, &p->pc, &r);
	service_put(e->svc, sb);
	if (st)
		return refuse(p, conn, (unsigned)r.status, r.error);
	/* Chunked (MHD hands us the decoded pieces): counted before it goes. */
	p->buffered = te != NULL;
	p->body.max = PORT_MAX_BUFFERED;
	if (p->buffered)
		return MHD_YES;
	p->head = request_head(conn, method, uri, header(conn, MHD_HTTP_HEADER_HOST),
			       length ? strtoll(length, NULL, 10) : -1,
			       p->upgrade ? header(conn, MHD_HTTP_HEADER_UPGRADE) : NULL, &p->head_len);
	if (!p->head)
		return refuse(p, conn, 500, "out of memory");
	send_all(p, e->svc->stop_fd, p->head, p->head_len);
	return MHD_YES;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct port_stream *s = cls;
	size_t want = max;
	ssize_t n;

	(void)pos;
	if (s->left >= 0 && (uint64_t)s->left < want)
		want = (size_t)s->left;
	if (!want)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (s->len) {           /* read with the head: counted there */
		n = (ssize_t)(s->len < want ? s->len : want);
		memcpy(buf, s->buf + s->off, (size_t)n);
		s->off += (size_t)n;
		s->len -= (size_t)n;
		if (s->left > 0)
			s->left -= n;
		return n;
	} else {
		for (;;) {
			int w;

			n = recv(s->fd, buf, want, MSG_DONTWAIT);
			if (n >= 0 || (errno != EAGAIN && errno != EINTR))
				break;
			w = wait_for(s->fd, POLLIN, s->stop_fd, s->client_fd, -1);
			if (w < 0) {
				s->err = w == -ECANCELED ? "the service is draining" : "the client went";
				return MHD_CONTENT_READER_END_WITH_ERROR;
			}
		}
		if (n < 0) {
			s->err = "the relay to the guest failed";
			return MHD_CONTENT_READER_END_WITH_ERROR;
		}
		if (n == 0) {
			if (s->left > 0) {
				s->err = "the guest's server closed before its Content-Length";
				return MHD_CONTENT_READER_END_WITH_ERROR;
			}
			return MHD_CONTENT_READER_END_OF_STREAM;
		}
	}
	s->in += (uint64_t)n;
	if (s->left > 0)
		s->left -= n;
	return n;
}

static void stream_free(void *cls)
{
	struct port_stream *s = cls;

	calls_port_close(s->pc, s->out, s->in, s->err);
	free(s->buf);
	free(s);
}

/* Read the guest server's response head into s->buf; 1xx heads but 101
 * skipped.
 * 0 and *h, or an HTTP status with err. */
static int read_head(struct port_stream *s, struct port_head *h, char *err, size_t errlen,
		     unsigned timeout_s)
{
	uint64_t end = clock_now_ns() + (uint64_t)timeout_s * NS_PER_S;
	unsigned interim = 0;
	const char *why;
	int rc;

	for (;;) {
		rc = port_parse_head(s->buf + s->off, s->len, h, &why);
		if (rc == 1 && (h->status >= 200 || h->status == 101)) {
			s->off += h->head_len;
			s->len -= h->head_len;
			return 0;
		}
		/* 100 Continue and the like: the real one follows, soon. */
		if (rc == 1 && ++interim > PORT_MAX_INTERIM) {
			snprintf(err, errlen, "the guest's server sent more than %d interim (1xx) "
				 "responses", PORT_MAX_INTERIM);
			return 502;
		}
		if (rc == 1) {
			s->off += h->head_len;
			s->len -= h->head_len;
			continue;
		}
		if (rc < 0) {
			snprintf(err, errlen, "%s", why);
			return 502;
		}
		if (s->off) {
			memmove(s->buf, s->buf + s->off, s->len);
			s->off = 0;
		}
		for (;;) {
			uint64_t now = clock_now_ns();
			ssize_t n;
			int w;

			n = recv(s->fd, s->buf + s->len, PORT_HEAD_MAX + PORT_READ_CHUNK - s->len,
				 MSG_DONTWAIT);
			if (n > 0) {
				s->len += (size_t)n;
				s->in += (uint64_t)n;
				break;
			}
			if (n == 0) {
				snprintf(err, errlen, "the guest's server closed the connection without "
					 "a response");
				return 502;
			}
			if (errno != EAGAIN && errno != EINTR) {
				snprintf(err, errlen, "the relay to the guest failed: %s", strerror(errno));
				return 502;
			}
			w = now >= end ? 0 : wait_for(s->fd, POLLIN, s->stop_fd, s->client_fd,
						      (int)((end - now) / 1000000) + 1);
			if (w == 0) {
				snprintf(err, errlen, "the guest's server sent no response in %u s",
					 timeout_s);
				return 504;
			}
			if (w < 0) {
				snprintf(err, errlen, w == -ECANCELED ? "the service is draining" :
					 "the client went");
				return 503;
			}
		}
	}
}

static void copy_response_headers(struct MHD_Response *resp, const char *buf,
				  const struct port_head *h)
{
	for (unsigned i = 0; i < h->nheaders; i++) {
		const struct port_header *hd = &h->headers[i];
		char *name, *value;

		if (port_hop_header(buf + hd->name, hd->name_len))
			continue;
		name = strndup(buf + hd->name, hd->name_len);
		value = strndup(buf + hd->value, hd->value_len);
		/* One libmicrohttpd refuses (a header it sets itself) is left out. */
		if (name && value)
			(void)MHD_add_response_header(resp, name, value);
		free(name);
		free(value);
	}
}

static void ws_free(struct ws_relay *w)
{
	stream_free(w->s);
	free(w->extra);
	free(w);
}

/* Client and guest joined until both ends are done, or the front end stops. */
static void *ws_main(void *arg)
{
	struct ws_relay *w = arg;
	struct e2b_server *e = w->e;
	struct port_stream *s = w->s;
	int a = dup(w->sock), b = dup(s->fd);
	struct pump p;

	/* Dups: the client's socket is MHD's to close, the guest's the call's. */
	if (a >= 0 && b >= 0 && !pump_open(&p, a, b)) {
		pump_preload(&p, 0, w->extra, w->extra_len);
		pump_preload(&p, 1, s->buf + s->off, s->len);
		pump_run(&p, e->ws_stop_fd);
		s->out += p.moved[0];
		/* What came with the 101 was counted when it was read. */
		s->in += p.moved[1] > s->len ? p.moved[1] - s->len : 0;
		pump_close(&p);
	} else {
		if (a >= 0)
			close(a);
		if (b >= 0)
			close(b);
		s->err = "cannot join the WebSocket's ends";
	}
	MHD_upgrade_action(w->urh, MHD_UPGRADE_ACTION_CLOSE);
	ws_free(w);
	thread_crew_done(&e->ws);
	return NULL;
}

static void on_upgraded(void *cls, struct MHD_Connection *conn, void *req_cls,
			const char *extra_in, size_t extra_in_size, MHD_socket sock,
			struct MHD_UpgradeResponseHandle *urh)
{
	struct ws_relay *w = cls;
	struct e2b_server *e = w->e;
	bool ok;

	(void)conn;
	(void)req_cls;
	w->taken = true;
	w->sock = sock;
	w->urh = urh;
	/* The guest's leftover fits PUMP_BUF: the head's read takes at most
	 * PORT_READ_CHUNK past it. */
	if (w->s->len > PUMP_BUF)
		w->s->len = PUMP_BUF;
	if (extra_in_size > PUMP_BUF)
		extra_in_size = PUMP_BUF;
	w->extra = malloc(extra_in_size ? extra_in_size : 1);
	ok = w->extra != NULL;
	if (ok) {
		memcpy(w->extra, extra_in, extra_in_size);
		w->extra_len = extra_in_size;
		ok = !thread_crew_start(&e->ws, E2B_MAX_CONNECTIONS, ws_main, w);
	}
	if (!ok) {
		w->s->err = "cannot start the WebSocket's relay";
		MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
		ws_free(w);
	}
}

/* The guest's server said 101: the client hears it, then its connection
 * is joined to the guest's (on_upgraded). */
static int upgrade(struct e2b_server *e, struct MHD_Connection *conn, struct port_call *p,
		   struct port_stream *s, const struct port_head *h)
{
	struct ws_relay *w = calloc(1, sizeof(*w));
	struct MHD_Response *resp = w ? MHD_create_response_for_upgrade(on_upgraded, w) : NULL;
	const char *head = s->buf + s->off - h->head_len;
	char *up = NULL;

	for (unsigned i = 0; i < h->nheaders && !up; i++)
		if (h->headers[i].name_len == 7 && !strncasecmp(head + h->headers[i].name, "Upgrade", 7))
			up = strndup(head + h->headers[i].value, h->headers[i].value_len);
	if (!resp || !up) {
		if (resp)
			MHD_destroy_response(resp);
		free(w);
		free(up);
		s->err = "no upgrade: out of memory, or the guest's 101 had no Upgrade header";
		stream_free(s);
		return send_error(conn, 502, "the guest's server switched protocols without an "
				  "Upgrade header (or mayfly is out of memory)");
	}
	w->e = e;
	w->s = s;
	copy_response_headers(resp, head, h);
	/* Upgrade is a hop header: set again, as the guest's server named it. */
	MHD_add_response_header(resp, MHD_HTTP_HEADER_UPGRADE, up);
	free(up);
	p->ws = w;
	return http_send(conn, MHD_HTTP_SWITCHING_PROTOCOLS, resp);
}

/* The body is in: the head (and a held body) sent, the answer read and
 * passed back. */
static enum MHD_Result respond(struct e2b_server *e, struct MHD_Connection *conn,
			       struct port_call *p)
{
	struct port_stream *s = calloc(1, sizeof(*s));
	struct MHD_Response *resp;
	struct port_head *h = malloc(sizeof(*h));
	const uint8_t *early;
	char err[400];
	size_t early_len;
	uint64_t size;
	int st;

	if (!s || !h || !(s->buf = malloc(PORT_HEAD_MAX + PORT_READ_CHUNK))) {
		free(h);
		if (s)
			free(s->buf);
		free(s);
		return send_error(conn, 500, "out of memory");
	}
	s->fd = calls_port_fd(p->pc);
	s->stop_fd = e->svc->stop_fd;
	s->client_fd = p->client_fd;
	s->pc = p->pc;
	p->pc = NULL;                  /* the stream's from here */
	s->out = p->sent;
	early = calls_port_early(s->pc, &early_len);
	if (early_len > PORT_HEAD_MAX + PORT_READ_CHUNK)
		early_len = PORT_HEAD_MAX + PORT_READ_CHUNK;
	memcpy(s->buf, early, early_len);
	s->len = early_len;
	s->in = early_len;
	st = read_head(s, h, err, sizeof(err), e->svc->cfg.call_timeout_s);
	if (st) {
		s->err = err;
		stream_free(s);
		free(h);
		return send_error(conn, (unsigned)st, err);
	}
	if (h->status == 101 && !p->upgrade) {
		s->err = "a 101 to a request that asked for no upgrade";
		stream_free(s);
		free(h);
		return send_error(conn, 502, "the guest's server switched protocols unasked");
	}
	if (p->upgrade && h->status == 101) {
		st = upgrade(e, conn, p, s, h);
		free(h);
		return (enum MHD_Result)st;
	}
	/* No body to come: HEAD, 204, 304 (RFC 9110, 6.4.1). */
	s->left = h->content_length;
	if (!strcmp(p->method, "HEAD") || h->status == 204 || h->status == 304)
		s->left = 0;
	size = s->left >= 0 ? (uint64_t)s->left : MHD_SIZE_UNKNOWN;
	resp = MHD_create_response_from_callback(size, PORT_READ_CHUNK, stream_read, s, stream_free);
	if (!resp) {
		stream_free(s);
		free(h);
		return MHD_NO;
	}
	copy_response_headers(resp, s->buf + s->off - h->head_len, h);
	st = (int)h->status;
	free(h);
	return http_send(conn, (unsigned)st, resp);
}

enum MHD_Result port_body(struct e2b_server *e, struct MHD_Connection *conn, struct port_call *p,
			  const char *data, size_t *size)
{
	char msg[200];

	if (p->replied) {
		*size = 0;
		return MHD_YES;
	}
	if (*size) {
		if (p->buffered) {
			if (http_body_add(&p->body, data, *size))
				return MHD_NO;
		} else {
			/* A server that stopped reading may still answer (413, say). */
			send_all(p, e->svc->stop_fd, data, *size);
		}
		*size = 0;
		return MHD_YES;
	}
	if (p->buffered) {
		if (p->body.too_large) {
			snprintf(msg, sizeof(msg), "a body without Content-Length is held to count it: "
				 "at most %u bytes", PORT_MAX_BUFFERED);
			return send_error(conn, 413, msg);
		}
		free(p->head);
		p->head = request_head(conn, p->method, p->uri, header(conn, MHD_HTTP_HEADER_HOST),
				       (int64_t)p->body.len, NULL, &p->head_len);
		if (!p->head)
			return send_error(conn, 500, "out of memory");
		if (!send_all(p, e->svc->stop_fd, p->head, p->head_len))
			send_all(p, e->svc->stop_fd, p->body.data, p->body.len);
	}
	return respond(e, conn, p);
}

void port_end(struct port_call *p)
{
	if (!p)
		return;
	/* A 101 whose client went before it was upgraded. */
	if (p->ws && !p->ws->taken)
		ws_free(p->ws);
	if (p->pc)
		calls_port_close(p->pc, p->sent, 0, "the request ended before its answer");
	free(p->head);
	free(p->uri);
	http_body_free(&p->body);
	free(p);
}
