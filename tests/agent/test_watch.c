/* test_watch.c - mayfly-agent's WATCH: a connection handed to a watcher that reports a directory's creates, writes, renames, removes and mode changes, a new subdirectory followed at once (recursive), never the temporary files of its own REPLACE writes; refusals and the watch's end. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client.h"

static struct client c;
static char dir[128];

static void setup(void)
{
	client_start_unix(&c);
	snprintf(dir, sizeof(dir), "%s/w", c.dir);
	cr_assert_eq(mkdir(dir, 0700), 0);
}

static void teardown(void)
{
	client_stop(&c);
}

TestSuite(watch, .init = setup, .fini = teardown, .timeout = 30);

/* WATCH on a connection of its own, made the client's. */
static void watch(uint32_t id, const char *path, uint32_t recursive)
{
	struct proto_writer *w;

	c.fd = client_connect(&c, true);
	c.off = c.len = 0;
	w = client_begin(PROTO_WATCH, id);
	proto_put_str(w, path);
	proto_put_u32(w, recursive);
	client_send(&c, w);
}

/* The next WATCH_EVENT, as "kind name". */
static void next_event(uint32_t id, char *out, size_t cap)
{
	struct proto_reader r;
	char name[PROTO_MAX_PATH];
	uint32_t kind;

	client_expect(&c, PROTO_WATCH_EVENT, id);
	proto_reader_init(&r, &c.f);
	cr_assert(proto_get_u32(&r, &kind) && proto_get_str(&r, name, sizeof(name)) &&
		  proto_done(&r), "a malformed WATCH_EVENT");
	snprintf(out, cap, "%u %s", kind, name);
}

/* The next event other than a repeat of the one before (a truncate and a
 * write are two WRITEs, say): kind name. */
static void expect_event(uint32_t id, unsigned kind, const char *name)
{
	static char last[PROTO_MAX_PATH + 16];
	char got[PROTO_MAX_PATH + 16], want[PROTO_MAX_PATH + 16];

	snprintf(want, sizeof(want), "%u %s", kind, name);
	do
		next_event(id, got, sizeof(got));
	while (!strcmp(got, last) && strcmp(got, want));
	cr_assert_str_eq(got, want);
	snprintf(last, sizeof(last), "%s", got);
}

static void touch(const char *rel, const char *text)
{
	char p[256];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	cr_assert_geq(fd, 0, "%s: %s", p, strerror(errno));
	if (text)
		cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

Test(watch, reports_each_change_by_its_relative_name_and_follows_new_directories)
{
	char p[256], q[256];

	watch(4, dir, 1);
	client_expect(&c, PROTO_OK, 4);
	touch("a", NULL);
	expect_event(4, PROTO_WATCH_CREATE, "a");
	touch("a", "x");
	expect_event(4, PROTO_WATCH_WRITE, "a");
	snprintf(p, sizeof(p), "%s/sub", dir);
	cr_assert_eq(mkdir(p, 0700), 0);
	/* Seen created, so already followed: a file in it at once is seen. */
	expect_event(4, PROTO_WATCH_CREATE, "sub");
	touch("sub/b", NULL);
	expect_event(4, PROTO_WATCH_CREATE, "sub/b");
	snprintf(p, sizeof(p), "%s/a", dir);
	cr_assert_eq(chmod(p, 0644), 0);
	expect_event(4, PROTO_WATCH_CHMOD, "a");
	snprintf(q, sizeof(q), "%s/sub/c", dir);
	cr_assert_eq(rename(p, q), 0);
	expect_event(4, PROTO_WATCH_RENAME, "a");
	expect_event(4, PROTO_WATCH_CREATE, "sub/c");
	cr_assert_eq(unlink(q), 0);
	expect_event(4, PROTO_WATCH_REMOVE, "sub/c");
}

Test(watch, a_replace_writes_temporary_is_not_reported_its_arrival_is)
{
	char tmp[256], p[256];

	watch(2, dir, 0);
	client_expect(&c, PROTO_OK, 2);
	/* As FILE_WRITE with REPLACE makes it: beside, then renamed over. */
	snprintf(tmp, sizeof(tmp), "%s/.f" ".mayfly-AbC123", dir);
	snprintf(p, sizeof(p), "%s/f", dir);
	touch(".f.mayfly-AbC123", "data");
	cr_assert_eq(rename(tmp, p), 0);
	expect_event(2, PROTO_WATCH_CREATE, "f");
}

Test(watch, not_recursive_a_subdirectorys_files_are_not_reported)
{
	char p[256];

	snprintf(p, sizeof(p), "%s/sub", dir);
	cr_assert_eq(mkdir(p, 0700), 0);
	watch(3, dir, 0);
	client_expect(&c, PROTO_OK, 3);
	touch("sub/x", NULL);
	touch("y", NULL);
	expect_event(3, PROTO_WATCH_CREATE, "y");   /* and nothing of sub/x before it */
}

Test(watch, a_symbolic_link_to_a_directory_is_watched_as_it)
{
	char link[256];

	snprintf(link, sizeof(link), "%s/link", c.dir);
	cr_assert_eq(symlink(dir, link), 0);
	watch(7, link, 1);
	client_expect(&c, PROTO_OK, 7);
	touch("through", NULL);
	expect_event(7, PROTO_WATCH_CREATE, "through");
}

Test(watch, the_watched_directory_removed_ends_the_watch_with_enoent)
{
	watch(5, dir, 0);
	client_expect(&c, PROTO_OK, 5);
	cr_assert_eq(rmdir(dir), 0);
	client_expect_error(&c, 5, ENOENT);
	cr_assert(client_sees_eof(&c, 5000));
}

Test(watch, refusals_a_missing_path_a_file_a_relative_path_and_a_bad_flag)
{
	struct proto_writer *w;
	char p[256];

	snprintf(p, sizeof(p), "%s/none", dir);
	watch(1, p, 0);
	client_expect_error(&c, 1, ENOENT);
	touch("file", NULL);
	snprintf(p, sizeof(p), "%s/file", dir);
	w = client_begin(PROTO_WATCH, 2);
	proto_put_str(w, p);
	proto_put_u32(w, 0);
	client_send(&c, w);
	client_expect_error(&c, 2, ENOTDIR);
	w = client_begin(PROTO_WATCH, 3);
	proto_put_str(w, "relative/dir");
	proto_put_u32(w, 0);
	client_send(&c, w);
	client_expect_error(&c, 3, EINVAL);
	/* recursive is 0 or 1: anything else is a malformed frame. */
	w = client_begin(PROTO_WATCH, 4);
	proto_put_str(w, dir);
	proto_put_u32(w, 7);
	client_send(&c, w);
	client_expect_error(&c, 4, EPROTO);
	cr_assert(client_sees_eof(&c, 5000));
}

Test(watch, the_hosts_close_ends_the_watcher)
{
	char path[64], buf[4096];
	int before, after = -1;
	FILE *f;

	watch(6, dir, 0);
	client_expect(&c, PROTO_OK, 6);
	/* The watcher is a child of the agent: it goes with the connection. */
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", c.agent, c.agent);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	before = fgets(buf, sizeof(buf), f) ? (int)strlen(buf) : 0;
	fclose(f);
	cr_assert_gt(before, 0, "no watcher child");
	close(c.fd);
	c.fd = -1;
	for (int i = 0; i < 100 && after != 0; i++) {
		usleep(50000);
		f = fopen(path, "r");
		cr_assert_not_null(f);
		after = fgets(buf, sizeof(buf), f) ? (int)strlen(buf) : 0;
		fclose(f);
	}
	cr_assert_eq(after, 0, "the watcher outlived its connection");
}
