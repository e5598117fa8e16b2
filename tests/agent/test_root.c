/* test_root.c - mayfly-agent's EXEC with PROTO_EXEC_ROOT: chrooted into a tiny busybox root as a given user, and the hostile frames it refuses. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client.h"

#define BUSYBOX "/bin/busybox"   /* Debian's busybox-static */

static struct client c;
static char root[256];           /* c.dir/root: bin/busybox, its links, tmp, etc */

/* A root of a static busybox and a few applet links, but no `ls`: the
 * host has one, the root not. */
static void make_root(void)
{
	static const char *const links[] = { "sh", "id", "pwd", "echo", "touch" };
	char cmd[1024];
	int n;

	n = snprintf(cmd, sizeof(cmd), "set -e; mkdir -p '%s/bin' '%s/etc' '%s/tmp'; "
		     "chmod 1777 '%s/tmp'; cp " BUSYBOX " '%s/bin/busybox'",
		     root, root, root, root, root);
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++)
		n += snprintf(cmd + n, sizeof(cmd) - (size_t)n, "; ln -s busybox '%s/bin/%s'", root,
			      links[i]);
	cr_assert_lt((size_t)n, sizeof(cmd));
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

static void setup(void)
{
	if (geteuid() != 0)
		cr_skip_test("needs root: chroot, setuid");
	if (access(BUSYBOX, X_OK) != 0)
		cr_skip_test(BUSYBOX " is missing (the busybox-static package)");
	client_start_unix(&c);
	snprintf(root, sizeof(root), "%s/root", c.dir);
	make_root();
}

static void teardown(void)
{
	if (c.agent > 0)
		client_stop(&c);
}

TestSuite(root, .init = setup, .fini = teardown, .timeout = 30);

#define ARGV(...) ((char *const[]){ __VA_ARGS__, NULL })

/* The EXEC of a process in a root. */
struct in_root {
	const char *root;
	uint32_t uid, gid, umask;
	const uint32_t *groups;
	uint32_t ngroups;
	const char *cwd;
};

static void exec_in(uint32_t id, const struct in_root *in, char *const *argv, char *const *envp)
{
	struct proto_exec e = { .flags = PROTO_EXEC_ROOT, .argv = (char **)argv,
				.envp = (char **)envp, .uid = in->uid, .gid = in->gid,
				.umask = in->umask, .ngroups = in->ngroups };
	struct proto_writer *w = client_begin(PROTO_EXEC, id);

	while (argv[e.argc])
		e.argc++;
	while (envp && envp[e.envc])
		e.envc++;
	snprintf(e.cwd, sizeof(e.cwd), "%s", in->cwd ? in->cwd : "");
	snprintf(e.root, sizeof(e.root), "%s", in->root);
	if (in->ngroups)
		memcpy(e.groups, in->groups, in->ngroups * sizeof(e.groups[0]));
	cr_assert_gt(proto_exec_encode(w, id, &e), 0);
	client_send_raw(&c, w->buf, w->len);
}

static void run_in(struct run *r, const struct in_root *in, char *const *argv, char *const *envp)
{
	uint32_t id = r->id ? r->id : 100;

	memset(r, 0, sizeof(*r));
	r->id = id;
	exec_in(id, in, argv, envp);
	client_collect(&c, r, 1, 10000);
	cr_assert_eq(r->frames_after_exit, 0);
}

Test(root, runs_chrooted_as_the_user_with_exactly_its_groups)
{
	static const uint32_t groups[] = { 10, 20 };
	struct in_root in = { .root = root, .uid = 1000, .gid = 1001, .umask = 022,
			      .groups = groups, .ngroups = 2 };
	struct run r = { .id = 1 };

	run_in(&r, &in, ARGV("/bin/sh", "-c", "id; pwd; echo $PATH"), NULL);
	cr_assert(r.started, "exec failed: errno %d", r.error);
	cr_assert_str_eq(r.out, "uid=1000 gid=1001 groups=10,20\n/\n"
			 "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n",
			 "%s", r.out);
	cr_assert_eq(r.code, 0, "%s", r.err);
	run_free(&r);
}

/* A file the process makes lands in the root on the host's side, owned by
 * the user, with the umask asked for. */
Test(root, cwd_umask_and_owner_are_the_requests)
{
	struct in_root in = { .root = root, .uid = 1000, .gid = 1001, .umask = 027, .cwd = "/tmp" };
	struct run r = { .id = 1 };
	char path[320];
	struct stat st;

	run_in(&r, &in, ARGV("sh", "-c", "pwd; umask; touch made"), NULL);
	cr_assert_str_eq(r.out, "/tmp\n0027\n", "%s%s", r.out, r.err);
	snprintf(path, sizeof(path), "%s/tmp/made", root);
	cr_assert_eq(stat(path, &st), 0, "%s is not there", path);
	cr_assert(st.st_uid == 1000 && st.st_gid == 1001, "owned by %u:%u", st.st_uid, st.st_gid);
	cr_assert_eq(st.st_mode & 0777, 0640, "mode %o", st.st_mode & 0777);
	run_free(&r);
}

/* The program is looked up in the root with the program's own PATH: the
 * host's /bin/ls is not there, and the root's sh is found by name. */
Test(root, a_program_missing_in_the_root_is_enoent)
{
	struct in_root in = { .root = root };
	struct run r = { .id = 1 };

	cr_assert_eq(access("/bin/ls", X_OK), 0, "the host has no /bin/ls to leave out");
	run_in(&r, &in, ARGV("ls", "/"), NULL);
	cr_assert_eq(r.error, ENOENT);
	cr_assert_not(r.started);
	r.id = 2;
	run_in(&r, &in, ARGV("/bin/ls"), NULL);
	cr_assert_eq(r.error, ENOENT);
	r.id = 3;
	run_in(&r, &in, ARGV("sh", "-c", "echo found"), (char *const[]){ "PATH=/nowhere:/bin", NULL });
	cr_assert_str_eq(r.out, "found\n");
	run_free(&r);
	/* No EXIT follows an ERROR: the next frame is the PONG. */
	client_send(&c, client_begin(PROTO_PING, 7));
	client_expect(&c, PROTO_PONG, 7);
}

Test(root, a_root_that_is_missing_or_not_a_directory_is_an_error)
{
	char file[320], missing[320];
	struct in_root in = { .root = file };
	struct run r = { .id = 1 };

	snprintf(file, sizeof(file), "%s/bin/busybox", root);
	snprintf(missing, sizeof(missing), "%s/nothing-here", root);
	run_in(&r, &in, ARGV("sh"), NULL);
	cr_assert_eq(r.error, ENOTDIR);
	in.root = missing;
	r.id = 2;
	run_in(&r, &in, ARGV("sh"), NULL);
	cr_assert_eq(r.error, ENOENT);
	/* The connection serves on. */
	client_send(&c, client_begin(PROTO_PING, 3));
	client_expect(&c, PROTO_PONG, 3);
}

/* Each frame is malformed: ERROR EPROTO, that connection closed, the agent
 * serving the next. */
static void refused(const char *why, void (*write_frame)(struct proto_writer *w), uint32_t cut)
{
	struct proto_writer *w = client_begin(PROTO_EXEC, 5);

	proto_put_u32(w, PROTO_EXEC_ROOT);
	proto_put_u32(w, 0);
	proto_put_u16(w, 0);
	proto_put_u16(w, 0);
	proto_put_str(w, "");
	proto_put_u32(w, 1);
	proto_put_str(w, "sh");
	proto_put_u32(w, 0);
	write_frame(w);
	cr_assert_gt(proto_end(w), 0);
	/* Cut short: the length field says so, the bytes are whole frames. */
	w->len -= cut;
	cr_assert_gt(proto_end(w), 0);
	client_send_raw(&c, w->buf, w->len);
	client_expect_error(&c, 5, EPROTO);
	cr_assert(client_sees_eof(&c, 2000), "%s: the connection stayed open", why);
	close(c.fd);
	client_connect(&c, true);
	client_send(&c, client_begin(PROTO_PING, 6));
	client_expect(&c, PROTO_PONG, 6);
}

static void fields(struct proto_writer *w, const char *r, uint32_t ngroups, uint32_t given)
{
	proto_put_str(w, r);
	proto_put_u32(w, 1000);
	proto_put_u32(w, 1000);
	proto_put_u32(w, 022);
	proto_put_u32(w, ngroups);
	for (uint32_t i = 0; i < given; i++)
		proto_put_u32(w, 100 + i);
}

static void good_fields(struct proto_writer *w) { fields(w, root, 2, 2); }
static void too_many_groups(struct proto_writer *w) { fields(w, root, 65, 65); }
static void relative_root(struct proto_writer *w) { fields(w, "tmp/root", 0, 0); }
static void dotdot_root(struct proto_writer *w) { fields(w, "/tmp/../etc", 0, 0); }
static void fewer_groups(struct proto_writer *w) { fields(w, root, 3, 2); }

Test(root, hostile_frames_close_the_connection_and_the_agent_serves_on)
{
	/* Cut short in each field: the last group, both, ngroups, umask, gid,
	 * uid, the root's last byte, all its bytes and half its length. */
	const uint32_t len = (uint32_t)strlen(root);
	const uint32_t cuts[] = { 4, 8, 12, 16, 20, 24, 25, 24 + len, 24 + len + 2 };

	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++)
		refused("truncated", good_fields, cuts[i]);
	refused("65 groups", too_many_groups, 0);
	refused("a relative root", relative_root, 0);
	refused("a root with ..", dotdot_root, 0);
	refused("fewer groups than counted", fewer_groups, 0);
}
