/* events.h - mayfly run/exec --json: one JSON object per line on stdout, valid whatever bytes the command writes. */
#ifndef MAYFLY_AGENT_CLIENT_EVENTS_H
#define MAYFLY_AGENT_CLIENT_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/phase.h"

/* A stream's text state: the bytes of a UTF-8 sequence cut by a chunk
 * boundary wait here for the rest. */
struct event_stream {
	const char *name;          /* "stdout" or "stderr" */
	uint8_t carry[4];
	size_t ncarry;
};

/* The longest prefix of s[0..len) that is whole, valid UTF-8 by RFC 3629
 * (no overlong forms, no surrogates, nothing above U+10FFFF). *cut is
 * true when what follows is the start of a sequence that may yet be
 * completed (at most 3 bytes at the very end); otherwise anything that
 * follows is invalid. */
size_t utf8_valid_prefix(const uint8_t *s, size_t len, bool *cut);

/* Seed jansson's hash function now: on first use it opens /dev/urandom,
 * which the main thread's seccomp filter forbids once the VM runs (its
 * last event may be the first). Before vm_run. */
void events_prepare(void);

/* Each writes one line to out and flushes it. */
void event_started(FILE *out, uint32_t pid);
/* Output as {"event":NAME,"data":TEXT} when it is valid UTF-8 (a sequence
 * cut at the end waits for the next chunk), else the whole chunk as
 * {"event":NAME,"data_b64":...}. */
void event_output(FILE *out, struct event_stream *st, const uint8_t *data, size_t len);
/* What is left in the carry, as data_b64. */
void event_output_flush(FILE *out, struct event_stream *st);
/* code -1 and signo 0 for the kinds that do not have them. */
void event_exit(FILE *out, int code, int signo, bool timed_out, uint64_t duration_us,
		int exit_code, bool truncated);
/* msg: any bytes; shown as printable ASCII. */
void event_error(FILE *out, const char *msg);
#define EVENT_EXIT_KINDS 64
/* The run's breakdown in milliseconds, -1 for a phase never reached. */
struct event_timings {
	double vmm_setup, first_run, guest_init, agent_ready, command_start, command_end, teardown,
	       total;
	bool restored;             /* from a snapshot: guest_init does not apply */
	uint64_t start_ns;         /* CLOCK_MONOTONIC at main(): a parent that took the clock
	                            * before exec knows what exec cost */
	double phases[PHASE_NR];   /* each milestone, in ms since main(); -1: not reached */
	/* VM exits to the VMM by kind: nexits counts, each under its kind's
	 * name (a name may repeat: its counts add up; a zero is left out). */
	const char *exit_kinds[EVENT_EXIT_KINDS];
	uint64_t exit_counts[EVENT_EXIT_KINDS];
	size_t nexits;
};
void event_timings(FILE *out, const struct event_timings *t);

#endif
