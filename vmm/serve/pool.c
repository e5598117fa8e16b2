/* pool.c - mayfly serve's warm pools: restored VMs waiting for a create, one pool per template, refilled by a few threads at once. */
#include "serve/pool.h"
#include "lib/log.h"

#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Per online CPU: a restore mostly waits (its jail, its VM, its agent). */
#define POOL_THREADS_PER_CPU 2

/* The template whose pool is short, or NULL. The lock held. */
static struct service_template *pool_short(struct service *svc)
{
	for (unsigned i = 0; i < svc->cfg.ntmpl; i++) {
		struct service_template *t = &svc->cfg.tmpl[i];

		if (t->pool_ready + t->pool_starting < svc->cfg.pool)
			return t;
	}
	return NULL;
}

/* A refill thread: while a pool is short (counting the VMs other threads
 * are starting), restore one VM for it. */
static void *pool_main(void *arg)
{
	struct service *svc = arg;
	char err[400];

	pthread_mutex_lock(&svc->lock);
	for (;;) {
		struct service_template *t = NULL;
		struct sandbox *sb;
		int rc;

		while (!svc->stopping && !(t = pool_short(svc)))
			pthread_cond_wait(&svc->changed, &svc->lock);
		if (svc->stopping)
			break;
		sb = service_new_sandbox(svc, t);
		if (!sb)
			break;
		sb->state = SB_STARTING;
		t->pool_starting++;
		pthread_mutex_unlock(&svc->lock);
		/* A warm VM is not worth the host's reserve either. */
		rc = service_memory_ok(svc, err, sizeof(err));
		if (!rc)
			rc = service_start_vm(svc, sb, NULL, NULL, err, sizeof(err));
		if (!rc)
			service_record(sb, "pool");
		pthread_mutex_lock(&svc->lock);
		t->pool_starting--;
		if (rc) {
			if (!svc->stopping)
				log_warn("serve: the warm pool of template '%s' cannot start a VM: %s",
					 t->name, err);
			pthread_mutex_unlock(&svc->lock);
			service_discard(svc, sb);   /* nothing of it is left but sb */
			pthread_mutex_lock(&svc->lock);
			/* Not in a tight loop: wait a moment, or for the drain. */
			if (!svc->stopping) {
				struct timespec until;

				clock_gettime(CLOCK_REALTIME, &until);
				until.tv_sec += 5;
				pthread_cond_timedwait(&svc->changed, &svc->lock, &until);
			}
			continue;
		}
		sb->state = SB_POOL;
		service_link_locked(svc, sb);
		t->pool_ready++;
		pthread_cond_broadcast(&svc->changed);
	}
	pthread_mutex_unlock(&svc->lock);
	return NULL;
}

/* As many threads as VMs the pools hold, as CPUs can restore at once
 * (a few each), and at most SERVICE_POOL_THREADS. */
static unsigned pool_threads(const struct service *svc)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned n = (cpus > 0 ? (unsigned)cpus : 1) * POOL_THREADS_PER_CPU;

	if (n > svc->cfg.pool * svc->cfg.ntmpl)
		n = svc->cfg.pool * svc->cfg.ntmpl;
	return n > SERVICE_POOL_THREADS ? SERVICE_POOL_THREADS : n;
}

int pool_start(struct service *svc)
{
	unsigned want = pool_threads(svc);

	for (svc->npool = 0; svc->npool < want; svc->npool++) {
		int rc = pthread_create(&svc->pool_threads[svc->npool], NULL, pool_main, svc);

		if (rc) {
			/* Fewer refill the pools all the same, unless there is none. */
			if (svc->npool)
				break;
			log_say("serve: cannot start the pool thread: %s", strerror(rc));
			return -rc;
		}
	}
	return 0;
}

void pool_join(struct service *svc)
{
	for (unsigned i = 0; i < svc->npool; i++)
		pthread_join(svc->pool_threads[i], NULL);
	svc->npool = 0;
}

struct sandbox *pool_take(struct service *svc, struct service_template *t)
{
	for (struct sandbox *sb = svc->list; sb; sb = sb->next)
		if (sb->state == SB_POOL && sb->tmpl == t) {
			sb->state = SB_STARTING;
			t->pool_ready--;
			pthread_cond_broadcast(&svc->changed);   /* refill */
			return sb;
		}
	return NULL;
}
