/* task_api.h - the Task service on ttrpc: each method's request unpacked and checked, task.c's call, its answer packed; and the events forwarded to containerd. */
#ifndef MAYFLY_SHIM_TASK_API_H
#define MAYFLY_SHIM_TASK_API_H

#include <stddef.h>

#include "shim/events.h"
#include "shim/task.h"
#include "shim/ttrpc_server.h"

/* containerd.task.v2.Task's methods, each handler's opaque a struct
 * task_service. Checkpoint and Update answer UNIMPLEMENTED. */
const struct ttrpc_method *task_api_methods(size_t *n);

/* Where events go: containerd's ttrpc socket ($TTRPC_ADDRESS), one
 * connection made again whenever it breaks. */
struct task_api_forwarder {
	const char *address;
	int fd;                    /* -1: not connected */
};

/* An events_send_fn over a struct task_api_forwarder: Events/Forward with
 * the event in an Envelope. 0; -EINVAL (containerd refused it, or it does
 * not encode: dropped); another -errno (try again). */
int task_api_forward(void *opaque, const char *namespace, const struct shim_event *e);

/* Shutdown's request: the shim ends (main waits on s->exit_fd). */
void task_api_request_exit(struct task_service *s);

#endif
