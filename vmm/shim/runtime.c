/* runtime.c - containerd's runtime v2 contract for a shim binary: its flags, `start` (a daemon per container group, its socket's address printed), `delete` (the cleanup after a shim that died), and the state a delete finds in the bundle. */
#include "shim/runtime.h"
#include "lib/atomic_file.h"
#include "lib/errmsg.h"
#include "lib/image_id.h"
#include "lib/log.h"
#include "shim/oci.h"
#include "shim/rootfs.h"
#include "shim/ttrpc.h"
#include "shim/task.pb-c.h"

#include <errno.h>
#include <fcntl.h>
#include <sha2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int runtime_parse(struct runtime_args *a, int argc, char **argv, char *err, size_t errlen)
{
	static const struct { const char *name; size_t off; } strings[] = {
		{ "namespace", offsetof(struct runtime_args, namespace) },
		{ "address", offsetof(struct runtime_args, address) },
		{ "publish-binary", offsetof(struct runtime_args, publish_binary) },
		{ "id", offsetof(struct runtime_args, id) },
		{ "bundle", offsetof(struct runtime_args, bundle) },
	};
	int i;

	memset(a, 0, sizeof(*a));
	for (i = 1; i < argc; i++) {
		const char *arg = argv[i], *name, *eq;
		size_t n;
		bool known = false;

		if (arg[0] != '-')
			break;
		name = arg + (arg[1] == '-' ? 2 : 1);
		eq = strchr(name, '=');
		n = eq ? (size_t)(eq - name) : strlen(name);
		if (n == 1 && name[0] == 'v') {
			a->action = RUNTIME_VERSION;
			return 0;
		}
		if (n == 5 && !strncmp(name, "debug", 5)) {
			a->debug = !eq || !strcmp(eq + 1, "true") || !strcmp(eq + 1, "1");
			continue;
		}
		for (size_t k = 0; k < sizeof(strings) / sizeof(strings[0]); k++) {
			if (strlen(strings[k].name) != n || strncmp(strings[k].name, name, n))
				continue;
			if (!eq && i + 1 >= argc)
				return errmsg_invalid(err, errlen, "-%s needs a value", strings[k].name);
			*(const char **)((char *)a + strings[k].off) = eq ? eq + 1 : argv[++i];
			known = true;
		}
		if (!known)
			return errmsg_invalid(err, errlen, "unknown flag %.60s", arg);
	}
	if (i < argc) {
		if (!strcmp(argv[i], "start"))
			a->action = RUNTIME_START;
		else if (!strcmp(argv[i], "delete"))
			a->action = RUNTIME_DELETE;
		else
			return errmsg_invalid(err, errlen, "unknown command %.60s (want start or delete)",
					      argv[i]);
		if (i + 1 < argc)
			return errmsg_invalid(err, errlen, "unexpected argument %.60s", argv[i + 1]);
	}
	if (!a->namespace || !*a->namespace)
		return errmsg_invalid(err, errlen, "-namespace is required");
	if (a->action != RUNTIME_SERVE && (!a->id || !*a->id))
		return errmsg_invalid(err, errlen, "-id is required");
	return 0;
}

int runtime_socket_address(const char *address, const char *ns, const char *group, char *out,
			   size_t len)
{
	uint8_t digest[SHA256_DIGEST_LENGTH];
	char hex[65];
	SHA2_CTX ctx;

	SHA256Init(&ctx);
	SHA256Update(&ctx, (const uint8_t *)address, strlen(address));
	SHA256Update(&ctx, (const uint8_t *)"/", 1);
	SHA256Update(&ctx, (const uint8_t *)ns, strlen(ns));
	SHA256Update(&ctx, (const uint8_t *)"/", 1);
	SHA256Update(&ctx, (const uint8_t *)group, strlen(group));
	SHA256Final(digest, &ctx);
	image_hash_hex(digest, hex);
	return (size_t)snprintf(out, len, "unix://" RUNTIME_SOCKET_DIR "/%s", hex) < len ? 0 : -ENAMETOOLONG;
}

static const char *socket_path(const char *address)
{
	return strncmp(address, "unix://", 7) ? address : address + 7;
}

static int socket_addr(const char *path, struct sockaddr_un *a)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(a->sun_path))
		return -ENAMETOOLONG;
	memcpy(a->sun_path, path, strlen(path) + 1);
	return 0;
}

static bool can_connect(const char *path)
{
	struct sockaddr_un a;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	if (fd < 0 || socket_addr(path, &a)) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return ok;
}

/* A listening socket at path: -EADDRINUSE when one is there already. */
static int listen_at(const char *path)
{
	struct sockaddr_un a;
	int fd, rc;

	if (socket_addr(path, &a))
		return -ENAMETOOLONG;
	fd = socket(AF_UNIX, SOCK_STREAM, 0);   /* no CLOEXEC: the daemon's fd 3 */
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 64) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

static int write_address(const char *address)
{
	int fd = open("address", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0)
		return -errno;
	if (write(fd, address, strlen(address)) != (ssize_t)strlen(address)) {
		close(fd);
		return -EIO;
	}
	return close(fd) < 0 ? -errno : 0;
}

/* The group a container's shim serves: the pod's sandbox (a sandbox
 * container is its own group), else the container alone. */
static void group_of(const char *id, char *out, size_t len)
{
	struct oci_config cfg;
	char err[200];

	snprintf(out, len, "%s", id);
	if (oci_config_load(&cfg, ".", err, sizeof(err)) == 0) {
		if (cfg.sandbox_id)
			snprintf(out, len, "%s", cfg.sandbox_id);
		oci_config_free(&cfg);
	}
}

int runtime_start(const struct runtime_args *a, const char *self)
{
	char address[160], group[256], fd3[8];
	const char *path;
	pid_t pid;
	int fd;

	group_of(a->id, group, sizeof(group));
	if (runtime_socket_address(a->address ? a->address : "", a->namespace, group, address,
				   sizeof(address))) {
		log_say("the shim's socket address is too long");
		return 1;
	}
	path = socket_path(address);
	if (mkdir("/run/containerd", 0711) < 0 && errno != EEXIST) {
		log_say("cannot create /run/containerd: %s", strerror(errno));
		return 1;
	}
	if (mkdir(RUNTIME_SOCKET_DIR, 0711) < 0 && errno != EEXIST) {
		log_say("cannot create " RUNTIME_SOCKET_DIR ": %s", strerror(errno));
		return 1;
	}
	fd = listen_at(path);
	if (fd == -EADDRINUSE) {
		/* The group's shim runs already: the container joins it. */
		if (can_connect(path)) {
			if (write_address(address)) {
				log_say("cannot write the bundle's address file: %s", strerror(errno));
				return 1;
			}
			printf("%s", address);
			return 0;
		}
		unlink(path);   /* a shim that died left it */
		fd = listen_at(path);
	}
	if (fd < 0) {
		log_say("cannot listen on %s: %s", path, strerror(-fd));
		return 1;
	}
	if (write_address(address)) {
		log_say("cannot write the bundle's address file: %s", strerror(errno));
		goto err;
	}
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		log_say("cannot fork the shim: %s", strerror(errno));
		goto err;
	}
	if (pid == 0) {
		char *argv[12];
		int n = 0, null = open("/dev/null", O_RDWR);

		/* The daemon: its own session (containerd's signals to the
		 * `start` process are not its), the socket as fd 3, stdio on
		 * /dev/null until it opens the bundle's log fifo. */
		setsid();
		if (fd != 3 && (dup2(fd, 3) < 0 || close(fd) < 0))
			_exit(127);
		if (null >= 0) {
			dup2(null, STDIN_FILENO);
			dup2(null, STDOUT_FILENO);
		}
		snprintf(fd3, sizeof(fd3), "3");
		argv[n++] = (char *)self;
		argv[n++] = "-namespace";
		argv[n++] = (char *)a->namespace;
		argv[n++] = "-id";
		argv[n++] = (char *)a->id;
		argv[n++] = "-address";
		argv[n++] = (char *)(a->address ? a->address : "");
		if (a->publish_binary) {
			argv[n++] = "-publish-binary";
			argv[n++] = (char *)a->publish_binary;
		}
		if (a->debug)
			argv[n++] = "-debug";
		argv[n] = NULL;
		execv(self, argv);
		_exit(127);
	}
	close(fd);
	printf("%s", address);
	return 0;

err:
	close(fd);
	unlink(path);
	return 1;
}

struct text {
	const char *s;
	size_t n;
};

static int write_text(int fd, void *opaque, const char **why)
{
	const struct text *t = opaque;

	if (write(fd, t->s, t->n) != (ssize_t)t->n)
		return errmsg_why(why, -EIO, "cannot write the shim's state");
	return 0;
}

int runtime_state_save(const char *bundle, const struct runtime_state *st)
{
	char path[4200], buf[512];
	const char *why = "";
	struct text t = { buf, 0 };
	int n;

	snprintf(path, sizeof(path), "%s/" RUNTIME_STATE_FILE, bundle);
	n = snprintf(buf, sizeof(buf), "%d %llu %d %s\n", (int)st->vm_pid,
		     (unsigned long long)st->vm_start_time, st->rootfs_mounted, st->vm_dir);
	if (n < 0 || (size_t)n >= sizeof(buf))
		return -ENAMETOOLONG;
	t.n = (size_t)n;
	return atomic_file_fill(path, write_text, &t, &why);
}

int runtime_state_load(const char *bundle, struct runtime_state *st)
{
	char path[4200];
	unsigned long long t = 0;
	int pid = 0, mounted = 0;
	FILE *f;

	memset(st, 0, sizeof(*st));
	snprintf(path, sizeof(path), "%s/" RUNTIME_STATE_FILE, bundle);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	if (fscanf(f, "%d %llu %d %255s", &pid, &t, &mounted, st->vm_dir) < 3 || pid < 0) {
		fclose(f);
		return -EBADMSG;
	}
	fclose(f);
	st->vm_pid = pid;
	st->vm_start_time = t;
	st->rootfs_mounted = mounted != 0;
	return 0;
}

uint64_t runtime_start_time(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long t = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strrchr(buf, ')');   /* the name may hold spaces and parentheses */
	/* After ") ": state is field 3, starttime field 22. */
	for (int field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	if (p)
		sscanf(p + 1, "%llu", &t);
	return t;
}

/* Wait up to ms for pid to be gone (it is not our child: poll /proc). */
static bool gone_within(pid_t pid, uint64_t start_time, int ms)
{
	for (int waited = 0; waited <= ms; waited += 50) {
		if (runtime_start_time(pid) != start_time)
			return true;
		usleep(50 * 1000);
	}
	return false;
}

int runtime_delete(const struct runtime_args *a)
{
	Containerd__Task__V2__DeleteResponse r = CONTAINERD__TASK__V2__DELETE_RESPONSE__INIT;
	Google__Protobuf__Timestamp t = GOOGLE__PROTOBUF__TIMESTAMP__INIT;
	struct runtime_state st;
	struct timespec now;
	char path[512];
	uint8_t *out = NULL;
	size_t len = 0;
	bool ok = true;

	/* What a shim killed with SIGKILL left: its VM (its jail's supervisor
	 * dies with the shim, the VM with it; a straggler is killed here),
	 * the VM's socket directory, the rootfs mount. The cwd is the bundle. */
	log_info("delete: cleaning up after the shim of %s", a->id);
	if (runtime_state_load(".", &st) == 0) {
		if (st.vm_pid > 0 && runtime_start_time(st.vm_pid) == st.vm_start_time) {
			kill(st.vm_pid, SIGKILL);
			if (!gone_within(st.vm_pid, st.vm_start_time, 5000)) {
				log_warn("the VM process %d outlived SIGKILL", (int)st.vm_pid);
				ok = false;
			}
		}
		if (st.vm_dir[0]) {
			snprintf(path, sizeof(path), "%s/vm.sock", st.vm_dir);
			unlink(path);
			snprintf(path, sizeof(path), "%s/vm.sock.ctl", st.vm_dir);
			unlink(path);
			if (rmdir(st.vm_dir) < 0 && errno != ENOENT)
				log_warn("cannot remove %s: %s", st.vm_dir, strerror(errno));
		}
		r.pid = (uint32_t)st.vm_pid;
	}
	if (rootfs_unmount("rootfs")) {
		log_warn("cannot unmount the bundle's rootfs: %s", strerror(errno));
		ok = false;
	}
	if (ok)
		unlink(RUNTIME_STATE_FILE);
	clock_gettime(CLOCK_REALTIME, &now);
	t.seconds = now.tv_sec;
	t.nanos = (int32_t)now.tv_nsec;
	r.exit_status = 128 + SIGKILL;
	r.exited_at = &t;
	if (ttrpc_pack(&r.base, &out, &len)) {
		log_say("cannot encode the DeleteResponse");
		return 1;
	}
	if (len && fwrite(out, 1, len, stdout) != len) {
		free(out);
		return 1;
	}
	free(out);
	return ok ? 0 : 1;
}
