/* test_protocol.c - the agent protocol codec: round trips, limits, and hostile bytes that must never be accepted or crash it. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol.h"

#define FRAME_MAX (PROTO_HEADER_LEN + PROTO_MAX_PAYLOAD)

static uint8_t buf[FRAME_MAX + 64];

/* Decode a whole frame that must be valid. */
static struct proto_frame decode_ok(const uint8_t *b, int len)
{
	struct proto_frame f;

	cr_assert_gt(len, 0);
	cr_assert_eq(proto_frame_decode(b, (size_t)len, &f), len);
	return f;
}

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

Test(protocol, header_layout_matches_the_worked_example)
{
	struct proto_writer w;
	static const uint8_t want[] = {
		0x0c, 0x00, 0x00, 0x00, 0x01, 0x01, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00,
		0x01, 0x00, 0x00, 0x00,
	};

	proto_begin(&w, buf, sizeof(buf), PROTO_HELLO, 7);
	proto_put_u32(&w, PROTO_VERSION);
	cr_assert_eq(proto_end(&w), 16);
	cr_assert_arr_eq(buf, want, sizeof(want));
}

Test(protocol, exec_example_of_the_docs_decodes)
{
	static const uint8_t ex[] = {
		0x2e, 0x00, 0x00, 0x00, 0x01, 0x03, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x88, 0x13, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00,
		0x65, 0x63, 0x68, 0x6f, 0x02, 0x00, 0x00, 0x00, 0x68, 0x69, 0x00, 0x00,
		0x00, 0x00,
	};
	struct proto_frame f = decode_ok(ex, sizeof(ex));
	struct proto_exec e;

	cr_assert_eq(f.id, 8);
	cr_assert_eq(proto_exec_decode(&f, &e), 0);
	cr_assert(e.flags == 0 && e.timeout_ms == 5000 && e.cwd[0] == '\0');
	cr_assert(e.argc == 2 && strcmp(e.argv[0], "echo") == 0 && strcmp(e.argv[1], "hi") == 0);
	cr_assert_eq(e.envc, 0);
	proto_exec_free(&e);
}

Test(protocol, empty_frames_round_trip)
{
	static const uint8_t types[] = { PROTO_PING, PROTO_FILE_END, PROTO_SHUTDOWN, PROTO_OK };
	struct proto_writer w;
	struct proto_frame f;

	for (size_t i = 0; i < sizeof(types); i++) {
		proto_begin(&w, buf, sizeof(buf), types[i], 0xdeadbeef);
		f = decode_ok(buf, proto_end(&w));
		cr_assert_eq(f.type, types[i]);
		cr_assert_eq(f.id, 0xdeadbeef);
		cr_assert_eq(f.version, PROTO_VERSION);
		cr_assert_eq(f.flags, 0);
		cr_assert_eq(f.payload_len, 0);
	}
}

Test(protocol, scalar_and_string_frames_round_trip)
{
	struct proto_writer w;
	struct proto_reader r;
	struct proto_frame f;
	uint32_t u32, u32b, u32c;
	uint64_t u64;
	uint16_t rows, cols;
	char s[64];
	const uint8_t *data;
	uint32_t len;

	/* HELLO_OK {u32 version, str agent_version} */
	proto_begin(&w, buf, sizeof(buf), PROTO_HELLO_OK, 1);
	proto_put_u32(&w, 1);
	proto_put_str(&w, "mayfly-agent 0.1.0");
	f = decode_ok(buf, proto_end(&w));
	proto_reader_init(&r, &f);
	cr_assert(proto_get_u32(&r, &u32) && u32 == 1);
	cr_assert(proto_get_str(&r, s, sizeof(s)));
	cr_assert_str_eq(s, "mayfly-agent 0.1.0");
	cr_assert(proto_done(&r));

	/* PONG {u64}, EXEC_STARTED {u32}, SIGNAL {u32} */
	proto_begin(&w, buf, sizeof(buf), PROTO_PONG, 2);
	proto_put_u64(&w, 0x0123456789abcdefull);
	f = decode_ok(buf, proto_end(&w));
	proto_reader_init(&r, &f);
	cr_assert(proto_get_u64(&r, &u64) && u64 == 0x0123456789abcdefull && proto_done(&r));

	/* ERROR {u32 errno, str message} */
	proto_begin(&w, buf, sizeof(buf), PROTO_ERROR, 3);
	proto_put_u32(&w, ENOENT);
	proto_put_str(&w, "");
	f = decode_ok(buf, proto_end(&w));
	proto_reader_init(&r, &f);
	cr_assert(proto_get_u32(&r, &u32) && u32 == ENOENT);
	cr_assert(proto_get_str(&r, s, sizeof(s)) && s[0] == '\0' && proto_done(&r));

	/* RESIZE {u16 rows, u16 cols} */
	proto_begin(&w, buf, sizeof(buf), PROTO_RESIZE, 4);
	proto_put_u16(&w, 50);
	proto_put_u16(&w, 132);
	f = decode_ok(buf, proto_end(&w));
	proto_reader_init(&r, &f);
	cr_assert(proto_get_u16(&r, &rows) && proto_get_u16(&r, &cols) && proto_done(&r));
	cr_assert(rows == 50 && cols == 132);

	/* EXIT {u32 kind, i32 code, u32 signo, u64 duration_us} */
	proto_begin(&w, buf, sizeof(buf), PROTO_EXIT, 5);
	proto_put_u32(&w, PROTO_EXIT_SIGNAL);
	proto_put_u32(&w, (uint32_t)-1);
	proto_put_u32(&w, 15);
	proto_put_u64(&w, 1234567);
	f = decode_ok(buf, proto_end(&w));
	proto_reader_init(&r, &f);
	cr_assert(proto_get_u32(&r, &u32) && u32 == PROTO_EXIT_SIGNAL);
	cr_assert(proto_get_u32(&r, &u32b) && (int32_t)u32b == -1);
	cr_assert(proto_get_u32(&r, &u32c) && u32c == 15);
	cr_assert(proto_get_u64(&r, &u64) && u64 == 1234567 && proto_done(&r));

	/* STDOUT / FILE_DATA {bytes}: binary, NULs allowed in bytes */
	proto_begin(&w, buf, sizeof(buf), PROTO_STDOUT, 6);
	proto_put_bytes(&w, "a\0b", 3);
	f = decode_ok(buf, proto_end(&w));
	proto_reader_init(&r, &f);
	cr_assert(proto_get_bytes(&r, &data, &len) && len == 3 && memcmp(data, "a\0b", 3) == 0);
	cr_assert(proto_done(&r));

	/* FILE_WRITE {str path, u32 mode, u32 flags}, MKDIR, REMOVE alike */
	proto_begin(&w, buf, sizeof(buf), PROTO_FILE_WRITE, 7);
	proto_put_str(&w, "/tmp/x");
	proto_put_u32(&w, 0640);
	proto_put_u32(&w, PROTO_WRITE_CREATE | PROTO_WRITE_TRUNC);
	f = decode_ok(buf, proto_end(&w));
	proto_reader_init(&r, &f);
	cr_assert(proto_get_str(&r, s, sizeof(s)) && strcmp(s, "/tmp/x") == 0);
	cr_assert(proto_get_u32(&r, &u32) && u32 == 0640);
	cr_assert(proto_get_u32(&r, &u32) && u32 == 3 && proto_done(&r));
}

Test(protocol, list_entries_round_trip)
{
	struct proto_writer w;
	struct proto_reader r;
	struct proto_frame f;
	uint32_t more, count, type, mode;
	uint64_t size;
	char name[256];

	proto_begin(&w, buf, sizeof(buf), PROTO_LIST_ENTRIES, 9);
	proto_put_u32(&w, 0);
	proto_put_u32(&w, 2);
	proto_put_str(&w, "a");
	proto_put_u32(&w, PROTO_FT_FILE);
	proto_put_u32(&w, 0644);
	proto_put_u64(&w, 10);
	proto_put_str(&w, "dir");
	proto_put_u32(&w, PROTO_FT_DIR);
	proto_put_u32(&w, 0755);
	proto_put_u64(&w, 4096);
	f = decode_ok(buf, proto_end(&w));
	proto_reader_init(&r, &f);
	cr_assert(proto_get_u32(&r, &more) && more == 0);
	cr_assert(proto_get_u32(&r, &count) && count == 2);
	cr_assert(proto_get_str(&r, name, sizeof(name)) && strcmp(name, "a") == 0);
	cr_assert(proto_get_u32(&r, &type) && type == PROTO_FT_FILE);
	cr_assert(proto_get_u32(&r, &mode) && mode == 0644);
	cr_assert(proto_get_u64(&r, &size) && size == 10);
	cr_assert(proto_get_str(&r, name, sizeof(name)) && strcmp(name, "dir") == 0);
	cr_assert(proto_get_u32(&r, &type) && type == PROTO_FT_DIR);
	cr_assert(proto_get_u32(&r, &mode) && proto_get_u64(&r, &size) && proto_done(&r));
}

Test(protocol, stat_round_trip_and_refusals)
{
	struct proto_stat in = { PROTO_FT_SYMLINK, 0777, 1ull << 40, -5 }, out;
	struct proto_writer w = { .buf = buf, .cap = sizeof(buf) };
	struct proto_frame f;
	int n = proto_stat_encode(&w, 11, &in);

	f = decode_ok(buf, n);
	cr_assert_eq(f.type, PROTO_STAT_RESULT);
	cr_assert_eq(proto_stat_decode(&f, &out), 0);
	cr_assert(out.type == in.type && out.mode == in.mode && out.size == in.size);
	cr_assert_eq(out.mtime_ns, -5);
	f.payload_len--;
	cr_assert_eq(proto_stat_decode(&f, &out), -EPROTO);
	f.payload_len += 2;     /* one trailing byte (buf has room) */
	cr_assert_eq(proto_stat_decode(&f, &out), -EPROTO);
	f.payload_len--;
	f.type = PROTO_STAT;
	cr_assert_eq(proto_stat_decode(&f, &out), -EPROTO);
}

Test(protocol, sysinfo_round_trip_and_figures_that_cannot_be)
{
	const struct proto_sysinfo in = { 2, 30, 100, 1 << 30, 1 << 29, 1 << 20, 1ull << 33, 1 << 30 };
	struct proto_writer w = { .buf = buf, .cap = sizeof(buf) };
	struct proto_sysinfo out, bad[6];
	struct proto_frame f;
	int n = proto_sysinfo_encode(&w, 12, &in);

	f = decode_ok(buf, n);
	cr_assert_eq(f.type, PROTO_SYSINFO_RESULT);
	cr_assert_eq(proto_sysinfo_decode(&f, &out), 0);
	cr_assert(out.cpus == in.cpus && out.cpu_busy == in.cpu_busy &&
		  out.cpu_total == in.cpu_total && out.mem_total == in.mem_total &&
		  out.mem_available == in.mem_available && out.mem_cached == in.mem_cached &&
		  out.disk_total == in.disk_total && out.disk_free == in.disk_free);
	f.payload_len--;
	cr_assert_eq(proto_sysinfo_decode(&f, &out), -EPROTO);
	f.payload_len += 2;
	cr_assert_eq(proto_sysinfo_decode(&f, &out), -EPROTO);
	/* A lying guest: no CPU or too many, a part larger than its whole. */
	for (int i = 0; i < 6; i++)
		bad[i] = in;
	bad[0].cpus = 0;
	bad[1].cpus = PROTO_MAX_CPUS + 1;
	bad[2].cpu_busy = 101;
	bad[3].mem_available = bad[3].mem_total + 1;
	bad[4].mem_cached = bad[4].mem_total + 1;
	bad[5].disk_free = bad[5].disk_total + 1;
	for (int i = 0; i < 6; i++) {
		n = proto_sysinfo_encode(&w, 12, &bad[i]);
		f = decode_ok(buf, n);
		cr_assert_eq(proto_sysinfo_decode(&f, &out), -EPROTO, "case %d", i);
	}
}

/* EXEC with the given argv/env, encoded into buf; returns the frame's length. */
static int exec_frame(uint32_t id, char **argv, uint32_t argc, char **envp, uint32_t envc,
		      const char *cwd)
{
	struct proto_exec e = { .flags = PROTO_EXEC_PTY | PROTO_EXEC_STDIN, .timeout_ms = 1500,
				.rows = 24, .cols = 80, .argc = argc, .envc = envc,
				.argv = argv, .envp = envp };
	struct proto_writer w = { .buf = buf, .cap = sizeof(buf) };

	strcpy(e.cwd, cwd);
	return proto_exec_encode(&w, id, &e);
}

Test(protocol, exec_round_trip)
{
	char *argv[] = { "sh", "-c", "echo hi", "" };
	char *envp[] = { "A=1", "EMPTY=", "X==y" };
	struct proto_exec e;
	struct proto_frame f = decode_ok(buf, exec_frame(42, argv, 4, envp, 3, "/tmp"));

	cr_assert_eq(f.type, PROTO_EXEC);
	cr_assert_eq(f.id, 42);
	cr_assert_eq(proto_exec_decode(&f, &e), 0);
	cr_assert_eq(e.flags, PROTO_EXEC_PTY | PROTO_EXEC_STDIN);
	cr_assert_eq(e.timeout_ms, 1500);
	cr_assert(e.rows == 24 && e.cols == 80);
	cr_assert_str_eq(e.cwd, "/tmp");
	cr_assert_eq(e.argc, 4);
	for (int i = 0; i < 4; i++)
		cr_assert_str_eq(e.argv[i], argv[i]);
	cr_assert_null(e.argv[4]);
	cr_assert_eq(e.envc, 3);
	for (int i = 0; i < 3; i++)
		cr_assert_str_eq(e.envp[i], envp[i]);
	cr_assert_null(e.envp[3]);
	proto_exec_free(&e);
	proto_exec_free(&e);    /* twice is harmless */
}

Test(protocol, exec_refuses_bad_lists)
{
	char *argv[PROTO_MAX_ARGS + 1];
	char *bad_env[][1] = { { "NOEQUALS" }, { "=value" } };
	char *ok_env[] = { "A=1" };
	char *nul_arg[] = { "a" };
	struct proto_exec e;
	struct proto_frame f;

	for (int i = 0; i <= PROTO_MAX_ARGS; i++)
		argv[i] = "x";
	f = decode_ok(buf, exec_frame(1, argv, 0, ok_env, 1, ""));
	cr_assert_eq(proto_exec_decode(&f, &e), -EPROTO, "argc 0");
	cr_assert_null(e.strings);
	f = decode_ok(buf, exec_frame(1, argv, PROTO_MAX_ARGS, argv, 0, ""));
	cr_assert_eq(proto_exec_decode(&f, &e), 0, "argc at the limit");
	proto_exec_free(&e);
	f = decode_ok(buf, exec_frame(1, argv, PROTO_MAX_ARGS + 1, ok_env, 1, ""));
	cr_assert_eq(proto_exec_decode(&f, &e), -EPROTO, "argc over the limit");
	for (int i = 0; i < 2; i++) {
		f = decode_ok(buf, exec_frame(1, argv, 1, bad_env[i], 1, ""));
		cr_assert_eq(proto_exec_decode(&f, &e), -EPROTO, "env %s", bad_env[i][0]);
	}
	/* A NUL inside an argument: patch "a" to "\0" on the wire. */
	f = decode_ok(buf, exec_frame(1, nul_arg, 1, ok_env, 0, ""));
	cr_assert_eq(proto_exec_decode(&f, &e), 0);
	proto_exec_free(&e);
	cr_assert_not_null(memchr(f.payload, 'a', f.payload_len));
	*(uint8_t *)memchr(f.payload, 'a', f.payload_len) = 0;
	cr_assert_eq(proto_exec_decode(&f, &e), -EPROTO, "NUL in argv");
	/* A count that claims more strings than the payload could hold. */
	f = decode_ok(buf, exec_frame(1, argv, 1, ok_env, 0, ""));
	put_le32((uint8_t *)f.payload + 4 + 4 + 2 + 2 + 4, 0x7fffffff);
	cr_assert_eq(proto_exec_decode(&f, &e), -EPROTO, "huge argc");
	/* Not an EXEC frame at all. */
	f = decode_ok(buf, exec_frame(1, argv, 1, ok_env, 0, ""));
	f.type = PROTO_STAT;
	cr_assert_eq(proto_exec_decode(&f, &e), -EPROTO);
}

Test(protocol, exec_refuses_every_truncation_and_trailing_bytes)
{
	char *argv[] = { "ls", "-l" };
	char *envp[] = { "K=V" };
	struct proto_exec e;
	struct proto_frame f = decode_ok(buf, exec_frame(3, argv, 2, envp, 1, "/"));
	uint32_t full = f.payload_len;

	for (uint32_t n = 0; n < full; n++) {
		f.payload_len = n;
		cr_assert_eq(proto_exec_decode(&f, &e), -EPROTO, "payload cut at %u", n);
		cr_assert_null(e.strings);
	}
	f.payload_len = full + 1;
	cr_assert_eq(proto_exec_decode(&f, &e), -EPROTO, "trailing byte");
}

Test(protocol, exec_cwd_at_the_path_limit)
{
	char *argv[] = { "x" };
	char cwd[PROTO_MAX_PATH + 1];
	struct proto_exec e;
	struct proto_frame f;
	struct proto_writer w;
	uint32_t n;

	memset(cwd, 'a', sizeof(cwd) - 1);
	cwd[PROTO_MAX_PATH - 1] = '\0';          /* 4095 bytes: fits */
	f = decode_ok(buf, exec_frame(1, argv, 1, NULL, 0, cwd));
	cr_assert_eq(proto_exec_decode(&f, &e), 0);
	cr_assert_eq(strlen(e.cwd), PROTO_MAX_PATH - 1);
	proto_exec_free(&e);

	/* 4096 bytes: one too many for cwd[PROTO_MAX_PATH] with its NUL. */
	cwd[PROTO_MAX_PATH - 1] = 'a';
	cwd[PROTO_MAX_PATH] = '\0';
	proto_begin(&w, buf, sizeof(buf), PROTO_EXEC, 1);
	proto_put_u32(&w, 0);
	proto_put_u32(&w, 0);
	proto_put_u16(&w, 0);
	proto_put_u16(&w, 0);
	proto_put_str(&w, cwd);
	proto_put_u32(&w, 1);
	proto_put_str(&w, "x");
	proto_put_u32(&w, 0);
	n = (uint32_t)proto_end(&w);
	f = decode_ok(buf, (int)n);
	cr_assert_eq(proto_exec_decode(&f, &e), -EPROTO);
}

/* EXEC of "id" with PROTO_EXEC_ROOT and root, 1000:1001, umask 027 and
 * ngroups groups (10, 11, ...), encoded into buf; the frame's length or the
 * encoder's error. */
static int root_frame(const char *root, uint32_t ngroups)
{
	char *argv[] = { "id" };
	struct proto_exec e = { .flags = PROTO_EXEC_ROOT | PROTO_EXEC_STDIN, .argc = 1,
				.argv = argv, .uid = 1000, .gid = 1001, .umask = 027,
				.ngroups = ngroups };
	struct proto_writer w = { .buf = buf, .cap = sizeof(buf) };

	snprintf(e.root, sizeof(e.root), "%s", root);
	for (uint32_t i = 0; i < ngroups && i < PROTO_MAX_GROUPS; i++)
		e.groups[i] = 10 + i;
	return proto_exec_encode(&w, 9, &e);
}

Test(protocol, exec_root_round_trip)
{
	struct proto_exec e;
	struct proto_frame f = decode_ok(buf, root_frame("/run/mayfly/rootfs", 3));

	cr_assert_eq(proto_exec_decode(&f, &e), 0);
	cr_assert_eq(e.flags, PROTO_EXEC_ROOT | PROTO_EXEC_STDIN);
	cr_assert_str_eq(e.argv[0], "id");
	cr_assert_str_eq(e.root, "/run/mayfly/rootfs");
	cr_assert(e.uid == 1000 && e.gid == 1001 && e.umask == 027);
	cr_assert_eq(e.ngroups, 3);
	cr_assert(e.groups[0] == 10 && e.groups[1] == 11 && e.groups[2] == 12);
	proto_exec_free(&e);
	/* "/" itself, no groups, and every group the limit allows. */
	f = decode_ok(buf, root_frame("/", 0));
	cr_assert_eq(proto_exec_decode(&f, &e), 0);
	cr_assert(!strcmp(e.root, "/") && e.ngroups == 0);
	proto_exec_free(&e);
	f = decode_ok(buf, root_frame("/a", PROTO_MAX_GROUPS));
	cr_assert_eq(proto_exec_decode(&f, &e), 0);
	cr_assert_eq(e.groups[PROTO_MAX_GROUPS - 1], 10 + PROTO_MAX_GROUPS - 1);
	proto_exec_free(&e);
	/* Without the bit, nothing of it is on the wire, and the decoder says so. */
	f = decode_ok(buf, exec_frame(1, (char *[]){ "id" }, 1, NULL, 0, ""));
	cr_assert_eq(proto_exec_decode(&f, &e), 0);
	cr_assert(e.root[0] == '\0' && e.uid == 0 && e.ngroups == 0);
	proto_exec_free(&e);
}

Test(protocol, canonical_paths)
{
	static const char *const good[] = { "/", "/a", "/run/mayfly/rootfs", "/a/.b/..c/b..", "/ /x" };
	static const char *const bad[] = { "", "a", "a/b", "./a", "//", "/a/", "/a//b", "/.", "/..",
					   "/a/.", "/a/../b", "/a/./b", "/../a" };
	char longest[PROTO_MAX_PATH + 1];

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		cr_assert(proto_path_canonical(good[i]), "%s", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_not(proto_path_canonical(bad[i]), "'%s'", bad[i]);
	memset(longest, 'a', sizeof(longest));
	longest[0] = '/';
	longest[PROTO_MAX_PATH - 1] = '\0';
	cr_assert(proto_path_canonical(longest), "4095 bytes");
	longest[PROTO_MAX_PATH - 1] = 'a';
	longest[PROTO_MAX_PATH] = '\0';
	cr_assert_not(proto_path_canonical(longest), "4096 bytes");
}

/* A ROOT frame's fields, each of which a test may get wrong. */
struct raw_root {
	bool no_flag;                /* the fields, but not PROTO_EXEC_ROOT */
	const char *root;
	uint32_t uid, gid, umask;
	uint32_t ngroups;            /* the count on the wire */
	uint32_t given;              /* the groups that follow it: 10, 11, ... */
	uint32_t minus_one_at;       /* 1-based: this group is (uint32_t)-1; 0: none */
};

/* EXEC of "id" with r's root fields, written field by field into buf. */
static struct proto_frame root_frame_raw(struct raw_root r)
{
	struct proto_writer w;

	proto_begin(&w, buf, sizeof(buf), PROTO_EXEC, 1);
	proto_put_u32(&w, r.no_flag ? 0 : PROTO_EXEC_ROOT);
	proto_put_u32(&w, 0);
	proto_put_u16(&w, 0);
	proto_put_u16(&w, 0);
	proto_put_str(&w, "");
	proto_put_u32(&w, 1);
	proto_put_str(&w, "id");
	proto_put_u32(&w, 0);
	proto_put_str(&w, r.root);
	proto_put_u32(&w, r.uid);
	proto_put_u32(&w, r.gid);
	proto_put_u32(&w, r.umask);
	proto_put_u32(&w, r.ngroups);
	for (uint32_t i = 0; i < r.given; i++)
		proto_put_u32(&w, i + 1 == r.minus_one_at ? UINT32_MAX : 10 + i);
	return decode_ok(buf, proto_end(&w));
}

#define REFUSED(why, ...) do { \
		struct proto_frame rf_ = root_frame_raw((struct raw_root){ __VA_ARGS__ }); \
		cr_assert_eq(proto_exec_decode(&rf_, &e), -EPROTO, why); \
		cr_assert_null(e.strings); \
		cr_assert_eq(e.root[0], '\0'); \
	} while (0)

Test(protocol, exec_root_refuses_each_bad_field)
{
	const uint32_t M = UINT32_MAX;
	static const char *const bad_roots[] = { "", "relative", "/a/../b", "/a/", "//" };
	struct proto_exec e;
	struct proto_frame f;
	/* "/r" (4 + 2 bytes), uid, gid, umask, ngroups, two groups */
	const uint32_t fields = 4 + 2 + 4 * 4 + 2 * 4;
	uint32_t full;

	f = root_frame_raw((struct raw_root){ .root = "/r", .umask = 022, .ngroups = 2, .given = 2 });
	cr_assert_eq(proto_exec_decode(&f, &e), 0, "the well-formed one");
	proto_exec_free(&e);
	full = f.payload_len;
	for (uint32_t n = full - fields; n < full; n++) {
		f.payload_len = n;
		cr_assert_eq(proto_exec_decode(&f, &e), -EPROTO, "root fields cut at %u", n);
	}
	f.payload_len = full + 1;
	cr_assert_eq(proto_exec_decode(&f, &e), -EPROTO, "a trailing byte");
	REFUSED("root fields without the bit", .no_flag = true, .root = "/r");
	for (size_t i = 0; i < sizeof(bad_roots) / sizeof(bad_roots[0]); i++)
		REFUSED("a bad root", .root = bad_roots[i]);
	f = root_frame_raw((struct raw_root){ .root = "/run/Xmayfly" });
	*(uint8_t *)memchr(f.payload, 'X', f.payload_len) = 0;
	cr_assert_eq(proto_exec_decode(&f, &e), -EPROTO, "a NUL in root");
	REFUSED("uid -1", .root = "/r", .uid = M);
	REFUSED("gid -1", .root = "/r", .gid = M);
	REFUSED("umask 01000", .root = "/r", .umask = 01000);
	REFUSED("a group -1", .root = "/r", .ngroups = 6, .given = 6, .minus_one_at = 6);
	REFUSED("65 groups", .root = "/r", .ngroups = PROTO_MAX_GROUPS + 1,
		.given = PROTO_MAX_GROUPS + 1);
	REFUSED("fewer groups than counted", .root = "/r", .ngroups = 3, .given = 2);
	REFUSED("a huge group count", .root = "/r", .ngroups = M);
}

Test(protocol, exec_root_encoder_refuses_what_the_decoder_would)
{
	cr_assert_eq(root_frame("relative", 0), -EINVAL);
	cr_assert_eq(root_frame("/a/..", 0), -EINVAL);
	cr_assert_eq(root_frame("/a", PROTO_MAX_GROUPS + 1), -EINVAL);
	cr_assert_gt(root_frame("/a", PROTO_MAX_GROUPS), 0);
}

Test(protocol, decode_needs_the_whole_frame_at_every_cut)
{
	struct proto_writer w;
	struct proto_frame f;
	int n;

	proto_begin(&w, buf, sizeof(buf), PROTO_STDERR, 77);
	proto_put_bytes(&w, "0123456789", 10);
	n = proto_end(&w);
	for (int cut = 0; cut < n; cut++)
		cr_assert_eq(proto_frame_decode(buf, (size_t)cut, &f), 0, "cut at %d", cut);
	cr_assert_eq(proto_frame_decode(buf, (size_t)n, &f), n);
	/* Bytes after the frame belong to the next one. */
	cr_assert_eq(proto_frame_decode(buf, (size_t)n + 5, &f), n);
}

Test(protocol, length_limits)
{
	static uint8_t big[FRAME_MAX + 8], src[PROTO_MAX_PAYLOAD];
	struct proto_frame f;
	struct proto_writer w;

	/* Below the header: refused as soon as the length is in. */
	for (uint32_t len = 0; len < PROTO_HEADER_LEN - 4; len++) {
		put_le32(big, len);
		cr_assert_eq(proto_frame_decode(big, 4, &f), -EPROTO, "length %u", len);
	}
	put_le32(big, PROTO_HEADER_LEN - 4 + PROTO_MAX_PAYLOAD + 1);
	cr_assert_eq(proto_frame_decode(big, 4, &f), -EPROTO);
	put_le32(big, UINT32_MAX);
	cr_assert_eq(proto_frame_decode(big, 4, &f), -EPROTO);
	cr_assert_eq(proto_frame_decode(big, 3, &f), 0);

	/* Exactly PROTO_MAX_PAYLOAD: fine both ways. */
	proto_begin(&w, big, sizeof(big), PROTO_FILE_DATA, 1);
	proto_put_bytes(&w, src, PROTO_MAX_PAYLOAD - 4);
	cr_assert_eq(proto_end(&w), FRAME_MAX);
	f = decode_ok(big, FRAME_MAX);
	cr_assert_eq(f.payload_len, PROTO_MAX_PAYLOAD);
	cr_assert_eq(proto_frame_decode(big, FRAME_MAX - 1, &f), 0);

	/* One byte over: the writer refuses, whatever its buffer. */
	proto_begin(&w, big, sizeof(big), PROTO_FILE_DATA, 1);
	proto_put_bytes(&w, src, PROTO_MAX_PAYLOAD - 3);
	cr_assert(w.error);
	cr_assert_eq(proto_end(&w), -EMSGSIZE);
}

Test(protocol, writer_is_bounded_by_its_buffer)
{
	uint8_t small[PROTO_HEADER_LEN + 6];
	struct proto_writer w;

	proto_begin(&w, small, 4, PROTO_PING, 1);
	cr_assert(w.error);
	cr_assert_eq(proto_end(&w), -EMSGSIZE);

	proto_begin(&w, small, sizeof(small), PROTO_STDOUT, 1);
	proto_put_u32(&w, 1);
	proto_put_u32(&w, 2);          /* 8 > 6: error, nothing written */
	cr_assert(w.error);
	cr_assert_eq(w.len, PROTO_HEADER_LEN + 4);
	proto_put_u16(&w, 3);          /* fits, but the writer is poisoned */
	cr_assert_eq(w.len, PROTO_HEADER_LEN + 4);
	cr_assert_eq(proto_end(&w), -EMSGSIZE);

	proto_begin(&w, small, sizeof(small), PROTO_STDOUT, 1);
	proto_put_bytes(&w, NULL, 3);  /* no data for a length: refused */
	cr_assert(w.error);
	proto_begin(&w, buf, sizeof(buf), PROTO_STDOUT, 1);
	proto_put_bytes(&w, NULL, 0);
	proto_put_str(&w, NULL);
	cr_assert_eq(proto_end(&w), PROTO_HEADER_LEN + 8);
}

Test(protocol, wrong_version_is_reported_with_the_frame)
{
	struct proto_writer w;
	struct proto_frame f;
	int n;

	proto_begin(&w, buf, sizeof(buf), PROTO_HELLO, 99);
	proto_put_u32(&w, 2);
	n = proto_end(&w);
	buf[4] = 2;
	cr_assert_eq(proto_frame_decode(buf, (size_t)n, &f), -EPROTONOSUPPORT);
	cr_assert_eq(f.id, 99);
	cr_assert_eq(f.version, 2);
	cr_assert_eq(proto_frame_decode(buf, (size_t)n - 1, &f), 0);
	buf[4] = 0;
	cr_assert_eq(proto_frame_decode(buf, (size_t)n, &f), -EPROTONOSUPPORT);
}

Test(protocol, reader_refuses_short_fields_trailing_bytes_and_bad_strings)
{
	struct proto_frame f = { .type = PROTO_STDIN };
	struct proto_reader r;
	uint8_t p[16];
	const uint8_t *data;
	uint32_t len, u32;
	uint64_t u64;
	char s[4];

	/* A string longer than what is left. */
	put_le32(p, 100);
	f.payload = p;
	f.payload_len = 8;
	proto_reader_init(&r, &f);
	cr_assert_not(proto_get_bytes(&r, &data, &len));
	cr_assert(r.error);
	cr_assert_not(proto_done(&r));
	/* A length that would wrap a 32-bit position. */
	put_le32(p, UINT32_MAX);
	proto_reader_init(&r, &f);
	cr_assert_not(proto_get_bytes(&r, &data, &len));
	/* Strings: cap - 1 characters fit, cap do not, a NUL never. */
	put_le32(p, 3);
	memcpy(p + 4, "abc", 3);
	f.payload_len = 7;
	proto_reader_init(&r, &f);
	cr_assert(proto_get_str(&r, s, 4) && strcmp(s, "abc") == 0 && proto_done(&r));
	proto_reader_init(&r, &f);
	cr_assert_not(proto_get_str(&r, s, 3));
	proto_reader_init(&r, &f);
	cr_assert_not(proto_get_str(&r, s, 0));
	p[5] = 0;
	proto_reader_init(&r, &f);
	cr_assert_not(proto_get_str(&r, s, 4));
	/* Trailing bytes. */
	f.payload_len = 8;
	proto_reader_init(&r, &f);
	cr_assert(proto_get_u32(&r, &u32));
	cr_assert(proto_get_u32(&r, &u32));
	cr_assert(proto_done(&r));
	proto_reader_init(&r, &f);
	cr_assert(proto_get_u32(&r, &u32));
	cr_assert_not(proto_done(&r));
	/* Short scalars; after an error everything fails. */
	f.payload_len = 7;
	proto_reader_init(&r, &f);
	cr_assert_not(proto_get_u64(&r, &u64));
	cr_assert_not(proto_get_u32(&r, &u32));
	cr_assert_not(proto_done(&r));
}

Test(protocol, type_names)
{
	cr_assert_str_eq(proto_type_name(PROTO_EXEC), "EXEC");
	cr_assert_str_eq(proto_type_name(PROTO_LIST_ENTRIES), "LIST_ENTRIES");
	cr_assert_str_eq(proto_type_name(0), "unknown");
	cr_assert_str_eq(proto_type_name(PROTO_FRESHEN), "FRESHEN");
	cr_assert_str_eq(proto_type_name(PROTO_NET), "NET");
	cr_assert_str_eq(proto_type_name(PROTO_RENAME), "RENAME");
	cr_assert_str_eq(proto_type_name(PROTO_PORT), "PORT");
	cr_assert_str_eq(proto_type_name(PROTO_WATCH), "WATCH");
	cr_assert_str_eq(proto_type_name(PROTO_WATCH_EVENT), "WATCH_EVENT");
	cr_assert_str_eq(proto_type_name(PROTO_SYSINFO), "SYSINFO");
	cr_assert_str_eq(proto_type_name(PROTO_SYSINFO_RESULT), "SYSINFO_RESULT");
	cr_assert_str_eq(proto_type_name(23), "unknown");
	cr_assert_str_eq(proto_type_name(76), "unknown");
	cr_assert_str_eq(proto_type_name(255), "unknown");
}

/* Decode everything a receiver might decode from `len` bytes at p. */
static void decode_everything(const uint8_t *p, size_t len)
{
	struct proto_frame f;
	struct proto_exec e;
	struct proto_stat st;
	struct proto_sysinfo si;
	struct proto_reader r;
	const uint8_t *data;
	uint32_t n, u32;
	char s[64];
	int rc = proto_frame_decode(p, len, &f);

	if (rc > 0) {
		cr_assert_leq((size_t)rc, len);
		cr_assert_leq(f.payload_len, PROTO_MAX_PAYLOAD);
		cr_assert_eq((size_t)rc, PROTO_HEADER_LEN + (size_t)f.payload_len);
	} else if (rc == 0 || rc == -EPROTO) {
		return;
	} else {
		cr_assert_eq(rc, -EPROTONOSUPPORT);
	}
	f.type = PROTO_EXEC;
	if (proto_exec_decode(&f, &e) == 0) {
		cr_assert_geq(e.argc, 1);
		cr_assert_null(e.argv[e.argc]);
		cr_assert_null(e.envp[e.envc]);
		for (uint32_t i = 0; i < e.envc; i++)
			cr_assert(strchr(e.envp[i], '=') > e.envp[i]);
		if (e.flags & PROTO_EXEC_ROOT)
			cr_assert(proto_exec_root_valid(&e));
		proto_exec_free(&e);
	}
	f.type = PROTO_STAT_RESULT;
	proto_stat_decode(&f, &st);
	f.type = PROTO_SYSINFO_RESULT;
	if (proto_sysinfo_decode(&f, &si) == 0)
		cr_assert(si.cpus >= 1 && si.cpu_busy <= si.cpu_total &&
			  si.mem_available <= si.mem_total && si.disk_free <= si.disk_total);
	proto_reader_init(&r, &f);
	while (proto_get_str(&r, s, sizeof(s)) || proto_get_u32(&r, &u32) ||
	       proto_get_bytes(&r, &data, &n))
		cr_assert_leq(r.pos, r.len);
}

Test(protocol, random_garbage_never_crashes)
{
	static uint8_t g[4096];
	unsigned seed = 12345;

	for (int iter = 0; iter < 20000; iter++) {
		size_t len = (size_t)rand_r(&seed) % sizeof(g);

		for (size_t i = 0; i < len; i++)
			g[i] = (uint8_t)rand_r(&seed);
		/* Often a plausible header, so the payload decoders get exercised. */
		if (len >= PROTO_HEADER_LEN && iter % 2) {
			put_le32(g, (uint32_t)(len - 4 - (size_t)rand_r(&seed) % 3));
			g[4] = PROTO_VERSION;
		}
		decode_everything(g, len);
	}
}

Test(protocol, mutated_exec_frames_never_crash)
{
	char *argv[] = { "sh", "-c", "echo hi" };
	char *envp[] = { "PATH=/bin", "A=b" };
	static uint8_t m[1024];
	unsigned seed = 777;
	int n = exec_frame(5, argv, 3, envp, 2, "/root");

	cr_assert_gt(n, 0);
	cr_assert_lt((size_t)n, sizeof(m));
	for (int iter = 0; iter < 40000; iter++) {
		/* The second half mutates a frame with PROTO_EXEC_ROOT's fields. */
		if (iter == 20000) {
			n = root_frame("/run/mayfly/rootfs", 4);
			cr_assert_gt(n, 0);
		}
		memcpy(m, buf, (size_t)n);
		for (int k = 1 + rand_r(&seed) % 4; k > 0; k--) {
			size_t at = PROTO_HEADER_LEN + (size_t)rand_r(&seed) % (size_t)(n - PROTO_HEADER_LEN);

			m[at] = (uint8_t)(rand_r(&seed) % 3 ? rand_r(&seed) : 0xff);
		}
		decode_everything(m, (size_t)n);
	}
}
