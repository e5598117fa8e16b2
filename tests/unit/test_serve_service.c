/* test_serve_service.c - mayfly serve's sandboxes with a fake VMM (tests/unit/fake_vmm.c: the real guest agent behind boot's socket protocol, no KVM): create, exec streamed, files, a delete racing an exec, a VM that does not start, a fork's children and a failing one, the warm pool, the drain. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "serve/calls.h"
#include "serve/live.h"
#include "serve/service.h"
#include "lib/fs_tree.h"
#include "serve_loop.h"
#include "dir_count.h"

static char root[] = "/tmp/serve-svc-XXXXXX";
static char state[64], home[64];
static struct service *svc;
static struct serve_loop main_loop;

/* A service on state (made by start), and its main loop. */
static void start_service(unsigned pool, bool ephemeral)
{
	const char *fake = getenv("FAKE_VMM");

	cr_assert_not_null(fake, "FAKE_VMM is not set");
	svc = calloc(1, sizeof(*svc));
	svc->cfg.ephemeral = ephemeral;
	svc->cfg.state = state;
	snprintf(svc->cfg.exe, sizeof(svc->cfg.exe), "%s", fake);
	/* Two templates: the fake VMM ignores their directories. */
	for (int i = 0; i < 2; i++) {
		struct service_template *t = &svc->cfg.tmpl[i];

		snprintf(t->name, sizeof(t->name), "%s", i ? "py" : "default");
		snprintf(t->id, sizeof(t->id), "%s", i ? "fake-py" : "fake");
		snprintf(t->dir, sizeof(t->dir), "%s", root);
		t->cpus = 1;
		t->mem_mib = i ? 512 : 256;
	}
	svc->cfg.ntmpl = 2;
	svc->cfg.pool = pool;
	svc->cfg.max_sandboxes = 8;
	svc->cfg.call_timeout_s = 10;
	svc->cfg.max_output = 1 << 20;
	svc->cfg.max_file = 1 << 20;
	cr_assert_eq(service_start(svc), 0);
	serve_loop_start(&main_loop, svc);
}

/* The drain (SIGTERM): the service goes, what it leaves stays. */
static void stop_service(void)
{
	service_stop(svc, 0);
	serve_loop_stop(&main_loop);
	service_destroy(svc);
	free(svc);
	svc = NULL;
}

/* A fresh root with the state directory and the fake guest's home. */
static void make_root(void)
{
	signal(SIGPIPE, SIG_IGN);
	cr_assert_not_null(mkdtemp(root));
	snprintf(state, sizeof(state), "%s/state", root);
	snprintf(home, sizeof(home), "%s/home", root);
	cr_assert_eq(mkdir(state, 0700), 0);
	cr_assert_eq(mkdir(home, 0700), 0);
	setenv("FAKE_VMM_HOME", home, 1);
}

static void start(unsigned pool)
{
	make_root();
	start_service(pool, true);
}

static void setup(void)
{
	start(0);
}

static void teardown(void)
{
	char sb[96];

	stop_service();
	snprintf(sb, sizeof(sb), "%s/sb", state);
	cr_assert_eq(dir_count(sb, ""), 0, "the drain left sandboxes on disk");
	fs_remove_tree(root);
	unsetenv("FAKE_VMM_FAIL");
	unsetenv("FAKE_VMM_FAIL_NTH");
	unsetenv("FAKE_VMM_DELAY_MS");
}

TestSuite(serve_service, .init = setup, .fini = teardown);

static struct sandbox *create(void)
{
	struct api_create req = { 0 };
	struct sandbox *sb;
	char err[400];
	int st = service_create(svc, &req, &sb, err, sizeof(err));

	cr_assert_eq(st, 201, "create: %d %s", st, err);
	service_put(svc, sb);
	return sb;
}

/* Run argv in sb; the whole JSON event stream into out. */
static void exec(struct sandbox *sb, const char *body, char *out, size_t len)
{
	struct call_result r = { 0 };
	struct exec_stream *s;
	struct sandbox *held;
	struct api_exec req;
	char err[300];
	size_t got = 0;
	ssize_t n;

	cr_assert_eq(api_parse_exec(body, strlen(body), &req, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(service_get(svc, sb->id, &held, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(calls_exec_start(svc, held, "test", &req, &s, &r), 0, "%s", r.error);
	while ((n = calls_exec_read(s, out + got, len - 1 - got)) > 0)
		got += (size_t)n;
	out[got] = '\0';
	calls_exec_end(s);
}

/* A streamed PUT of data in two pieces, ended with rc (0: committed). */
static void put(struct sandbox *sb, const char *path, const char *data, size_t len, int rc,
		struct call_result *r)
{
	struct file_put *p;

	cr_assert_eq(calls_put_begin(svc, sb, "test", path, 0600, &p, r), 0, "%s", r->error);
	cr_assert_eq(calls_put_data(p, data, len / 2), 0);
	cr_assert_eq(calls_put_data(p, data + len / 2, len - len / 2), 0);
	calls_put_end(p, rc, r);
}

/* A streamed GET read in small pieces: the bytes (malloc'd), or NULL
 * with r's error. */
static uint8_t *get(struct sandbox *sb, const char *path, size_t *len, struct call_result *r)
{
	struct file_get *g;
	uint8_t *data = NULL;
	uint64_t size;
	ssize_t n;

	*len = 0;
	if (calls_get_begin(svc, sb, "test", path, &g, &size, r))
		return NULL;
	data = malloc(size + 1);
	while ((n = calls_get_read(g, data + *len, 2)) > 0)
		*len += (size_t)n;
	cr_assert_eq(n, 0);
	cr_assert_eq(*len, size);
	calls_get_end(g);
	r->status = 200;
	return data;
}

Test(serve_service, create_exec_files_delete)
{
	struct sandbox *sb = create(), *held;
	struct call_result r = { 0 };
	char out[4096], dir[128], id[40], err[200];
	uint8_t *data;
	size_t len;
	pid_t pid = sb->pid;

	snprintf(dir, sizeof(dir), "%s/sb/%s/" REGISTRY_RECORD, state, sb->id);
	cr_assert_eq(access(dir, R_OK), 0, "no record on disk");
	exec(sb, "{\"argv\":[\"sh\",\"-c\",\"echo hi; exit 3\"]}", out, sizeof(out));
	cr_assert(strstr(out, "{\"event\":\"stdout\",\"data\":\"hi\\n\"}"), "%s", out);
	cr_assert(strstr(out, "\"code\":3"), "%s", out);

	cr_assert_eq(service_get(svc, sb->id, &held, err, sizeof(err)), 0);
	put(held, "/f.txt", "abc", 3, 0, &r);
	cr_assert_eq(r.status, 204, "%s", r.error);
	data = get(held, "/f.txt", &len, &r);
	cr_assert_eq(r.status, 200, "%s", r.error);
	cr_assert_eq(len, 3);
	cr_assert_eq(memcmp(data, "abc", 3), 0);
	free(data);
	/* A PUT stopped part-way leaves the file as it was. */
	put(held, "/f.txt", "a torn write", 12, -ECONNABORTED, &r);
	cr_assert_eq(r.status, 502, "%d %s", r.status, r.error);
	data = get(held, "/f.txt", &len, &r);
	cr_assert(r.status == 200 && len == 3 && memcmp(data, "abc", 3) == 0);
	free(data);
	data = get(held, "/missing", &len, &r);
	cr_assert_eq(r.status, 404, "%d %s", r.status, r.error);
	cr_assert_null(data);
	service_put(svc, held);

	snprintf(id, sizeof(id), "%s", sb->id);
	cr_assert_eq(service_delete(svc, id, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(kill(pid, 0), -1, "the VM process is gone");
	snprintf(dir, sizeof(dir), "%s/sb/%s", state, id);
	cr_assert_eq(access(dir, F_OK), -1, "its directory is gone");
	cr_assert_eq(service_delete(svc, id, err, sizeof(err)), 404);
}

struct racer {
	struct sandbox *sb;
	char out[4096];
};

static void *long_exec(void *arg)
{
	struct racer *r = arg;

	exec(r->sb, "{\"argv\":[\"sleep\",\"30\"]}", r->out, sizeof(r->out));
	return NULL;
}

Test(serve_service, a_delete_racing_an_exec_is_refused_until_it_ends)
{
	struct racer r = { .sb = create() };
	struct call_result cr = { 0 };
	struct sandbox *held;
	pthread_t t;
	char err[200];
	int st = 0;

	cr_assert_eq(pthread_create(&t, NULL, long_exec, &r), 0);
	/* Until the exec runs (its slot is there), then the delete. */
	for (int i = 0; i < 500 && !r.sb->execs; i++)
		usleep(10000);
	cr_assert_not_null(r.sb->execs);
	st = service_delete(svc, r.sb->id, err, sizeof(err));
	cr_assert_eq(st, 409, "%d %s", st, err);
	cr_assert(strstr(err, "busy"), "%s", err);
	cr_assert_eq(service_get(svc, r.sb->id, &held, err, sizeof(err)), 0);
	/* The only exec there was: the last id given. */
	cr_assert_eq(calls_signal(svc, held, svc->next_exec, SIGKILL, &cr), 0);
	service_put(svc, held);
	pthread_join(t, NULL);
	cr_assert(strstr(r.out, "\"signal\":9"), "%s", r.out);
	cr_assert_eq(service_delete(svc, r.sb->id, err, sizeof(err)), 0, "%s", err);
}

Test(serve_service, a_vm_that_does_not_start_is_500_with_its_line_and_leaves_nothing)
{
	struct api_create req = { 0 };
	struct sandbox *sb;
	char err[400], dir[96];

	setenv("FAKE_VMM_FAIL", "1", 1);
	cr_assert_eq(service_create(svc, &req, &sb, err, sizeof(err)), 500);
	cr_assert(strstr(err, "a fake failure"), "%s", err);
	snprintf(dir, sizeof(dir), "%s/sb", state);
	cr_assert_eq(dir_count(dir, ""), 0);
}

Test(serve_service, a_cpus_or_mem_other_than_the_templates_is_400_before_any_vm_starts)
{
	struct api_create req = { .cpus = 2 };
	struct sandbox *sb;
	char err[400], dir[96];

	snprintf(dir, sizeof(dir), "%s/sb", state);
	cr_assert_eq(service_create(svc, &req, &sb, err, sizeof(err)), 400);
	cr_assert(strstr(err, "cpus 2 differs from template 'default''s 1"), "%s", err);
	req = (struct api_create){ .mem_mib = 512 };
	cr_assert_eq(service_create(svc, &req, &sb, err, sizeof(err)), 400);
	cr_assert(strstr(err, "mem 512 differs from template 'default''s 256 MiB"), "%s", err);
	cr_assert_eq(dir_count(dir, ""), 0, "a VM was started for a refused create");
	/* The template's own shape is no mistake. */
	req = (struct api_create){ .cpus = 1, .mem_mib = 256 };
	cr_assert_eq(service_create(svc, &req, &sb, err, sizeof(err)), 201, "%s", err);
	service_put(svc, sb);
	cr_assert_eq(service_delete(svc, sb->id, err, sizeof(err)), 0, "%s", err);
}

Test(serve_service, a_create_names_its_template_by_name_or_id_and_an_unknown_one_is_400)
{
	struct api_create req = { .template = "py" };
	struct sandbox *sb;
	char err[400], dir[96];

	cr_assert_eq(service_create(svc, &req, &sb, err, sizeof(err)), 201, "%s", err);
	service_put(svc, sb);
	cr_assert_str_eq(sb->rec.template, "fake-py");
	cr_assert_eq(service_delete(svc, sb->id, err, sizeof(err)), 0, "%s", err);
	snprintf(req.template, sizeof(req.template), "fake-py");
	req.mem_mib = 512;         /* py's, not the default's */
	cr_assert_eq(service_create(svc, &req, &sb, err, sizeof(err)), 201, "%s", err);
	service_put(svc, sb);
	cr_assert_str_eq(sb->rec.template, "fake-py");
	cr_assert_eq(service_delete(svc, sb->id, err, sizeof(err)), 0, "%s", err);
	snprintf(req.template, sizeof(req.template), "nope");
	cr_assert_eq(service_create(svc, &req, &sb, err, sizeof(err)), 400);
	cr_assert(strstr(err, "no template 'nope' (this service has: default py)"), "%s", err);
	snprintf(dir, sizeof(dir), "%s/sb", state);
	cr_assert_eq(dir_count(dir, ""), 0);
}

static int fork_of(struct sandbox *parent, unsigned count, json_t **kids, char *err, size_t len)
{
	struct sandbox *held;
	int st;

	cr_assert_eq(service_get(svc, parent->id, &held, err, len), 0, "%s", err);
	st = live_fork(svc, held, "test", count, kids, err, len);
	service_put(svc, held);
	return st;
}

Test(serve_service, a_fork_gives_n_children_and_a_failing_child_leaves_nothing)
{
	struct sandbox *parent = create(), *kid;
	char err[400], dir[96], out[8192], path[128];
	json_t *kids = NULL, *list;
	unsigned count;

	/* 5 children restored together: each is a sandbox that answers. */
	cr_assert_eq(fork_of(parent, 5, &kids, err, sizeof(err)), 201, "%s", err);
	cr_assert_eq(json_array_size(kids), 5);
	for (size_t i = 0; i < 5; i++) {
		const char *id = json_string_value(json_object_get(json_array_get(kids, i), "id"));

		cr_assert_eq(service_get(svc, id, &kid, err, sizeof(err)), 0, "%s", err);
		service_put(svc, kid);
		exec(kid, "{\"argv\":[\"echo\",\"child\"]}", out, sizeof(out));
		cr_assert(strstr(out, "\"data\":\"child\\n\""), "%s", out);
		cr_assert_eq(service_delete(svc, id, err, sizeof(err)), 0, "%s", err);
	}
	json_decref(kids);

	/* The third child fails: the fork is 500 naming it, and every child
	 * made (the others, restored at the same time) is gone. */
	snprintf(path, sizeof(path), "%s/fork-starts", home);
	unlink(path);
	setenv("FAKE_VMM_FAIL_NTH", "3", 1);
	kids = NULL;
	cr_assert_eq(fork_of(parent, 5, &kids, err, sizeof(err)), 500);
	cr_assert_null(kids);
	cr_assert(strstr(err, "child") && strstr(err, "a fake failure"), "%s", err);
	snprintf(dir, sizeof(dir), "%s/sb", state);
	cr_assert_eq(dir_count(dir, ""), 1, "only the parent's sandbox stays on disk");
	snprintf(dir, sizeof(dir), "%s/forks", state);
	cr_assert_eq(dir_count(dir, ""), 0, "the fork's snapshot is left");
	list = service_list(svc);
	cr_assert_eq(json_array_size(list), 1, "only the parent is listed");
	json_decref(list);
	pthread_mutex_lock(&svc->lock);
	count = svc->count;
	pthread_mutex_unlock(&svc->lock);
	cr_assert_eq(count, 1, "every child's place given back");
	/* And the parent goes on. */
	exec(parent, "{\"argv\":[\"true\"]}", out, sizeof(out));
	cr_assert(strstr(out, "\"code\":0"), "%s", out);
}

/* A client listing, holding and deleting whatever it finds while a fork
 * fails: it must never reach a child. */
struct lister {
	const char *parent;
	atomic_bool done;          /* the fork returned */
	bool saw_child;
};

static void *list_and_hold(void *arg)
{
	struct lister *l = arg;
	char err[300];

	while (!atomic_load(&l->done)) {
		json_t *list = service_list(svc);

		for (size_t i = 0; i < json_array_size(list); i++) {
			const char *id = json_string_value(json_object_get(json_array_get(list, i), "id"));
			struct sandbox *held;

			if (!strcmp(id, l->parent))
				continue;
			l->saw_child = true;
			/* Held across the fork's clean-up, then deleted. */
			if (service_get(svc, id, &held, err, sizeof(err)) == 0) {
				while (!atomic_load(&l->done))
					usleep(10000);
				service_put(svc, held);
			}
			service_delete(svc, id, err, sizeof(err));
		}
		json_decref(list);
		usleep(5000);
	}
	return NULL;
}

Test(serve_service, a_failing_forks_children_are_never_seen_and_all_go)
{
	struct sandbox *parent = create();
	struct lister l = { .parent = parent->id };
	char err[400], dir[96], path[128];
	json_t *kids = NULL;
	pthread_t t;
	unsigned count;

	/* The third of 3 fails 1.5 s after the others answer. */
	snprintf(path, sizeof(path), "%s/fork-starts", home);
	unlink(path);
	setenv("FAKE_VMM_FAIL_NTH", "3", 1);
	setenv("FAKE_VMM_FAIL_DELAY_MS", "1500", 1);
	cr_assert_eq(pthread_create(&t, NULL, list_and_hold, &l), 0);
	cr_assert_eq(fork_of(parent, 3, &kids, err, sizeof(err)), 500, "%s", err);
	atomic_store(&l.done, true);
	pthread_join(t, NULL);
	unsetenv("FAKE_VMM_FAIL_DELAY_MS");
	cr_assert_not(l.saw_child, "a child of the failing fork was listed");
	snprintf(dir, sizeof(dir), "%s/sb", state);
	cr_assert_eq(dir_count(dir, ""), 1, "only the parent's sandbox stays on disk");
	pthread_mutex_lock(&svc->lock);
	count = svc->count;
	pthread_mutex_unlock(&svc->lock);
	cr_assert_eq(count, 1, "every child's place given back");
}

static void pool_setup(void)
{
	start(2);
}

TestSuite(serve_pool, .init = pool_setup, .fini = teardown);

/* Up to 5 s for the pools to hold their 2 VMs each (two templates);
 * the gauges then into *g. */
static void wait_pool_full(const char *what, struct metrics_gauges *g)
{
	for (int i = 0; i < 500; i++) {
		service_gauges(svc, g);
		if (g->pool_ready == 4)
			return;
		usleep(10000);
	}
	cr_assert_eq(g->pool_ready, 4, "the pools did not %s", what);
}

Test(serve_pool, fills_gives_and_refills)
{
	struct metrics_gauges g;
	struct sandbox *sb;

	wait_pool_full("fill", &g);
	cr_assert(g.ntmpl == 2 && g.tmpl_ready[0] == 2 && g.tmpl_ready[1] == 2);
	sb = create();
	service_gauges(svc, &g);
	cr_assert_eq(g.running, 1);
	cr_assert_eq(g.tmpl_ready[0], 1, "the default template's pool did not give it");
	cr_assert_eq(g.tmpl_ready[1], 2, "another template's pool gave it");
	cr_assert_str_eq(sb->rec.template, "fake");
	wait_pool_full("refill", &g);
	{
		json_t *list = service_list(svc);

		cr_assert_eq(json_array_size(list), 1, "pooled VMs are not listed");
		cr_assert_str_eq(json_string_value(json_object_get(json_array_get(list, 0), "id")),
				 sb->id);
		json_decref(list);
	}
}

/* Restores of 300 ms each: the refill threads start several at once. */
static void slow_pool_setup(void)
{
	setenv("FAKE_VMM_DELAY_MS", "300", 1);
	start(2);
}

TestSuite(serve_pool_refill, .init = slow_pool_setup, .fini = teardown);

Test(serve_pool_refill, restores_several_vms_at_once)
{
	struct metrics_gauges g;
	unsigned most = 0;

	for (int i = 0; i < 1000; i++) {
		unsigned starting = 0;

		pthread_mutex_lock(&svc->lock);
		for (unsigned t = 0; t < svc->cfg.ntmpl; t++)
			starting += svc->cfg.tmpl[t].pool_starting;
		pthread_mutex_unlock(&svc->lock);
		if (starting > most)
			most = starting;
		service_gauges(svc, &g);
		if (g.pool_ready == 4)
			break;
		usleep(5000);
	}
	cr_assert_eq(g.pool_ready, 4, "the pools did not fill");
	cr_assert_geq(most, 2, "the pools' VMs were restored one at a time");
}

/* Whether pid's command line holds the two arguments a and b in a row. */
static bool cmdline_has(pid_t pid, const char *a, const char *b)
{
	char path[64], buf[4096];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	cr_assert_gt(n, 0);
	buf[n] = '\0';
	for (char *p = buf; p < buf + n; p += strlen(p) + 1)
		if (!strcmp(p, a) && p + strlen(p) + 1 < buf + n && !strcmp(p + strlen(p) + 1, b))
			return true;
	return false;
}

/* A pooled VM's broker was forked with its rules before the jail: a create
 * with rules gets a VM of its own, started with them; the pool stays. */
Test(serve_pool, a_create_with_network_rules_boots_its_own_vm_with_them)
{
	const char *body = "{\"allow_net\":[\"a.test:443\"],\"resolve\":[\"a.test:127.0.0.1\"]}";
	struct metrics_gauges g;
	struct api_create req;
	struct sandbox *sb;
	char err[400];
	int st;

	wait_pool_full("fill", &g);
	cr_assert_eq(api_parse_create(body, strlen(body), &req, err, sizeof(err)), 0, "%s", err);
	st = service_create(svc, &req, &sb, err, sizeof(err));
	api_create_free(&req);
	cr_assert_eq(st, 201, "create: %d %s", st, err);
	service_put(svc, sb);
	service_gauges(svc, &g);
	cr_assert_eq(g.pool_ready, 4, "a pooled VM was taken");
	cr_assert(cmdline_has(sb->pid, "--allow-net", "a.test:443"));
	cr_assert(cmdline_has(sb->pid, "--resolve", "a.test:127.0.0.1"));
	{
		json_t *j = service_sandbox_json(sb), *allow = json_object_get(j, "allow_net");

		cr_assert_eq(json_array_size(allow), 1);
		cr_assert_str_eq(json_string_value(json_array_get(allow, 0)), "a.test:443");
		json_decref(j);
	}
}

/* ---- a restart: the sandboxes a previous service left, taken over ---- */

static void restart_setup(void)
{
	make_root();
	start_service(0, false);
}

/* Every sandbox deleted (their VMs with them), then the usual checks. */
static void restart_teardown(void)
{
	json_t *list = service_list(svc), *v;
	size_t i;
	char err[300];

	json_array_foreach(list, i, v)
		service_delete(svc, json_string_value(json_object_get(v, "id")), err, sizeof(err));
	json_decref(list);
	teardown();
}

TestSuite(serve_restart, .init = restart_setup, .fini = restart_teardown);

static struct sandbox *create_with(const char *body)
{
	struct api_create req;
	struct sandbox *sb;
	char err[400];
	int st;

	cr_assert_eq(api_parse_create(body, strlen(body), &req, err, sizeof(err)), 0, "%s", err);
	st = service_create(svc, &req, &sb, err, sizeof(err));
	api_create_free(&req);
	cr_assert_eq(st, 201, "create: %d %s", st, err);
	service_put(svc, sb);
	return sb;
}

/* Rewrite sandbox id's record as a service killed at some step left it. */
static void edit_record(const char *id, const char *st, pid_t pid, int64_t created,
			const char *template)
{
	struct registry_record r;
	char dir[128];

	snprintf(dir, sizeof(dir), "%s/sb/%s", state, id);
	cr_assert_eq(registry_read(dir, &r), 0);
	snprintf(r.state, sizeof(r.state), "%s", st);
	if (pid >= 0) {
		r.pid = pid;
		r.pid_start = pid ? registry_pid_start(pid) : 0;
	}
	if (created)
		r.created = created;
	if (template)
		snprintf(r.template, sizeof(r.template), "%s", template);
	cr_assert_eq(registry_write(dir, &r), 0);
}

/* A snapshot in the sandbox's paused directory (the fake VMM reads none). */
static void make_paused(const char *id)
{
	char dir[160];
	FILE *f;

	snprintf(dir, sizeof(dir), "%s/sb/%s/" SERVICE_PAUSED, state, id);
	cr_assert_eq(mkdir(dir, 0700), 0);
	strcat(dir, "/state");
	f = fopen(dir, "w");
	cr_assert_not_null(f);
	fclose(f);
}

static void kill_and_reap(pid_t pid)
{
	kill(-pid, SIGKILL);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* The sandbox id's JSON member key, as a string ("" when none). */
static const char *member(const char *id, const char *key, char *out, size_t len)
{
	json_t *j = service_get_json(svc, id);
	json_t *v = j ? json_object_get(j, key) : NULL;

	snprintf(out, len, "%s", json_is_string(v) ? json_string_value(v) : "");
	json_decref(j);
	return out;
}

Test(serve_restart, a_drain_leaves_the_sandboxes_and_a_restart_takes_them_over_as_they_were)
{
	struct sandbox *a = create_with("{\"env\":{\"GREETING\":\"hi there\"},\"ttl\":600,"
					"\"allow_net\":[\"a.test:443\"]}");
	struct sandbox *b = create();
	char ida[40], idb[40], out[4096], st[32], why[200], err[300];
	pid_t pa = a->pid, pb = b->pid;
	int64_t created = a->created;

	snprintf(ida, sizeof(ida), "%s", a->id);
	snprintf(idb, sizeof(idb), "%s", b->id);
	stop_service();
	cr_assert(registry_pid_alive(pa), "the drain stopped a sandbox's VM");
	cr_assert(registry_pid_alive(pb), "the drain stopped a sandbox's VM");
	/* b paused, as a pause that finished leaves it. */
	kill_and_reap(pb);
	make_paused(idb);
	edit_record(idb, "paused", 0, 0, NULL);

	start_service(0, false);
	cr_assert_str_eq(member(ida, "state", st, sizeof(st)), "running");
	cr_assert_str_eq(member(idb, "state", st, sizeof(st)), "paused");
	a = NULL;
	cr_assert_eq(service_get(svc, ida, &a, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(a->pid, pa, "not the same VM process");
	cr_assert(a->adopted);
	cr_assert_eq(a->created, created, "its creation time changed");
	cr_assert_eq(a->rec.ttl_s, 600u, "its ttl was lost");
	cr_assert_eq(a->net.nallow, 1, "its network rules were lost");
	service_put(svc, a);
	exec(a, "{\"argv\":[\"sh\",\"-c\",\"echo $GREETING\"]}", out, sizeof(out));
	cr_assert(strstr(out, "{\"event\":\"stdout\",\"data\":\"hi there\\n\"}"),
		  "its environment was lost: %s", out);

	/* Its VM killed: exited, with why; calls are 409 and say it. */
	kill(pa, SIGKILL);
	for (int i = 0; i < 300 && strcmp(member(ida, "state", st, sizeof(st)), "exited"); i++)
		usleep(10000);
	cr_assert_str_eq(st, "exited");
	cr_assert(strstr(member(ida, "reason", why, sizeof(why)), "VM process ended"), "%s", why);
	cr_assert_eq(service_get(svc, ida, &a, err, sizeof(err)), 409);
	cr_assert(strstr(err, "VM process ended"), "%s", err);
}

Test(serve_restart, unfinished_and_deleted_sandboxes_go_damaged_ones_are_listed_with_why)
{
	struct sandbox *sb[6];
	char id[6][40], dir[320], st[32], why[300], err[300];
	pid_t pid[6];
	FILE *f;

	for (int i = 0; i < 6; i++) {
		sb[i] = create();
		snprintf(id[i], sizeof(id[i]), "%s", sb[i]->id);
		pid[i] = sb[i]->pid;
	}
	stop_service();
	edit_record(id[0], "starting", -1, 0, NULL);   /* a create cut short */
	edit_record(id[1], "deleting", -1, 0, NULL);   /* a delete cut short */
	snprintf(dir, sizeof(dir), "%s/sb/%s/" REGISTRY_RECORD, state, id[2]);
	f = fopen(dir, "w");                            /* a record out of shape */
	cr_assert_not_null(f);
	fputs("{\"id\":", f);
	fclose(f);
	edit_record(id[3], "running", -1, 0, "gone-template");
	kill_and_reap(pid[4]);                          /* its VM gone while down */
	make_paused(id[5]);                             /* a resume cut short */
	edit_record(id[5], "resuming", -1, 0, NULL);
	snprintf(dir, sizeof(dir), "%s/sb/0123456789abcdef", state);
	cr_assert_eq(mkdir(dir, 0700), 0);              /* killed before its first record */

	start_service(0, false);
	cr_assert_eq(access(dir, F_OK), -1, "a directory without a record was kept");
	for (int i = 0; i < 2; i++) {
		snprintf(dir, sizeof(dir), "%s/sb/%s", state, id[i]);
		cr_assert_eq(access(dir, F_OK), -1, "%s was left", dir);
		cr_assert_null(service_get_json(svc, id[i]));
		cr_assert(!registry_pid_alive(pid[i]), "the VM of an unfinished sandbox lives on");
	}
	cr_assert_str_eq(member(id[2], "state", st, sizeof(st)), "damaged");
	cr_assert(strstr(member(id[2], "reason", why, sizeof(why)), "record.json is out of shape"),
		  "%s", why);
	cr_assert_str_eq(member(id[3], "state", st, sizeof(st)), "damaged");
	cr_assert(strstr(member(id[3], "reason", why, sizeof(why)), "gone-template"), "%s", why);
	cr_assert_str_eq(member(id[4], "state", st, sizeof(st)), "exited");
	cr_assert(strstr(member(id[4], "reason", why, sizeof(why)), "while the service was down"),
		  "%s", why);
	cr_assert_str_eq(member(id[5], "state", st, sizeof(st)), "paused");
	cr_assert(!registry_pid_alive(pid[5]), "the VM of an unfinished resume lives on");
	/* A damaged sandbox's VM goes with its delete; the others are deleted too. */
	cr_assert(registry_pid_alive(pid[3]));
	cr_assert_eq(service_delete(svc, id[3], err, sizeof(err)), 0, "%s", err);
	cr_assert(!registry_pid_alive(pid[3]), "a damaged sandbox's delete left its VM");
	cr_assert_eq(service_delete(svc, id[2], err, sizeof(err)), 0, "%s", err);
	kill_and_reap(pid[2]);   /* its record lost, nobody knew its VM */
}

Test(serve_restart, ttl_counts_on_across_a_restart)
{
	struct sandbox *sb = create_with("{\"ttl\":600}");
	char id[40], dir[128];
	pid_t pid = sb->pid;

	snprintf(id, sizeof(id), "%s", sb->id);
	stop_service();
	/* Made 700 s ago: past its ttl while no service ran. */
	edit_record(id, "running", -1, (int64_t)time(NULL) - 700, NULL);
	start_service(0, false);
	snprintf(dir, sizeof(dir), "%s/sb/%s", state, id);
	for (int i = 0; i < 300 && access(dir, F_OK) == 0; i++)
		usleep(10000);
	cr_assert_eq(access(dir, F_OK), -1, "a sandbox past its ttl was kept");
	cr_assert_null(service_get_json(svc, id));
	cr_assert(!registry_pid_alive(pid), "its VM lives on");
}

/* ---- memory: a reserve the host keeps; a VM killed is reported ---- */

static void write_meminfo(const char *path, unsigned long long avail_kib)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f);
	fprintf(f, "MemTotal:       4000000 kB\nMemFree:         100 kB\nMemAvailable:   %llu kB\n",
		avail_kib);
	fclose(f);
}

Test(serve_service, under_the_memory_reserve_a_create_or_fork_is_503_and_says_why)
{
	struct api_create req = { 0 };
	struct sandbox *sb = create();
	char meminfo[96], err[400];
	json_t *kids = NULL;
	int st;

	snprintf(meminfo, sizeof(meminfo), "%s/meminfo", root);
	write_meminfo(meminfo, 100 * 1024);
	svc->cfg.meminfo = meminfo;
	svc->cfg.memory_reserve_mib = 256;
	st = service_create(svc, &req, &sb, err, sizeof(err));
	cr_assert_eq(st, 503, "%d %s", st, err);
	cr_assert(strstr(err, "100 MiB of memory available, under the service's reserve of 256 MiB"),
		  "%s", err);
	sb = svc->list;
	cr_assert_eq(live_fork(svc, sb, "test", 1, &kids, err, sizeof(err)), 503, "%s", err);
	write_meminfo(meminfo, 4ULL << 20);
	create();
	svc->cfg.meminfo = NULL;
}

Test(serve_service, a_vm_killed_under_the_service_is_exited_with_its_cause_in_the_api_and_metrics)
{
	struct sandbox *a = create(), *b = create();
	char id[2][40], path[160], why[300], st[32];
	struct metrics_gauges g;
	FILE *f;
	char *text;
	size_t len;

	snprintf(id[0], sizeof(id[0]), "%s", a->id);
	snprintf(id[1], sizeof(id[1]), "%s", b->id);
	/* a: its cgroup's OOM killer, as the jail's supervisor says it last. */
	snprintf(path, sizeof(path), "%s/sb/%s/log", state, a->id);
	f = fopen(path, "a");
	cr_assert_not_null(f);
	fputs("mayfly: jail: the VM process was killed by its memory limit (the cgroup's OOM "
	      "killer, memory.max)\n", f);
	fclose(f);
	kill(a->pid, SIGKILL);
	kill(b->pid, SIGKILL);
	for (int i = 0; i < 300 && (strcmp(member(id[0], "state", st, sizeof(st)), "exited") ||
				    strcmp(member(id[1], "state", st, sizeof(st)), "exited")); i++)
		usleep(10000);
	cr_assert(strstr(member(id[0], "reason", why, sizeof(why)), "killed by its memory limit"),
		  "%s", why);
	cr_assert(strstr(member(id[1], "reason", why, sizeof(why)), "killed by signal 9"), "%s", why);
	service_gauges(svc, &g);
	text = metrics_render(&svc->metrics, &g, &len);
	cr_assert(strstr(text, "mayfly_serve_vm_exits_total{cause=\"memory\"} 1\n"), "%s", text);
	cr_assert(strstr(text, "mayfly_serve_vm_exits_total{cause=\"signal\"} 1\n"), "%s", text);
	free(text);
}
