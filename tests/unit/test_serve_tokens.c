/* test_serve_tokens.c - mayfly serve's token file: its lines parsed strictly, a secret file refused when others can read it, tokens matched whole. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "serve/tokens.h"

static struct tokens t;

static int parse(const char *text, char *err, size_t errlen)
{
	return tokens_parse(&t, text, strlen(text), err, errlen);
}

Test(serve_tokens, lines_comments_and_blanks)
{
	char err[200];

	cr_assert_eq(parse("# ops\n\nalice  0123456789abcdef\n\tbob\tfedcba9876543210zz \r\n", err,
			   sizeof(err)), 0, "%s", err);
	cr_assert_eq(t.n, 2);
	cr_assert_str_eq(t.t[0].name, "alice");
	cr_assert_str_eq(t.t[1].secret, "fedcba9876543210zz");
	cr_assert_str_eq(tokens_check(&t, "Bearer 0123456789abcdef"), "alice");
	cr_assert_str_eq(tokens_check(&t, "bearer fedcba9876543210zz"), "bob");
}

Test(serve_tokens, a_token_matches_only_whole)
{
	char err[200];

	cr_assert_eq(parse("alice 0123456789abcdef\n", err, sizeof(err)), 0);
	cr_assert_null(tokens_check(&t, NULL));
	cr_assert_null(tokens_check(&t, ""));
	cr_assert_null(tokens_check(&t, "Bearer "));
	cr_assert_null(tokens_check(&t, "Bearer 0123456789abcde"));
	cr_assert_null(tokens_check(&t, "Bearer 0123456789abcdef0"));
	cr_assert_null(tokens_check(&t, "Bearer 0123456789abcdeF"));
	cr_assert_null(tokens_check(&t, "Basic 0123456789abcdef"));
	cr_assert_null(tokens_check(&t, "0123456789abcdef"));
}

static void refused(const char *text, const char *want)
{
	char err[200] = "";

	cr_assert_eq(parse(text, err, sizeof(err)), -EINVAL, "%s", text);
	cr_assert(strstr(err, want), "got '%s', want '%s'", err, want);
	cr_assert_null(strstr(err, "0123456789abcdef"), "the secret is never in a message");
}

Test(serve_tokens, bad_files_are_refused_by_line)
{
	refused("", "no token");
	refused("# only\n", "no token");
	refused("alice\n", "line 1: want NAME TOKEN");
	refused("alice 0123456789abcdef extra\n", "nothing after");
	refused("alice short\n", "16-256 bytes");
	refused("al/ice 0123456789abcdef\n", "name: only");
	refused("a 0123456789abcdef\na 0123456789abcdeg\n", "line 2: name given twice");
}

Test(serve_tokens, a_file_others_can_read_is_refused)
{
	char dir[] = "/tmp/tokens-XXXXXX", path[64], err[200];
	int fd;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/t", dir);
	fd = open(path, O_WRONLY | O_CREAT, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "alice 0123456789abcdef\n", 23), 23);
	close(fd);
	chmod(path, 0644);
	cr_assert_eq(tokens_load(&t, path, err, sizeof(err)), -EPERM);
	cr_assert(strstr(err, "chmod 600"), "%s", err);
	chmod(path, 0600);
	cr_assert_eq(tokens_load(&t, path, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(t.t[0].name, "alice");
	unlink(path);
	cr_assert_eq(tokens_load(&t, path, err, sizeof(err)), -ENOENT);
	rmdir(dir);
}
