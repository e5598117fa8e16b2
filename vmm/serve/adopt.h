/* adopt.h - mayfly serve's restart: the sandboxes a previous service left in the state directory taken over as they were, or listed with why not. */
#ifndef MAYFLY_SERVE_ADOPT_H
#define MAYFLY_SERVE_ADOPT_H

struct service;

/* For each sandbox directory under sbdir (STATE/sb), by its record:
 *  - "running" (or "resuming" whose snapshot was taken over): its VM
 *    process, when still the one recorded (pid and start time) and its
 *    agent answers, adopted as running; its pause finished meanwhile:
 *    paused; its VM gone: listed as exited, with why;
 *  - "paused" with its snapshot, or "resuming" that had not finished:
 *    paused (a VM of the unfinished resume stopped);
 *  - "starting", "pool", "deleting": nobody was told of it, or it was
 *    deleted: its VM stopped, its files removed;
 *  - a record or spec out of shape, a snapshot missing, a template this
 *    service does not have: listed as damaged, with why (a delete
 *    removes it).
 * ttl and idle_timeout count on from the record. One log line in all. */
void adopt_all(struct service *svc, const char *sbdir);

#endif
