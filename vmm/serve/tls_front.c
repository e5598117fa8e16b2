/* tls_front.c - TLS for serve --e2b: OpenSSL (Debian's libssl, linked statically) ends each client's TLS in a thread of its own, which relays the plain bytes to libmicrohttpd through a socketpair; MHD never sees TLS. */
#include "serve/tls_front.h"
#include "lib/log.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#define TLS_BUF (16u << 10)            /* a TLS record's plaintext at most */

/* ALPN: HTTP/1.1 only (the SDK offers h2 over TLS; MHD speaks 1.1). A
 * client that offers no http/1.1 goes on without ALPN. */
static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
		       const unsigned char *in, unsigned inlen, void *arg)
{
	static const unsigned char h11[] = "\x08http/1.1";
	unsigned char *sel;

	(void)ssl;
	(void)arg;
	if (SSL_select_next_proto(&sel, outlen, h11, sizeof(h11) - 1, in, inlen) !=
	    OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_NOACK;
	*out = sel;
	return SSL_TLSEXT_ERR_OK;
}

static int ssl_failed(char *err, size_t errlen, const char *what, const char *path)
{
	char e[256];

	ERR_error_string_n(ERR_get_error(), e, sizeof(e));
	snprintf(err, errlen, "%s %s: %s", what, path, e);
	return -EINVAL;
}

int tls_front_load(struct tls_front *t, const char *cert, const char *key, char *err,
		   size_t errlen)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

	memset(t, 0, sizeof(*t));
	t->listen_fd = t->stop_fd = -1;
	if (!ctx)
		return ssl_failed(err, errlen, "TLS:", "cannot be set up");
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	/* No renegotiation, no tickets kept in this process's memory for long. */
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
	SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
	if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
		ssl_failed(err, errlen, "--e2b-cert", cert);
		SSL_CTX_free(ctx);
		return -EINVAL;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 &&
	    ERR_GET_REASON(ERR_peek_error()) != X509_R_KEY_VALUES_MISMATCH) {
		ssl_failed(err, errlen, "--e2b-key", key);
		SSL_CTX_free(ctx);
		return -EINVAL;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		ERR_clear_error();
		snprintf(err, errlen, "--e2b-key %s is not the key of --e2b-cert %s", key, cert);
		SSL_CTX_free(ctx);
		return -EINVAL;
	}
	t->ctx = ctx;
	return 0;
}

void tls_front_free(struct tls_front *t)
{
	if (t->ctx)
		SSL_CTX_free(t->ctx);
	t->ctx = NULL;
}

struct tls_conn {
	struct tls_front *t;
	int fd;                        /* the client's socket */
	struct sockaddr_storage peer;
	socklen_t peer_len;
};

/* What a TLS call that returned r waits for: POLLIN or POLLOUT, or 0 when
 * it failed for good. */
static short ssl_wants(SSL *ssl, int r)
{
	int e = SSL_get_error(ssl, r);

	return e == SSL_ERROR_WANT_READ ? POLLIN : e == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
}

/* The handshake, guarded as serve's request heads are (http_guard): cut
 * after handshake_ms, or for a newcomer when TLS_MAX_HANDSHAKES wait. */
static bool handshake(struct tls_conn *c, SSL *ssl)
{
	struct http_guard_conn *g = http_guard_open(&c->t->guard, c->fd);
	bool done = false;

	for (;;) {
		int r = SSL_accept(ssl);
		short ev = r == 1 ? 0 : ssl_wants(ssl, r);
		struct pollfd p[2] = { { .fd = c->fd, .events = ev },
				       { .fd = c->t->stop_fd, .events = POLLIN } };

		done = r == 1;
		if (!ev || poll(p, 2, -1) < 0 || p[1].revents)
			break;
	}
	/* Before the fd can be closed and its number reused. */
	if (g)
		http_guard_close(&c->t->guard, g);
	return done;
}

/* Plain bytes both ways between the client's TLS and the daemon's end,
 * until both directions are done or the front stops. */
static void relay(struct tls_conn *c, SSL *ssl, int plain, uint8_t *in, uint8_t *out)
{
	size_t in_len = 0, in_off = 0, out_len = 0;
	bool client_eof = false, plain_eof = false, plain_shut = false;
	short want_ssl = 0;            /* what the pending TLS call waits for */

	for (;;) {
		struct pollfd p[3];
		bool moved = false;
		short ev;
		int r;

		/* The client's bytes: read what TLS has (also what it buffered). */
		if (!client_eof && !in_len) {
			r = SSL_read(ssl, in, TLS_BUF);
			if (r > 0) {
				in_len = (size_t)r;
				in_off = 0;
				moved = true;
			} else if (!(ev = ssl_wants(ssl, r))) {
				client_eof = true;
			} else {
				want_ssl |= ev;
			}
		}
		if (in_len) {
			ssize_t n = send(plain, in + in_off, in_len, MSG_DONTWAIT | MSG_NOSIGNAL);

			if (n > 0) {
				in_off += (size_t)n;
				in_len -= (size_t)n;
				moved = true;
			} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
				return;
			}
		}
		if (client_eof && !in_len && !plain_shut) {
			shutdown(plain, SHUT_WR);
			plain_shut = true;
		}
		/* The daemon's bytes, each record written whole before the next. */
		if (!plain_eof && !out_len) {
			ssize_t n = recv(plain, out, TLS_BUF, MSG_DONTWAIT);

			if (n > 0) {
				out_len = (size_t)n;
				moved = true;
			} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
				plain_eof = true;
			}
		}
		if (out_len) {
			r = SSL_write(ssl, out, (int)out_len);
			if (r > 0) {
				out_len = 0;
				moved = true;
			} else if (!(ev = ssl_wants(ssl, r))) {
				return;
			} else {
				want_ssl |= ev;
			}
		}
		if (plain_eof && !out_len) {
			SSL_shutdown(ssl);
			return;
		}
		if (moved) {
			want_ssl = 0;
			continue;
		}
		p[0] = (struct pollfd){ .fd = c->fd, .events = want_ssl ? want_ssl : POLLIN };
		p[1] = (struct pollfd){ .fd = plain, .events = (short)((in_len ? POLLOUT : 0) |
								      (!plain_eof && !out_len ? POLLIN : 0)) };
		p[2] = (struct pollfd){ .fd = c->t->stop_fd, .events = POLLIN };
		if (client_eof && !want_ssl)
			p[0].fd = -1;
		if (poll(p, 3, -1) < 0 && errno != EINTR)
			return;
		if (p[2].revents)
			return;
		want_ssl = 0;
	}
}

static void *conn_main(void *arg)
{
	struct tls_conn *c = arg;
	struct tls_front *t = c->t;
	SSL *ssl = SSL_new(t->ctx);
	uint8_t *buf = malloc(2 * TLS_BUF);
	int sp[2] = { -1, -1 };

	if (ssl && buf && SSL_set_fd(ssl, c->fd) == 1 && handshake(c, ssl) &&
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0) {
		/* The daemon owns sp[0] from here, even when it refuses it. */
		if (MHD_add_connection(t->daemon, sp[0], (struct sockaddr *)&c->peer,
				       c->peer_len) == MHD_YES)
			relay(c, ssl, sp[1], buf, buf + TLS_BUF);
		close(sp[1]);
	}
	ERR_clear_error();
	free(buf);
	if (ssl)
		SSL_free(ssl);
	close(c->fd);
	free(c);
	thread_crew_done(&t->crew);
	return NULL;
}

static void *accept_main(void *arg)
{
	struct tls_front *t = arg;

	for (;;) {
		struct pollfd p[2] = { { .fd = t->listen_fd, .events = POLLIN },
				       { .fd = t->stop_fd, .events = POLLIN } };
		struct tls_conn *c;
		bool ok;

		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (!(p[0].revents & POLLIN))
			continue;
		c = calloc(1, sizeof(*c));
		if (!c)
			continue;
		c->t = t;
		c->peer_len = sizeof(c->peer);
		c->fd = accept4(t->listen_fd, (struct sockaddr *)&c->peer, &c->peer_len,
				SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (c->fd < 0) {
			free(c);
			continue;
		}
		ok = !thread_crew_start(&t->crew, t->max_conns, conn_main, c);
		if (!ok) {
			close(c->fd);
			free(c);
		}
	}
	return NULL;
}

int tls_front_start(struct tls_front *t, int listen_fd, struct MHD_Daemon *d)
{
	t->listen_fd = listen_fd;
	t->daemon = d;
	t->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (t->stop_fd < 0)
		return -errno;
	if (http_guard_start(&t->guard, TLS_MAX_HANDSHAKES, t->handshake_ms)) {
		close(t->stop_fd);
		t->stop_fd = -1;
		return -EAGAIN;
	}
	thread_crew_init(&t->crew);
	if (thread_create(&t->acceptor, accept_main, t)) {
		http_guard_stop(&t->guard);
		thread_crew_destroy(&t->crew);
		close(t->stop_fd);
		t->stop_fd = -1;
		return -EAGAIN;
	}
	t->started = true;
	return 0;
}

void tls_front_stop(struct tls_front *t)
{
	uint64_t one = 1;

	if (!t->started)
		return;
	(void)!write(t->stop_fd, &one, sizeof(one));
	pthread_join(t->acceptor, NULL);
	thread_crew_wait(&t->crew);
	close(t->stop_fd);
	t->stop_fd = -1;
	if (t->listen_fd >= 0)
		close(t->listen_fd);
	t->listen_fd = -1;
	http_guard_stop(&t->guard);
	thread_crew_destroy(&t->crew);
	t->started = false;
}
