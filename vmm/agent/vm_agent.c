/* vm_agent.c - a VM in this process, driven through its guest agent by a job on a second thread. */
#include "agent/vm_agent.h"
#include "agent/session.h"
#include "control/ctl_server.h"
#include "clock.h"
#include "exitcode.h"
#include "log.h"
#include "seccomp/seccomp.h"
#include "thread.h"

#include <errno.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define INIT_WAIT_S   20     /* how long the boot timer alone is waited for */
#define FRESHEN_WAIT_S 10
#define SEED_BYTES    32
#define NS            1000000000ULL

static int dial_vm(void *opaque)
{
	return vm_connect_vsock(opaque);
}

/* No agent can answer before the guest's init has run (it writes the boot
 * timer first): knocking earlier only costs the booting guest a refused
 * connection every few milliseconds. A rootfs whose init never writes the
 * timer is tried anyway after a while. A restored guest's timer counts as
 * fired. False when the VM ended. */
static bool wait_guest_init(struct vm_agent *va)
{
	uint64_t patience = clock_now_ns() + INIT_WAIT_S * NS;

	while (!vm_guest_init_us(&va->vm) && clock_now_ns() < patience) {
		struct pollfd p = { .fd = va->cancel_fd, .events = POLLIN };

		if (poll(&p, 1, 1) > 0)
			return false;
	}
	return true;
}

/* The OK answering request `id` (`name` in messages); rc: its send's
 * failure, if it failed. */
static int wait_ok(struct agent_client *c, uint32_t id, int rc, const char *name,
		   uint64_t deadline_ns, const char **why)
{
	static _Thread_local char msg[160];
	struct proto_frame f;

	if (!rc)
		rc = agent_client_next(c, id, &f, deadline_ns);
	if (!rc) {
		if (f.type == PROTO_OK)
			return 0;
		if (f.type != PROTO_ERROR) {
			snprintf(msg, sizeof(msg), "the guest agent answered %s with something else",
				 name);
			*why = msg;
			return -EPROTO;
		}
		rc = agent_client_error(&f, msg, sizeof(msg));
		*why = msg;
		return rc;
	}
	snprintf(msg, sizeof(msg), rc == -ETIMEDOUT ? "the guest agent did not answer %s in time" :
		 "lost the guest agent during %s", name);
	*why = msg;
	return rc;
}

/* Send the request of `len` bytes in c->wbuf and wait for its OK. */
static int request_ok(struct agent_client *c, uint32_t id, int len, const char *name,
		      uint64_t deadline_ns, const char **why)
{
	int rc = len < 0 ? len : agent_client_send(c, (size_t)len, deadline_ns);

	return wait_ok(c, id, rc, name, deadline_ns, why);
}

/* agent_first's builder: FRESHEN, the host's wall clock and fresh random
 * bytes taken on each try; its id into *opaque. */
static int freshen_frame(struct agent_client *c, uint8_t *buf, size_t cap, void *opaque)
{
	uint8_t seed[SEED_BYTES];
	uint32_t *id = opaque;
	struct proto_writer w;
	struct timespec now;
	int len;

	/* getrandom without flags: the host's pool is long since initialised. */
	if (getrandom(seed, sizeof(seed), 0) != sizeof(seed))
		return -EIO;
	*id = agent_client_id(c);
	clock_gettime(CLOCK_REALTIME, &now);
	proto_begin(&w, buf, cap, PROTO_FRESHEN, *id);
	proto_put_u64(&w, (uint64_t)now.tv_sec * NS + (uint64_t)now.tv_nsec);
	proto_put_bytes(&w, seed, sizeof(seed));
	len = proto_end(&w);
	explicit_bzero(seed, sizeof(seed));
	return len;
}

int vm_agent_connect_fresh(struct agent_client *c, agent_dial_fn dial, void *dial_opaque,
			   uint64_t deadline_ns, int cancel_fd, const char **why)
{
	uint32_t id = 0;
	struct agent_first first = { freshen_frame, &id };
	int rc = agent_client_connect_first(c, dial, dial_opaque, PROTO_AGENT_PORT, &first,
					    deadline_ns, cancel_fd, why);

	if (!rc)
		rc = wait_ok(c, id, 0, "FRESHEN", deadline_ns, why);
	return rc;
}

/* NET: the guest agent serves the proxy (docs/protocol.md). */
static int tell_net(struct agent_client *c, uint64_t deadline_ns, const char **why)
{
	uint32_t id = agent_client_id(c);
	struct proto_writer w;

	proto_begin(&w, c->wbuf, sizeof(c->wbuf), PROTO_NET, id);
	proto_put_u32(&w, NET_GUEST_PROXY_PORT);
	proto_put_u32(&w, NET_VSOCK_PORT);
	return request_ok(c, id, proto_end(&w), "NET", deadline_ns, why);
}

static void agent_work(struct vm_agent *va)
{
	const char *why = "";
	int rc;

	if (!wait_guest_init(va))
		return;
	/* From the VM's build, not the process's start: making the default snapshot
	 * first (hashing a root image of hundreds of MiB, a cold boot) is not this
	 * VM's boot. */
	if (va->vm.snap)
		rc = vm_agent_connect_fresh(&va->client, dial_vm, &va->vm,
					    va->built_ns + VM_AGENT_BOOT_TIMEOUT_S * NS,
					    va->cancel_fd, &why);
	else
		rc = agent_client_connect(&va->client, dial_vm, &va->vm, PROTO_AGENT_PORT,
					  va->built_ns + VM_AGENT_BOOT_TIMEOUT_S * NS,
					  va->cancel_fd, &why);
	if (!rc && va->net && va->net->attached)
		rc = tell_net(&va->client, clock_now_ns() + FRESHEN_WAIT_S * NS, &why);
	if (rc) {
		if (rc != -ECANCELED)
			vm_stop(&va->vm, RUN_EXIT_AGENT, "%s", why);
		return;
	}
	/* Freshened: host clients held in the backlog come in now. */
	if (va->vm.snap && va->vm.vsock)
		virtio_vsock_release(va->vm.vsock);
	va->ready_ns = clock_now_ns();
	if (va->ctl)
		ctl_server_ready(va->ctl);   /* the service's check that we are up */
	log_info("guest agent ready after %.1f ms", (double)(va->ready_ns - va->start_ns) / 1e6);
	if (!va->job) {
		agent_client_close(&va->client);   /* freshened: the VM is the user's now */
		/* Idle from here, maybe one of many forked children: what the
		 * build freed goes back to the host. */
		malloc_trim(0);
		return;
	}
	va->job(va, va->opaque);
	va->job_done = true;
	/* Nothing in the VM is worth keeping: end it now, no guest shutdown. */
	if (!va->keep_running)
		vm_stop(&va->vm, 0, "job finished");
}

static void *agent_thread(void *arg)
{
	struct vm_agent *va = arg;

	/* The approver runs in the spawner (approve_spawner.h): nothing of
	 * ours is ever exec'd, so this thread is always filtered. */
	thread_set_name(va->saves_snapshot ? "snapshot" : "agent");
	seccomp_enter(va->saves_snapshot ? SECCOMP_ROLE_SNAPSHOT : SECCOMP_ROLE_AGENT);
	agent_work(va);
	if (va->job_end)
		va->job_end(va, va->opaque);
	return NULL;
}

int vm_agent_run(struct vm_agent *va, const struct vm_config *cfg, const struct snapshot *snap,
		 uint64_t start_ns)
{
	pthread_t thread;
	uint64_t one = 1;
	int code;

	va->start_ns = start_ns;
	va->client.fd = -1;
	code = vm_build(&va->vm, cfg, snap, start_ns);
	va->built_ns = clock_now_ns();
	if (!code && va->net && net_run_attach(va->net, &va->vm))
		code = EXIT_INTERNAL;
	if (!code && va->jail)
		code = jail_enter(va->jail, cfg);
	if (!code && va->ctl && ctl_server_start(va->ctl, &va->vm))
		code = EXIT_INTERNAL;
	if (code)
		return code;
	va->built = true;
	/* A restored agent refuses work until FRESHEN: a client of the --vsock
	 * socket waits in the backlog until our thread has sent it. */
	if (snap && va->vm.vsock && virtio_vsock_hold(va->vm.vsock))
		log_warn("cannot hold the vsock listener until the agent is freshened");
	va->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (va->cancel_fd < 0) {
		log_error("cannot create an eventfd: %s", strerror(errno));
		return EXIT_INTERNAL;
	}
	/* The agent thread must never take SIGINT/SIGTERM: vm_run's signalfd does. */
	thread_block_stop_signals();
	if (va->net && net_run_audit(va->net))
		return EXIT_INTERNAL;
	if (va->start_threads && va->start_threads(va, va->opaque)) {
		log_error("cannot start the job's threads");
		return EXIT_INTERNAL;
	}
	if (thread_create(&thread, agent_thread, va)) {
		log_error("cannot start the agent thread");
		return EXIT_INTERNAL;
	}
	if (va->signal_hook)
		vm_set_signal_hook(&va->vm, va->signal_hook, va->opaque);
	code = vm_run(&va->vm);
	/* Every wait of the agent thread ends now, whatever it waits for. */
	if (write(va->cancel_fd, &one, sizeof(one)) < 0)
		log_warn("cannot stop the agent thread: %s", strerror(errno));
	pthread_join(thread, NULL);
	return code;
}

void vm_agent_destroy(struct vm_agent *va)
{
	agent_client_close(&va->client);
	vm_destroy(&va->vm);
	if (va->cancel_fd >= 0)
		close(va->cancel_fd);
	va->cancel_fd = -1;
}
