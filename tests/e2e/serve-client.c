/* serve-client.c - the e2e suite's HTTP client for mayfly serve over its Unix socket: one request, the status on stdout, the body to a file (curl is not in the harness's minimal L1). */
/*
 * usage: serve-client [-t TOKEN] [-c CONTENT-TYPE] [-d BODY | -f FILE] [-o OUT]
 *                     [-D HEADERS] [-T] SOCKET METHOD URL
 * Sends one HTTP/1.0 request (so the reply ends with the connection: no
 * chunked encoding to undo), prints the reply's status code and a newline
 * on stdout, writes the body to OUT (default /dev/null) and the header
 * lines to HEADERS. -d '' sends an empty body with Content-Length 0. -T:
 * the status line also has the microseconds from connect to the reply's
 * end (tools/bench-serve).
 * Exit: 0 a reply came, 1 none (connect or read failed), 2 usage.
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* To the socket with send(MSG_NOSIGNAL): no SIGPIPE when the service
 * answered early (413) and closed; to a file with write. */
static int write_all(int fd, const char *p, size_t n, bool sock)
{
	while (n) {
		ssize_t w = sock ? send(fd, p, n, MSG_NOSIGNAL) : write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static char *slurp(const char *path, size_t *len)
{
	struct stat st;
	char *buf;
	int fd = open(path, O_RDONLY);

	if (fd < 0 || fstat(fd, &st) < 0)
		return NULL;
	buf = malloc((size_t)st.st_size + 1);
	*len = 0;
	while (buf && *len < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + *len, (size_t)st.st_size - *len);

		if (r <= 0)
			break;
		*len += (size_t)r;
	}
	close(fd);
	return buf;
}

int main(int argc, char **argv)
{
	const char *token = NULL, *ctype = NULL, *out = "/dev/null", *hdrs = NULL;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char *body = NULL, *slurped = NULL, head[4096], buf[65536];
	size_t blen = 0, hl, got = 0;
	int opt, fd, ofd, status = 0;
	bool has_body = false, in_body = false, timed = false;
	struct timespec t0, t1;
	FILE *hf = NULL;
	ssize_t n;

	while ((opt = getopt(argc, argv, "t:c:d:f:o:D:T")) != -1) {
		switch (opt) {
		case 't': token = optarg; break;
		case 'c': ctype = optarg; break;
		case 'd': body = optarg; blen = strlen(optarg); has_body = true; break;
		case 'f':
			free(slurped);
			body = slurped = slurp(optarg, &blen);
			if (!body) {
				perror(optarg);
				return 2;
			}
			has_body = true;
			break;
		case 'o': out = optarg; break;
		case 'D': hdrs = optarg; break;
		case 'T': timed = true; break;
		default: return 2;
		}
	}
	if (argc - optind != 3 || strlen(argv[optind]) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "usage: serve-client [-t TOKEN] [-c TYPE] [-d BODY | -f FILE] [-o OUT] "
			"[-D HEADERS] SOCKET METHOD URL\n");
		return 2;
	}
	strcpy(sa.sun_path, argv[optind]);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		perror("serve-client: connect");
		return 1;
	}
	hl = (size_t)snprintf(head, sizeof(head), "%s %s HTTP/1.0\r\nHost: mayfly\r\n",
			      argv[optind + 1], argv[optind + 2]);
	if (token)
		hl += (size_t)snprintf(head + hl, sizeof(head) - hl, "Authorization: Bearer %s\r\n", token);
	if (has_body)
		hl += (size_t)snprintf(head + hl, sizeof(head) - hl, "Content-Type: %s\r\n"
				       "Content-Length: %zu\r\n",
				       ctype ? ctype : "application/json", blen);
	hl += (size_t)snprintf(head + hl, sizeof(head) - hl, "\r\n");
	/* The service may answer (413) before it read the whole body. */
	if (write_all(fd, head, hl, true) || (blen && write_all(fd, body, blen, true) && errno != EPIPE &&
					errno != ECONNRESET))
		fprintf(stderr, "serve-client: write: %s\n", strerror(errno));
	ofd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (ofd < 0) {
		perror(out);
		return 2;
	}
	if (hdrs)
		hf = fopen(hdrs, "w");
	while ((n = read(fd, buf + got, sizeof(buf) - got)) > 0) {
		got += (size_t)n;
		if (!in_body) {
			char *end = memmem(buf, got, "\r\n\r\n", 4);

			if (!end) {
				if (got == sizeof(buf))
					break;
				continue;
			}
			*end = '\0';
			if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
				break;
			if (hf) {
				/* Now: a test waits for a header of a reply still streaming. */
				fprintf(hf, "%s\n", buf);
				fflush(hf);
			}
			in_body = true;
			n = (ssize_t)(got - (size_t)(end + 4 - buf));
			memmove(buf, end + 4, (size_t)n);
			got = (size_t)n;
		}
		if (write_all(ofd, buf, got, false))
			break;
		got = 0;
	}
	close(ofd);
	if (hf)
		fclose(hf);
	close(fd);
	free(slurped);   /* LeakSanitizer's exit status would hide ours */
	if (!status) {
		fprintf(stderr, "serve-client: no reply\n");
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (timed)
		printf("%d %lld\n", status, (long long)(t1.tv_sec - t0.tv_sec) * 1000000 +
		       (t1.tv_nsec - t0.tv_nsec) / 1000);
	else
		printf("%d\n", status);
	return 0;
}
