/* fuzz_agent.c - libFuzzer target: a hostile guest agent's byte stream into the host's agent client, command session and file transfers. */
#include "agent_client/client.h"
#include "agent_client/session.h"
#include "agent_client/transfer.h"
#include "agent_client/watch.h"
#include "lib/clock.h"
#include "fuzz_common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

/*
 * Input (tests/fuzz/make-agent-seeds writes the same):
 *
 *   byte 0      what the host does, modulo 11:
 *               0 agent_client_connect (the stream starts with the VMM's
 *                 "OK <port>\n", then the agent's answer to HELLO)
 *               1 session_exec, raw streams   2 session_exec, JSON lines
 *               3 transfer_get                4 transfer_put (a 3000-byte file)
 *               5 agent_client_recv until the stream ends, each ERROR
 *                 through agent_client_error
 *               6 transfer_get_mem            7 transfer_put_mem (3000 bytes)
 *               8 transfer_list
 *               9 session_exec in a container's root, as a user with
 *                 groups (PROTO_EXEC_ROOT), raw streams
 *               10 agent_watch_next until the watch ends (a WATCH's events)
 *   bytes 1-2   a limit, little-endian: session_exec's max_output and
 *               transfer_get(_mem)'s max_bytes (0: none)
 *   the rest    everything the agent (or the VMM's front door) sends
 *
 * The host's end is one end of a socket pair; the input is written into
 * the other end, which is then shut down for writing, so every read the
 * host makes ends (at the stream's end at the latest) and nothing waits on
 * the clock; every call still has a deadline of a few seconds, so a host
 * that would wait on a silent agent shows as a libFuzzer timeout. Request
 * ids start at 1 (HELLO is 0), as on a fresh connection.
 *
 * Checks besides the sanitizers: every call returns (no hang) with a
 * documented result; an error comes with a reason; transfer_get that
 * fails leaves the user's file as it was, one that succeeds leaves the
 * file and nothing else (no temporary file either way); transfer_get_mem
 * gives len bytes and a NUL, within max_bytes, and its stats count them;
 * every listed entry keeps transfer_list's promises (a name of at most
 * PROTO_MAX_PATH - 1 bytes, a mode of 07777 at most); and no file
 * descriptor outlives the input.
 */
#define DEADLINE_NS (5ull * 1000 * 1000 * 1000)
#define CONNECT_NS  (5ull * 1000 * 1000)
#define PUT_SIZE    3000

static const char precious[] = "the user's file, which a failed get must not touch\n";
static char dir[4096], local[4200], put_src[4200];
static int devnull = -1;
static FILE *json_null;
static bool verbose;
static unsigned dials;

static void remove_dir(void)
{
	unlink(local);
	unlink(put_src);
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *tmp = getenv("TMPDIR");
	uint8_t data[PUT_SIZE];
	int fd;

	(void)argc;
	(void)argv;
	verbose = fuzz_log_init();
	snprintf(dir, sizeof(dir), "%s/mayfly-fuzz-agent-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir))
		fuzz_die("mkdtemp");
	snprintf(local, sizeof(local), "%s/got", dir);
	snprintf(put_src, sizeof(put_src), "%s/put", dir);
	atexit(remove_dir);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 13);
	fd = open(put_src, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, data, sizeof(data)) != (ssize_t)sizeof(data) || close(fd))
		fuzz_die("cannot write the file to put");
	devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	json_null = fopen("/dev/null", "w");
	if (devnull < 0 || !json_null)
		fuzz_die("/dev/null");
	return 0;
}

/* The VMM's front door, for agent_client_connect: the first dial gets the
 * stream, a second (a retry) is refused for good. */
static int dial(void *opaque)
{
	return dials++ ? -EIO : *(int *)opaque;
}

static void do_connect(struct agent_client *c, int host_fd)
{
	const char *why = NULL;
	int fd = host_fd, rc;

	dials = 0;
	/* A deadline nearer than the client's retry interval: a refused
	 * CONNECT is not retried (no sleep per input). Every read still
	 * takes what is readable, deadline or not. */
	rc = agent_client_connect(c, dial, &fd, PROTO_AGENT_PORT, clock_now_ns() + CONNECT_NS, -1,
				  &why);
	if (verbose)
		fprintf(stderr, "fuzz_agent: connect: %d %s\n", rc, rc ? why : "");
	if (rc && (!why || !*why))
		fuzz_broken("a failed connect came without a reason", NULL);
	if (!rc && c->fd != host_fd)
		fuzz_broken("a connect that succeeded does not hold the stream", NULL);
	/* On failure the client closed the stream itself. */
	if (rc)
		c->fd = -1;
}

static void do_exec(struct agent_client *c, bool json, bool in_root, uint16_t limit)
{
	static char *argv[] = { "sh", "-c", "echo hi", NULL };
	static const uint32_t groups[] = { 1000, 27, 100 };
	struct exec_spec spec;
	struct exec_result res;

	session_spec_init(&spec);
	spec.argv = argv;
	spec.argc = 3;
	if (in_root) {
		spec.root = "/run/mayfly/rootfs";
		spec.uid = spec.gid = 1000;
		spec.groups = groups;
		spec.ngroups = 3;
	}
	spec.json = json;
	spec.json_out = json_null;
	spec.out_fd = spec.err_fd = devnull;
	spec.deadline_ns = clock_now_ns() + DEADLINE_NS;
	if (limit)
		spec.max_output = limit;
	memset(&res, 0, sizeof(res));
	session_exec(c, &spec, &res);
	if (verbose)
		fprintf(stderr, "fuzz_agent: exec: exit %d %s\n", res.exit_code, res.error);
	if (res.exit_code < 0 || res.exit_code > 255)
		fuzz_broken("session_exec gave an exit code no process can have", res.error);
	/* mayfly's own codes come with a reason, unless the command's EXIT
	 * said so itself. */
	if (res.exit_code >= RUN_EXIT_TIMEOUT && res.exit_code <= RUN_EXIT_NOTFOUND &&
	    !res.error[0] && !res.ended_ns)
		fuzz_broken("session_exec failed without a reason", NULL);
	if (memchr(res.error, 0, sizeof(res.error)) == NULL)
		fuzz_broken("session_exec's reason is not a string", NULL);
}

/* The directory holds exactly the files it held before: the put source
 * and the user's file. */
static void check_dir(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		fuzz_die("opendir");
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	if (n != 2)
		fuzz_broken("a get left a file behind (or took the user's away)", NULL);
}

/* A watch's events until its end: each a kind of 1..5 and a name that
 * fits; the end with a reason. */
static void do_watch(struct agent_client *c)
{
	char name[256], why[256];
	unsigned kind;
	int rc;

	while ((rc = agent_watch_next(c, 0, -1, &kind, name, sizeof(name), why, sizeof(why))) == 1)
		if (kind < PROTO_WATCH_CREATE || kind > PROTO_WATCH_CHMOD || !name[0] ||
		    strlen(name) >= sizeof(name))
			fuzz_broken("a watch event out of its bounds", name);
	if (rc < 0 && !why[0])
		fuzz_broken("a watch ended without a reason", NULL);
}

static void do_get(struct agent_client *c, uint16_t limit)
{
	char why[256], now[sizeof(precious)];
	int fd = open(local, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ssize_t n;
	int rc;

	if (fd < 0 || write(fd, precious, sizeof(precious)) != (ssize_t)sizeof(precious) ||
	    close(fd))
		fuzz_die("cannot write the user's file");
	rc = transfer_get(c, "/etc/hostname", local, limit ? limit : UINT64_MAX,
			  clock_now_ns() + DEADLINE_NS, NULL, why, sizeof(why));
	if (verbose)
		fprintf(stderr, "fuzz_agent: get: %d %s\n", rc, rc ? why : "");
	check_dir();
	if (!rc)
		return;
	if (!why[0])
		fuzz_broken("a failed get came without a reason", NULL);
	fd = open(local, O_RDONLY | O_CLOEXEC);
	n = fd < 0 ? -1 : read(fd, now, sizeof(now));
	if (fd >= 0)
		close(fd);
	if (n != (ssize_t)sizeof(precious) || memcmp(now, precious, sizeof(precious)))
		fuzz_broken("a failed get changed the user's file", why);
}

static void do_put(struct agent_client *c)
{
	char why[256];
	int rc = transfer_put(c, put_src, "/tmp/x", clock_now_ns() + DEADLINE_NS, NULL, why,
			      sizeof(why));

	if (verbose)
		fprintf(stderr, "fuzz_agent: put: %d %s\n", rc, rc ? why : "");
	if (rc && !why[0])
		fuzz_broken("a failed put came without a reason", NULL);
}

static void do_get_mem(struct agent_client *c, uint16_t limit)
{
	struct transfer_stats st = { 0 };
	uint8_t *data = NULL;
	size_t len = 0;
	char why[256];
	int rc = transfer_get_mem(c, "/etc/hostname", limit ? limit : UINT64_MAX, &data, &len,
				  clock_now_ns() + DEADLINE_NS, &st, why, sizeof(why));

	if (verbose)
		fprintf(stderr, "fuzz_agent: get_mem: %d %s\n", rc, rc ? why : "");
	if (rc) {
		if (data)
			fuzz_broken("a failed get_mem left data behind", why);
		if (!why[0])
			fuzz_broken("a failed get_mem came without a reason", NULL);
		return;
	}
	if (!data || data[len] != 0 || (limit && len > limit) || st.bytes != len)
		fuzz_broken("get_mem's data, NUL, limit or byte count is wrong", NULL);
	free(data);
}

static void do_put_mem(struct agent_client *c)
{
	static uint8_t data[PUT_SIZE];
	struct transfer_stats st = { 0 };
	char why[256];
	int rc = transfer_put_mem(c, data, sizeof(data), "/tmp/x", 0644, false,
				  clock_now_ns() + DEADLINE_NS, &st, why, sizeof(why));

	if (verbose)
		fprintf(stderr, "fuzz_agent: put_mem: %d %s\n", rc, rc ? why : "");
	if (rc && !why[0])
		fuzz_broken("a failed put_mem came without a reason", NULL);
}

static void list_entry(void *opaque, const char *name, uint32_t type, uint32_t mode,
		       uint64_t size)
{
	size_t n = strnlen(name, PROTO_MAX_PATH);

	(void)size;
	(*(unsigned *)opaque)++;
	/* Not the type: its users name anything unknown "other". */
	(void)type;
	if (n == PROTO_MAX_PATH || mode > 07777)
		fuzz_broken("transfer_list passed on an entry it promises never to", name);
}

static void do_list(struct agent_client *c)
{
	unsigned entries = 0;
	char why[256];
	int rc = transfer_list(c, "/", list_entry, &entries, clock_now_ns() + DEADLINE_NS, why,
			       sizeof(why));

	if (verbose)
		fprintf(stderr, "fuzz_agent: list: %d, %u entries %s\n", rc, entries, rc ? why : "");
	if (rc && !why[0])
		fuzz_broken("a failed list came without a reason", NULL);
}

static void do_recv(struct agent_client *c)
{
	struct proto_frame f;
	char why[128];
	int rc;

	while ((rc = agent_client_recv(c, &f, clock_now_ns() + DEADLINE_NS)) == 1) {
		struct proto_sysinfo si;

		/* SYSINFO_RESULT: what decodes holds together. */
		if (!proto_sysinfo_decode(&f, &si) &&
		    (si.cpus < 1 || si.cpus > PROTO_MAX_CPUS || si.cpu_busy > si.cpu_total ||
		     si.mem_available > si.mem_total || si.mem_cached > si.mem_total ||
		     si.disk_free > si.disk_total))
			fuzz_broken("a SYSINFO_RESULT decoded with figures that cannot be", NULL);
		if (f.type == PROTO_ERROR) {
			int e = agent_client_error(&f, why, sizeof(why));

			if (e >= 0 || e < -4095 || !why[0])
				fuzz_broken("agent_client_error gave other than -1..-4095 and a reason", why);
		}
	}
	if (rc != -EPIPE && rc != -EPROTO)
		fuzz_broken("a stream that ends did not end agent_client_recv with EPIPE or EPROTO",
		       NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cursor c = { data, size };
	uint8_t mode = take8(&c) % 11;
	uint16_t limit = take16(&c);
	/* Static: 768 KiB of buffers, not cleared per input (the client
	 * tracks what it filled). */
	static struct agent_client clients[1];
	struct agent_client *client = clients;
	int fd_before = lowest_free_fd(), sv[2];
	ssize_t w;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		fuzz_die("socketpair");
	/* All of the agent's bytes are there before the host reads: a
	 * stream that fits the socket's buffer (inputs are small). */
	w = c.left ? send(sv[1], c.p, c.left, MSG_DONTWAIT | MSG_NOSIGNAL) : 0;
	if (w < 0)
		fuzz_die("cannot write the agent's stream");
	shutdown(sv[1], SHUT_WR);
	client->fd = sv[0];
	client->cancel_fd = -1;
	client->broken = false;
	client->next_id = 1;
	client->rstart = client->rlen = 0;
	switch (mode) {
	case 0: do_connect(client, sv[0]); break;
	case 1: do_exec(client, false, false, limit); break;
	case 2: do_exec(client, true, false, limit); break;
	case 9: do_exec(client, false, true, limit); break;
	case 10: do_watch(client); break;
	case 3: do_get(client, limit); break;
	case 4: do_put(client); break;
	case 5: do_recv(client); break;
	case 6: do_get_mem(client, limit); break;
	case 7: do_put_mem(client); break;
	default: do_list(client);
	}
	agent_client_close(client);
	close(sv[1]);
	if (lowest_free_fd() != fd_before)
		fuzz_broken("a file descriptor was left open", NULL);
	return 0;
}
