/* test_session.c - one command through a lying agent: deadlines, signals, numbers, output caps and JSON that stays valid. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent_client/session.h"
#include "lib/base64.h"
#include "lib/clock.h"
#include "fake_agent.h"

#define MS 1000000ULL

static struct fake_agent a;

static void setup(void)
{
	fake_init(&a);
}

static void teardown(void)
{
	fake_fini(&a);
}

TestSuite(session, .init = setup, .fini = teardown, .timeout = 60);

static void fill_u32(struct proto_writer *w, void *v) { proto_put_u32(w, *(uint32_t *)v); }

static void fill_exit(struct proto_writer *w, void *v)
{
	const uint32_t *e = v;   /* kind, code, signo */

	proto_put_u32(w, e[0]);
	proto_put_u32(w, e[1]);
	proto_put_u32(w, e[2]);
	proto_put_u64(w, 1000);
}

static void fill_error(struct proto_writer *w, void *v)
{
	const char *const *e = v;   /* errno as text, message */

	proto_put_u32(w, (uint32_t)strtoul(e[0], NULL, 0));
	proto_put_str(w, e[1]);
}

static void started(void)
{
	uint32_t pid = 42;

	cr_assert(fake_send(&a, PROTO_EXEC_STARTED, 1, fill_u32, &pid));
}

static void exits(uint32_t kind, uint32_t code, uint32_t signo)
{
	uint32_t e[3] = { kind, code, signo };

	cr_assert(fake_send(&a, PROTO_EXIT, 1, fill_exit, e));
}

static struct exec_spec spec_for(char **argv)
{
	struct exec_spec spec;

	session_spec_init(&spec);
	spec.argv = argv;
	spec.argc = 1;
	return spec;
}

static void run(struct exec_spec *spec, struct exec_result *res)
{
	session_exec(a.client, spec, res);
}

static char *true_argv[] = { "true", NULL };

Test(session, an_honest_run_returns_the_command_code)
{
	struct exec_spec spec = spec_for(true_argv);
	struct exec_result res;
	int out[2];
	char buf[8] = "";

	cr_assert_eq(pipe(out), 0);
	spec.out_fd = out[1];
	started();
	cr_assert(fake_send_bytes(&a, PROTO_STDOUT, 1, "hi\n", 3));
	exits(PROTO_EXIT_CODE, 3, 0);
	run(&spec, &res);
	cr_assert_eq(res.exit_code, 3, "%s", res.error);
	cr_assert_neq(res.started_ns, 0);
	cr_assert_neq(res.ended_ns, 0);
	cr_assert_eq(read(out[0], buf, sizeof(buf)), 3);
	cr_assert_str_eq(buf, "hi\n");
	close(out[0]);
	close(out[1]);
}

Test(session, a_missing_program_is_127)
{
	struct exec_spec spec = spec_for(true_argv);
	const char *e[] = { "2", "no such program" };
	struct exec_result res;

	cr_assert(fake_send(&a, PROTO_ERROR, 1, fill_error, e));
	run(&spec, &res);
	cr_assert_eq(res.exit_code, RUN_EXIT_NOTFOUND);
	cr_assert_not_null(strstr(res.error, "no such program"), "%s", res.error);
}

/* Finding 5: a guest errno is range-checked, never negated blindly. */
Test(session, an_errno_out_of_range_is_an_agent_failure)
{
	static const char *const bad[] = { "0x80000000", "0xffffffff", "0", "4096" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct exec_spec spec = spec_for(true_argv);
		const char *e[] = { bad[i], "lies" };
		struct exec_result res;

		fake_fini(&a);
		fake_init(&a);
		cr_assert(fake_send(&a, PROTO_ERROR, 1, fill_error, e));
		run(&spec, &res);
		cr_assert_eq(res.exit_code, RUN_EXIT_AGENT, "errno %s", bad[i]);
		cr_assert_not_null(strstr(res.error, "protocol"), "%s: %s", bad[i], res.error);
	}
}

Test(session, agent_text_reaches_the_user_printable)
{
	struct exec_spec spec = spec_for(true_argv);
	const char *e[] = { "13", "denied\x1b[2J\r\n\xff\x80 here" };
	struct exec_result res;

	cr_assert(fake_send(&a, PROTO_ERROR, 1, fill_error, e));
	run(&spec, &res);
	cr_assert_eq(res.exit_code, RUN_EXIT_AGENT);
	for (const char *p = res.error; *p; p++)
		cr_assert(*p >= 0x20 && *p < 0x7f, "byte 0x%02x in '%s'", (unsigned char)*p, res.error);
	cr_assert_not_null(strstr(res.error, "denied\\x1b[2J\\x0d\\x0a\\xff\\x80 here"), "%s",
			   res.error);
}

Test(session, exit_fields_out_of_range_are_an_agent_failure)
{
	static const uint32_t bad[][3] = {
		{ PROTO_EXIT_CODE, 256, 0 }, { PROTO_EXIT_CODE, 0xffffffff, 0 },
		{ PROTO_EXIT_SIGNAL, 0, 0x1234567 }, { PROTO_EXIT_SIGNAL, 0, 0 },
		{ PROTO_EXIT_TIMEOUT, 0, 65 }, { 3, 0, 9 },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct exec_spec spec = spec_for(true_argv);
		struct exec_result res;

		fake_fini(&a);
		fake_init(&a);
		started();
		exits(bad[i][0], bad[i][1], bad[i][2]);
		run(&spec, &res);
		cr_assert_eq(res.exit_code, RUN_EXIT_AGENT, "case %zu gave %d", i, res.exit_code);
	}
}

Test(session, output_before_started_or_a_second_start_is_an_agent_failure)
{
	struct exec_spec spec = spec_for(true_argv);
	struct exec_result res;

	cr_assert(fake_send_bytes(&a, PROTO_STDOUT, 1, "x", 1));
	run(&spec, &res);
	cr_assert_eq(res.exit_code, RUN_EXIT_AGENT);
	fake_fini(&a);
	fake_init(&a);
	started();
	started();
	run(&spec, &res);
	cr_assert_eq(res.exit_code, RUN_EXIT_AGENT);
}

Test(session, an_oversized_frame_length_is_an_agent_failure)
{
	uint8_t hdr[PROTO_HEADER_LEN] = { 0xff, 0xff, 0xff, 0x7f, PROTO_VERSION, PROTO_STDOUT };
	struct exec_spec spec = spec_for(true_argv);
	struct exec_result res;

	cr_assert_eq(write(a.fd, hdr, sizeof(hdr)), (ssize_t)sizeof(hdr));
	run(&spec, &res);
	cr_assert_eq(res.exit_code, RUN_EXIT_AGENT);
}

Test(session, an_agent_that_hangs_up_is_an_agent_failure)
{
	struct exec_spec spec = spec_for(true_argv);
	struct exec_result res;

	started();
	close(a.fd);
	a.fd = -1;
	run(&spec, &res);
	cr_assert_eq(res.exit_code, RUN_EXIT_AGENT);
	cr_assert_neq(res.error[0], '\0');
}

Test(session, frames_for_other_requests_are_ignored)
{
	struct exec_spec spec = spec_for(true_argv);
	uint32_t e[3] = { PROTO_EXIT_CODE, 3, 0 };
	struct exec_result res;

	cr_assert(fake_send(&a, PROTO_EXIT, 7, fill_exit, e));
	started();
	exits(PROTO_EXIT_SIGNAL, 0, 9);
	run(&spec, &res);
	cr_assert_eq(res.exit_code, 137);
}

/* Output frames for process 1, many to a write, as fast as the host
 * takes them, until the test ends or (signal_ends) a SIGNAL arrives. */
static void flood_frames(struct fake_agent *fa, bool signal_ends)
{
	static _Thread_local uint8_t block[256 * 1024];
	size_t len = 0;

	while (len + 80 <= sizeof(block)) {
		struct proto_writer w;

		proto_begin(&w, block + len, sizeof(block) - len, PROTO_STDOUT, 1);
		proto_put_bytes(&w, "spam spam spam spam spam spam spam spam spam spam\n", 50);
		len += (size_t)proto_end(&w);
	}
	while (!atomic_load(&fa->stop) && !(signal_ends && atomic_load(&fa->signals))) {
		for (size_t off = 0; off < len;) {
			ssize_t n = send(fa->fd, block + off, len - off, MSG_NOSIGNAL);

			if (n <= 0)
				return;
			off += (size_t)n;
		}
		fake_read_frames(fa, 0);
	}
}

static void flood(struct fake_agent *fa)
{
	uint32_t pid = 7;

	if (fake_send(fa, PROTO_EXEC_STARTED, 1, fill_u32, &pid))
		flood_frames(fa, false);
}

/* Finding 1: a guest that keeps sending frames must not defeat the deadline. */
Test(session, a_flooding_agent_cannot_defeat_the_deadline)
{
	struct exec_spec spec = spec_for(true_argv);
	struct exec_result res;
	uint64_t t0 = clock_now_ns();
	int devnull[2];

	cr_assert_eq(pipe(devnull), 0);
	close(devnull[0]);
	spec.out_fd = devnull[1];   /* EPIPE: dropped, the command goes on */
	signal(SIGPIPE, SIG_IGN);
	/* JSON makes each frame cost the host more than the agent: frames are
	 * always waiting, as with a guest that floods. */
	spec.json = true;
	spec.json_out = fopen("/dev/null", "w");
	fake_start(&a, flood, NULL);
	spec.deadline_ns = t0 + 300 * MS;
	run(&spec, &res);
	cr_assert_eq(res.exit_code, RUN_EXIT_TIMEOUT, "%d: %s", res.exit_code, res.error);
	cr_assert_lt(clock_now_ns() - t0, 3000 * MS, "returned %llu ms after a 300 ms deadline",
		     (unsigned long long)((clock_now_ns() - t0) / MS));
	close(devnull[1]);
	fclose(spec.json_out);
}

/* An agent that floods until it sees a SIGNAL, then exits by it. */
static void flood_until_signalled(struct fake_agent *fa)
{
	uint32_t pid = 7, e[3] = { PROTO_EXIT_SIGNAL, 0, 0 };

	if (!fake_send(fa, PROTO_EXEC_STARTED, 1, fill_u32, &pid))
		return;
	flood_frames(fa, true);
	e[2] = atomic_load(&fa->last_signal);
	fake_send(fa, PROTO_EXIT, 1, fill_exit, e);
}

/* Finding 1, second half: forwarded signals must not starve either. */
Test(session, a_signal_is_passed_on_while_frames_keep_coming)
{
	struct exec_spec spec = spec_for(true_argv);
	struct exec_result res;
	int sigs[2], out[2];
	uint8_t term = SIGTERM;

	cr_assert_eq(pipe(sigs), 0);
	cr_assert_eq(pipe(out), 0);
	close(out[0]);
	signal(SIGPIPE, SIG_IGN);
	spec.out_fd = out[1];
	spec.json = true;
	spec.json_out = fopen("/dev/null", "w");
	spec.signal_fd = sigs[0];
	spec.deadline_ns = clock_now_ns() + 20000 * MS;
	cr_assert_eq(write(sigs[1], &term, 1), 1);
	fake_start(&a, flood_until_signalled, NULL);
	run(&spec, &res);
	cr_assert_eq(res.exit_code, 128 + SIGTERM, "%d: %s", res.exit_code, res.error);
	cr_assert_eq(atomic_load(&a.last_signal), SIGTERM);
	fclose(spec.json_out);
	close(sigs[0]);
	close(sigs[1]);
	close(out[1]);
}

/* Sends `arg` bytes of output, 64 KiB a frame, then waits for SIGKILL. */
static void big_output(struct fake_agent *fa)
{
	static char chunk[PROTO_CHUNK];
	size_t total = (size_t)(uintptr_t)fa->arg;
	uint32_t pid = 7, e[3] = { PROTO_EXIT_SIGNAL, 0, SIGKILL };

	memset(chunk, 'o', sizeof(chunk));
	if (!fake_send(fa, PROTO_EXEC_STARTED, 1, fill_u32, &pid))
		return;
	for (size_t sent = 0; sent < total && !atomic_load(&fa->signals); sent += sizeof(chunk)) {
		if (!fake_send_bytes(fa, PROTO_STDOUT, 1, chunk, sizeof(chunk)))
			return;
		fake_read_frames(fa, 0);
	}
	while (!atomic_load(&fa->stop) && !atomic_load(&fa->signals))
		if (!fake_read_frames(fa, 100))
			return;
	if (atomic_load(&fa->last_signal) == SIGKILL)
		fake_send(fa, PROTO_EXIT, 1, fill_exit, e);
}

/* Finding 12: the host's output is capped; past it the command is killed. */
Test(session, output_past_max_output_is_dropped_and_the_command_killed)
{
	struct exec_spec spec = spec_for(true_argv);
	struct exec_result res;
	char path[] = "/tmp/mayfly-out-XXXXXX";
	int fd = mkstemp(path);

	cr_assert_geq(fd, 0);
	unlink(path);
	spec.out_fd = fd;
	spec.max_output = (1 << 20) + 5;
	fake_start(&a, big_output, (void *)(uintptr_t)(16 << 20));
	run(&spec, &res);
	cr_assert(res.truncated);
	cr_assert_eq(res.exit_code, 128 + SIGKILL, "%d: %s", res.exit_code, res.error);
	cr_assert_not_null(strstr(res.error, "--max-output"), "%s", res.error);
	cr_assert_eq(lseek(fd, 0, SEEK_END), (1 << 20) + 5, "exactly the cap passed on");
	close(fd);
}

/* Everything --json wrote, as one string. */
static char *json_lines(FILE *f)
{
	long n;
	char *s;

	fflush(f);
	n = ftell(f);
	s = calloc(1, (size_t)n + 1);
	rewind(f);
	cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
	return s;
}

/* Decode data / data_b64 of one event into out. */
static size_t event_bytes(json_t *ev, uint8_t *out)
{
	json_t *d = json_object_get(ev, "data"), *b = json_object_get(ev, "data_b64");
	size_t n = 0;

	if (d) {
		memcpy(out, json_string_value(d), json_string_length(d));
		return json_string_length(d);
	}
	cr_assert_not_null(b);
	for (const char *p = json_string_value(b); *p; p += 4) {
		static const char tab[] =
			"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
		uint32_t v = 0;
		int pad = 0;

		for (int k = 0; k < 4; k++) {
			v <<= 6;
			if (p[k] == '=')
				pad++;
			else
				v |= (uint32_t)(strchr(tab, p[k]) - tab);
		}
		for (int k = 0; k < 3 - pad; k++)
			out[n++] = (uint8_t)(v >> (16 - 8 * k));
	}
	return n;
}

/* The bytes every JSON consumer has choked on, cut at every boundary. */
static const uint8_t nasty[] = {
	'o', 'k', ' ', 0xc3, 0xa9, ' ',        /* é, valid */
	0xed, 0xa0, 0x80,                      /* a surrogate */
	0xc0, 0xaf,                            /* an overlong '/' */
	0xf5, 0x80, 0x80, 0x80, 0xff, 0xfe,    /* lead bytes that never start anything */
	0xf0, 0x9f, 0x98, 0x80,                /* U+1F600, valid */
	0xf4, 0x90, 0x80, 0x80,                /* past U+10FFFF */
	0x00, '"', '\\', 0x1f, 0x7f, '\n',
	0xe2, 0x82,                            /* a cut € */
};

static uint8_t sent[1 << 16];
static size_t nsent;

/* Sends 400 chunks of random and nasty bytes (recorded in sent), then EXIT 0. */
static void nasty_output(struct fake_agent *fa)
{
	uint32_t pid = 7, e[3] = { PROTO_EXIT_CODE, 0, 0 };

	if (!fake_send(fa, PROTO_EXEC_STARTED, 1, fill_u32, &pid))
		return;
	srand(7);
	for (int i = 0; i < 400; i++) {
		uint8_t chunk[64];
		size_t n = (size_t)(rand() % 40) + 1;

		for (size_t k = 0; k < n; k++)
			chunk[k] = i % 3 == 0 ? (uint8_t)rand() : nasty[(size_t)(i + (int)k) % sizeof(nasty)];
		if (!fake_send_bytes(fa, PROTO_STDOUT, 1, chunk, (uint32_t)n))
			return;
		memcpy(sent + nsent, chunk, n);
		nsent += n;
	}
	fake_send(fa, PROTO_EXIT, 1, fill_exit, e);
}

/* Finding 6: every line is strict JSON whatever the command writes, and
 * data + data_b64 give back exactly the bytes. */
Test(session, json_lines_stay_valid_whatever_bytes_come)
{
	struct exec_spec spec = spec_for(true_argv);
	struct exec_result res;
	static uint8_t got[1 << 17];
	size_t ngot = 0, lines = 0;
	FILE *f = tmpfile();
	char *all, *line, *save;

	cr_assert_not_null(f);
	spec.json = true;
	spec.json_out = f;
	fake_start(&a, nasty_output, NULL);
	run(&spec, &res);
	cr_assert_eq(res.exit_code, 0, "%s", res.error);
	all = json_lines(f);
	for (line = strtok_r(all, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		json_error_t jerr;
		json_t *ev = json_loads(line, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
		const char *name;

		cr_assert_not_null(ev, "not JSON: %s (%s)", line, jerr.text);
		name = json_string_value(json_object_get(ev, "event"));
		cr_assert_not_null(name);
		if (!strcmp(name, "stdout"))
			ngot += event_bytes(ev, got + ngot);
		json_decref(ev);
		lines++;
	}
	cr_assert_gt(lines, 100);
	cr_assert_eq(ngot, nsent);
	cr_assert(memcmp(got, sent, nsent) == 0, "the bytes came back different");
	free(all);
	fclose(f);
}

Test(session, json_exit_event_says_truncated_and_error_messages_are_json)
{
	struct exec_spec spec = spec_for(true_argv);
	struct exec_result res;
	FILE *f = tmpfile();
	char *all;

	spec.json = true;
	spec.json_out = f;
	spec.max_output = 10;
	fake_start(&a, big_output, (void *)(uintptr_t)(1 << 20));
	run(&spec, &res);
	all = json_lines(f);
	cr_assert_not_null(strstr(all, "\"truncated\":true"), "%s", all);
	cr_assert_not_null(strstr(all, "\"data\":\"oooooooooo\""), "%s", all);
	free(all);
	fclose(f);
}

/* Reads the host's frames until it has passed on (uintptr_t)arg bytes of
 * stdin and, with arg 0, its end (10 s at most), then exits 0. */
static void take_stdin(struct fake_agent *fa)
{
	uint64_t want = (uintptr_t)fa->arg, until = clock_now_ns() + 10000 * MS;
	uint32_t pid = 7, e[3] = { PROTO_EXIT_CODE, 0, 0 };

	while (!atomic_load(&fa->stop) && clock_now_ns() < until &&
	       (want ? atomic_load(&fa->stdin_bytes) < want : !atomic_load(&fa->stdin_ended)))
		if (!fake_read_frames(fa, 100))
			return;
	if (fake_send(fa, PROTO_EXEC_STARTED, 1, fill_u32, &pid))
		fake_send(fa, PROTO_EXIT, 1, fill_exit, e);
}

/* A stdin that hands out a few bytes per read (here a seqpacket socket:
 * one record a read; a terminal's lines, a writer's small pieces) still
 * goes to the agent in frames as full as what is there allows. */
Test(session, small_pieces_of_stdin_share_a_frame)
{
	struct exec_spec spec = spec_for(true_argv);
	struct exec_result res;
	int sv[2];

	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	for (int i = 0; i < 50; i++)
		cr_assert_eq(write(sv[1], "abc", 3), 3);
	shutdown(sv[1], SHUT_WR);
	spec.stdin_fd = sv[0];
	fake_start(&a, take_stdin, (void *)(uintptr_t)0);
	run(&spec, &res);
	cr_assert_eq(res.exit_code, 0, "%d: %s", res.exit_code, res.error);
	cr_assert_eq(atomic_load(&a.stdin_bytes), 150);
	cr_assert_eq(atomic_load(&a.stdin_frames), 1, "50 pieces went in %d frames",
		     atomic_load(&a.stdin_frames));
	close(sv[0]);
	close(sv[1]);
}

/* Coalescing never waits: what stdin has goes now, its writer still open. */
Test(session, stdin_is_passed_on_without_waiting_for_more)
{
	struct exec_spec spec = spec_for(true_argv);
	struct exec_result res;
	int in[2];

	cr_assert_eq(pipe(in), 0);
	cr_assert_eq(write(in[1], "abc", 3), 3);
	spec.stdin_fd = in[0];
	fake_start(&a, take_stdin, (void *)(uintptr_t)3);
	run(&spec, &res);
	cr_assert_eq(res.exit_code, 0, "%d: %s", res.exit_code, res.error);
	cr_assert_eq(atomic_load(&a.stdin_bytes), 3);
	cr_assert_not(atomic_load(&a.stdin_ended));
	close(in[0]);
	close(in[1]);
}

/* The EXEC the host sent, read from the agent's end and decoded into *e
 * (the caller frees it); false when the host sent nothing. */
static bool sent_exec(struct proto_exec *e)
{
	static uint8_t buf[PROTO_HEADER_LEN + PROTO_MAX_PAYLOAD];
	struct proto_frame f;
	ssize_t n = recv(a.fd, buf, sizeof(buf), MSG_DONTWAIT);

	if (n <= 0)
		return false;
	cr_assert_eq(proto_frame_decode(buf, (size_t)n, &f), n);
	cr_assert_eq(f.type, PROTO_EXEC);
	cr_assert_eq(proto_exec_decode(&f, e), 0);
	return true;
}

/* A container's root goes to the agent with its user; without one, the
 * EXEC is the old encoding (no PROTO_EXEC_ROOT). */
Test(session, a_root_is_sent_with_its_user_groups_and_umask)
{
	static const uint32_t groups[] = { 10, 20, 30 };
	struct exec_spec spec = spec_for(true_argv);
	struct exec_result res;
	struct proto_exec e;

	spec.root = "/run/mayfly/rootfs";
	spec.uid = 1000;
	spec.gid = 1001;
	spec.groups = groups;
	spec.ngroups = 3;
	started();
	exits(PROTO_EXIT_CODE, 0, 0);
	run(&spec, &res);
	cr_assert_eq(res.exit_code, 0, "%s", res.error);
	cr_assert(sent_exec(&e));
	cr_assert_eq(e.flags & PROTO_EXEC_ROOT, PROTO_EXEC_ROOT);
	cr_assert_str_eq(e.root, "/run/mayfly/rootfs");
	cr_assert(e.uid == 1000 && e.gid == 1001 && e.umask == 022, "umask %o", e.umask);
	cr_assert(e.ngroups == 3 && e.groups[0] == 10 && e.groups[2] == 30);
	proto_exec_free(&e);

	fake_fini(&a);
	fake_init(&a);
	spec = spec_for(true_argv);
	started();
	exits(PROTO_EXIT_CODE, 0, 0);
	run(&spec, &res);
	cr_assert(sent_exec(&e));
	cr_assert_eq(e.flags & PROTO_EXEC_ROOT, 0);
	cr_assert_eq(e.root[0], '\0');
	proto_exec_free(&e);
}

/* What the agent would refuse (and close the connection for) is refused
 * here, with the reason, and nothing is sent. */
Test(session, a_bad_root_or_user_fails_before_anything_is_sent)
{
	static uint32_t groups[PROTO_MAX_GROUPS + 1];
	static const char *const roots[] = { "relative", "/a/../b", "/a/", "" };
	struct exec_spec spec;
	struct exec_result res;
	struct proto_exec e;

	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
		spec = spec_for(true_argv);
		spec.root = roots[i];
		run(&spec, &res);
		cr_assert_eq(res.exit_code, RUN_EXIT_MAYFLY, "root '%s'", roots[i]);
		cr_assert_not_null(strstr(res.error, "canonical absolute path"), "%s", res.error);
	}
	spec = spec_for(true_argv);
	spec.root = "/r";
	spec.groups = groups;
	spec.ngroups = PROTO_MAX_GROUPS + 1;
	run(&spec, &res);
	cr_assert_eq(res.exit_code, RUN_EXIT_MAYFLY);
	cr_assert_not_null(strstr(res.error, "at most 64"), "%s", res.error);
	spec.ngroups = 0;
	spec.uid = UINT32_MAX;
	run(&spec, &res);
	cr_assert_eq(res.exit_code, RUN_EXIT_MAYFLY);
	cr_assert_not_null(strstr(res.error, "out of range"), "%s", res.error);
	spec.uid = 0;
	spec.umask = 01000;
	run(&spec, &res);
	cr_assert_eq(res.exit_code, RUN_EXIT_MAYFLY);
	cr_assert_not(sent_exec(&e), "a refused EXEC was sent");
}
