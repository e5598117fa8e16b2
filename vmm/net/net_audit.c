/* net_audit.c - the network's audit records: queued by the I/O thread, appended to the --audit log by a writer thread, fail closed. */
#include "net/net_audit.h"
#include "lib/log.h"
#include "seccomp/seccomp.h"
#include "lib/thread.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static void *writer(void *arg)
{
	struct net_audit *a = arg;
	char err[256];

	seccomp_enter(SECCOMP_ROLE_AGENT);   /* the agent client's: it appends to the log too */
	pthread_mutex_lock(&a->lock);
	for (;;) {
		json_t *rec;

		while (!a->len && !a->stop)
			pthread_cond_wait(&a->cond, &a->lock);
		if (!a->len)
			break;
		bool failed = a->failed, bad = false;

		rec = a->queue[a->head];
		pthread_mutex_unlock(&a->lock);
		if (!failed && audit_append(a->log, rec, err, sizeof(err))) {
			log_error("net: audit log: %s: no more connections", err);
			bad = true;
		}
		json_decref(rec);
		pthread_mutex_lock(&a->lock);
		a->failed |= bad;
		a->head = (a->head + 1) % NET_AUDIT_SLOTS;
		a->len--;
	}
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

int net_audit_start(struct net_audit *a, struct audit_log *log, const char *sandbox)
{
	memset(a, 0, sizeof(*a));
	if (!log)
		return 0;
	a->log = log;
	snprintf(a->sandbox, sizeof(a->sandbox), "%s", sandbox ? sandbox : "");
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->cond, NULL);
	if (thread_create(&a->thread, writer, a)) {
		pthread_cond_destroy(&a->cond);
		pthread_mutex_destroy(&a->lock);
		a->log = NULL;
		return -EAGAIN;
	}
	a->started = true;
	return 0;
}

bool net_audit_admit(void *opaque, unsigned open)
{
	struct net_audit *a = opaque;
	bool room;

	if (!a->started)
		return true;
	pthread_mutex_lock(&a->lock);
	room = a->len + open + 1 <= NET_AUDIT_SLOTS && !a->failed;
	pthread_mutex_unlock(&a->lock);
	return room;
}

void net_audit_record(void *opaque, const struct net_outcome *o)
{
	struct net_audit *a = opaque;
	json_t *rec;

	if (!a->started)
		return;
	rec = json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:i}, s:s, s:{s:s, s:s, s:s, s:I, s:I}}",
			"sandbox", a->sandbox, "caller", "net",
			"call", "tool", "net", "method", o->method, "host", o->host, "port", (int)o->port,
			"outcome", o->allowed ? "allowed" : "refused",
			"result", "addr", o->addr, "rule", o->rule, "reason", o->reason,
			"bytes_up", (json_int_t)o->bytes_up, "bytes_down", (json_int_t)o->bytes_down);
	pthread_mutex_lock(&a->lock);
	/* admit kept a slot for every open connection: there is room. */
	if (rec && a->len < NET_AUDIT_SLOTS) {
		a->queue[(a->head + a->len) % NET_AUDIT_SLOTS] = rec;
		a->len++;
		rec = NULL;
		pthread_cond_signal(&a->cond);
	} else {
		a->failed = true;   /* out of memory: fail closed */
	}
	pthread_mutex_unlock(&a->lock);
	json_decref(rec);
}

void net_audit_stop(struct net_audit *a)
{
	if (!a->started)
		return;
	pthread_mutex_lock(&a->lock);
	a->stop = true;
	pthread_cond_signal(&a->cond);
	pthread_mutex_unlock(&a->lock);
	pthread_join(a->thread, NULL);
	pthread_cond_destroy(&a->cond);
	pthread_mutex_destroy(&a->lock);
	a->started = false;
}
