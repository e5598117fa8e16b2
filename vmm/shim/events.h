/* events.h - the task events containerd must see, in the order it must see them: queued by the service, forwarded to containerd by one thread. */
#ifndef MAYFLY_SHIM_EVENTS_H
#define MAYFLY_SHIM_EVENTS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#define EVENTS_QUEUE_MAX 1024   /* past this the oldest is dropped, with a log line */
#define EVENTS_ID_MAX    76

enum shim_event_kind {
	EV_TASK_CREATE, EV_TASK_START, EV_TASK_EXIT, EV_TASK_DELETE, EV_TASK_OOM,
	EV_EXEC_ADDED, EV_EXEC_STARTED, EV_TASK_PAUSED, EV_TASK_RESUMED, EV_KINDS,
};

struct shim_event {
	enum shim_event_kind kind;
	char container_id[EVENTS_ID_MAX + 1];
	char exec_id[EVENTS_ID_MAX + 1];   /* EXEC_*, an exec's TASK_EXIT / TASK_DELETE */
	uint32_t pid;
	uint32_t exit_status;
	struct timespec at;                /* when it happened (CLOCK_REALTIME) */
	char bundle[4096];                 /* TASK_CREATE */
	struct shim_event *next;
};

/* How an event reaches containerd: ttrpc's Events/Forward on
 * $TTRPC_ADDRESS (events_forward.c). 0, or -errno to try again later. */
typedef int (*events_send_fn)(void *opaque, const char *namespace, const struct shim_event *e);

struct events {
	pthread_mutex_t lock;
	pthread_cond_t more;
	struct shim_event *head, *tail;
	unsigned len;
	uint64_t dropped;
	bool stopping;
	pthread_t thread;
	bool started;
	char namespace[64];
	events_send_fn send;
	void *send_opaque;
};

/* The containerd topic and type URL of a kind ("/tasks/exit",
 * "containerd.events.TaskExit"). */
const char *events_topic(enum shim_event_kind k);
const char *events_type_url(enum shim_event_kind k);

/* Start the forwarding thread. 0 or -errno. */
int events_start(struct events *ev, const char *namespace, events_send_fn send, void *opaque);

/* Queue e (copied) to be sent after every event queued before it. Any
 * thread; never blocks on containerd. */
void events_publish(struct events *ev, const struct shim_event *e);

/* Send what is queued (for at most grace_ms while containerd does not
 * take it), then stop the thread. */
void events_stop(struct events *ev, int grace_ms);

#endif
