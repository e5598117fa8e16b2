/* test_shim_events.c - the shim's events reach containerd in the order they happened, survive a containerd that is away for a while, and cannot grow without bound. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "shim/events.h"

struct sink {
	pthread_mutex_t lock;
	enum shim_event_kind seen[2048];
	char ids[2048][EVENTS_ID_MAX + 1];
	int n;
	_Atomic int failures;      /* sends to refuse (containerd away) before taking any */
	_Atomic bool blocked;      /* refuse every send */
};

static int take(void *opaque, const char *ns, const struct shim_event *e)
{
	struct sink *s = opaque;

	cr_assert_str_eq(ns, "ns1");
	if (atomic_load(&s->blocked))
		return -ECONNREFUSED;
	if (atomic_load(&s->failures) > 0) {
		atomic_fetch_sub(&s->failures, 1);
		return -ECONNREFUSED;
	}
	pthread_mutex_lock(&s->lock);
	s->seen[s->n] = e->kind;
	snprintf(s->ids[s->n], sizeof(s->ids[0]), "%s", e->container_id);
	s->n++;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static void publish(struct events *ev, enum shim_event_kind k, const char *id)
{
	struct shim_event e = { .kind = k };

	snprintf(e.container_id, sizeof(e.container_id), "%s", id);
	events_publish(ev, &e);
}

Test(shim_events, in_order_even_after_failed_sends)
{
	static struct sink s = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct events ev;
	static const enum shim_event_kind order[] = { EV_TASK_CREATE, EV_TASK_START, EV_TASK_EXIT,
						      EV_TASK_DELETE };

	atomic_store(&s.failures, 3);
	cr_assert_eq(events_start(&ev, "ns1", take, &s), 0);
	for (int i = 0; i < 4; i++)
		publish(&ev, order[i], "c1");
	events_stop(&ev, 5000);
	cr_assert_eq(s.n, 4);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(s.seen[i], order[i], "event %d out of order", i);
}

Test(shim_events, topics_and_types_are_containerds)
{
	cr_assert_str_eq(events_topic(EV_TASK_EXIT), "/tasks/exit");
	cr_assert_str_eq(events_type_url(EV_TASK_EXIT), "containerd.events.TaskExit");
	cr_assert_str_eq(events_topic(EV_EXEC_ADDED), "/tasks/exec-added");
	cr_assert_str_eq(events_type_url(EV_EXEC_STARTED), "containerd.events.TaskExecStarted");
	cr_assert_str_eq(events_topic(EV_TASK_PAUSED), "/tasks/paused");
}

/* containerd gone for good: the queue keeps the newest EVENTS_QUEUE_MAX
 * and the stop gives up after its grace. */
Test(shim_events, the_queue_is_bounded)
{
	static struct sink s = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct events ev;
	char id[8];

	atomic_store(&s.blocked, true);
	cr_assert_eq(events_start(&ev, "ns1", take, &s), 0);
	for (int i = 0; i < EVENTS_QUEUE_MAX + 500; i++) {
		snprintf(id, sizeof(id), "%d", i);
		publish(&ev, EV_TASK_START, id);
	}
	pthread_mutex_lock(&ev.lock);
	cr_assert_leq(ev.len, EVENTS_QUEUE_MAX);
	cr_assert_eq(ev.dropped, 500);
	/* The newest is kept. */
	cr_assert_str_eq(ev.tail->container_id, "1523");
	pthread_mutex_unlock(&ev.lock);
	events_stop(&ev, 300);
	cr_assert_eq(s.n, 0);
}
