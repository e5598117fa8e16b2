/* test_transfer.c - --put, --get and cp against a lying agent: deadlines, a size cap, and the user's file never damaged. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_client/transfer.h"
#include "lib/clock.h"
#include "fake_agent.h"

#define MS 1000000ULL

static struct fake_agent a;
static char dir[] = "/tmp/mayfly-transfer-XXXXXX";
static char why[256];

static void setup(void)
{
	strcpy(dir, "/tmp/mayfly-transfer-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	fake_init(&a);
}

static void teardown(void)
{
	char cmd[128];

	fake_fini(&a);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(transfer, .init = setup, .fini = teardown, .timeout = 60);

static void path_in(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", dir, name);
}

static void write_file(const char *path, const char *content)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f);
	fputs(content, f);
	fclose(f);
}

static char *read_file(const char *path)
{
	static char buf[4096];
	FILE *f = fopen(path, "r");
	size_t n;

	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* How many entries the test directory holds: temporary files must go. */
static int entries(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	while ((e = readdir(d)))
		n += e->d_name[0] != '.' || (e->d_name[1] && strcmp(e->d_name, ".."));
	closedir(d);
	return n;
}

/* The agent answers a FILE_READ with `arg`: a script of what to send. */
enum lie { HALF_THEN_HANG_UP, HALF_THEN_ERROR, ENDLESS, WHOLE, SILENT };

static void fill_eio(struct proto_writer *w, void *unused)
{
	(void)unused;
	proto_put_u32(w, EIO);
	proto_put_str(w, "disk on fire");
}

static void serve_read(struct fake_agent *fa)
{
	static char chunk[PROTO_CHUNK];
	enum lie lie = (enum lie)(uintptr_t)fa->arg;

	memset(chunk, 'g', sizeof(chunk));
	fake_read_frames(fa, 5000);   /* the FILE_READ */
	if (lie == SILENT) {
		while (!atomic_load(&fa->stop) && fake_read_frames(fa, 100))
			;
		return;
	}
	for (int i = 0; i < (lie == ENDLESS ? 1 << 20 : 2) && !atomic_load(&fa->stop); i++)
		if (!fake_send_bytes(fa, PROTO_FILE_DATA, 1, chunk, i == 1 && lie == WHOLE ? 5 : 1000))
			return;
	if (lie == HALF_THEN_ERROR)
		fake_send(fa, PROTO_ERROR, 1, fill_eio, NULL);
	else if (lie == WHOLE)
		fake_send(fa, PROTO_FILE_END, 1, NULL, NULL);
	else if (lie == HALF_THEN_HANG_UP)
		shutdown(fa->fd, SHUT_RDWR);
}

static int get(const char *local, enum lie lie, uint64_t max, uint64_t deadline_ms)
{
	fake_start(&a, serve_read, (void *)(uintptr_t)lie);
	return transfer_get(a.client, "/guest/file", local, max,
			    clock_now_ns() + deadline_ms * MS, NULL, why, sizeof(why));
}

Test(transfer, a_whole_file_replaces_the_old_one)
{
	char local[256];

	path_in(local, sizeof(local), "out.txt");
	write_file(local, "precious");
	chmod(local, 0640);
	cr_assert_eq(get(local, WHOLE, 1 << 20, 5000), 0, "%s", why);
	cr_assert_eq(strlen(read_file(local)), 1005);
	{
		struct stat st;

		cr_assert_eq(stat(local, &st), 0);
		cr_assert_eq(st.st_mode & 07777, 0640, "the old file's mode is kept");
	}
	cr_assert_eq(entries(), 1, "no temporary file left");
}

static void serve_empty(struct fake_agent *fa)
{
	fake_read_frames(fa, 5000);   /* the FILE_READ */
	fake_send(fa, PROTO_FILE_END, 1, NULL, NULL);
}

/* Found by fuzz-agent (seed get-mem-empty): an empty guest file read into
 * memory handed memcpy a NULL source (undefined, however short), which
 * UBSan stops on. It is "", len 0, NUL-terminated. */
Test(transfer, an_empty_file_into_memory_is_an_empty_string)
{
	struct transfer_stats st = { 0 };
	uint8_t *data = NULL;
	size_t len = 1;

	fake_start(&a, serve_empty, NULL);
	cr_assert_eq(transfer_get_mem(a.client, "/guest/empty", 1 << 20, &data, &len,
				      clock_now_ns() + 5000 * MS, &st, why, sizeof(why)), 0, "%s", why);
	cr_assert_not_null(data);
	cr_assert_eq(len, 0);
	cr_assert_eq(data[0], '\0');
	cr_assert_eq(st.bytes, 0);
	free(data);
}

/* Finding 4: a failed --get never touches LOCAL. */
Test(transfer, a_failed_get_leaves_the_users_file_as_it_was)
{
	static const enum lie lies[] = { HALF_THEN_HANG_UP, HALF_THEN_ERROR };

	for (size_t i = 0; i < sizeof(lies) / sizeof(lies[0]); i++) {
		char local[256];

		fake_fini(&a);
		fake_init(&a);
		path_in(local, sizeof(local), "keep.txt");
		write_file(local, "precious");
		cr_assert_neq(get(local, lies[i], 1 << 20, 5000), 0, "case %zu", i);
		cr_assert_str_eq(read_file(local), "precious", "case %zu", i);
		cr_assert_eq(entries(), 1, "case %zu: no temporary file left", i);
	}
}

Test(transfer, a_failed_get_of_a_new_name_leaves_nothing)
{
	char local[256];

	path_in(local, sizeof(local), "new.txt");
	cr_assert_neq(get(local, HALF_THEN_HANG_UP, 1 << 20, 5000), 0);
	cr_assert_eq(access(local, F_OK), -1);
	cr_assert_eq(entries(), 0);
}

/* Not a regular file: written directly, never unlinked (as root, the old
 * code unlinked /dev/null). */
Test(transfer, a_fifo_target_is_written_in_place_and_never_removed)
{
	char local[256];
	struct stat st;
	int rd;

	path_in(local, sizeof(local), "fifo");
	cr_assert_eq(mkfifo(local, 0600), 0);
	rd = open(local, O_RDONLY | O_NONBLOCK);
	cr_assert_geq(rd, 0);
	cr_assert_neq(get(local, HALF_THEN_HANG_UP, 1 << 20, 5000), 0);
	cr_assert_eq(lstat(local, &st), 0, "the FIFO is still there");
	cr_assert(S_ISFIFO(st.st_mode));
	close(rd);
}

Test(transfer, a_symlink_target_is_replaced_through_the_link)
{
	char local[256], real[256];
	struct stat st;

	path_in(real, sizeof(real), "real.txt");
	path_in(local, sizeof(local), "link.txt");
	write_file(real, "old");
	cr_assert_eq(symlink(real, local), 0);
	cr_assert_eq(get(local, WHOLE, 1 << 20, 5000), 0, "%s", why);
	cr_assert_eq(lstat(local, &st), 0);
	cr_assert(S_ISLNK(st.st_mode), "the link stays a link");
	cr_assert_eq(strlen(read_file(real)), 1005);
}

/* Finding 3: a lying agent cannot make the host write more than the cap. */
Test(transfer, more_than_max_get_bytes_is_refused)
{
	char local[256];

	path_in(local, sizeof(local), "big.bin");
	cr_assert_eq(get(local, ENDLESS, 64 << 10, 20000), -EFBIG);
	cr_assert_not_null(strstr(why, "--max-get-bytes"), "%s", why);
	cr_assert_eq(access(local, F_OK), -1);
	cr_assert_eq(entries(), 0);
	cr_assert(a.client->broken, "the rest of that file must not be read as answers");
}

/* Finding 2: a silent agent meets the call's deadline. */
Test(transfer, a_silent_agent_meets_the_deadline_of_a_get)
{
	char local[256];
	uint64_t t0 = clock_now_ns();

	path_in(local, sizeof(local), "x");
	cr_assert_eq(get(local, SILENT, 1 << 20, 300), -ETIMEDOUT);
	cr_assert_lt(clock_now_ns() - t0, 5000 * MS);
	cr_assert_not_null(strstr(why, "--call-timeout"), "%s", why);
}

static void never_read(struct fake_agent *fa)
{
	while (!atomic_load(&fa->stop))
		usleep(10000);
}

Test(transfer, an_agent_that_stops_reading_meets_the_deadline_of_a_put)
{
	char local[256];
	uint64_t t0 = clock_now_ns();
	int fd;

	path_in(local, sizeof(local), "big");
	fd = open(local, O_WRONLY | O_CREAT, 0600);
	cr_assert_eq(ftruncate(fd, 64 << 20), 0);
	close(fd);
	fake_start(&a, never_read, NULL);
	cr_assert_eq(transfer_put(a.client, local, "/guest/big", t0 + 300 * MS, NULL, why, sizeof(why)),
		     -ETIMEDOUT);
	cr_assert_lt(clock_now_ns() - t0, 5000 * MS);
}

/* ---- LIST: a directory's entries, from an agent that may lie ---- */

enum list_lie { LIST_TWO_FRAMES, LIST_BAD_MORE, LIST_BAD_MODE, LIST_TRAILING, LIST_ENDLESS,
		LIST_BAD_TYPE, LIST_SLASH, LIST_DOTDOT, LIST_EMPTY_NAME };

struct entry_spec {
	const char *name;
	uint32_t type;
	uint32_t mode;
	uint32_t more;
	bool trailing;
};

static void fill_entries(struct proto_writer *w, void *opaque)
{
	const struct entry_spec *e = opaque;

	proto_put_u32(w, e->more);
	proto_put_u32(w, 1);
	proto_put_str(w, e->name);
	proto_put_u32(w, e->type);
	proto_put_u32(w, e->mode);
	proto_put_u64(w, 42);
	if (e->trailing)
		proto_put_u32(w, 0);
}

static void serve_list(struct fake_agent *fa)
{
	enum list_lie lie = (enum list_lie)(uintptr_t)fa->arg;
	struct entry_spec first = { "a", PROTO_FT_FILE, 0644, 1, false };
	struct entry_spec last = { "b", PROTO_FT_FILE, 0600, 0, false };

	fake_read_frames(fa, 5000);   /* the LIST */
	if (lie == LIST_BAD_MORE)
		first.more = 2;
	if (lie == LIST_BAD_MODE)
		first.mode = 010000;
	if (lie == LIST_TRAILING)
		first.trailing = true;
	if (lie == LIST_BAD_TYPE)
		first.type = PROTO_FT_SYMLINK + 1;
	if (lie == LIST_SLASH)
		first.name = "../../etc/passwd";
	if (lie == LIST_DOTDOT)
		first.name = "..";
	if (lie == LIST_EMPTY_NAME)
		first.name = "";
	if (!fake_send(fa, PROTO_LIST_ENTRIES, 1, fill_entries, &first))
		return;
	while (lie == LIST_ENDLESS && !atomic_load(&fa->stop))
		if (!fake_send(fa, PROTO_LIST_ENTRIES, 1, fill_entries, &first))
			return;
	fake_send(fa, PROTO_LIST_ENTRIES, 1, fill_entries, &last);
}

static int seen;

static void count_entry(void *opaque, const char *name, uint32_t type, uint32_t mode, uint64_t size)
{
	(void)opaque;
	cr_assert_eq(type, PROTO_FT_FILE);
	cr_assert_eq(size, 42);
	cr_assert(mode <= 07777);
	cr_assert_eq(strlen(name), 1);
	seen++;
}

static int list(enum list_lie lie, uint64_t deadline_ms)
{
	seen = 0;
	fake_start(&a, serve_list, (void *)(uintptr_t)lie);
	return transfer_list(a.client, "/guest/dir", count_entry, NULL,
			     clock_now_ns() + deadline_ms * MS, why, sizeof(why));
}

Test(transfer, a_listing_in_two_frames_gives_every_entry)
{
	cr_assert_eq(list(LIST_TWO_FRAMES, 5000), 0, "%s", why);
	cr_assert_eq(seen, 2);
	cr_assert_not(a.client->broken);
}

Test(transfer, a_listing_out_of_shape_is_a_protocol_error)
{
	cr_assert_eq(list(LIST_BAD_MORE, 5000), -EPROTO);
	cr_assert(a.client->broken);
}

Test(transfer, a_mode_out_of_range_is_a_protocol_error)
{
	cr_assert_eq(list(LIST_BAD_MODE, 5000), -EPROTO);
	cr_assert_eq(seen, 0);
}

/* An entry no guest file system holds never reaches fn: an unknown type, or a
 * name a caller printing or joining it must not see (a slash, "..", nothing). */
static void entry_refused(enum list_lie lie)
{
	cr_assert_eq(list(lie, 5000), -EPROTO);
	cr_assert_eq(seen, 0);
}

Test(transfer, an_unknown_file_type_is_a_protocol_error) { entry_refused(LIST_BAD_TYPE); }
Test(transfer, an_entry_name_with_a_slash_is_a_protocol_error) { entry_refused(LIST_SLASH); }
Test(transfer, an_entry_named_dotdot_is_a_protocol_error) { entry_refused(LIST_DOTDOT); }
Test(transfer, an_empty_entry_name_is_a_protocol_error) { entry_refused(LIST_EMPTY_NAME); }

Test(transfer, bytes_after_the_entries_are_a_protocol_error)
{
	cr_assert_eq(list(LIST_TRAILING, 5000), -EPROTO);
}

Test(transfer, a_listing_that_never_ends_stops_at_the_deadline)
{
	uint64_t t0 = clock_now_ns();

	cr_assert_eq(list(LIST_ENDLESS, 300), -ETIMEDOUT, "%s", why);
	cr_assert_lt(clock_now_ns() - t0, 10000 * MS);
	cr_assert(a.client->broken);
}
