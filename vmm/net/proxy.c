/* proxy.c - the guest's proxied connections on the host, in the I/O thread: request head, rules, broker, ClientHello, relay with caps. */
#include "net/proxy.h"
#include "net/sni.h"
#include "net/socks.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

enum nc_state {
	NC_HEAD,        /* reading the request head */
	NC_BROKER,      /* asked the broker, waiting for its answer */
	NC_HELLO,       /* CONNECT to 443: reading the ClientHello */
	NC_RELAY,       /* both ways */
	NC_REFUSING,    /* writing the refusal, then closed */
};

struct net_conn {
	struct net_proxy *px;
	struct net_conn *next, *prev;
	uint32_t id;
	enum nc_state state;
	int gfd, tfd;                  /* the guest's side (our socket pair end), the server's */
	uint32_t gev, tev;             /* events watched on each, UINT32_MAX: not watched */
	struct net_request req;
	bool parsed;
	bool socks, socks_greeted;     /* a SOCKS5 client (first byte 5); its greeting answered */
	int err;                       /* the broker's -errno, for a SOCKS5 reply code */
	uint8_t socks_code;            /* the parser's reply code for a bad request, else 0 */
	bool g_eof, t_eof;             /* read EOF from that side */
	bool g_shut, t_shut;           /* shutdown(SHUT_WR) passed on to that side */
	uint8_t *up, *down;            /* NET_RELAY_BUF each: guest to server, server to guest */
	size_t up_off, up_len, down_off, down_len;
	uint64_t bytes_up, bytes_down;
	char addr[46];
	char rule[NET_RULE_TEXT_MAX];
};

_Static_assert(NET_RELAY_BUF >= NET_HELLO_MAX + NET_HEAD_MAX, "a head and a hello fit in up");
_Static_assert(NET_RELAY_BUF >= 2 * NET_HEAD_MAX + NET_HOST_MAX + 64, "a rewritten head fits");

static void conn_event(void *opaque, uint32_t events);
static void conn_pump(struct net_conn *c);
static int drain(int to, uint8_t *buf, size_t *off, size_t *len, uint64_t *count,
		 uint64_t *total);

/* Queue n bytes for the guest's client after what is still unsent (a
 * SOCKS5 greeting's answer may be, when the request follows it at once). */
static void put_down(struct net_conn *c, const void *p, size_t n)
{
	if (c->down_off)
		memmove(c->down, c->down + c->down_off, c->down_len);
	c->down_off = 0;
	memcpy(c->down + c->down_len, p, n);
	c->down_len += n;
}

/* ---- the outcome: one log line per attempt, and the record ---- */

static void outcome(struct net_conn *c, bool allowed, const char *reason)
{
	struct net_proxy *px = c->px;
	struct net_outcome o = {
		.vm_id = px->vm_id, .method = c->parsed ? c->req.method : "",
		.host = c->parsed ? c->req.host : "", .port = c->parsed ? c->req.port : 0,
		.addr = c->addr, .allowed = allowed, .rule = c->rule, .reason = reason ? reason : "",
		.bytes_up = c->bytes_up, .bytes_down = c->bytes_down,
	};

	if (allowed) {
		px->allowed++;
		log_limited(&px->lim_allow, LOG_INFO, "net: allowed %s %s port %u -> %s (rule '%s'): "
			    "%llu bytes up, %llu down", o.method, o.host, o.port, o.addr, o.rule,
			    (unsigned long long)o.bytes_up, (unsigned long long)o.bytes_down);
	} else {
		px->refused++;
		log_limited(&px->lim_refuse, LOG_WARN, "net: refused %s %s port %u%s%s: %s",
			    o.method[0] ? o.method : "(request)", o.host[0] ? o.host : "-", o.port,
			    o.addr[0] ? " at " : "", o.addr, o.reason);
	}
	if (px->record)
		px->record(px->record_opaque, &o);
}

/* ---- connections ---- */

static void watch(struct net_conn *c, int fd, uint32_t *cur, uint32_t want)
{
	struct net_proxy *px = c->px;

	if (fd < 0 || *cur == want)
		return;
	/* Nothing wanted: out of the loop, or a hang-up epoll always reports
	 * would wake us again and again (a server gone while the guest does
	 * not read). */
	if (!want) {
		if (*cur != UINT32_MAX)
			event_loop_del(px->loop, fd);
		*cur = UINT32_MAX;
		return;
	}
	if (*cur == UINT32_MAX) {
		if (event_loop_add(px->loop, fd, want, conn_event, c) == 0)
			*cur = want;
		return;
	}
	if (event_loop_mod(px->loop, fd, want) == 0)
		*cur = want;
}

static void close_fd(struct net_proxy *px, int *fd, uint32_t *ev)
{
	if (*fd < 0)
		return;
	if (*ev != UINT32_MAX)
		event_loop_del(px->loop, *fd);
	close(*fd);
	*fd = -1;
	*ev = UINT32_MAX;
}

static void conn_free(struct net_conn *c)
{
	struct net_proxy *px = c->px;

	if (c->state == NC_RELAY)
		outcome(c, true, NULL);
	close_fd(px, &c->gfd, &c->gev);
	close_fd(px, &c->tfd, &c->tev);
	if (c->prev)
		c->prev->next = c->next;
	else
		px->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	px->nr_conns--;
	free(c->up);
	free(c->down);
	free(c);
}

/* Refuse with an HTTP status and a one-line reason for the guest's client,
 * then close once it is written. */
static void refuse(struct net_conn *c, int status, const char *reason)
{
	static const char *const texts[] = { [0] = "Forbidden", [1] = "Bad Gateway",
					     [2] = "Bad Request", [3] = "Request Header Fields Too Large",
					     [4] = "Service Unavailable" };
	const char *text = status == 403 ? texts[0] : status == 502 ? texts[1] :
			   status == 431 ? texts[3] : status == 503 ? texts[4] : texts[2];
	int n;

	outcome(c, false, reason);
	close_fd(c->px, &c->tfd, &c->tev);
	c->state = NC_REFUSING;
	c->up_off = c->up_len = 0;
	c->bytes_up = 0;        /* from here: bytes dropped while lingering */
	if (c->socks) {
		/* SOCKS5 has no room for a reason: the code says what it can,
		 * the log line the rest. Before its greeting's answer: 05 FF. */
		uint8_t rep[NET_SOCKS_REPLY_LEN];

		net_socks_reply(c->socks_code ? c->socks_code : net_socks_code(status, c->err), rep);
		if (!c->socks_greeted)
			rep[1] = 0xff;
		put_down(c, rep, c->socks_greeted ? NET_SOCKS_REPLY_LEN : 2);
		c->t_eof = true;
		conn_pump(c);
		return;
	}
	c->down_off = 0;
	n = snprintf((char *)c->down, NET_RELAY_BUF, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\n"
		     "Connection: close\r\nX-Mayfly-Refused: 1\r\n\r\nmayfly: %s\n", status, text,
		     reason);
	c->down_len = n > 0 && n < NET_RELAY_BUF ? (size_t)n : 0;
	c->t_eof = true;
	conn_pump(c);
}

/* The connection ended without a word owed (SNI refused: the guest's
 * client already heard 200, or the guest went away). */
static void drop(struct net_conn *c, const char *reason)
{
	outcome(c, false, reason);
	c->state = NC_HEAD;      /* not counted again as allowed */
	conn_free(c);
}

static bool is_literal(const char *host)
{
	struct net_addr a;

	return net_addr_parse(host, &a);
}

/* The head is in: check the rules, then ask the broker. */
static void head_done(struct net_conn *c)
{
	struct net_proxy *px = c->px;
	const struct net_rule *rule = net_policy_match(px->policy, c->req.host, c->req.port);
	char why[NET_REASON_MAX];
	int rc;

	if (!rule) {
		snprintf(why, sizeof(why), "%s port %u is not allowed by any --allow-net rule",
			 c->req.host, c->req.port);
		refuse(c, 403, why);
		return;
	}
	if (px->bytes_up >= px->max_bytes || px->bytes_down >= px->max_bytes) {
		refuse(c, 403, "the sandbox's network byte budget is used up");
		return;
	}
	snprintf(c->rule, sizeof(c->rule), "%s", rule->text);
	rc = net_broker_ask(px->broker_fd, c->id, c->req.host, c->req.port);
	if (rc) {
		refuse(c, 503, rc == -EAGAIN ? "the network broker is busy" :
			       "the network broker is gone");
		return;
	}
	c->state = NC_BROKER;
	watch(c, c->gfd, &c->gev, 0);
}

/* NC_HEAD of a SOCKS5 client: its greeting answered (no authentication),
 * then its CONNECT request, in up[0, up_len). */
static void read_socks(struct net_conn *c)
{
	const char *why = "";
	uint8_t code = NET_SOCKS_FAILURE;
	size_t used;
	int rc;

	if (!c->socks_greeted) {
		rc = net_socks_greeting(c->up, c->up_len, &used);
		if (rc == -EAGAIN)
			return;
		if (rc) {
			refuse(c, 400, rc == -EACCES ? "a SOCKS5 client that offers no method without "
				       "authentication" : "a malformed SOCKS5 greeting");
			return;
		}
		memmove(c->up, c->up + used, c->up_len - used);
		c->up_len -= used;
		c->socks_greeted = true;
		put_down(c, (const uint8_t[]){ NET_SOCKS_VERSION, 0 /* no authentication */ }, 2);
		/* Sent now (the client waits for it before its request); what
		 * the socket does not take waits for EPOLLOUT. */
		if (drain(c->gfd, c->down, &c->down_off, &c->down_len, NULL, NULL) < 0) {
			drop(c, "the client left during its SOCKS5 greeting");
			return;
		}
		if (c->down_len)
			watch(c, c->gfd, &c->gev, EPOLLIN | EPOLLOUT);
		if (!c->up_len)
			return;
	}
	rc = net_socks_request(c->up, c->up_len, &c->req, &code, &why);
	if (rc == -EAGAIN)
		return;
	if (rc) {
		c->socks_code = code;
		refuse(c, 400, why);
		return;
	}
	c->parsed = true;
	head_done(c);
}

static void read_head(struct net_conn *c)
{
	size_t room = NET_HEAD_MAX - c->up_len;
	const char *why = "";
	ssize_t n;
	int rc;

	if (!room)
		return;
	n = recv(c->gfd, c->up + c->up_len, room, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		if (c->up_len)
			drop(c, "the client closed before its request was whole");
		else
			conn_free(c);   /* connected and left: not an attempt */
		return;
	}
	c->up_len += (size_t)n;
	if (c->up[0] == NET_SOCKS_VERSION) {
		c->socks = true;
		read_socks(c);
		return;
	}
	rc = net_http_parse(c->up, c->up_len, &c->req, &why);
	if (rc == -EAGAIN)
		return;
	if (rc) {
		refuse(c, rc == -E2BIG ? 431 : 400, why);
		return;
	}
	c->parsed = true;
	head_done(c);
}

/* The server's socket arrived: answer the client, or pass its request on. */
static void connected(struct net_conn *c, int fd)
{
	size_t rest = c->up_len - c->req.head_len;
	static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";

	c->tfd = fd;
	c->tev = UINT32_MAX;
	if (c->req.kind == NET_REQ_CONNECT || c->req.kind == NET_REQ_SOCKS) {
		memmove(c->up, c->up + c->req.head_len, rest);
		c->up_len = rest;
		if (c->req.kind == NET_REQ_SOCKS) {
			uint8_t rep[NET_SOCKS_REPLY_LEN];

			net_socks_reply(NET_SOCKS_OK, rep);
			put_down(c, rep, sizeof(rep));
		} else {
			put_down(c, ok, sizeof(ok) - 1);
		}
		/* A name on 443 must be the TLS server name the client asks for:
		 * no tunnel to an allowed address under another name. */
		c->state = c->req.port == c->px->tls_port && !is_literal(c->req.host) ? NC_HELLO :
			   NC_RELAY;
	} else {
		/* The rewritten head goes first, then what followed the head. */
		char *head = malloc(NET_HEAD_MAX + NET_HOST_MAX + 64);
		int len = head ? net_http_rewrite(c->up, &c->req, head,
						  NET_HEAD_MAX + NET_HOST_MAX + 64) : -ENOMEM;

		if (len < 0) {
			free(head);
			refuse(c, 502, "cannot rewrite the request");
			return;
		}
		memmove(c->up + len, c->up + c->req.head_len, rest);
		memcpy(c->up, head, (size_t)len);
		free(head);
		c->up_len = (size_t)len + rest;
		c->state = NC_RELAY;
	}
	c->up_off = 0;
	conn_pump(c);
}

static struct net_conn *find(struct net_proxy *px, uint32_t id)
{
	for (struct net_conn *c = px->conns; c; c = c->next)
		if (c->id == id)
			return c;
	return NULL;
}

static void broker_event(void *opaque, uint32_t events)
{
	struct net_proxy *px = opaque;

	(void)events;
	for (int i = 0; i < 16; i++) {
		struct net_broker_rep rep;
		struct net_conn *c;
		int fd, rc = net_broker_answer(px->broker_fd, &rep, &fd);

		if (rc == -EAGAIN || rc == -EINTR)
			return;
		if (rc == -EPIPE || (rc && rc != -EBADMSG)) {
			/* The broker is gone: no connection will ever come. */
			log_limited(&px->lim_cap, LOG_WARN, "net: the network broker is gone");
			event_loop_del(px->loop, px->broker_fd);
			for (;;) {
				for (c = px->conns; c && c->state != NC_BROKER; c = c->next)
					;
				if (!c)
					break;
				/* It leaves NC_BROKER (and may be freed): start over. */
				refuse(c, 503, "the network broker is gone");
			}
			return;
		}
		if (rc)
			continue;
		c = find(px, rep.id);
		if (!c || c->state != NC_BROKER) {
			if (fd >= 0)
				close(fd);   /* its client left meanwhile */
			continue;
		}
		if (rep.has_addr)
			net_addr_format(&rep.addr, c->addr);
		if (rep.err) {
			c->err = rep.err;
			refuse(c, rep.err == -EACCES ? 403 : 502, rep.reason);
			continue;
		}
		connected(c, fd);
	}
}

/* ---- the pump: one function decides what each side is watched for ---- */

static bool over_cap(struct net_conn *c)
{
	struct net_proxy *px = c->px;

	if (px->bytes_up < px->max_bytes && px->bytes_down < px->max_bytes)
		return false;
	log_limited(&px->lim_cap, LOG_WARN, "net: the sandbox's %llu bytes each way are used up: "
		    "connection closed", (unsigned long long)px->max_bytes);
	return true;
}

/* Move bytes from `from` into buf[off+len, NET_RELAY_BUF), counted in
 * *count and *total when they are given (bytes from the server). */
static int fill(int from, uint8_t *buf, size_t *off, size_t *len, bool *eof, uint64_t *count,
		uint64_t *total)
{
	ssize_t n;

	if (*eof)
		return 0;
	if (!*len)
		*off = 0;
	if (*off + *len == NET_RELAY_BUF)
		return 0;
	n = recv(from, buf + *off + *len, NET_RELAY_BUF - *off - *len, MSG_DONTWAIT);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	if (n == 0)
		*eof = true;
	*len += (size_t)n;
	if (count) {
		*count += (uint64_t)n;
		*total += (uint64_t)n;
	}
	return (int)n;
}

static int drain(int to, uint8_t *buf, size_t *off, size_t *len, uint64_t *count, uint64_t *total)
{
	ssize_t n;

	if (!*len)
		return 0;
	n = send(to, buf + *off, *len, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	*off += (size_t)n;
	*len -= (size_t)n;
	if (count) {
		*count += (uint64_t)n;
		*total += (uint64_t)n;
	}
	return 0;
}

/* NC_HELLO: enough of the ClientHello to judge it. */
static bool check_hello(struct net_conn *c)
{
	char sni[NET_HOST_MAX + 1], why[NET_REASON_MAX];
	const char *what = "";
	int rc;

	if (c->up_len < NET_HELLO_MAX && !c->g_eof) {
		ssize_t n = recv(c->gfd, c->up + c->up_len, NET_HELLO_MAX - c->up_len, MSG_DONTWAIT);

		if (n > 0)
			c->up_len += (size_t)n;
		else if (n == 0)
			c->g_eof = true;
	}
	rc = net_sni_parse(c->up, c->up_len, sni, &what);
	if (rc == -EAGAIN && !c->g_eof)
		return false;
	if (rc == 0 && strcmp(sni, c->req.host)) {
		snprintf(why, sizeof(why), "TLS server name %s differs from the CONNECT host", sni);
		drop(c, why);
		return true;
	}
	if (rc) {
		snprintf(why, sizeof(why), "TLS ClientHello refused: %s",
			 rc == -ENOENT ? "no server name" : rc == -EAGAIN ? "cut short" : what);
		drop(c, why);
		return true;
	}
	c->state = NC_RELAY;
	return false;
}

/* NC_REFUSING: the refusal written, the write side shut; what the client
 * still sends is read and dropped until it closes (a close with its bytes
 * unread would reset the guest's connection, and the refusal with it), at
 * most NET_LINGER_MAX bytes. True when the connection is gone. */
static bool linger(struct net_conn *c)
{
	for (int i = 0; i < 16 && !c->g_eof; i++) {
		ssize_t n = recv(c->gfd, c->up, NET_RELAY_BUF, MSG_DONTWAIT);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		if (n <= 0 || (c->bytes_up += (uint64_t)n) > NET_LINGER_MAX)
			c->g_eof = true;
	}
	if (!c->down_len && !c->g_shut) {
		shutdown(c->gfd, SHUT_WR);
		c->g_shut = true;
	}
	if (c->g_eof && !c->down_len) {
		conn_free(c);
		return true;
	}
	return false;
}

static void conn_pump(struct net_conn *c)
{
	uint32_t gwant = 0, twant = 0;
	int rc = 0;

	for (int round = 0; round < 4; round++) {
		rc = drain(c->gfd, c->down, &c->down_off, &c->down_len, NULL, NULL);
		if (rc)
			break;
		if (c->state == NC_REFUSING) {
			if (linger(c))
				return;
			break;
		}
		if (c->state == NC_HELLO) {
			if (c->down_len)
				break;          /* the 200 first: the client sends its hello after it */
			if (check_hello(c))
				return;
			if (c->state == NC_HELLO)
				break;
		}
		if (c->state != NC_RELAY)
			break;
		if (over_cap(c)) {
			conn_free(c);
			return;
		}
		rc = drain(c->tfd, c->up, &c->up_off, &c->up_len, &c->bytes_up, &c->px->bytes_up);
		if (!rc)
			rc = fill(c->gfd, c->up, &c->up_off, &c->up_len, &c->g_eof, NULL, NULL);
		if (rc >= 0)
			rc = fill(c->tfd, c->down, &c->down_off, &c->down_len, &c->t_eof,
				  &c->bytes_down, &c->px->bytes_down);
		if (rc < 0)
			break;
		if (rc == 0 && !c->up_len && !c->down_len)
			break;
	}
	if (rc < 0) {
		conn_free(c);           /* a reset on either side ends both */
		return;
	}
	if (c->state == NC_RELAY) {
		if (c->g_eof && !c->up_len && !c->t_shut) {
			shutdown(c->tfd, SHUT_WR);
			c->t_shut = true;
		}
		if (c->t_eof && !c->down_len && !c->g_shut) {
			shutdown(c->gfd, SHUT_WR);
			c->g_shut = true;
		}
		if (c->t_shut && c->g_shut) {
			conn_free(c);
			return;
		}
		if (!c->g_eof && c->up_off + c->up_len < NET_RELAY_BUF)
			gwant |= EPOLLIN;
		if (!c->t_eof && c->down_off + c->down_len < NET_RELAY_BUF)
			twant |= EPOLLIN;
		if (c->up_len)
			twant |= EPOLLOUT;
	} else if (c->state == NC_HEAD || c->state == NC_HELLO || c->state == NC_REFUSING) {
		gwant |= EPOLLIN;
	}
	if (c->down_len)
		gwant |= EPOLLOUT;
	watch(c, c->gfd, &c->gev, gwant);
	watch(c, c->tfd, &c->tev, twant);
}

static void conn_event(void *opaque, uint32_t events)
{
	struct net_conn *c = opaque;

	if (c->state == NC_HEAD && (events & EPOLLIN)) {
		read_head(c);
		return;
	}
	if (c->state == NC_BROKER)
		return;   /* not watched meanwhile; a client that left is seen after */
	conn_pump(c);
}

int net_proxy_accept(void *opaque)
{
	struct net_proxy *px = opaque;
	struct net_conn *c;
	int sv[2];

	if (px->admit && !px->admit(px->record_opaque, px->nr_conns)) {
		log_limited(&px->lim_cap, LOG_WARN, "net: the audit log is behind or failed: the "
			    "guest's connection is refused");
		px->refused++;
		return -EAGAIN;
	}
	if (px->nr_conns >= px->max_conns) {
		log_limited(&px->lim_cap, LOG_WARN, "net: %u proxied connections open: the guest's "
			    "next one is refused", px->max_conns);
		px->refused++;
		return -EAGAIN;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->up = malloc(NET_RELAY_BUF);
	c->down = malloc(NET_RELAY_BUF);
	if (!c->up || !c->down ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0) {
		free(c->up);
		free(c->down);
		free(c);
		return -ENOMEM;
	}
	c->px = px;
	c->id = px->next_id++;
	c->gfd = sv[0];
	c->tfd = -1;
	c->gev = c->tev = UINT32_MAX;
	c->next = px->conns;
	if (px->conns)
		px->conns->prev = c;
	px->conns = c;
	px->nr_conns++;
	watch(c, c->gfd, &c->gev, EPOLLIN);
	if (c->gev == UINT32_MAX) {
		close(sv[1]);
		c->state = NC_HEAD;
		conn_free(c);
		return -ENOSPC;
	}
	return sv[1];
}

int net_proxy_init(struct net_proxy *px, struct event_loop *loop, const struct net_policy *p,
		   int broker_fd, const char *vm_id)
{
	memset(px, 0, sizeof(*px));
	px->loop = loop;
	px->policy = p;
	px->broker_fd = broker_fd;
	px->max_conns = NET_MAX_CONNS;
	px->max_bytes = NET_MAX_BYTES;
	px->tls_port = 443;
	px->next_id = 1;
	snprintf(px->vm_id, sizeof(px->vm_id), "%s", vm_id ? vm_id : "");
	return event_loop_add(loop, broker_fd, EPOLLIN, broker_event, px);
}

void net_proxy_destroy(struct net_proxy *px)
{
	while (px->conns) {
		struct net_conn *c = px->conns;

		/* The loop is stopped: its sources go with it, not one by one. */
		c->gev = c->tev = UINT32_MAX;
		conn_free(c);
	}
	if (px->allowed || px->refused)
		log_info("net: %llu connections allowed, %llu refused; %llu bytes up, %llu down",
			 (unsigned long long)px->allowed, (unsigned long long)px->refused,
			 (unsigned long long)px->bytes_up, (unsigned long long)px->bytes_down);
}
