/* vm_agent.c - the run step of a VM driven through its guest agent: a job on a thread of its own talks to the agent while vm_run runs the VM. */
#include "launch/vm_agent.h"
#include "agent_client/lifecycle.h"
#include "control/ctl_server.h"
#include "lib/clock.h"
#include "lib/exitcode.h"
#include "lib/log.h"
#include "seccomp/seccomp.h"
#include "lib/thread.h"
#include "net/net.h"
#include "vm/vm.h"

#include <errno.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define INIT_WAIT_S   20     /* how long the boot timer alone is waited for */
#define FRESHEN_WAIT_S 10
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

	while (!vm_guest_init_us(va->vm) && clock_now_ns() < patience) {
		struct pollfd p = { .fd = va->cancel_fd, .events = POLLIN };

		if (poll(&p, 1, 1) > 0)
			return false;
	}
	return true;
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
	if (vm_restored(va->vm))
		rc = agent_connect_fresh(&va->client, dial_vm, va->vm,
					 va->built_ns + AGENT_BOOT_TIMEOUT_S * NS, va->cancel_fd, &why);
	else
		rc = agent_client_connect(&va->client, dial_vm, va->vm, PROTO_AGENT_PORT,
					  va->built_ns + AGENT_BOOT_TIMEOUT_S * NS,
					  va->cancel_fd, &why);
	if (!rc && va->net && va->net->attached)
		rc = agent_tell_net(&va->client, NET_GUEST_PROXY_PORT, NET_VSOCK_PORT,
				    clock_now_ns() + FRESHEN_WAIT_S * NS, &why);
	if (rc) {
		if (rc != -ECANCELED)
			vm_stop(va->vm, RUN_EXIT_AGENT, "%s", why);
		return;
	}
	/* Freshened: host clients held in the backlog come in now. */
	if (vm_restored(va->vm))
		vm_vsock_release(va->vm);
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
		vm_stop(va->vm, 0, "job finished");
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

void vm_agent_init(struct vm_agent *va)
{
	va->cancel_fd = -1;
	va->client.fd = -1;
}

int vm_agent_run(struct vm_agent *va, struct vm *vm, struct net_run *net, struct ctl_server *ctl,
		 uint64_t start_ns, uint64_t built_ns)
{
	pthread_t thread;
	uint64_t one = 1;
	int code;

	va->vm = vm;
	va->net = net;
	va->ctl = ctl;
	va->start_ns = start_ns;
	va->built_ns = built_ns;
	/* A restored agent refuses work until FRESHEN: a client of the --vsock
	 * socket waits in the backlog until our thread has sent it. */
	if (vm_restored(vm) && vm_vsock_hold(vm) == -EBUSY)
		log_warn("cannot hold the vsock listener until the agent is freshened");
	va->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (va->cancel_fd < 0) {
		log_error("cannot create an eventfd: %s", strerror(errno));
		return EXIT_INTERNAL;
	}
	/* The agent thread must never take SIGINT/SIGTERM: vm_run's signalfd does. */
	thread_block_stop_signals();
	if (net && net_run_audit(net))
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
		vm_set_signal_hook(vm, va->signal_hook, va->opaque);
	code = vm_run(vm);
	/* Every wait of the agent thread ends now, whatever it waits for. */
	if (write(va->cancel_fd, &one, sizeof(one)) < 0)
		log_warn("cannot stop the agent thread: %s", strerror(errno));
	pthread_join(thread, NULL);
	return code;
}

void vm_agent_close(struct vm_agent *va)
{
	if (va->stop_threads)
		va->stop_threads(va, va->opaque);
	va->stop_threads = NULL;
	agent_client_close(&va->client);
	if (va->cancel_fd >= 0)
		close(va->cancel_fd);
	va->cancel_fd = -1;
}
