/* approve_spawner.h - the approver's spawner: a process forked before the jail and the filters that runs --approve's command for the jailed, filtered VMM. */
#ifndef MAYFLY_POLICY_APPROVE_SPAWNER_H
#define MAYFLY_POLICY_APPROVE_SPAWNER_H

#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>

#include "policy/approve.h"

/* A call's JSON longer than this is refused without asking. */
#define APPROVE_SPAWNER_MAX_CALL (16u << 20)
/* Past the approver's own timeout, how long the VMM waits for the answer. */
#define APPROVE_SPAWNER_GRACE_MS 5000

struct approve_spawner {
	int fd;                    /* our end of the socket pair; -1: none */
	pid_t pid;                 /* the spawner; 0: none */
	pid_t owner;               /* the process that forked it (and reaps it) */
	unsigned timeout_ms;       /* the approver's, for our own wait */
	bool broken;               /* a lost answer: every later call is refused */
	pthread_mutex_t lock;      /* one call at a time on fd */
};

/* Fork the spawner, single-threaded, before jail_start and any filter: it
 * keeps this process's uid, capabilities, environment, namespaces and
 * working directory, with nothing open but its socket and stderr (stdin
 * and stdout are /dev/null). It runs each call it is told with
 * approve_check, and ends (killing an approver still running) when the
 * socket's other end is closed: once this process and the jailed VM
 * process it forks are gone, whatever ended them. 0 or -errno. */
int approve_spawner_start(struct approve_spawner *s, const struct approver *a)
	__attribute__((warn_unused_result));

/* Ask the spawner about one call: approve_check's answer, from any
 * thread (calls are serialised). A spawner that is gone or does not
 * answer within the approver's timeout and a grace refuses the call,
 * and every later one. */
void approve_spawner_ask(struct approve_spawner *s, const char *call_json,
			 struct approve_result *res);

/* Close our end; the process that forked the spawner also waits for its
 * end (it ends on the end of file, once no other process holds the
 * socket). Safe on a spawner never started, or zeroed. */
void approve_spawner_stop(struct approve_spawner *s);

#endif
