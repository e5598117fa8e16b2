/* tokens.h - mayfly serve's bearer tokens: a file of "NAME TOKEN" lines, checked in constant time. */
#ifndef MAYFLY_SERVE_TOKENS_H
#define MAYFLY_SERVE_TOKENS_H

#include <stddef.h>

#define TOKENS_MAX       256
#define TOKEN_NAME_MAX   64     /* [A-Za-z0-9._:@-], the audit log's "caller" */
#define TOKEN_MIN_LEN    16     /* a shorter secret is refused */
#define TOKEN_MAX_LEN    256    /* printable ASCII, no space */

struct token {
	char name[TOKEN_NAME_MAX + 1];
	char secret[TOKEN_MAX_LEN + 1];
	size_t len;
};

struct tokens {
	struct token t[TOKENS_MAX];
	int n;
};

/* Parse a token file's text: one "NAME TOKEN" per line (blanks around and
 * between), '#' comment lines and empty lines skipped; names unique. 0, or
 * -EINVAL with one line in err naming the line number (never the secret). */
int tokens_parse(struct tokens *t, const char *text, size_t len, char *err, size_t errlen);

/* tokens_parse of the file at path, which must not be readable by group or
 * others (it holds secrets). 0 or -errno with one line in err. */
int tokens_load(struct tokens *t, const char *path, char *err, size_t errlen);

/* The name of the token an Authorization header value carries
 * ("Bearer TOKEN"), or NULL (no header, another scheme, no such token).
 * Every token is compared, each in time independent of where it differs. */
const char *tokens_check(const struct tokens *t, const char *authorization);
/* The same for the secret itself (E2B's X-API-KEY and X-Access-Token). */
const char *tokens_find(const struct tokens *t, const char *secret);

#endif
