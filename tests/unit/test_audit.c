/* test_audit.c - the audit log: a real chain verifies; each kind of tampering is caught at the line it hits; appends from two processes interleave into one chain; through its writer process, with a hostile sender. */
#include "policy/audit.h"
#include "policy/audit_writer.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[] = "/tmp/mayfly-audit-test.XXXXXX";
static char path[128];

static void setup(void)
{
	strcpy(dir, "/tmp/mayfly-audit-test.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/audit.log", dir);
}

static void teardown(void)
{
	unlink(path);
	rmdir(dir);
}

TestSuite(audit, .init = setup, .fini = teardown);

static void append_n(int n, const char *who)
{
	struct audit_log log;
	char err[256];

	cr_assert_eq(audit_open(&log, path, err, sizeof(err)), 0, "%s", err);
	for (int i = 0; i < n; i++) {
		json_t *rec = json_pack("{s:s, s:i, s:[s,s]}", "who", who, "i", i, "argv", "echo", "é");

		cr_assert_eq(audit_append(&log, rec, err, sizeof(err)), 0, "%s", err);
		json_decref(rec);
	}
	audit_close(&log);
}

static char *slurp(size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = malloc(1 << 20);

	cr_assert_not_null(f);
	*len = fread(buf, 1, 1 << 20, f);
	fclose(f);
	return buf;
}

static void spit(const char *buf, size_t len)
{
	FILE *f = fopen(path, "wb");

	cr_assert_not_null(f);
	cr_assert_eq(fwrite(buf, 1, len, f), len);
	fclose(f);
}

/* The byte offsets where each line starts (line 1 at [1]). */
static int lines(const char *buf, size_t len, size_t *start, int max)
{
	int n = 0;

	for (size_t i = 0; i < len && n < max; i++)
		if (i == 0 || buf[i - 1] == '\n')
			start[++n] = i;
	start[n + 1] = len;
	return n;
}

static struct audit_verdict verify_bad(uint64_t line, const char *why_has)
{
	struct audit_verdict v;

	cr_assert_eq(audit_verify(path, NULL, &v), 1, "tampering not detected");
	cr_assert_eq(v.bad_line, line, "bad line %llu, want %llu (%s)",
		     (unsigned long long)v.bad_line, (unsigned long long)line, v.why);
	cr_assert_not_null(strstr(v.why, why_has), "why: %s", v.why);
	return v;
}

Test(audit, a_real_log_verifies_and_each_line_chains_to_the_one_before)
{
	struct audit_verdict v;
	size_t len, start[8];
	char *buf;

	append_n(3, "a");
	append_n(2, "b");   /* a second process, later: the chain goes on */
	cr_assert_eq(audit_verify(path, NULL, &v), 0, "%s", v.why);
	cr_assert_eq(v.records, 5);
	buf = slurp(&len);
	cr_assert_eq(lines(buf, len, start, 6), 5);
	cr_assert_eq(strncmp(buf, "{\"v\":1,\"seq\":1,\"prev\":\"0000", 27), 0, "%.60s", buf);
	cr_assert_not_null(strstr(buf + start[5], "\"seq\":5"));
	/* Non-ASCII text stays text. */
	cr_assert_not_null(strstr(buf, "\"é\""));
	free(buf);
}

Test(audit, an_edited_line_is_named)
{
	size_t len, start[8];
	char *buf, *p;

	append_n(4, "a");
	buf = slurp(&len);
	lines(buf, len, start, 6);
	p = strstr(buf + start[2], "\"echo\"");
	memcpy(p, "\"ECHO\"", 6);
	spit(buf, len);
	verify_bad(2, "edited");
	free(buf);
}

Test(audit, an_edited_line_with_its_own_hash_recomputed_breaks_the_next)
{
	size_t len, start[8], n;
	char *buf, *p, hex[65];

	append_n(4, "a");
	buf = slurp(&len);
	lines(buf, len, start, 6);
	p = strstr(buf + start[2], "\"echo\"");
	memcpy(p, "\"ECHO\"", 6);
	/* Forge line 2's line_sha256: the tamperer knows the format. */
	n = start[3] - start[2] - (sizeof(",\"line_sha256\":\"") - 1 + 64 + 3);
	audit_sha256_hex(buf + start[2], n, hex);
	memcpy(buf + start[2] + n + sizeof(",\"line_sha256\":\"") - 1, hex, 64);
	spit(buf, len);
	verify_bad(3, "prev does not match");
	free(buf);
}

Test(audit, a_removed_line_is_named)
{
	size_t len, start[8];
	char *buf;

	append_n(4, "a");
	buf = slurp(&len);
	lines(buf, len, start, 6);
	memmove(buf + start[2], buf + start[3], len - start[3]);
	spit(buf, len - (start[3] - start[2]));
	verify_bad(2, "seq is 3, want 2");
	free(buf);
}

Test(audit, reordered_lines_are_named)
{
	size_t len, start[8], l2, l3;
	char *buf, *copy;

	append_n(4, "a");
	buf = slurp(&len);
	lines(buf, len, start, 6);
	l2 = start[3] - start[2];
	l3 = start[4] - start[3];
	copy = malloc(len);
	memcpy(copy, buf, start[2]);
	memcpy(copy + start[2], buf + start[3], l3);
	memcpy(copy + start[2] + l3, buf + start[2], l2);
	memcpy(copy + start[4], buf + start[4], len - start[4]);
	spit(copy, len);
	verify_bad(2, "seq is 3, want 2");
	free(copy);
	free(buf);
}

Test(audit, a_log_cut_mid_line_is_named_and_refused_for_appends)
{
	struct audit_log log;
	size_t len, start[8];
	char *buf, err[256];

	append_n(3, "a");
	buf = slurp(&len);
	lines(buf, len, start, 6);
	spit(buf, start[3] + 10);
	verify_bad(3, "cut short");
	cr_assert_eq(audit_open(&log, path, err, sizeof(err)), -EBADMSG);
	cr_assert_not_null(strstr(err, "cut short"), "%s", err);
	free(buf);
}

Test(audit, lines_cut_off_the_end_show_against_a_head_kept_elsewhere)
{
	struct audit_verdict v;
	size_t len, start[8];
	char *buf, head[65];

	append_n(3, "a");
	cr_assert_eq(audit_verify(path, NULL, &v), 0);
	strcpy(head, v.head);
	buf = slurp(&len);
	lines(buf, len, start, 6);
	spit(buf, start[3]);   /* the last line gone, at a line boundary */
	/* Alone the shorter chain is self-consistent ... */
	cr_assert_eq(audit_verify(path, NULL, &v), 0);
	cr_assert_eq(v.records, 2);
	/* ... but not against the head printed before. */
	cr_assert_eq(audit_verify(path, head, &v), 1);
	cr_assert_eq(v.bad_line, 3);
	cr_assert_not_null(strstr(v.why, "removed from the end"), "%s", v.why);
	/* A head from the middle of an intact log is fine. */
	spit(buf, len);
	cr_assert_eq(audit_verify(path, head, &v), 0);
	free(buf);
}

Test(audit, two_processes_appending_at_once_make_one_chain)
{
	struct audit_verdict v;
	pid_t pid[2];
	int status;

	for (int i = 0; i < 2; i++) {
		pid[i] = fork();
		cr_assert_geq(pid[i], 0);
		if (pid[i] == 0) {
			struct audit_log log;
			char err[256];
			int rc = audit_open(&log, path, err, sizeof(err));

			for (int k = 0; !rc && k < 50; k++) {
				json_t *rec = json_pack("{s:i, s:i}", "proc", i, "k", k);

				rc = audit_append(&log, rec, err, sizeof(err));
				json_decref(rec);
			}
			_exit(rc ? 1 : 0);
		}
	}
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(waitpid(pid[i], &status, 0), pid[i]);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	cr_assert_eq(audit_verify(path, NULL, &v), 0, "line %llu: %s",
		     (unsigned long long)v.bad_line, v.why);
	cr_assert_eq(v.records, 100);
}

Test(audit, bytes_that_are_not_utf8_are_kept_as_base64)
{
	json_t *j = audit_bytes("a\xff", 2);

	cr_assert(json_is_object(j));
	cr_assert_str_eq(json_string_value(json_object_get(j, "base64")), "Yf8=");
	json_decref(j);
	j = audit_bytes("ok", 2);
	cr_assert_str_eq(json_string_value(j), "ok");
	json_decref(j);
}

/* ---- the writer: the VM process holds a socket, never the log ---- */

/* Descriptors of this process open on the log. */
static int fds_on_log(void)
{
	char link[64], target[256];
	int n = 0;

	for (int fd = 0; fd < 1024; fd++) {
		ssize_t len;

		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		len = readlink(link, target, sizeof(target) - 1);
		if (len <= 0)
			continue;
		target[len] = '\0';
		n += !strcmp(target, path);
	}
	return n;
}

static void *append_from_thread(void *arg)
{
	struct audit_log *log = arg;
	char err[256];

	for (int i = 0; i < 20; i++) {
		json_t *rec = json_pack("{s:s, s:i}", "who", "thread", "i", i);

		cr_assert_eq(audit_append(log, rec, err, sizeof(err)), 0, "%s", err);
		json_decref(rec);
	}
	return NULL;
}

Test(audit, through_its_writer_records_chain_and_this_process_holds_no_descriptor_of_the_log)
{
	struct audit_verdict v;
	struct audit_log log;
	pthread_t t;
	char err[256];

	cr_assert_eq(audit_open(&log, path, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(fds_on_log(), 1);
	cr_assert_eq(audit_writer_start(&log, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(fds_on_log(), 0, "the log is still open here: a jailed VM could cut it");
	cr_assert_eq(pthread_create(&t, NULL, append_from_thread, &log), 0);
	append_from_thread(&log);
	pthread_join(t, NULL);
	audit_close(&log);
	cr_assert_eq(audit_verify(path, NULL, &v), 0, "%s at line %llu", v.why,
		     (unsigned long long)v.bad_line);
	cr_assert_eq(v.records, 40);
}

/* What a compromised VM process may send its writer: a record that is not
 * an object is refused (the writer goes on); a stream that is not of
 * records ends the writer, and every later append fails (fail closed);
 * nothing it sends cuts the log back. */
Test(audit, a_hostile_sender_gets_refusals_and_never_shortens_the_log)
{
	struct audit_verdict v;
	struct audit_log log;
	struct { int32_t rc; char err[200]; } reply;
	json_t *rec = json_pack("{s:s}", "who", "vm");
	const char *bad[] = { "[1,2]", "{\"a\":", "\"x\"", "{\"a\":1,\"a\":2}" };
	char err[256], deep[200];
	uint32_t len;

	cr_assert_eq(audit_open(&log, path, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(audit_writer_start(&log, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(audit_append(&log, rec, err, sizeof(err)), 0, "%s", err);
	memset(deep, '[', sizeof(deep));
	for (size_t i = 0; i <= sizeof(bad) / sizeof(bad[0]); i++) {
		const char *b = i < sizeof(bad) / sizeof(bad[0]) ? bad[i] : deep;
		size_t n = i < sizeof(bad) / sizeof(bad[0]) ? strlen(b) : sizeof(deep);

		len = (uint32_t)n;
		cr_assert_eq(write(log.remote, &len, sizeof(len)), sizeof(len));
		cr_assert_eq(write(log.remote, b, n), (ssize_t)n);
		cr_assert_eq(read(log.remote, &reply, sizeof(reply)), sizeof(reply));
		cr_assert_eq(reply.rc, -EINVAL, "record %zu: %d", i, reply.rc);
	}
	cr_assert_eq(audit_append(&log, rec, err, sizeof(err)), 0, "the writer did not go on: %s", err);
	/* A length past any record: the writer ends. */
	len = AUDIT_LINE_MAX;
	cr_assert_eq(write(log.remote, &len, sizeof(len)), sizeof(len));
	cr_assert_neq(audit_append(&log, rec, err, sizeof(err)), 0);
	cr_assert(strstr(err, "writer is gone"), "%s", err);
	cr_assert_neq(audit_append(&log, rec, err, sizeof(err)), 0, "not failed closed");
	json_decref(rec);
	audit_close(&log);
	cr_assert_eq(audit_verify(path, NULL, &v), 0, "%s", v.why);
	cr_assert_eq(v.records, 2);
}
