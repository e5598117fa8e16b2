/* test_files.c - mayfly-agent's file requests: write and read back, modes, STAT, LIST, MKDIR -p, REMOVE -r, errors. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client.h"
#include "dir_count.h"

static struct client c;

static void setup(void)
{
	client_start(&c);
}

static void teardown(void)
{
	client_stop(&c);
}

TestSuite(files, .init = setup, .fini = teardown, .timeout = 30);

/* c.dir + "/" + name (a few results stay valid at once). */
static const char *at(const char *name)
{
	static char paths[4][256];
	static int next;
	char *p = paths[next++ % 4];

	snprintf(p, sizeof(paths[0]), "%s/%s", c.dir, name);
	return p;
}

static void send_path(uint8_t type, uint32_t id, const char *path)
{
	struct proto_writer *w = client_begin(type, id);

	proto_put_str(w, path);
	client_send(&c, w);
}

/* {str path, u32 a[, u32 b]}: FILE_WRITE, MKDIR, REMOVE */
static void send_path_u32s(uint8_t type, uint32_t id, const char *path, uint32_t a,
			   uint32_t b, bool two)
{
	struct proto_writer *w = client_begin(type, id);

	proto_put_str(w, path);
	proto_put_u32(w, a);
	if (two)
		proto_put_u32(w, b);
	client_send(&c, w);
}

static void send_data(uint8_t type, uint32_t id, const uint8_t *data, size_t len)
{
	struct proto_writer *w = client_begin(type, id);

	proto_put_bytes(w, data, (uint32_t)len);
	client_send(&c, w);
}

/* FILE_WRITE, the data in chunks, FILE_END: both answered OK. */
static void write_file(uint32_t id, const char *path, uint32_t mode, uint32_t flags,
		       const uint8_t *data, size_t len)
{
	send_path_u32s(PROTO_FILE_WRITE, id, path, mode, flags, true);
	client_expect(&c, PROTO_OK, id);
	for (size_t off = 0; off < len; off += PROTO_CHUNK)
		send_data(PROTO_FILE_DATA, id, data + off,
			  len - off < PROTO_CHUNK ? len - off : PROTO_CHUNK);
	client_send(&c, client_begin(PROTO_FILE_END, id));
	client_expect(&c, PROTO_OK, id);
}

/* FILE_READ: the FILE_DATA chunks, then FILE_END. Returns a malloc'd copy. */
static uint8_t *read_file(uint32_t id, const char *path, size_t *len)
{
	char *data = NULL;
	struct proto_reader r;
	const uint8_t *p;
	size_t cap = 0;
	uint32_t n;

	*len = 0;
	send_path(PROTO_FILE_READ, id, path);
	for (;;) {
		cr_assert_eq(client_recv(&c, 5000), 1);
		cr_assert_eq(c.f.id, id);
		if (c.f.type == PROTO_FILE_END)
			break;
		cr_assert_eq(c.f.type, PROTO_FILE_DATA, "got %s", proto_type_name(c.f.type));
		proto_reader_init(&r, &c.f);
		cr_assert(proto_get_bytes(&r, &p, &n) && proto_done(&r));
		cr_assert_leq(n, PROTO_CHUNK);
		client_append(&data, len, &cap, p, n);
	}
	cr_assert_eq(c.f.payload_len, 0);
	return (uint8_t *)data;
}

static struct proto_stat stat_path(uint32_t id, const char *path)
{
	struct proto_stat st;

	send_path(PROTO_STAT, id, path);
	client_expect(&c, PROTO_STAT_RESULT, id);
	cr_assert_eq(proto_stat_decode(&c.f, &st), 0);
	return st;
}

Test(files, sysinfo_reports_the_machines_figures_and_refuses_a_missing_path)
{
	struct proto_sysinfo si;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	send_path(PROTO_SYSINFO, 5, "/");
	client_expect(&c, PROTO_SYSINFO_RESULT, 5);
	cr_assert_eq(proto_sysinfo_decode(&c.f, &si), 0);
	cr_assert_eq((long)si.cpus, cpus);
	cr_assert_gt(si.cpu_total, 0);
	cr_assert_gt(si.mem_total, 16u << 20, "MemTotal in bytes");
	cr_assert_gt(si.mem_available, 0);
	cr_assert_gt(si.disk_total, 0);
	send_path(PROTO_SYSINFO, 6, "/no/such/dir");
	client_expect(&c, PROTO_ERROR, 6);
}

Test(files, binary_write_then_read_back)
{
	size_t len = (1 << 20) + 12345, got_len;
	uint8_t *data = malloc(len), *got;
	unsigned seed = 42;
	struct proto_stat st;

	for (size_t i = 0; i < len; i++)
		data[i] = (uint8_t)rand_r(&seed);
	data[7] = 0;
	write_file(1, at("blob"), 0640, PROTO_WRITE_CREATE | PROTO_WRITE_TRUNC, data, len);
	st = stat_path(2, at("blob"));
	cr_assert_eq(st.type, PROTO_FT_FILE);
	cr_assert_eq(st.mode, 0640, "mode %o", st.mode);
	cr_assert_eq(st.size, len);
	cr_assert_gt(st.mtime_ns, 0);
	got = read_file(3, at("blob"), &got_len);
	cr_assert_eq(got_len, len);
	cr_assert(memcmp(got, data, len) == 0);
	free(got);

	/* Truncate and append. */
	write_file(4, at("blob"), 0600, PROTO_WRITE_TRUNC, (const uint8_t *)"one", 3);
	write_file(5, at("blob"), 0600, PROTO_WRITE_APPEND, (const uint8_t *)"two", 3);
	got = read_file(6, at("blob"), &got_len);
	cr_assert(got_len == 6 && memcmp(got, "onetwo", 6) == 0);
	cr_assert_eq(stat_path(7, at("blob")).mode, 0640, "mode is set at creation only");
	free(got);
	free(data);

	/* An empty file reads as FILE_END alone. */
	write_file(8, at("empty"), 0755, PROTO_WRITE_CREATE, NULL, 0);
	cr_assert_eq(stat_path(9, at("empty")).mode, 0755);
	got = read_file(10, at("empty"), &got_len);
	cr_assert_eq(got_len, 0);
	free(got);
}

Test(files, a_replacing_write_is_whole_or_nothing)
{
	uint8_t *got;
	size_t got_len;

	write_file(1, at("doc"), 0644, PROTO_WRITE_CREATE | PROTO_WRITE_TRUNC,
		   (const uint8_t *)"old", 3);
	/* Committed: the new content, exactly the mode asked for. */
	write_file(2, at("doc"), 0600, PROTO_WRITE_REPLACE, (const uint8_t *)"brand new", 9);
	got = read_file(3, at("doc"), &got_len);
	cr_assert(got_len == 9 && memcmp(got, "brand new", 9) == 0);
	free(got);
	cr_assert_eq(stat_path(4, at("doc")).mode, 0600);
	cr_assert_eq(dir_count(c.dir, ".doc.mayfly-"), 0, "a committed write left its temporary file");
	/* Under way: the old file is whole beside the temporary one. */
	send_path_u32s(PROTO_FILE_WRITE, 5, at("doc"), 0644, PROTO_WRITE_REPLACE, true);
	client_expect(&c, PROTO_OK, 5);
	send_data(PROTO_FILE_DATA, 5, (const uint8_t *)"torn", 4);
	got = read_file(6, at("doc"), &got_len);
	cr_assert(got_len == 9 && memcmp(got, "brand new", 9) == 0);
	free(got);
	cr_assert_eq(dir_count(c.dir, ".doc.mayfly-"), 1);
	/* The host goes before FILE_END: the old file stays, nothing is left. */
	close(c.fd);
	c.fd = -1;
	for (int i = 0; i < 500 && dir_count(c.dir, ".doc.mayfly-") != 0; i++)
		usleep(10000);
	cr_assert_eq(dir_count(c.dir, ".doc.mayfly-"), 0, "an abandoned write left its temporary file");
	cr_assert_eq(dir_count(c.dir, "doc"), 1);
}

Test(files, write_errors)
{
	/* No CREATE flag and no file. */
	send_path_u32s(PROTO_FILE_WRITE, 1, at("missing"), 0644, 0, true);
	client_expect_error(&c, 1, ENOENT);
	/* Into a directory that is not there. */
	send_path_u32s(PROTO_FILE_WRITE, 2, at("no/such/file"), 0644, PROTO_WRITE_CREATE, true);
	client_expect_error(&c, 2, ENOENT);
	/* Not a regular file: a FIFO must not block the agent. */
	cr_assert_eq(mkfifo(at("fifo"), 0644), 0);
	send_path_u32s(PROTO_FILE_WRITE, 3, at("fifo"), 0644, 0, true);
	client_expect(&c, PROTO_ERROR, 3);
	send_path(PROTO_FILE_READ, 4, at("fifo"));
	client_expect_error(&c, 4, EINVAL);
	/* Data or end with no write open. */
	send_data(PROTO_FILE_DATA, 5, (const uint8_t *)"x", 1);
	client_expect_error(&c, 5, EBADF);
	client_send(&c, client_begin(PROTO_FILE_END, 5));
	client_expect_error(&c, 5, EBADF);
	/* The same id twice. */
	send_path_u32s(PROTO_FILE_WRITE, 6, at("f"), 0644, PROTO_WRITE_CREATE, true);
	client_expect(&c, PROTO_OK, 6);
	send_path_u32s(PROTO_FILE_WRITE, 6, at("g"), 0644, PROTO_WRITE_CREATE, true);
	client_expect_error(&c, 6, EEXIST);
}

Test(files, read_errors)
{
	send_path(PROTO_FILE_READ, 1, at("missing"));
	client_expect_error(&c, 1, ENOENT);
	send_path(PROTO_FILE_READ, 2, c.dir);
	client_expect_error(&c, 2, EISDIR);
	send_path(PROTO_STAT, 3, at("missing"));
	client_expect_error(&c, 3, ENOENT);
	send_path(PROTO_LIST, 4, at("missing"));
	client_expect_error(&c, 4, ENOENT);
}

Test(files, stat_does_not_follow_symlinks)
{
	struct proto_stat st;

	cr_assert_eq(symlink("/etc", at("link")), 0);
	st = stat_path(1, at("link"));
	cr_assert_eq(st.type, PROTO_FT_SYMLINK);
	st = stat_path(2, c.dir);
	cr_assert_eq(st.type, PROTO_FT_DIR);
	cr_assert_eq(st.mode, 0700);
}

Test(files, mkdir_with_and_without_parents)
{
	send_path_u32s(PROTO_MKDIR, 1, at("a/b/c/"), 0700, 1, true);
	client_expect(&c, PROTO_OK, 1);
	cr_assert_eq(stat_path(2, at("a/b/c")).mode, 0700);
	cr_assert_eq(stat_path(3, at("a/b")).mode, 0755);
	send_path_u32s(PROTO_MKDIR, 4, at("a/b/c"), 0700, 1, true);
	client_expect(&c, PROTO_OK, 4);        /* -p: an existing directory is fine */
	send_path_u32s(PROTO_MKDIR, 5, at("a/b/c"), 0700, 0, true);
	client_expect_error(&c, 5, EEXIST);
	send_path_u32s(PROTO_MKDIR, 6, at("x/y"), 0755, 0, true);
	client_expect_error(&c, 6, ENOENT);
	send_path_u32s(PROTO_MKDIR, 7, at("single"), 0751, 0, true);
	client_expect(&c, PROTO_OK, 7);
	cr_assert_eq(stat_path(8, at("single")).mode, 0751);
}

/* LIST path; returns how many entries, checking `want` (name -> type) among them. */
static unsigned list_dir(uint32_t id, const char *path, const char *want, uint32_t want_type,
			 int *frames)
{
	struct proto_reader r;
	uint32_t more = 1, count, type, mode;
	uint64_t size;
	char name[256];
	unsigned total = 0;
	bool found = !want;

	*frames = 0;
	send_path(PROTO_LIST, id, path);
	while (more) {
		client_expect(&c, PROTO_LIST_ENTRIES, id);
		cr_assert_leq(c.f.payload_len, PROTO_MAX_PAYLOAD);
		(*frames)++;
		proto_reader_init(&r, &c.f);
		cr_assert(proto_get_u32(&r, &more) && proto_get_u32(&r, &count));
		for (uint32_t i = 0; i < count; i++) {
			cr_assert(proto_get_str(&r, name, sizeof(name)) && proto_get_u32(&r, &type) &&
				  proto_get_u32(&r, &mode) && proto_get_u64(&r, &size));
			cr_assert(strcmp(name, ".") && strcmp(name, ".."));
			if (want && strcmp(name, want) == 0) {
				cr_assert_eq(type, want_type);
				found = true;
			}
		}
		cr_assert(proto_done(&r));
		total += count;
	}
	cr_assert(found, "%s not listed", want);
	return total;
}

Test(files, list_small_and_large_directories)
{
	char name[300];
	int frames;

	send_path_u32s(PROTO_MKDIR, 1, at("d/sub"), 0755, 1, true);
	client_expect(&c, PROTO_OK, 1);
	write_file(2, at("d/file"), 0644, PROTO_WRITE_CREATE, (const uint8_t *)"hello", 5);
	cr_assert_eq(symlink("file", at("d/link")), 0);
	cr_assert_eq(list_dir(3, at("d"), "sub", PROTO_FT_DIR, &frames), 3);
	cr_assert_eq(list_dir(4, at("d"), "link", PROTO_FT_SYMLINK, &frames), 3);
	cr_assert_eq(list_dir(5, at("d/sub"), NULL, 0, &frames), 0);
	cr_assert_eq(frames, 1);

	/* 800 long names: more than one frame (about 290 fit in one), every entry once. */
	send_path_u32s(PROTO_MKDIR, 6, at("big"), 0755, 0, true);
	client_expect(&c, PROTO_OK, 6);
	for (int i = 0; i < 800; i++) {
		int fd;

		snprintf(name, sizeof(name), "%s/big/%0200d", c.dir, i);
		fd = open(name, O_CREAT | O_WRONLY, 0644);
		cr_assert_geq(fd, 0);
		close(fd);
	}
	cr_assert_eq(list_dir(7, at("big"), NULL, 0, &frames), 800);
	cr_assert_gt(frames, 1);
}

Test(files, remove_plain_and_recursive_without_following_symlinks)
{
	struct stat st;

	/* Outside the tree: must survive the removal of a link to it. */
	send_path_u32s(PROTO_MKDIR, 1, at("outside"), 0755, 0, true);
	client_expect(&c, PROTO_OK, 1);
	write_file(2, at("outside/keep"), 0644, PROTO_WRITE_CREATE, (const uint8_t *)"k", 1);
	send_path_u32s(PROTO_MKDIR, 3, at("tree/a/b"), 0755, 1, true);
	client_expect(&c, PROTO_OK, 3);
	write_file(4, at("tree/a/b/f"), 0644, PROTO_WRITE_CREATE, (const uint8_t *)"x", 1);
	cr_assert_eq(symlink(at("outside"), at("tree/a/escape")), 0);

	/* Without recursion a non-empty directory stays. */
	send_path_u32s(PROTO_REMOVE, 5, at("tree"), 0, 0, false);
	client_expect_error(&c, 5, ENOTEMPTY);
	send_path_u32s(PROTO_REMOVE, 6, at("tree"), 1, 0, false);
	client_expect(&c, PROTO_OK, 6);
	cr_assert_neq(lstat(at("tree"), &st), 0);
	cr_assert_eq(stat(at("outside/keep"), &st), 0, "the symlink was followed");

	/* Plain: a file, an empty directory, a symlink (not its target), a missing path. */
	cr_assert_eq(symlink(at("outside"), at("l")), 0);
	send_path_u32s(PROTO_REMOVE, 7, at("l"), 0, 0, false);
	client_expect(&c, PROTO_OK, 7);
	cr_assert_eq(stat(at("outside/keep"), &st), 0);
	send_path_u32s(PROTO_REMOVE, 8, at("outside/keep"), 0, 0, false);
	client_expect(&c, PROTO_OK, 8);
	send_path_u32s(PROTO_REMOVE, 9, at("outside"), 0, 0, false);
	client_expect(&c, PROTO_OK, 9);
	send_path_u32s(PROTO_REMOVE, 10, at("outside"), 1, 0, false);
	client_expect_error(&c, 10, ENOENT);
}

static void send_rename(uint32_t id, const char *from, const char *to)
{
	struct proto_writer *w = client_begin(PROTO_RENAME, id);
	char f[PROTO_MAX_PATH];

	snprintf(f, sizeof(f), "%s", from);   /* at() reuses one buffer */
	proto_put_str(w, f);
	proto_put_str(w, to);
	client_send(&c, w);
}

/* RENAME: rename(2) itself; a symlink is moved, never followed; errors as
 * they are. */
Test(files, rename_moves_replaces_and_never_follows)
{
	char from[PROTO_MAX_PATH], buf[16];
	struct stat st;
	int fd;

	write_file(1, at("a"), 0644, PROTO_WRITE_CREATE, (const uint8_t *)"alpha", 5);
	snprintf(from, sizeof(from), "%s", at("a"));
	send_rename(2, from, at("b"));
	client_expect(&c, PROTO_OK, 2);
	cr_assert_neq(lstat(at("a"), &st), 0);
	fd = open(at("b"), O_RDONLY);
	cr_assert_eq(read(fd, buf, sizeof(buf)), 5);
	close(fd);
	/* Over an existing file: replaced. */
	write_file(3, at("c"), 0644, PROTO_WRITE_CREATE, (const uint8_t *)"old", 3);
	snprintf(from, sizeof(from), "%s", at("b"));
	send_rename(4, from, at("c"));
	client_expect(&c, PROTO_OK, 4);
	cr_assert_eq(stat(at("c"), &st), 0);
	cr_assert_eq(st.st_size, 5);
	/* A symlink moves as itself. */
	cr_assert_eq(symlink("c", at("l")), 0);
	snprintf(from, sizeof(from), "%s", at("l"));
	send_rename(5, from, at("m"));
	client_expect(&c, PROTO_OK, 5);
	cr_assert_eq(lstat(at("m"), &st), 0);
	cr_assert(S_ISLNK(st.st_mode));
	cr_assert_eq(stat(at("c"), &st), 0, "the target stays");
	/* A missing source; a directory into a file. */
	snprintf(from, sizeof(from), "%s", at("nope"));
	send_rename(6, from, at("x"));
	client_expect_error(&c, 6, ENOENT);
	send_path_u32s(PROTO_MKDIR, 7, at("dir"), 0755, 0, true);
	client_expect(&c, PROTO_OK, 7);
	snprintf(from, sizeof(from), "%s", at("dir"));
	send_rename(8, from, at("c"));
	client_expect_error(&c, 8, ENOTDIR);
}
