/* events.c - the task events containerd must see, in the order it must see them: queued by the service, forwarded to containerd by one thread. */
#include "shim/events.h"
#include "lib/clock.h"
#include "lib/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RETRY_MIN_MS 50
#define RETRY_MAX_MS 2000

static const struct {
	const char *topic, *type;
} kinds[EV_KINDS] = {
	[EV_TASK_CREATE] = { "/tasks/create", "containerd.events.TaskCreate" },
	[EV_TASK_START] = { "/tasks/start", "containerd.events.TaskStart" },
	[EV_TASK_EXIT] = { "/tasks/exit", "containerd.events.TaskExit" },
	[EV_TASK_DELETE] = { "/tasks/delete", "containerd.events.TaskDelete" },
	[EV_TASK_OOM] = { "/tasks/oom", "containerd.events.TaskOOM" },
	[EV_EXEC_ADDED] = { "/tasks/exec-added", "containerd.events.TaskExecAdded" },
	[EV_EXEC_STARTED] = { "/tasks/exec-started", "containerd.events.TaskExecStarted" },
	[EV_TASK_PAUSED] = { "/tasks/paused", "containerd.events.TaskPaused" },
	[EV_TASK_RESUMED] = { "/tasks/resumed", "containerd.events.TaskResumed" },
};

const char *events_topic(enum shim_event_kind k)
{
	return k < EV_KINDS ? kinds[k].topic : "/tasks/unknown";
}

const char *events_type_url(enum shim_event_kind k)
{
	return k < EV_KINDS ? kinds[k].type : "";
}

/* The head of the queue, sent in order; a failed send is tried again
 * (containerd may be restarting) with a growing pause, until the stop. */
static void *forward(void *arg)
{
	struct events *ev = arg;
	int pause_ms = RETRY_MIN_MS;

	pthread_mutex_lock(&ev->lock);
	for (;;) {
		struct shim_event *e;
		int rc;

		while (!ev->head && !ev->stopping)
			pthread_cond_wait(&ev->more, &ev->lock);
		if (!ev->head)
			break;
		e = ev->head;
		pthread_mutex_unlock(&ev->lock);
		rc = ev->send(ev->send_opaque, ev->namespace, e);
		pthread_mutex_lock(&ev->lock);
		if (rc == 0 || rc == -EINVAL) {
			if (rc)
				log_warn("event %s for %s refused by containerd: dropped",
					 events_topic(e->kind), e->container_id);
			ev->head = e->next;
			if (!ev->head)
				ev->tail = NULL;
			ev->len--;
			free(e);
			pause_ms = RETRY_MIN_MS;
			pthread_cond_broadcast(&ev->more);   /* events_stop waits for the queue to empty */
			continue;
		}
		if (ev->stopping)
			break;   /* events_stop's grace ran out */
		{
			struct timespec until = clock_realtime_after_ms((unsigned)pause_ms);

			pthread_cond_timedwait(&ev->more, &ev->lock, &until);
		}
		pause_ms = pause_ms * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : pause_ms * 2;
	}
	pthread_mutex_unlock(&ev->lock);
	return NULL;
}

int events_start(struct events *ev, const char *namespace, events_send_fn send, void *opaque)
{
	int rc;

	memset(ev, 0, sizeof(*ev));
	pthread_mutex_init(&ev->lock, NULL);
	pthread_cond_init(&ev->more, NULL);
	snprintf(ev->namespace, sizeof(ev->namespace), "%s", namespace);
	ev->send = send;
	ev->send_opaque = opaque;
	rc = pthread_create(&ev->thread, NULL, forward, ev);
	ev->started = rc == 0;
	return -rc;
}

void events_publish(struct events *ev, const struct shim_event *e)
{
	struct shim_event *copy = malloc(sizeof(*copy));

	if (!copy) {
		log_warn("out of memory: event %s for %s dropped", events_topic(e->kind), e->container_id);
		return;
	}
	*copy = *e;
	copy->next = NULL;
	pthread_mutex_lock(&ev->lock);
	if (ev->len >= EVENTS_QUEUE_MAX && ev->head && ev->head->next) {
		/* containerd away for long: keep the newest; the oldest unsent one
		 * is past helping anyone. (The head may be in flight.) */
		struct shim_event *old = ev->head->next;

		ev->head->next = old->next;
		if (ev->tail == old)
			ev->tail = ev->head;
		ev->len--;
		if (ev->dropped++ == 0)
			log_warn("containerd does not take events: dropping the oldest");
		free(old);
	}
	if (ev->tail)
		ev->tail->next = copy;
	else
		ev->head = copy;
	ev->tail = copy;
	ev->len++;
	pthread_cond_signal(&ev->more);
	pthread_mutex_unlock(&ev->lock);
}

void events_stop(struct events *ev, int grace_ms)
{
	struct timespec until = clock_realtime_after_ms((unsigned)grace_ms);

	if (!ev->started)
		return;
	pthread_mutex_lock(&ev->lock);
	while (ev->head) {
		pthread_cond_signal(&ev->more);
		if (pthread_cond_timedwait(&ev->more, &ev->lock, &until) == ETIMEDOUT)
			break;
	}
	ev->stopping = true;
	pthread_cond_broadcast(&ev->more);
	pthread_mutex_unlock(&ev->lock);
	pthread_join(ev->thread, NULL);
	while (ev->head) {
		struct shim_event *e = ev->head;

		ev->head = e->next;
		free(e);
	}
	ev->tail = NULL;
	ev->started = false;
	pthread_cond_destroy(&ev->more);
	pthread_mutex_destroy(&ev->lock);
}
