/* tokens.c - mayfly serve's bearer tokens: a file of "NAME TOKEN" lines, checked in constant time. */
#include "serve/tokens.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TOKENS_FILE_MAX (1u << 20)

static bool name_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       strchr("._:@-", ch) != NULL;
}

/* One field of a line: [s, *end) up to a blank. */
static const char *field(const char *s, const char *eol, const char **end)
{
	while (s < eol && (*s == ' ' || *s == '\t'))
		s++;
	*end = s;
	while (*end < eol && **end != ' ' && **end != '\t')
		(*end)++;
	return s;
}

static int line_error(char *err, size_t errlen, int line, const char *what)
{
	snprintf(err, errlen, "token file line %d: %s", line, what);
	return -EINVAL;
}

int tokens_parse(struct tokens *t, const char *text, size_t len, char *err, size_t errlen)
{
	const char *p = text, *end = text + len;
	int line = 0;

	t->n = 0;
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p)), *n0, *n1, *s0, *s1, *rest, *e;
		struct token *tk;

		eol = eol ? eol : end;
		line++;
		e = eol;
		if (e > p && e[-1] == '\r')
			e--;
		n0 = field(p, e, &n1);
		p = eol + 1;
		if (n0 == n1 || *n0 == '#')
			continue;
		s0 = field(n1, e, &s1);
		if (s0 == s1)
			return line_error(err, errlen, line, "want NAME TOKEN");
		if (field(s1, e, &rest) != rest)
			return line_error(err, errlen, line, "want NAME TOKEN, nothing after");
		if ((size_t)(n1 - n0) > TOKEN_NAME_MAX)
			return line_error(err, errlen, line, "name longer than 64 bytes");
		for (const char *c = n0; c < n1; c++)
			if (!name_char(*c))
				return line_error(err, errlen, line, "name: only [A-Za-z0-9._:@-]");
		if ((size_t)(s1 - s0) < TOKEN_MIN_LEN || (size_t)(s1 - s0) > TOKEN_MAX_LEN)
			return line_error(err, errlen, line, "token must be 16-256 bytes");
		for (const char *c = s0; c < s1; c++)
			if (*c < 0x21 || *c > 0x7e)
				return line_error(err, errlen, line, "token: printable ASCII only");
		if (t->n >= TOKENS_MAX)
			return line_error(err, errlen, line, "more than 256 tokens");
		for (int i = 0; i < t->n; i++)
			if (strlen(t->t[i].name) == (size_t)(n1 - n0) &&
			    !memcmp(t->t[i].name, n0, (size_t)(n1 - n0)))
				return line_error(err, errlen, line, "name given twice");
		tk = &t->t[t->n++];
		memcpy(tk->name, n0, (size_t)(n1 - n0));
		tk->name[n1 - n0] = '\0';
		tk->len = (size_t)(s1 - s0);
		memcpy(tk->secret, s0, tk->len);
		tk->secret[tk->len] = '\0';
	}
	if (!t->n) {
		snprintf(err, errlen, "the token file has no token");
		return -EINVAL;
	}
	return 0;
}

int tokens_load(struct tokens *t, const char *path, char *err, size_t errlen)
{
	struct stat st;
	char *buf = NULL;
	ssize_t n;
	size_t got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK), rc;   /* a FIFO: refused */

	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot open token file %s: %s", path, strerror(-rc));
		return rc;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > TOKENS_FILE_MAX) {
		snprintf(err, errlen, "token file %s: not a regular file of at most 1 MiB", path);
		rc = -EINVAL;
		goto out_close;
	}
	if (st.st_mode & 077) {
		snprintf(err, errlen, "token file %s is readable by others: chmod 600 it", path);
		rc = -EPERM;
		goto out_close;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto out_close;
	}
	while ((n = read(fd, buf + got, (size_t)st.st_size - got)) > 0)
		got += (size_t)n;
	if (n < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot read token file %s: %s", path, strerror(-rc));
		goto out_free;
	}
	rc = tokens_parse(t, buf, got, err, errlen);
out_free:
	explicit_bzero(buf, got);
	free(buf);
out_close:
	close(fd);
	return rc;
}

/* Equal, in time that depends on the lengths only. */
static bool same(const char *a, size_t alen, const char *b, size_t blen)
{
	volatile uint8_t diff = (uint8_t)(alen != blen);

	for (size_t i = 0; i < blen; i++)
		diff |= (uint8_t)(a[i < alen ? i : 0] ^ b[i]);
	return alen && !diff;
}

const char *tokens_find(const struct tokens *t, const char *secret)
{
	const char *found = NULL;
	size_t len;

	if (!secret)
		return NULL;
	len = strnlen(secret, TOKEN_MAX_LEN + 1);
	for (int i = 0; i < t->n; i++)
		if (same(secret, len, t->t[i].secret, t->t[i].len) && !found)
			found = t->t[i].name;
	return found;
}

const char *tokens_check(const struct tokens *t, const char *authorization)
{
	const char *tok;

	if (!authorization || strncasecmp(authorization, "Bearer ", 7))
		return NULL;
	tok = authorization + 7;
	while (*tok == ' ')
		tok++;
	return tokens_find(t, tok);
}
