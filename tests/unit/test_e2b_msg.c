/* test_e2b_msg.c - E2B envd's messages as the SDK sends and reads them: the captured requests parsed, every refusal naming its member, events and entries to the byte, base64 both ways. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "serve/e2b_msg.h"

#define MIB (1u << 20)

static int start(const char *json, struct e2b_start *s, char *err, size_t errlen)
{
	return e2b_parse_start((const uint8_t *)json, strlen(json), s, err, errlen);
}

/* commands.run("echo hi", {cwd, envs}) as the SDK sends it (wire capture). */
Test(e2b_msg, start_takes_the_sdk_command)
{
	struct e2b_start s;
	char err[200] = "";

	cr_assert_eq(start("{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\",\"echo hi\"],"
			   "\"envs\":{\"A\":\"1\",\"B\":\"x=y\"},\"cwd\":\"/tmp\"},\"stdin\":false}",
			   &s, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(s.argc, 4);
	cr_assert_str_eq(s.argv[0], "/bin/bash");
	cr_assert_str_eq(s.argv[3], "echo hi");
	cr_assert_null(s.argv[4]);
	cr_assert_eq(s.nenv, 2);
	cr_assert_str_eq(s.env[0], "A=1");
	cr_assert_str_eq(s.env[1], "B=x=y");
	cr_assert_null(s.env[2]);
	cr_assert(s.has_cwd);
	cr_assert_str_eq(s.cwd, "/tmp");
	cr_assert_not(s.stdin_open);
	cr_assert_not(s.pty);
	cr_assert_not(s.has_tag);
	e2b_start_free(&s);
	cr_assert_null(s.argv);
	e2b_start_free(&s);   /* a freed one is zeroed: twice is fine */
}

/* pty.create({cols: 80, rows: 24}): no stdin member, so stdin stays open. */
Test(e2b_msg, start_takes_the_sdk_pty)
{
	struct e2b_start s;
	char err[200] = "";

	cr_assert_eq(start("{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-i\",\"-l\"],\"envs\":"
			   "{\"TERM\":\"xterm-256color\",\"LANG\":\"C.UTF-8\",\"LC_ALL\":\"C.UTF-8\"}},"
			   "\"pty\":{\"size\":{\"cols\":80,\"rows\":24}},\"tag\":\"shell\"}",
			   &s, err, sizeof(err)), 0, "%s", err);
	cr_assert(s.pty);
	cr_assert_eq(s.cols, 80);
	cr_assert_eq(s.rows, 24);
	cr_assert(s.stdin_open);
	cr_assert_eq(s.nenv, 3);
	cr_assert(s.has_tag);
	cr_assert_str_eq(s.tag, "shell");
	cr_assert_not(s.has_cwd);
	e2b_start_free(&s);
}

Test(e2b_msg, start_ignores_unknown_members_and_reads_null_as_unset)
{
	struct e2b_start s;
	char err[200] = "";

	cr_assert_eq(start("{\"process\":{\"cmd\":\"ls\",\"args\":null,\"envs\":null,\"cwd\":null,"
			   "\"future\":{\"x\":[1,2]}},\"pty\":null,\"tag\":null,\"stdin\":null,"
			   "\"later\":\"y\"}", &s, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(s.argc, 1);
	cr_assert_eq(s.nenv, 0);
	cr_assert_not_null(s.env);
	cr_assert_not(s.has_cwd || s.has_tag || s.pty);
	cr_assert(s.stdin_open);
	e2b_start_free(&s);
	cr_assert_eq(start("{\"process\":{\"cmd\":\"ls\",\"cwd\":\"\"},\"tag\":\"\",\"stdin\":true,"
			   "\"pty\":{\"size\":{\"cols\":\"1000\",\"rows\":1}}}", &s, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_not(s.has_cwd || s.has_tag, "\"\" is the default");
	cr_assert_eq(s.cols, 1000, "a uint32 may be a string");
	cr_assert_eq(s.rows, 1);
	e2b_start_free(&s);
}

static void start_refused(const char *json, size_t len, const char *member)
{
	struct e2b_start s;
	char err[200] = "";

	cr_assert_eq(e2b_parse_start((const uint8_t *)json, len, &s, err, sizeof(err)), -EINVAL,
		     "%.200s", json);
	cr_assert(*err && !strchr(err, '\n'), "%.200s: one line", json);
	if (member)
		cr_assert_not_null(strstr(err, member), "%.200s: \"%s\" not in \"%s\"", json, member,
				   err);
	cr_assert_null(s.argv);
	cr_assert_null(s.owner);
}

static void refused_start(const char *json, const char *member)
{
	start_refused(json, strlen(json), member);
}

Test(e2b_msg, start_refuses_what_is_not_a_command)
{
	refused_start("", "process");
	refused_start("{}", "process");
	refused_start("{\"process\":null}", "process");
	refused_start("{\"process\":[]}", "process");
	refused_start("{\"process\":{}}", "cmd");
	refused_start("{\"process\":{\"cmd\":\"\"}}", "cmd");
	refused_start("{\"process\":{\"cmd\":5}}", "cmd");
	refused_start("{\"process\":{\"cmd\":\"ls\",\"args\":\"-l\"}}", "args");
	refused_start("{\"process\":{\"cmd\":\"ls\",\"args\":[1]}}", "args");
	refused_start("{\"process\":{\"cmd\":\"ls\",\"args\":[null]}}", "args");
	refused_start("{\"process\":{\"cmd\":\"ls\",\"envs\":[]}}", "envs");
	refused_start("{\"process\":{\"cmd\":\"ls\",\"envs\":{\"\":\"v\"}}}", "envs");
	refused_start("{\"process\":{\"cmd\":\"ls\",\"envs\":{\"A=B\":\"v\"}}}", "envs");
	refused_start("{\"process\":{\"cmd\":\"ls\",\"envs\":{\"A\":1}}}", "envs");
	refused_start("{\"process\":{\"cmd\":\"ls\",\"envs\":{\"A\":null}}}", "envs");
	refused_start("{\"process\":{\"cmd\":\"ls\",\"cwd\":7}}", "cwd");
	refused_start("{\"process\":{\"cmd\":\"ls\"},\"stdin\":\"yes\"}", "stdin");
	refused_start("{\"process\":{\"cmd\":\"ls\"},\"stdin\":1}", "stdin");
	refused_start("{\"process\":{\"cmd\":\"ls\"},\"tag\":[]}", "tag");
	refused_start("{\"process\":{\"cmd\":\"ls\"},\"pty\":{}}", "pty");
	refused_start("{\"process\":{\"cmd\":\"ls\"},\"pty\":true}", "pty");
	refused_start("{\"process\":{\"cmd\":\"ls\"},\"pty\":{\"size\":{\"cols\":80}}}", "pty");
	refused_start("{\"process\":{\"cmd\":\"ls\"},\"pty\":{\"size\":{\"cols\":0,\"rows\":1}}}", "pty");
	refused_start("{\"process\":{\"cmd\":\"ls\"},\"pty\":{\"size\":{\"cols\":1001,\"rows\":1}}}", "pty");
	refused_start("{\"process\":{\"cmd\":\"ls\"},\"pty\":{\"size\":{\"cols\":-1,\"rows\":1}}}", "pty");
	refused_start("{\"process\":{\"cmd\":\"ls\"},\"pty\":{\"size\":{\"cols\":80.5,\"rows\":1}}}", "pty");
	refused_start("{\"process\":{\"cmd\":\"ls\"},\"pty\":{\"size\":{\"cols\":\"x\",\"rows\":1}}}", "pty");
	/* What jansson refuses for us: still one line, no struct. */
	refused_start("{\"process\":{\"cmd\":\"l\\u0000s\"}}", NULL);
	refused_start("{\"process\":{\"cmd\":\"ls\",\"cmd\":\"rm\"}}", NULL);
	refused_start("{\"process\":{\"cmd\":\"\xff\"}}", NULL);
	refused_start("{\"process\":{\"cmd\":\"\xc0\xaf\"}}", NULL);
	refused_start("{\"process\":", NULL);
	refused_start("[]", NULL);
	refused_start("\"x\"", NULL);
	start_refused("{\"process\":{\"cmd\":\"ls\"}}\0", 25, NULL);
}

/* A JSON StartRequest with n args of arglen bytes each. */
static char *many_args(size_t n, size_t arglen)
{
	size_t cap = 64 + n * (arglen + 3), o;
	char *j = malloc(cap);

	cr_assert_not_null(j);
	o = (size_t)snprintf(j, cap, "{\"process\":{\"cmd\":\"x\",\"args\":[");
	for (size_t i = 0; i < n; i++) {
		j[o++] = '"';
		memset(j + o, 'a', arglen);
		o += arglen;
		j[o++] = '"';
		j[o++] = i + 1 < n ? ',' : ']';
	}
	if (!n)
		j[o++] = ']';
	snprintf(j + o, cap - o, "}}");
	return j;
}

Test(e2b_msg, start_bounds_args_and_bytes)
{
	struct e2b_start s;
	char err[200] = "", *j;

	j = many_args(E2B_MAX_ARGS - 1, 1);
	cr_assert_eq(start(j, &s, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(s.argc, E2B_MAX_ARGS, "argv fits the agent's 1024");
	e2b_start_free(&s);
	free(j);
	j = many_args(E2B_MAX_ARGS, 1);
	refused_start(j, "args");
	free(j);
	/* "x\0" and one arg: 2 + len + 1 bytes, up to 1 MiB. */
	j = many_args(1, MIB - 3);
	cr_assert_eq(start(j, &s, err, sizeof(err)), 0, "%s", err);
	e2b_start_free(&s);
	free(j);
	j = many_args(1, MIB - 2);
	refused_start(j, "bytes");
	free(j);
	j = many_args(2, 600000);
	refused_start(j, "bytes");
	free(j);
}

Test(e2b_msg, start_bounds_envs_in_count_and_bytes)
{
	size_t cap = 64 + (E2B_MAX_ARGS + 1) * 16, o;
	char *j = malloc(cap), err[200] = "";
	struct e2b_start s;

	cr_assert_not_null(j);
	o = (size_t)snprintf(j, cap, "{\"process\":{\"cmd\":\"x\",\"envs\":{");
	for (int i = 0; i < E2B_MAX_ARGS; i++)
		o += (size_t)snprintf(j + o, cap - o, "%s\"K%d\":\"v\"", i ? "," : "", i);
	snprintf(j + o, cap - o, "}}}");
	cr_assert_eq(start(j, &s, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(s.nenv, E2B_MAX_ARGS);
	cr_assert_str_eq(s.env[E2B_MAX_ARGS - 1], "K1023=v");
	e2b_start_free(&s);
	snprintf(j + o, cap - o, ",\"K%d\":\"v\"}}}", E2B_MAX_ARGS);
	refused_start(j, "envs");
	free(j);

	/* One value that takes the budget past 1 MiB with "x\0" and "K=". */
	j = malloc(MIB + 64);
	cr_assert_not_null(j);
	o = (size_t)snprintf(j, 64, "{\"process\":{\"cmd\":\"x\",\"envs\":{\"K\":\"");
	memset(j + o, 'v', MIB - 4);
	snprintf(j + o + MIB - 4, 64, "\"}}}");
	refused_start(j, "bytes");
	j[o + MIB - 5] = '"';
	snprintf(j + o + MIB - 4, 64, "}}}");
	cr_assert_eq(start(j, &s, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(strlen(s.env[0]), MIB - 3, "K= and MIB - 5 bytes");
	e2b_start_free(&s);
	free(j);
}

/* The longest cwd and tag fit their buffers; a byte more is refused. */
Test(e2b_msg, start_bounds_cwd_and_tag_by_their_buffers)
{
	static const struct { const char *head, *tail, *member; size_t cap; } t[] = {
		{ "{\"process\":{\"cmd\":\"x\",\"cwd\":\"", "\"}}", "cwd", 4096 },
		{ "{\"process\":{\"cmd\":\"x\"},\"tag\":\"", "\"}", "tag", 256 },
	};
	char *text = malloc(8192), *j = malloc(8192), err[200] = "";
	struct e2b_start s;

	cr_assert(text && j);
	cr_assert_eq(sizeof(s.cwd), t[0].cap);
	cr_assert_eq(sizeof(s.tag), t[1].cap);
	for (size_t i = 0; i < 2; i++) {
		memset(text, '/', t[i].cap);
		text[t[i].cap - 1] = '\0';
		snprintf(j, 8192, "%s%s%s", t[i].head, text, t[i].tail);
		cr_assert_eq(start(j, &s, err, sizeof(err)), 0, "%s", err);
		cr_assert_eq(strlen(i ? s.tag : s.cwd), t[i].cap - 1);
		e2b_start_free(&s);
		text[t[i].cap - 1] = '/';
		text[t[i].cap] = '\0';
		snprintf(j, 8192, "%s%s%s", t[i].head, text, t[i].tail);
		refused_start(j, t[i].member);
	}
	free(text);
	free(j);
}

static int sel(const char *json, uint32_t *pid, char *tag, size_t cap)
{
	char err[200] = "";

	return e2b_parse_selector((const uint8_t *)json, strlen(json), pid, tag, cap, err,
				  sizeof(err));
}

Test(e2b_msg, selector_is_a_pid_or_a_tag)
{
	static const char *const bad[] = {
		"{\"process\":{\"tag\":\"12345678\"}}", "{\"process\":{\"pid\":1,\"tag\":\"web\"}}",
		"{\"process\":{}}", "{\"process\":{\"tag\":\"\"}}", "{}", "{\"process\":{\"pid\":-1}}",
		"{\"process\":{\"pid\":4294967296}}", "{\"process\":{\"pid\":\"42x\"}}",
		"{\"process\":{\"pid\":\"\"}}", "{\"process\":{\"pid\":\"-1\"}}",
		"{\"process\":{\"pid\":1.5}}", "{\"process\":{\"pid\":true}}",
	};
	uint32_t pid = 7;
	char tag[8] = "junk";

	cr_assert_eq(sel("{\"process\":{\"pid\":42}}", &pid, tag, sizeof(tag)), 0);
	cr_assert_eq(pid, 42);
	cr_assert_str_eq(tag, "");
	cr_assert_eq(sel("{\"process\":{\"pid\":\"4294967295\"}}", &pid, tag, sizeof(tag)), 0);
	cr_assert_eq(pid, UINT32_MAX);
	cr_assert_eq(sel("{\"process\":{\"pid\":0}}", &pid, tag, sizeof(tag)), 0,
		     "pid 0 is no process: not_found is the caller's");
	cr_assert_eq(sel("{\"process\":{\"pid\":3.0}}", &pid, tag, sizeof(tag)), 0);
	cr_assert_eq(pid, 3);
	cr_assert_eq(sel("{\"process\":{\"tag\":\"web\",\"pid\":null}}", &pid, tag, sizeof(tag)), 0);
	cr_assert_eq(pid, 0);
	cr_assert_str_eq(tag, "web");
	cr_assert_eq(sel("{\"process\":{\"tag\":\"1234567\"}}", &pid, tag, sizeof(tag)), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(sel(bad[i], &pid, tag, sizeof(tag)), -EINVAL, "%s", bad[i]);
}

static int sig(const char *json, uint32_t *pid, int *signo)
{
	char err[200] = "";

	return e2b_parse_signal((const uint8_t *)json, strlen(json), pid, signo, err, sizeof(err));
}

Test(e2b_msg, signal_is_kill_or_term_by_name_or_number)
{
	static const char *const bad[] = {
		"{\"process\":{\"pid\":1},\"signal\":\"SIGNAL_UNSPECIFIED\"}",
		"{\"process\":{\"pid\":1},\"signal\":0}", "{\"process\":{\"pid\":1},\"signal\":2}",
		"{\"process\":{\"pid\":1},\"signal\":\"SIGKILL\"}", "{\"process\":{\"pid\":1}}",
		"{\"process\":{\"pid\":1},\"signal\":\"signal_sigkill\"}",
		"{\"process\":{\"tag\":\"web\"},\"signal\":\"SIGNAL_SIGKILL\"}",
		"{\"signal\":\"SIGNAL_SIGKILL\"}",
	};
	uint32_t pid;
	int signo;

	cr_assert_eq(sig("{\"process\":{\"pid\":42},\"signal\":\"SIGNAL_SIGKILL\"}", &pid, &signo), 0);
	cr_assert_eq(pid, 42);
	cr_assert_eq(signo, SIGKILL);
	cr_assert_eq(sig("{\"process\":{\"pid\":42},\"signal\":\"SIGNAL_SIGTERM\"}", &pid, &signo), 0);
	cr_assert_eq(signo, SIGTERM);
	cr_assert_eq(sig("{\"process\":{\"pid\":42},\"signal\":9}", &pid, &signo), 0);
	cr_assert_eq(signo, 9);
	cr_assert_eq(sig("{\"process\":{\"pid\":42},\"signal\":15}", &pid, &signo), 0);
	cr_assert_eq(signo, 15);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(sig(bad[i], &pid, &signo), -EINVAL, "%s", bad[i]);
}

static int input(const char *json, size_t len, uint8_t **data, size_t *n, bool *pty, char *err)
{
	uint32_t pid = 0;

	return e2b_parse_input((const uint8_t *)json, len, &pid, data, n, pty, err, 200);
}

static void input_is(const char *json, const char *want, size_t wantlen, bool want_pty)
{
	uint8_t *data = NULL;
	size_t n = 99;
	bool pty = !want_pty;
	char err[200] = "";

	cr_assert_eq(input(json, strlen(json), &data, &n, &pty, err), 0, "%s: %s", json, err);
	cr_assert_not_null(data);
	cr_assert_eq(n, wantlen, "%s", json);
	cr_assert_eq(memcmp(data, want, wantlen), 0, "%s", json);
	cr_assert_eq(pty, want_pty, "%s", json);
	free(data);
}

static void input_refused(const char *json, const char *why)
{
	uint8_t *data = (uint8_t *)"x";
	size_t n;
	bool pty;
	char err[200] = "";

	cr_assert_eq(input(json, strlen(json), &data, &n, &pty, err), -EINVAL, "%.100s", json);
	cr_assert_null(data, "%.100s", json);
	cr_assert_not_null(strstr(err, why), "%.100s: %s", json, err);
}

Test(e2b_msg, input_takes_base64_of_every_alphabet_and_padding)
{
	input_is("{\"process\":{\"pid\":1},\"input\":{\"stdin\":\"aGkK\"}}", "hi\n", 3, false);
	input_is("{\"process\":{\"pid\":1},\"input\":{\"pty\":\"AAEC/w==\"}}", "\0\1\2\xff", 4, true);
	input_is("{\"process\":{\"pid\":1},\"input\":{\"pty\":\"AAEC_w\"}}", "\0\1\2\xff", 4, true);
	input_is("{\"process\":{\"pid\":1},\"input\":{\"stdin\":\"-_8=\"}}", "\xfb\xff", 2, false);
	input_is("{\"process\":{\"pid\":1},\"input\":{\"stdin\":\"+/8\"}}", "\xfb\xff", 2, false);
	input_is("{\"process\":{\"pid\":1},\"input\":{\"stdin\":\"\"}}", "", 0, false);
	input_is("{\"process\":{\"pid\":1},\"input\":{\"stdin\":\"aGk\",\"pty\":null}}", "hi", 2, false);
}

Test(e2b_msg, input_refuses_what_is_not_one_base64_string)
{
	input_refused("{\"process\":{\"pid\":1},\"input\":{\"stdin\":\"aGk*\"}}", "base64");
	input_refused("{\"process\":{\"pid\":1},\"input\":{\"stdin\":\"aGkKa\"}}", "base64");
	input_refused("{\"process\":{\"pid\":1},\"input\":{\"stdin\":\"aR==\"}}", "base64");
	input_refused("{\"process\":{\"pid\":1},\"input\":{\"stdin\":\"a=Gk\"}}", "base64");
	input_refused("{\"process\":{\"pid\":1},\"input\":{\"stdin\":\"aGk K\"}}", "base64");
	input_refused("{\"process\":{\"pid\":1},\"input\":{\"stdin\":5}}", "stdin");
	input_refused("{\"process\":{\"pid\":1},\"input\":{\"stdin\":\"aGk=\",\"pty\":\"aGk=\"}}", "one");
	input_refused("{\"process\":{\"pid\":1},\"input\":{}}", "one");
	input_refused("{\"process\":{\"pid\":1}}", "input");
	input_refused("{\"process\":{\"pid\":1},\"input\":\"aGk=\"}", "input");
	input_refused("{\"process\":{\"tag\":\"t\"},\"input\":{\"stdin\":\"aGk=\"}}", "pid");
}

/* {"process":{"pid":1},"input":{"stdin":"<base64 of n bytes>"}} */
static char *input_of(size_t n, size_t *len)
{
	static const char head[] = "{\"process\":{\"pid\":1},\"input\":{\"stdin\":\"";
	size_t b = (n + 2) / 3 * 4;
	char *j = malloc(sizeof(head) + b + 8);

	cr_assert_not_null(j);
	memcpy(j, head, sizeof(head) - 1);
	for (size_t i = 0; i < b; i++)
		j[sizeof(head) - 1 + i] = 'A';
	if (n % 3)
		memset(j + sizeof(head) - 1 + b - (3 - n % 3), '=', 3 - n % 3);
	memcpy(j + sizeof(head) - 1 + b, "\"}}", 4);
	*len = sizeof(head) - 1 + b + 3;
	return j;
}

Test(e2b_msg, input_takes_one_mib_and_refuses_a_byte_more)
{
	uint8_t *data = NULL;
	size_t n, len;
	bool pty;
	char err[200] = "", *j = input_of(MIB, &len);

	cr_assert_eq(input(j, len, &data, &n, &pty, err), 0, "%s", err);
	cr_assert_eq(n, MIB);
	free(data);
	free(j);
	j = input_of(MIB + 1, &len);
	cr_assert_eq(input(j, len, &data, &n, &pty, err), -EINVAL);
	cr_assert_not_null(strstr(err, "1 MiB"), "%s", err);
	free(j);
}

/* What e2b_event_data encodes, the input parser decodes to the same bytes. */
Test(e2b_msg, data_event_and_input_round_trip)
{
	uint8_t bytes[256];

	for (size_t i = 0; i < sizeof(bytes); i++)
		bytes[i] = (uint8_t)(255 - i);
	for (size_t n = 0; n <= sizeof(bytes); n += 37) {
		char *ev = e2b_event_data("pty", bytes, n), *in, err[200] = "";
		json_t *j = json_loads(ev, 0, NULL);
		const char *b64 = json_string_value(json_object_get(
			json_object_get(json_object_get(j, "event"), "data"), "pty"));
		uint8_t *data;
		size_t got;
		bool pty;

		cr_assert_not_null(b64, "%s", ev);
		cr_assert_gt(asprintf(&in, "{\"process\":{\"pid\":1},\"input\":{\"pty\":\"%s\"}}", b64), 0);
		cr_assert_eq(input(in, strlen(in), &data, &got, &pty, err), 0, "%s", err);
		cr_assert_eq(got, n);
		cr_assert_eq(memcmp(data, bytes, n), 0);
		free(data);
		free(in);
		json_decref(j);
		free(ev);
	}
}

static int update(const char *json, unsigned *cols, unsigned *rows)
{
	uint32_t pid;
	char err[200] = "";

	return e2b_parse_update((const uint8_t *)json, strlen(json), &pid, cols, rows, err,
				sizeof(err));
}

Test(e2b_msg, update_takes_a_size_or_nothing)
{
	unsigned c = 9, r = 9;

	cr_assert_eq(update("{\"process\":{\"pid\":1},\"pty\":{\"size\":{\"cols\":120,\"rows\":40}}}",
			    &c, &r), 0);
	cr_assert_eq(c, 120);
	cr_assert_eq(r, 40);
	cr_assert_eq(update("{\"process\":{\"pid\":1}}", &c, &r), 0);
	cr_assert(c == 0 && r == 0, "no pty: nothing to change");
	cr_assert_eq(update("{\"process\":{\"pid\":1},\"pty\":{\"size\":{\"cols\":0,\"rows\":40}}}",
			    &c, &r), -EINVAL);
	cr_assert_eq(update("{\"process\":{\"pid\":1},\"pty\":{\"size\":{\"cols\":1,\"rows\":1001}}}",
			    &c, &r), -EINVAL);
	cr_assert_eq(update("{\"pty\":{\"size\":{\"cols\":1,\"rows\":1}}}", &c, &r), -EINVAL);
}

Test(e2b_msg, filesystem_requests_take_their_paths)
{
	char p[8], d[8], err[200] = "";
	unsigned depth = 0;
	bool rec = true;
#define J(s) (const uint8_t *)(s), strlen(s)

	cr_assert_eq(e2b_parse_path(J("{\"path\":\"/tmp/a\"}"), p, sizeof(p), err, sizeof(err)), 0);
	cr_assert_str_eq(p, "/tmp/a");
	cr_assert_eq(e2b_parse_path(J("{\"path\":\"1234567\"}"), p, sizeof(p), err, sizeof(err)), 0);
	cr_assert_eq(e2b_parse_path(J("{\"path\":\"12345678\"}"), p, sizeof(p), err, sizeof(err)),
		     -EINVAL);
	cr_assert_eq(e2b_parse_path(J("{\"path\":\"\"}"), p, sizeof(p), err, sizeof(err)), -EINVAL);
	cr_assert_not_null(strstr(err, "path"));
	cr_assert_eq(e2b_parse_path(J("{}"), p, sizeof(p), err, sizeof(err)), -EINVAL);
	cr_assert_eq(e2b_parse_path(J("{\"path\":1}"), p, sizeof(p), err, sizeof(err)), -EINVAL);

	cr_assert_eq(e2b_parse_list_dir(J("{\"path\":\"/\"}"), p, sizeof(p), &depth, err,
					sizeof(err)), 0);
	cr_assert_eq(depth, 1);
	cr_assert_eq(e2b_parse_list_dir(J("{\"path\":\"/\",\"depth\":0}"), p, sizeof(p), &depth, err,
					sizeof(err)), 0);
	cr_assert_eq(depth, 1);
	cr_assert_eq(e2b_parse_list_dir(J("{\"path\":\"/\",\"depth\":\"16\"}"), p, sizeof(p), &depth,
					err, sizeof(err)), 0);
	cr_assert_eq(depth, 16);
	cr_assert_eq(e2b_parse_list_dir(J("{\"path\":\"/\",\"depth\":17}"), p, sizeof(p), &depth,
					err, sizeof(err)), -EINVAL);
	cr_assert_not_null(strstr(err, "depth"));
	cr_assert_eq(e2b_parse_list_dir(J("{\"depth\":2}"), p, sizeof(p), &depth, err,
					sizeof(err)), -EINVAL);

	cr_assert_eq(e2b_parse_move(J("{\"source\":\"/a\",\"destination\":\"/b\"}"), p, d, sizeof(p),
				    err, sizeof(err)), 0);
	cr_assert_str_eq(p, "/a");
	cr_assert_str_eq(d, "/b");
	cr_assert_eq(e2b_parse_move(J("{\"source\":\"/a\"}"), p, d, sizeof(p), err, sizeof(err)),
		     -EINVAL);
	cr_assert_not_null(strstr(err, "destination"));
	cr_assert_eq(e2b_parse_move(J("{\"destination\":\"/b\"}"), p, d, sizeof(p), err,
				    sizeof(err)), -EINVAL);
	cr_assert_not_null(strstr(err, "source"));

	cr_assert_eq(e2b_parse_watch_dir(J("{\"path\":\"/w\"}"), p, sizeof(p), &rec, err,
					 sizeof(err)), 0);
	cr_assert_not(rec);
	cr_assert_eq(e2b_parse_watch_dir(J("{\"path\":\"/w\",\"recursive\":true,\"includeEntry\":false}"),
					 p, sizeof(p), &rec, err, sizeof(err)), 0);
	cr_assert(rec);
	/* No entries in mayfly's events: asking for them is refused, not ignored. */
	cr_assert_eq(e2b_parse_watch_dir(J("{\"path\":\"/w\",\"includeEntry\":true}"), p, sizeof(p),
					 &rec, err, sizeof(err)), -EINVAL);
	cr_assert_not_null(strstr(err, "includeEntry"));
	cr_assert_eq(e2b_parse_watcher_id(J("{\"watcherId\":\"abc\"}"), p, sizeof(p), err,
					  sizeof(err)), 0);
	cr_assert_str_eq(p, "abc");
	cr_assert_eq(e2b_parse_watcher_id(J("{}"), p, sizeof(p), err, sizeof(err)), -EINVAL);
	cr_assert_eq(e2b_parse_watcher_id(J("{\"watcherId\":7}"), p, sizeof(p), err, sizeof(err)),
		     -EINVAL);
	cr_assert_eq(e2b_parse_watch_dir(J("{\"path\":\"/w\",\"recursive\":\"true\"}"), p, sizeof(p),
					 &rec, err, sizeof(err)), -EINVAL);
	cr_assert_not_null(strstr(err, "recursive"));
#undef J
}

static void text_eq(char *got, const char *want)
{
	cr_assert_not_null(got, "%s", want);
	cr_assert_str_eq(got, want);
	free(got);
}

Test(e2b_msg, process_events_are_exact)
{
	uint8_t big[1] = { 0 };

	text_eq(e2b_event_start(42), "{\"event\":{\"start\":{\"pid\":42}}}");
	text_eq(e2b_event_start(UINT32_MAX), "{\"event\":{\"start\":{\"pid\":4294967295}}}");
	text_eq(e2b_event_data("stdout", (const uint8_t *)"hello\n", 6),
		"{\"event\":{\"data\":{\"stdout\":\"aGVsbG8K\"}}}");
	text_eq(e2b_event_data("stderr", (const uint8_t *)"\xff", 1),
		"{\"event\":{\"data\":{\"stderr\":\"/w==\"}}}");
	text_eq(e2b_event_data("pty", NULL, 0), "{\"event\":{\"data\":{\"pty\":\"\"}}}");
	cr_assert_null(e2b_event_data("stdin", (const uint8_t *)"x", 1));
	cr_assert_null(e2b_event_data(NULL, (const uint8_t *)"x", 1));
	cr_assert_null(e2b_event_data("stdout", big, E2B_MAX_DATA + 1));
	text_eq(e2b_event_end(3, true, "exit status 3", NULL),
		"{\"event\":{\"end\":{\"exitCode\":3,\"exited\":true,\"status\":\"exit status 3\"}}}");
	text_eq(e2b_event_end(0, true, "exit status 0", NULL),
		"{\"event\":{\"end\":{\"exited\":true,\"status\":\"exit status 0\"}}}");
	text_eq(e2b_event_end(-1, true, "signal: killed", "killed"),
		"{\"event\":{\"end\":{\"exitCode\":-1,\"exited\":true,\"status\":\"signal: killed\","
		"\"error\":\"killed\"}}}");
	text_eq(e2b_event_end(0, false, NULL, NULL), "{\"event\":{\"end\":{}}}");
	text_eq(e2b_event_end(0, false, "", ""), "{\"event\":{\"end\":{\"error\":\"\"}}}");
	text_eq(e2b_event_end(1, true, "\xff\n", NULL),
		"{\"event\":{\"end\":{\"exitCode\":1,\"exited\":true,\"status\":\"\xef\xbf\xbd\\n\"}}}");
	text_eq(e2b_event_keepalive(), "{\"event\":{\"keepalive\":{}}}");
	/* WatchDirResponse's oneof is its own top: no "event" around it. */
	text_eq(e2b_watch_start(), "{\"start\":{}}");
	text_eq(e2b_watch_keepalive(), "{\"keepalive\":{}}");
	text_eq(e2b_watch_event(1, "a/b"), "{\"filesystem\":{\"name\":\"a/b\",\"type\":\"EVENT_TYPE_CREATE\"}}");
	text_eq(e2b_watch_event(5, "\xff"), "{\"filesystem\":{\"name\":\"\xef\xbf\xbd\",\"type\":\"EVENT_TYPE_CHMOD\"}}");
	cr_assert_null(e2b_watch_event(0, "a"));
	cr_assert_null(e2b_watch_event(6, "a"));
	cr_assert_null(e2b_fs_event(2, NULL));
}

Test(e2b_msg, end_event_texts_are_bounded)
{
	char *long_text = malloc(5000), *ev;
	json_t *j;

	cr_assert_not_null(long_text);
	memset(long_text, 'e', 4999);
	long_text[4999] = '\0';
	ev = e2b_event_end(2, true, long_text, long_text);
	j = json_loads(ev, 0, NULL);
	cr_assert_not_null(j);
	cr_assert_eq(strlen(json_string_value(json_object_get(json_object_get(json_object_get(j,
		"event"), "end"), "error"))), E2B_MAX_TEXT);
	json_decref(j);
	free(ev);
	free(long_text);
}

static void entry_eq(const struct e2b_entry *e, const char *want)
{
	json_t *j = e2b_entry_json(e);
	char *s;

	cr_assert_not_null(j);
	s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	text_eq(s, want);
}

Test(e2b_msg, entries_are_exact_entry_info)
{
	struct e2b_entry e = {
		.name = "f.txt", .path = "/tmp/f.txt", .type = 1, .size = 1234, .mode = 0644,
		.owner = "root", .group = "root", .mtime_s = 1704067200,
	};

	e2b_permissions(0100644, e.permissions);
	entry_eq(&e, "{\"name\":\"f.txt\",\"type\":\"FILE_TYPE_FILE\",\"path\":\"/tmp/f.txt\","
		 "\"size\":\"1234\",\"mode\":420,\"permissions\":\"-rw-r--r--\",\"owner\":\"root\","
		 "\"group\":\"root\",\"modifiedTime\":\"2024-01-01T00:00:00Z\"}");
	e.type = 3;
	e.has_target = true;
	strcpy(e.symlink_target, "/etc/\xff");
	e.size = UINT64_MAX;
	e.mtime_s = -1;
	e.permissions[0] = 'l';
	entry_eq(&e, "{\"name\":\"f.txt\",\"type\":\"FILE_TYPE_SYMLINK\",\"path\":\"/tmp/f.txt\","
		 "\"size\":\"9223372036854775807\",\"mode\":420,\"permissions\":\"lrw-r--r--\","
		 "\"owner\":\"root\",\"group\":\"root\",\"modifiedTime\":\"1969-12-31T23:59:59Z\","
		 "\"symlinkTarget\":\"/etc/\xef\xbf\xbd\"}");
}

/* What a guest may hand back: odd types, times and unterminated names. */
Test(e2b_msg, entries_stay_within_entry_info)
{
	struct e2b_entry e = { .type = 2 };
	json_t *j;

	memset(e.name, 'n', sizeof(e.name));
	memset(e.owner, 'o', sizeof(e.owner));
	e.mtime_s = INT64_MIN;
	j = e2b_entry_json(&e);
	cr_assert_not_null(j);
	cr_assert_str_eq(json_string_value(json_object_get(j, "type")), "FILE_TYPE_DIRECTORY");
	cr_assert_eq(strlen(json_string_value(json_object_get(j, "name"))), sizeof(e.name) - 1);
	cr_assert_eq(strlen(json_string_value(json_object_get(j, "owner"))), sizeof(e.owner) - 1);
	cr_assert_str_eq(json_string_value(json_object_get(j, "modifiedTime")),
			 "0001-01-01T00:00:00Z");
	cr_assert_null(json_object_get(j, "symlinkTarget"));
	json_decref(j);
	e.mtime_s = INT64_MAX;
	e.type = 7;
	j = e2b_entry_json(&e);
	cr_assert_str_eq(json_string_value(json_object_get(j, "modifiedTime")),
			 "9999-12-31T23:59:59Z");
	cr_assert_str_eq(json_string_value(json_object_get(j, "type")), "FILE_TYPE_UNSPECIFIED");
	json_decref(j);
	e.type = -1;
	e.mtime_s = 0;
	j = e2b_entry_json(&e);
	cr_assert_str_eq(json_string_value(json_object_get(j, "type")), "FILE_TYPE_UNSPECIFIED");
	cr_assert_str_eq(json_string_value(json_object_get(j, "modifiedTime")),
			 "1970-01-01T00:00:00Z");
	json_decref(j);
}

Test(e2b_msg, permissions_read_as_ls_prints_them)
{
	static const struct { uint32_t mode; const char *want; } t[] = {
		{ 0100644, "-rw-r--r--" }, { 040755, "drwxr-xr-x" }, { 0120777, "lrwxrwxrwx" },
		{ 0104755, "-rwsr-xr-x" }, { 0104644, "-rwSr--r--" }, { 0102755, "-rwxr-sr-x" },
		{ 0102745, "-rwxr-Sr-x" }, { 041777, "drwxrwxrwt" }, { 041776, "drwxrwxrwT" },
		{ 020666, "crw-rw-rw-" }, { 060660, "brw-rw----" }, { 010644, "prw-r--r--" },
		{ 0140755, "srwxr-xr-x" }, { 0, "----------" }, { 0107777, "-rwsrwsrwt" },
		{ 0xffffffff, "-rwsrwsrwt" },
	};
	char out[11];

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		memset(out, 'x', sizeof(out));
		e2b_permissions(t[i].mode, out);
		cr_assert_str_eq(out, t[i].want, "%o", t[i].mode);
	}
}

/* A path as E2B gives it: absolute as it is, relative in E2B_HOME. */
Test(e2b_msg, guest_paths_relative_to_the_home_and_bounded)
{
	char out[16];

	cr_assert_eq(e2b_guest_path("/tmp/x", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "/tmp/x");
	cr_assert_eq(e2b_guest_path("a/b", out, sizeof(out)), 0);
	cr_assert_str_eq(out, E2B_HOME "/a/b");
	cr_assert_eq(e2b_guest_path("", out, sizeof(out)), -EINVAL);
	cr_assert_eq(e2b_guest_path(NULL, out, sizeof(out)), -EINVAL);
	cr_assert_eq(e2b_guest_path("/123456789012345", out, sizeof(out)), -ENAMETOOLONG);
	cr_assert_eq(e2b_guest_path("123456789012", out, sizeof(out)), -ENAMETOOLONG,
		     "the home counts");
}

/* E2B's error body: the status as "code"; a message of any bytes valid JSON. */
Test(e2b_msg, error_bodies_carry_the_status_and_valid_text)
{
	json_t *j = e2b_error_json(404, "no such \xff file");
	char *text = json_dumps(j, JSON_COMPACT);

	cr_assert_str_eq(text, "{\"code\":404,\"message\":\"no such \xef\xbf\xbd file\"}");
	free(text);
	json_decref(j);
}
