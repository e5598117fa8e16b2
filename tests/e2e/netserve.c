/* netserve.c - the network suite's loopback web server in the harness's L1: plain HTTP or TLS (a test CA's certificate), fixed answers and static files. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

/*
 * usage: netserve [-d DIR] PORT [CERT KEY]
 * Listens on 127.0.0.1:PORT (TLS with CERT and KEY) and forks a child per
 * connection. Each request's head is read; GET /big answers 64 MiB of 'x';
 * with -d, GET /srv/PATH answers DIR/PATH (a directory's index.html; 404 when
 * missing), which is all pip's PEP 503 index and git's dumb HTTP need; any
 * other path "netserve PATH\n". The query string is ignored. Runs until killed.
 */

#define BIG_BYTES (64u << 20)

struct io {
	int fd;
	SSL *ssl;
};

static int io_read(struct io *io, char *buf, int len)
{
	return io->ssl ? SSL_read(io->ssl, buf, len) : (int)read(io->fd, buf, (size_t)len);
}

static int io_write(struct io *io, const char *buf, int len)
{
	int done = 0;

	while (done < len) {
		int n = io->ssl ? SSL_write(io->ssl, buf + done, len - done) :
				  (int)write(io->fd, buf + done, (size_t)(len - done));

		if (n <= 0)
			return -1;
		done += n;
	}
	return 0;
}

static const char *root;      /* -d DIR */

/* GET /srv/PATH: the file under root, as text/html or octet-stream. */
static void serve_file(struct io *io, const char *path)
{
	char file[2048], reply[512];
	static char chunk[65536];
	const char *type = "application/octet-stream";
	struct stat st;
	size_t len;
	ssize_t n;
	int fd, hn;

	if (strstr(path, "..") ||
	    snprintf(file, sizeof(file) - 16, "%s/%s", root, path) >= (int)sizeof(file) - 16)
		goto not_found;
	if (stat(file, &st) == 0 && S_ISDIR(st.st_mode))
		strcat(file, "/index.html");
	fd = open(file, O_RDONLY);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		goto not_found;
	len = strlen(file);
	if (len > 5 && !strcmp(file + len - 5, ".html"))
		type = "text/html";
	hn = snprintf(reply, sizeof(reply), "HTTP/1.1 200 OK\r\nContent-Type: %s\r\n"
		      "Content-Length: %lld\r\nConnection: close\r\n\r\n", type,
		      (long long)st.st_size);
	if (io_write(io, reply, hn))
		return;
	while ((n = read(fd, chunk, sizeof(chunk))) > 0)
		if (io_write(io, chunk, (int)n))
			return;
	return;
not_found:
	hn = snprintf(reply, sizeof(reply), "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n"
		      "Connection: close\r\n\r\n");
	io_write(io, reply, hn);
}

static void serve(struct io *io)
{
	char head[8192], path[1024] = "/", reply[2048];
	static char chunk[65536];
	int len = 0, n;

	while (len < (int)sizeof(head) - 1) {
		n = io_read(io, head + len, (int)sizeof(head) - 1 - len);
		if (n <= 0)
			return;
		len += n;
		head[len] = '\0';
		if (strstr(head, "\r\n\r\n"))
			break;
	}
	if (sscanf(head, "%*s %1023s", path) != 1)
		return;
	path[strcspn(path, "?")] = '\0';
	if (root && !strncmp(path, "/srv/", 5)) {
		serve_file(io, path + 5);
		return;
	}
	if (!strcmp(path, "/big")) {
		n = snprintf(reply, sizeof(reply), "HTTP/1.1 200 OK\r\nContent-Length: %u\r\n"
			     "Connection: close\r\n\r\n", BIG_BYTES);
		if (io_write(io, reply, n))
			return;
		memset(chunk, 'x', sizeof(chunk));
		for (unsigned sent = 0; sent < BIG_BYTES; sent += sizeof(chunk))
			if (io_write(io, chunk, sizeof(chunk)))
				return;
		return;
	}
	n = snprintf(reply, sizeof(reply), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n"
		     "Connection: close\r\n\r\nnetserve %s\n", strlen(path) + 10, path);
	io_write(io, reply, n);
}

int main(int argc, char **argv)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	SSL_CTX *ctx = NULL;
	int one = 1, lfd;

	if (argc > 2 && !strcmp(argv[1], "-d")) {
		root = argv[2];
		argc -= 2;
		argv += 2;
	}
	if (argc != 2 && argc != 4) {
		fprintf(stderr, "usage: netserve [-d DIR] PORT [CERT KEY]\n");
		return 2;
	}
	sin.sin_port = htons((uint16_t)atoi(argv[1]));
	signal(SIGCHLD, SIG_IGN);   /* children reaped by the kernel */
	signal(SIGPIPE, SIG_IGN);
	if (argc == 4) {
		ctx = SSL_CTX_new(TLS_server_method());
		if (!ctx || SSL_CTX_use_certificate_chain_file(ctx, argv[2]) != 1 ||
		    SSL_CTX_use_PrivateKey_file(ctx, argv[3], SSL_FILETYPE_PEM) != 1) {
			ERR_print_errors_fp(stderr);
			return 1;
		}
	}
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(lfd, 128) < 0) {
		perror("netserve: listen");
		return 1;
	}
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		struct io io = { .fd = fd };

		if (fd < 0)
			continue;
		if (fork() == 0) {
			close(lfd);
			if (ctx) {
				io.ssl = SSL_new(ctx);
				SSL_set_fd(io.ssl, fd);
				if (SSL_accept(io.ssl) != 1)
					_exit(1);
			}
			serve(&io);
			if (io.ssl)
				SSL_shutdown(io.ssl);
			_exit(0);
		}
		close(fd);
	}
}
