/* pool.h - mayfly serve's warm pools: restored VMs waiting for a create, one pool per template, refilled by a few threads at once. */
#ifndef MAYFLY_SERVE_POOL_H
#define MAYFLY_SERVE_POOL_H

#include "serve/service.h"

/* Start the refill threads (none when cfg.pool is 0). 0 or -errno after
 * one line; the threads started then are joined by pool_join. */
int pool_start(struct service *svc);

/* Wait for every refill thread (after svc->stopping is set and
 * broadcast): a VM one was starting is linked by then. */
void pool_join(struct service *svc);

/* A ready VM of template t, taken out of its pool (SB_STARTING, still
 * linked), or NULL. The service's lock held. */
struct sandbox *pool_take(struct service *svc, struct service_template *t);

#endif
