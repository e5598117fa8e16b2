/* test_mcp.c - the MCP server end to end against the real guest agent on the host (mayfly-agent --fd): both eras (2025 initialize, 2026-07-28 per-request _meta), tools, approval, audit, cancellation and malformed input. */
#include "mcp/mcp.h"
#include "mcp/mcp_modern.h"
#include "policy/audit.h"
#include "protocol.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WAIT_MS 20000   /* generous: ASan, a loaded machine */

static struct {
	pid_t agent;
	struct agent_client *client;
	struct gate gate;
	struct audit_log audit;
	struct mcp_server srv;
	pthread_t thread;
	int to_srv, from_srv;      /* our ends */
	char dir[64];
	char rbuf[1 << 20];
	size_t rlen;
	int rc;
	bool audit_open, serving;  /* what stop has to undo */
} t;

static void *serve(void *arg)
{
	(void)arg;
	t.rc = mcp_serve(&t.srv);
	close(t.srv.out_fd);
	return NULL;
}

static void start_agent(void)
{
	const char *path = getenv("MAYFLY_AGENT");
	struct proto_writer w;
	struct proto_frame f;
	int sv[2], len;

	cr_assert_not_null(path, "MAYFLY_AGENT is not set");
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	t.agent = fork();
	cr_assert_geq(t.agent, 0);
	if (t.agent == 0) {
		char *args[] = { "mayfly-agent", "--fd", "10", "--home", t.dir, NULL };

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (dup2(sv[1], 10) < 0 || fcntl(10, F_SETFD, 0) < 0)
			_exit(127);
		execv(path, args);
		_exit(127);
	}
	close(sv[1]);
	t.client = calloc(1, sizeof(*t.client));
	t.client->fd = sv[0];
	t.client->cancel_fd = -1;
	t.client->next_id = 1;
	proto_begin(&w, t.client->wbuf, sizeof(t.client->wbuf), PROTO_HELLO, 0);
	proto_put_u32(&w, PROTO_VERSION);
	len = proto_end(&w);
	cr_assert_eq(agent_client_send(t.client, (size_t)len, 0), 0);
	cr_assert_eq(agent_client_recv(t.client, &f, 0), 1);
	cr_assert_eq(f.type, PROTO_HELLO_OK);
}

/* The server on a thread, with approver cmd (NULL: none) and an audit log. */
static void start(const char *approver, size_t line_max)
{
	int in[2], out[2];
	char err[256], log[128];

	memset(&t, 0, sizeof(t));
	strcpy(t.dir, "/tmp/mayfly-mcp-test.XXXXXX");
	cr_assert_not_null(mkdtemp(t.dir));
	start_agent();
	snprintf(log, sizeof(log), "%s/audit.log", t.dir);
	cr_assert_eq(audit_open(&t.audit, log, err, sizeof(err)), 0, "%s", err);
	t.audit_open = true;
	t.gate = (struct gate){ .audit = &t.audit, .approver = { .cmd = approver, .timeout_ms = 5000 },
				.sandbox = "test-vm", .caller = "mcp:unknown" };
	cr_assert_eq(pipe2(in, O_CLOEXEC), 0);
	cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
	t.srv = (struct mcp_server){ .in_fd = in[0], .out_fd = out[1], .client = t.client,
				     .gate = &t.gate, .stop_fd = -1, .line_max = line_max,
				     .limits = { .call_timeout_s = 10, .max_get_bytes = 1 << 20,
						 .max_output = 1 << 20, .max_timeout_s = 3600 } };
	t.to_srv = in[1];
	t.from_srv = out[0];
	cr_assert_eq(pthread_create(&t.thread, NULL, serve, NULL), 0);
	t.serving = true;
}

/* Undoes what start did, as far as it got: a test calls it, and the
 * suite's .fini again (a no-op then) for a test that failed before it,
 * so that no agent process or temporary directory outlives a failure. */
static void stop(void)
{
	char cmd[100];

	if (t.serving) {
		close(t.to_srv);
		pthread_join(t.thread, NULL);
		close(t.srv.in_fd);
		close(t.from_srv);
		t.serving = false;
	}
	if (t.client) {
		agent_client_close(t.client);
		free(t.client);
		t.client = NULL;
	}
	if (t.agent > 0) {
		kill(t.agent, SIGKILL);
		waitpid(t.agent, NULL, 0);
		t.agent = 0;
	}
	if (t.audit_open) {
		audit_close(&t.audit);
		t.audit_open = false;
	}
	if (t.dir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", t.dir);
		t.dir[0] = '\0';
		cr_assert_eq(system(cmd), 0);
	}
}

TestSuite(mcp, .fini = stop);

static void say(const char *line)
{
	size_t n = strlen(line);

	cr_assert_eq(write(t.to_srv, line, n), (ssize_t)n);
	cr_assert_eq(write(t.to_srv, "\n", 1), 1);
}

/* The server's next message, parsed; fails the test after WAIT_MS. */
static json_t *hear(void)
{
	for (;;) {
		char *nl = memchr(t.rbuf, '\n', t.rlen);
		struct pollfd p = { .fd = t.from_srv, .events = POLLIN };
		ssize_t n;

		if (nl) {
			size_t len = (size_t)(nl - t.rbuf);
			json_error_t e;
			json_t *j = json_loadb(t.rbuf, len, 0, &e);

			cr_assert_not_null(j, "not JSON from the server: %.*s", (int)len, t.rbuf);
			memmove(t.rbuf, nl + 1, t.rlen - len - 1);
			t.rlen -= len + 1;
			return j;
		}
		cr_assert_eq(poll(&p, 1, WAIT_MS), 1, "no message from the server");
		n = read(t.from_srv, t.rbuf + t.rlen, sizeof(t.rbuf) - t.rlen);
		cr_assert_gt(n, 0, "the server closed its output");
		t.rlen += (size_t)n;
	}
}

/* Nothing more from the server within ms. */
static void silence(int ms)
{
	struct pollfd p = { .fd = t.from_srv, .events = POLLIN };

	cr_assert_eq(t.rlen, 0, "unexpected: %.*s", (int)t.rlen, t.rbuf);
	cr_assert_eq(poll(&p, 1, ms), 0, "the server said something more");
}

static json_t *result_of(json_t *m, json_int_t id)
{
	cr_assert_str_eq(json_string_value(json_object_get(m, "jsonrpc")), "2.0");
	cr_assert_eq(json_integer_value(json_object_get(m, "id")), id, "%s", json_dumps(m, 0));
	cr_assert_not_null(json_object_get(m, "result"), "%s", json_dumps(m, 0));
	return json_object_get(m, "result");
}

static int error_code(json_t *m)
{
	json_t *e = json_object_get(m, "error");

	cr_assert_not_null(e, "want an error: %s", json_dumps(m, 0));
	cr_assert(json_is_string(json_object_get(e, "message")));
	return (int)json_integer_value(json_object_get(e, "code"));
}

static void init(void)
{
	json_t *m, *r;

	say("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
	    "\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"tester\",\"version\":\"1\"}}}");
	m = hear();
	r = result_of(m, 1);
	cr_assert_str_eq(json_string_value(json_object_get(r, "protocolVersion")), "2025-06-18");
	cr_assert(json_is_object(json_object_get(json_object_get(r, "capabilities"), "tools")));
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(r, "serverInfo"), "name")),
			 "mayfly");
	json_decref(m);
	say("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
}

#define META26 "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"," \
	"\"io.modelcontextprotocol/clientInfo\":{\"name\":\"modern\",\"version\":\"2\"}," \
	"\"io.modelcontextprotocol/clientCapabilities\":{}}"

/* The fields every 2026-07-28 result carries; cacheable: ttlMs, cacheScope too. */
static void modern_result(json_t *r, bool cacheable)
{
	json_t *info = json_object_get(json_object_get(r, "_meta"), "io.modelcontextprotocol/serverInfo");

	cr_assert_str_eq(json_string_value(json_object_get(r, "resultType")), "complete", "%s",
			 json_dumps(r, 0));
	cr_assert_str_eq(json_string_value(json_object_get(info, "name")), "mayfly");
	cr_assert(json_is_string(json_object_get(info, "version")));
	cr_assert_eq(json_is_integer(json_object_get(r, "ttlMs")), cacheable);
	if (cacheable) {
		cr_assert_geq(json_integer_value(json_object_get(r, "ttlMs")), 0);
		cr_assert_str_eq(json_string_value(json_object_get(r, "cacheScope")), "public");
	}
}

/* tools/call NAME ARGS (JSON text) as request id, in 2025 (meta NULL) or
 * with meta ("," META26); its CallToolResult. */
static json_t *call_in(int id, const char *name, const char *args, const char *meta)
{
	char line[4096];
	json_t *m, *r;

	snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\","
		 "\"params\":{\"name\":\"%s\",\"arguments\":%s%s}}", id, name, args, meta ? meta : "");
	say(line);
	m = hear();
	r = json_incref(result_of(m, id));
	json_decref(m);
	cr_assert(json_is_array(json_object_get(r, "content")));
	cr_assert(json_is_boolean(json_object_get(r, "isError")));
	if (meta)
		modern_result(r, false);
	else
		cr_assert_null(json_object_get(r, "resultType"), "a 2025 result has no resultType");
	return r;
}

static json_t *call(int id, const char *name, const char *args)
{
	return call_in(id, name, args, NULL);
}

static json_t *sc(json_t *r)
{
	cr_assert_not(json_is_true(json_object_get(r, "isError")), "%s", json_dumps(r, 0));
	return json_object_get(r, "structuredContent");
}

Test(mcp, initialize_then_tools_list_names_the_four_tools)
{
	const char *want[] = { "run_command", "read_file", "write_file", "list_files" };
	json_t *m, *tools;

	start(NULL, 0);
	init();
	say("{\"jsonrpc\":\"2.0\",\"id\":\"list\",\"method\":\"tools/list\"}");
	m = hear();
	cr_assert_str_eq(json_string_value(json_object_get(m, "id")), "list");
	tools = json_object_get(json_object_get(m, "result"), "tools");
	cr_assert_eq(json_array_size(tools), 4);
	for (size_t i = 0; i < 4; i++) {
		json_t *tool = json_array_get(tools, i);

		cr_assert_str_eq(json_string_value(json_object_get(tool, "name")), want[i]);
		cr_assert_str_eq(json_string_value(json_object_get(json_object_get(tool, "inputSchema"),
								   "type")), "object");
	}
	json_decref(m);
	stop();
	cr_assert_eq(t.rc, 0);
}

Test(mcp, an_unknown_version_is_answered_with_ours_and_a_known_one_echoed)
{
	json_t *m;

	start(NULL, 0);
	say("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"1999-01-01\"}}");
	m = hear();
	cr_assert_str_eq(json_string_value(json_object_get(result_of(m, 1), "protocolVersion")),
			 MCP_PROTOCOL_VERSION);
	json_decref(m);
	say("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-03-26\"}}");
	m = hear();
	cr_assert_str_eq(json_string_value(json_object_get(result_of(m, 2), "protocolVersion")),
			 "2025-03-26");
	json_decref(m);
	stop();
}

/* SEP-1303: from 2025-11-25 on, a tool's bad arguments are a tool error the
 * model can read and fix (2025-06-18 keeps the protocol error it had:
 * malformed_input_gets_json_rpc_errors..., as an unknown tool does). */
Test(mcp, bad_arguments_are_a_tool_error_from_2025_11_25_on)
{
	json_t *m, *r;

	start(NULL, 0);
	say("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
	    "\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}");
	m = hear();
	cr_assert_str_eq(json_string_value(json_object_get(result_of(m, 1), "protocolVersion")),
			 "2025-11-25");
	json_decref(m);
	r = call(2, "run_command", "{\"command\":7}");
	cr_assert(json_is_true(json_object_get(r, "isError")), "%s", json_dumps(r, 0));
	json_decref(r);
	stop();
}

Test(mcp, run_command_returns_exit_code_and_both_streams)
{
	json_t *r, *s;

	start(NULL, 0);
	init();
	r = call(2, "run_command", "{\"command\":\"echo out; echo err >&2; exit 3\"}");
	s = sc(r);
	cr_assert_eq(json_integer_value(json_object_get(s, "exit_code")), 3);
	cr_assert_str_eq(json_string_value(json_object_get(s, "stdout")), "out\n");
	cr_assert_str_eq(json_string_value(json_object_get(s, "stderr")), "err\n");
	cr_assert(json_is_null(json_object_get(s, "signal")));
	json_decref(r);
	/* argv form, stdin, env, cwd: several calls in one sandbox. */
	r = call(3, "run_command", "{\"command\":[\"sh\",\"-c\",\"read x; echo $x-$K-$(pwd)\"],"
		 "\"stdin\":\"hello\\n\",\"env\":{\"K\":\"v\"},\"cwd\":\"/tmp\"}");
	cr_assert_str_eq(json_string_value(json_object_get(sc(r), "stdout")), "hello-v-/tmp\n");
	json_decref(r);
	/* Binary output stays exact, as base64. */
	r = call(4, "run_command", "{\"command\":\"printf '\\\\377\\\\000'\"}");
	cr_assert_str_eq(json_string_value(json_object_get(sc(r), "stdout_base64")), "/wA=");
	json_decref(r);
	/* A command that cannot run is a tool error, not a protocol error. */
	r = call(5, "run_command", "{\"command\":[\"/no/such/program\"]}");
	cr_assert(json_is_true(json_object_get(r, "isError")));
	json_decref(r);
	stop();
}

Test(mcp, write_then_read_then_list_a_file)
{
	char args[512], hex[65];
	json_t *r, *s, *e;

	start(NULL, 0);
	init();
	snprintf(args, sizeof(args), "{\"path\":\"%s/a.txt\",\"content\":\"héllo\\n\"}", t.dir);
	r = call(2, "write_file", args);
	cr_assert_eq(json_integer_value(json_object_get(sc(r), "bytes")), 7);
	json_decref(r);
	snprintf(args, sizeof(args), "{\"path\":\"%s/a.txt\"}", t.dir);
	r = call(3, "read_file", args);
	s = sc(r);
	cr_assert_str_eq(json_string_value(json_object_get(s, "content")), "héllo\n");
	audit_sha256_hex("h\xc3\xa9llo\n", 7, hex);
	cr_assert_str_eq(json_string_value(json_object_get(s, "sha256")), hex);
	json_decref(r);
	snprintf(args, sizeof(args), "{\"path\":\"%s/b.bin\",\"content\":\"AP8=\",\"encoding\":\"base64\","
		 "\"mode\":384}", t.dir);
	json_decref(call(4, "write_file", args));
	snprintf(args, sizeof(args), "{\"path\":\"%s/b.bin\"}", t.dir);
	r = call(5, "read_file", args);
	cr_assert_str_eq(json_string_value(json_object_get(sc(r), "content_base64")), "AP8=");
	json_decref(r);
	snprintf(args, sizeof(args), "{\"path\":\"%s\"}", t.dir);
	r = call(6, "list_files", args);
	s = sc(r);
	cr_assert_eq(json_integer_value(json_object_get(s, "total")), 3);   /* a.txt b.bin audit.log */
	for (size_t i = 0; i < 3; i++) {
		e = json_array_get(json_object_get(s, "entries"), i);
		if (!strcmp(json_string_value(json_object_get(e, "name")), "b.bin")) {
			cr_assert_eq(json_integer_value(json_object_get(e, "mode")), 0600);
			cr_assert_eq(json_integer_value(json_object_get(e, "size")), 2);
			cr_assert_str_eq(json_string_value(json_object_get(e, "type")), "file");
		}
	}
	json_decref(r);
	r = call(7, "read_file", "{\"path\":\"/no/such/file\"}");
	cr_assert(json_is_true(json_object_get(r, "isError")));
	json_decref(r);
	stop();
}

Test(mcp, a_refusal_reaches_the_client_as_a_tool_error_and_is_audited)
{
	char path[128], args[256];
	json_t *r;
	const char *text;

	/* Refuses anything that mentions "rm" or a secret place. */
	start("! grep -qE '\"rm\"|/secret' || { echo 'no rm'; exit 1; }", 0);
	init();
	r = call(2, "run_command", "{\"command\":[\"rm\",\"-rf\",\"/tmp/x\"]}");
	cr_assert(json_is_true(json_object_get(r, "isError")));
	text = json_string_value(json_object_get(json_array_get(json_object_get(r, "content"), 0), "text"));
	cr_assert_not_null(strstr(text, "refused by the approver"), "%s", text);
	cr_assert_not_null(strstr(text, "no rm"), "%s", text);
	json_decref(r);
	r = call(3, "run_command", "{\"command\":\"true\"}");
	cr_assert_eq(json_integer_value(json_object_get(sc(r), "exit_code")), 0);
	json_decref(r);
	snprintf(args, sizeof(args), "{\"path\":\"%s/secret\",\"content\":\"x\"}", t.dir);
	r = call(4, "write_file", args);
	cr_assert(json_is_true(json_object_get(r, "isError")));
	json_decref(r);
	snprintf(path, sizeof(path), "%s/secret", t.dir);
	cr_assert_neq(access(path, F_OK), 0, "a refused write happened");
	stop();
}

Test(mcp, every_call_is_in_the_audit_log_and_the_chain_verifies)
{
	struct audit_verdict v;
	char log[128], cmd[400], args[256];
	FILE *f;
	char line[8192];
	int n = 0, refused = 0, caller = 0, redacted = 1;

	start("grep -qv '\"false\"'", 0);
	init();
	json_decref(call(2, "run_command", "{\"command\":\"echo hi\",\"env\":{\"TOKEN\":\"s3cret\"}}"));
	json_decref(call(3, "run_command", "{\"command\":[\"false\"]}"));
	snprintf(args, sizeof(args), "{\"path\":\"%s/w\",\"content\":\"x\"}", t.dir);
	json_decref(call(4, "write_file", args));
	snprintf(args, sizeof(args), "{\"path\":\"%s/w\"}", t.dir);
	/* "x": its size and digest, for the approver and the record. */
	snprintf(cmd, sizeof(cmd), "grep -q '\"content\":{\"bytes\":1,\"sha256\":\"2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881\"}' %s/audit.log", t.dir);
	cr_assert_eq(system(cmd), 0, "write_file's content digest is not in its call");
	json_decref(call(5, "read_file", args));
	snprintf(log, sizeof(log), "%s/audit.log", t.dir);
	cr_assert_eq(audit_verify(log, NULL, &v), 0, "%s", v.why);
	cr_assert_eq(v.records, 4);
	f = fopen(log, "r");
	while (fgets(line, sizeof(line), f)) {
		n++;
		refused += strstr(line, "\"outcome\":\"refused\"") != NULL;
		caller += strstr(line, "\"caller\":\"mcp:tester\"") != NULL;
		if (strstr(line, "s3cret"))
			redacted = 0;
	}
	fclose(f);
	cr_assert_eq(refused, 1);
	cr_assert_eq(caller, 4);
	cr_assert(redacted, "an environment value reached the log");
	/* "hi\n": its bytes and sha256. */
	snprintf(cmd, sizeof(cmd), "grep -q '\"stdout\":{\"bytes\":3,\"sha256\":\"98ea6e4f216f2fb4b69fff9b3a44842c38686ca685f3f55dc48c5d3fb1107be4\"' %s", log);
	cr_assert_eq(system(cmd), 0, "stdout's digest is not recorded");
	stop();
}

Test(mcp, a_cancelled_command_is_killed_and_gets_no_answer)
{
	json_t *m;
	struct timespec t0, t1;

	start(NULL, 0);
	init();
	clock_gettime(CLOCK_MONOTONIC, &t0);
	say("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"run_command\","
	    "\"arguments\":{\"command\":\"sleep 60\"}}}");
	/* ping and server/discover are answered while the command runs. */
	usleep(200000);
	say("{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\"}");
	m = hear();
	cr_assert(json_is_object(result_of(m, 8)));
	cr_assert_eq(json_object_size(result_of(m, 8)), 0, "a 2025 ping's result is {}");
	json_decref(m);
	say("{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"server/discover\",\"params\":{" META26 "}}");
	m = hear();
	modern_result(result_of(m, 10), true);
	json_decref(m);
	/* A 2026-07-28 ping (its _meta says so) gets a complete result too;
	 * the 2025 one above an empty object. */
	say("{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"ping\",\"params\":{" META26 "}}");
	m = hear();
	modern_result(result_of(m, 11), false);
	json_decref(m);
	say("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":7,"
	    "\"reason\":\"user\"}}");
	say("{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"name\":\"run_command\","
	    "\"arguments\":{\"command\":\"echo next\"}}}");
	m = hear();
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(result_of(m, 9),
									   "structuredContent"), "stdout")),
			 "next\n");
	json_decref(m);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	cr_assert_lt(t1.tv_sec - t0.tv_sec, 30, "the cancelled command was not killed");
	silence(200);
	stop();
}

Test(mcp, malformed_input_gets_json_rpc_errors_and_the_session_goes_on)
{
	json_t *m;
	char *big;

	start(NULL, 4096);
	say("{not json");
	m = hear();
	cr_assert_eq(error_code(m), MCP_PARSE_ERROR);
	cr_assert(json_is_null(json_object_get(m, "id")));
	json_decref(m);
	say("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]");
	m = hear();
	cr_assert_eq(error_code(m), MCP_INVALID_REQUEST);
	json_decref(m);
	say("{\"jsonrpc\":\"1.0\",\"id\":2,\"method\":\"ping\"}");
	m = hear();
	cr_assert_eq(error_code(m), MCP_INVALID_REQUEST);
	cr_assert_eq(json_integer_value(json_object_get(m, "id")), 2);
	json_decref(m);
	say("{\"jsonrpc\":\"2.0\",\"id\":{\"x\":1},\"method\":\"ping\"}");
	m = hear();
	cr_assert_eq(error_code(m), MCP_INVALID_REQUEST);
	json_decref(m);
	say("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}");
	m = hear();
	cr_assert_eq(error_code(m), MCP_INVALID_REQUEST, "tools before initialize");
	json_decref(m);
	init();
	say("{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"resources/list\"}");
	m = hear();
	cr_assert_eq(error_code(m), MCP_METHOD_NOT_FOUND);
	json_decref(m);
	say("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"nope\"}}");
	m = hear();
	cr_assert_eq(error_code(m), MCP_INVALID_PARAMS);
	json_decref(m);
	say("{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{\"name\":\"run_command\","
	    "\"arguments\":{\"command\":42}}}");
	m = hear();
	cr_assert_eq(error_code(m), MCP_INVALID_PARAMS);
	json_decref(m);
	say("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"read_file\","
	    "\"arguments\":{\"path\":\"relative\"}}}");
	m = hear();
	cr_assert_eq(error_code(m), MCP_INVALID_PARAMS);
	json_decref(m);
	/* A line past the limit: one error, and the next line is read afresh. */
	big = malloc(20000);
	memset(big, 'x', 19999);
	big[19999] = '\0';
	say(big);
	free(big);
	m = hear();
	cr_assert_eq(error_code(m), MCP_INVALID_REQUEST);
	json_decref(m);
	say("");
	say("{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\"}");
	m = hear();
	result_of(m, 8);
	json_decref(m);
	/* Notifications and responses get no answer. */
	say("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/whatever\"}");
	say("{\"jsonrpc\":\"2.0\",\"id\":99,\"result\":{}}");
	silence(200);
	stop();
	cr_assert_eq(t.rc, 0);
}

/* What a message would take parsed is bounded before it is parsed: 20,000
 * integers in an array, or arrays 100 deep, are refused with one error
 * (a 31 MiB line of integers took 1.2 GB before), and the session goes on.
 * Long strings are one value each: a file's content passes. */
Test(mcp, a_message_too_big_parsed_is_refused_unparsed)
{
	size_t n = 20000 * 2 + 200, at = 0;
	char *line = malloc(n);
	json_t *m;

	start(NULL, 1 << 20);
	init();
	at += (size_t)sprintf(line, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\",\"params\":{\"x\":[");
	for (int i = 0; i < 20000; i++)
		at += (size_t)sprintf(line + at, i ? ",1" : "1");
	sprintf(line + at, "]}}");
	say(line);
	m = hear();
	cr_assert_eq(error_code(m), MCP_INVALID_REQUEST);
	cr_assert(strstr(json_string_value(json_object_get(json_object_get(m, "error"), "message")),
			 "not parsed"));
	json_decref(m);
	at = (size_t)sprintf(line, "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"ping\",\"params\":{\"x\":");
	for (int i = 0; i < 100; i++)
		line[at++] = '[';
	for (int i = 0; i < 100; i++)
		line[at++] = ']';
	sprintf(line + at, "}}");
	say(line);
	m = hear();
	cr_assert_eq(error_code(m), MCP_INVALID_REQUEST);
	json_decref(m);
	/* A long string with brackets and commas inside it is one value. */
	at = (size_t)sprintf(line, "{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"ping\",\"params\":{\"x\":\"");
	for (int i = 0; i < 20000; i++)
		at += (size_t)sprintf(line + at, i % 2 ? "[," : "\\\"");
	sprintf(line + at, "\"}}");
	say(line);
	m = hear();
	result_of(m, 11);
	json_decref(m);
	free(line);
	stop();
	cr_assert_eq(t.rc, 0);
}

Test(mcp, a_command_too_big_for_the_agent_is_invalid_params_and_the_session_goes_on)
{
	size_t n = 300000;
	char *line = malloc(n + 200);
	json_t *m, *r;
	int len;

	cr_assert_not_null(line);
	start(NULL, 0);
	init();
	len = sprintf(line, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":"
		      "{\"name\":\"run_command\",\"arguments\":{\"command\":\"");
	memset(line + len, 'x', n);
	strcpy(line + len + n, "\"}}}");
	say(line);
	free(line);
	m = hear();
	cr_assert_eq(error_code(m), MCP_INVALID_PARAMS);
	json_decref(m);
	r = call(3, "run_command", "{\"command\":\"echo still here\"}");
	cr_assert_str_eq(json_string_value(json_object_get(sc(r), "stdout")), "still here\n");
	json_decref(r);
	stop();
}

/* ---- MCP 2026-07-28: no initialize, the version in each request's _meta ---- */

Test(mcp, modern_discover_list_and_call_need_no_initialize)
{
	char line[1024], log[128];
	json_t *m, *r, *v;
	FILE *f;
	int callers = 0;

	start(NULL, 0);
	say("{\"jsonrpc\":\"2.0\",\"id\":\"d\",\"method\":\"server/discover\",\"params\":{" META26 "}}");
	m = hear();
	cr_assert_str_eq(json_string_value(json_object_get(m, "id")), "d");
	r = json_object_get(m, "result");
	modern_result(r, true);
	v = json_object_get(r, "supportedVersions");
	cr_assert_eq(json_array_size(v), 1);
	cr_assert_str_eq(json_string_value(json_array_get(v, 0)), MCP_MODERN_VERSION);
	cr_assert(json_is_object(json_object_get(json_object_get(r, "capabilities"), "tools")));
	cr_assert(json_is_string(json_object_get(r, "instructions")));
	json_decref(m);
	say("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\",\"params\":{" META26 "}}");
	m = hear();
	r = result_of(m, 2);
	modern_result(r, true);
	cr_assert_eq(json_array_size(json_object_get(r, "tools")), 4);
	json_decref(m);
	r = call_in(3, "run_command", "{\"command\":\"echo modern\"}", "," META26);
	cr_assert_str_eq(json_string_value(json_object_get(sc(r), "stdout")), "modern\n");
	json_decref(r);
	/* The audit names the caller from this request's clientInfo. */
	snprintf(log, sizeof(log), "%s/audit.log", t.dir);
	f = fopen(log, "r");
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f))
		callers += strstr(line, "\"caller\":\"mcp:modern\"") != NULL;
	fclose(f);
	cr_assert_eq(callers, 1);
	stop();
	cr_assert_eq(t.rc, 0);
}

/* The error answering line (request id 1). */
static int modern_error(const char *line, json_t **data)
{
	json_t *m;
	int code;

	say(line);
	m = hear();
	cr_assert_eq(json_integer_value(json_object_get(m, "id")), 1, "%s", json_dumps(m, 0));
	code = error_code(m);
	*data = json_incref(json_object_get(json_object_get(m, "error"), "data"));
	json_decref(m);
	return code;
}

Test(mcp, modern_unknown_version_and_malformed_meta_are_the_specified_errors)
{
	json_t *data, *r;

	start(NULL, 0);
	/* An unknown version, and a 2025 one (spoken after initialize, not per request). */
	cr_assert_eq(modern_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":"
				  "{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"1900-01-01\","
				  "\"io.modelcontextprotocol/clientCapabilities\":{}}}}", &data),
		     MCP_UNSUPPORTED_VERSION);
	cr_assert_eq(json_array_size(json_object_get(data, "supported")), 1);
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(data, "supported"), 0)),
			 MCP_MODERN_VERSION);
	cr_assert_str_eq(json_string_value(json_object_get(data, "requested")), "1900-01-01");
	json_decref(data);
	cr_assert_eq(modern_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/discover\",\"params\":"
				  "{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2025-06-18\","
				  "\"io.modelcontextprotocol/clientCapabilities\":{}}}}", &data),
		     MCP_UNSUPPORTED_VERSION);
	cr_assert_str_eq(json_string_value(json_object_get(data, "requested")), "2025-06-18");
	json_decref(data);
	/* Required fields missing or of the wrong type: invalid params. */
	cr_assert_eq(modern_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":"
				  "{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"}}}",
				  &data), MCP_INVALID_PARAMS);
	cr_assert_eq(modern_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":"
				  "{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":20260728,"
				  "\"io.modelcontextprotocol/clientCapabilities\":{}}}}", &data),
		     MCP_INVALID_PARAMS);
	cr_assert_eq(modern_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":"
				  "{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
				  "\"io.modelcontextprotocol/clientCapabilities\":{},"
				  "\"io.modelcontextprotocol/clientInfo\":{\"name\":\"x\"}}}}", &data),
		     MCP_INVALID_PARAMS);
	cr_assert_null(data);
	/* Bad arguments are a tool error the model sees; an unknown tool is not. */
	r = call_in(2, "run_command", "{\"command\":42}", "," META26);
	cr_assert(json_is_true(json_object_get(r, "isError")));
	cr_assert_not_null(strstr(json_string_value(json_object_get(json_array_get(
		json_object_get(r, "content"), 0), "text")), "command"));
	json_decref(r);
	cr_assert_eq(modern_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{"
				  "\"name\":\"nope\"," META26 "}}", &data), MCP_INVALID_PARAMS);
	/* initialize is not a 2026-07-28 method. */
	cr_assert_eq(modern_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
				  META26 "}}", &data), MCP_METHOD_NOT_FOUND);
	/* Without the claim a request is a 2025 one: refused before initialize
	 * (what a 2025 server answers, so a client's probe falls back). */
	cr_assert_eq(modern_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/discover\"}", &data),
		     MCP_METHOD_NOT_FOUND);
	cr_assert_eq(modern_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":"
				  "{\"_meta\":{\"io.modelcontextprotocol/clientCapabilities\":{}}}}", &data),
		     MCP_INVALID_REQUEST);
	stop();
	cr_assert_eq(t.rc, 0);
}

Test(mcp, both_eras_share_one_sandbox_after_initialize)
{
	json_t *m, *r;

	start(NULL, 0);
	init();
	json_decref(call(2, "write_file", "{\"path\":\"/tmp/mayfly-mcp-era.txt\",\"content\":\"both\"}"));
	/* A 2026 request after initialize is served statelessly, same sandbox. */
	r = call_in(3, "read_file", "{\"path\":\"/tmp/mayfly-mcp-era.txt\"}", "," META26);
	cr_assert_str_eq(json_string_value(json_object_get(sc(r), "content")), "both");
	json_decref(r);
	/* subscriptions/listen: acknowledged with nothing honoured, then ended. */
	say("{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"subscriptions/listen\",\"params\":{"
	    "\"notifications\":{\"toolsListChanged\":true}," META26 "}}");
	m = hear();
	cr_assert_str_eq(json_string_value(json_object_get(m, "method")),
			 "notifications/subscriptions/acknowledged");
	r = json_object_get(m, "params");
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(r, "_meta"),
							"io.modelcontextprotocol/subscriptionId")), 4);
	cr_assert_eq(json_object_size(json_object_get(r, "notifications")), 0);
	json_decref(m);
	m = hear();
	modern_result(result_of(m, 4), false);
	json_decref(m);
	/* And the 2025 session goes on as it was. */
	r = call(5, "run_command", "{\"command\":[\"rm\",\"/tmp/mayfly-mcp-era.txt\"]}");
	cr_assert_eq(json_integer_value(json_object_get(sc(r), "exit_code")), 0);
	json_decref(r);
	stop();
	cr_assert_eq(t.rc, 0);
}
