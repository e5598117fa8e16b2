/* approve.h - the approval hook: an operator's command that sees each exec or file write as JSON and must exit 0 to allow it. */
#ifndef MAYFLY_POLICY_APPROVE_H
#define MAYFLY_POLICY_APPROVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define APPROVE_DEFAULT_TIMEOUT_S 30
#define APPROVE_MAX_TIMEOUT_S     3600
/* What of the approver's stdout is kept as its reason (the rest is read and dropped). */
#define APPROVE_REASON_MAX        400

struct approver {
	const char *cmd;           /* run with /bin/sh -c; NULL: every call allowed */
	unsigned timeout_ms;       /* 0: APPROVE_DEFAULT_TIMEOUT_S */
};

struct approve_result {
	bool allowed;
	/* Refused: why, one line of printable ASCII ("the approver exited 1:
	 * <its first stdout line>", "... was killed by signal 9", "... did not
	 * answer within 30 s", "... could not be started: ..."). Allowed: "". */
	char reason[APPROVE_REASON_MAX + 100];
	uint64_t duration_us;
};

/* Ask the approver about one call. Its command runs with /bin/sh -c in a
 * process group of its own, with default signal dispositions, nothing
 * open but the call on stdin (call_json and a newline, then end of file),
 * stdout to a pipe (its first line becomes the reason of a refusal) and
 * our stderr. It allows the call by exiting 0 within the timeout.
 * Anything else refuses it: another exit status, death by a signal, no
 * exit within the timeout (its process group is then killed), or a
 * command that cannot be started. Whatever the approver does, this
 * returns within the timeout and a kill, and leaves no process behind
 * (its group is killed once it exited). Any thread. */
void approve_check(const struct approver *a, const char *call_json, struct approve_result *res);

/* The same, also ended (refused, the approver's group killed) as soon as
 * stop_fd is readable or hung up (-1: never): the approver spawner's
 * socket, whose end of file means mayfly is gone. */
void approve_check_until(const struct approver *a, const char *call_json, int stop_fd,
			 struct approve_result *res);

#endif
