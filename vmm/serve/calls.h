/* calls.h - mayfly serve's tool calls into a sandbox through its guest agent: exec (streamed as JSON lines), signals, files; each approved and audited. */
#ifndef MAYFLY_SERVE_CALLS_H
#define MAYFLY_SERVE_CALLS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "serve/api.h"
#include "serve/service.h"

/* The outcome of a call that is not a stream: an HTTP status; for an
 * error a message and a code for the JSON error ("refused" for the
 * approver's no). */
struct call_result {
	int status;
	const char *code;
	char error[400];
};

struct exec_stream;

/* Start req (moved into the stream: the caller's copy is emptied) on sb,
 * which the caller holds (service_get); the stream puts it back when it
 * ends. 0 and *out: read the events with calls_exec_read, then
 * calls_exec_end. Else r says why (403 refused, 500 audit or start
 * failure) and sb is still the caller's to put. */
int calls_exec_start(struct service *svc, struct sandbox *sb, const char *caller,
		     struct api_exec *req, struct exec_stream **out, struct call_result *r);
/* The exec's id (for POST .../exec/ID/signal). */
uint64_t calls_exec_id(const struct exec_stream *s);
/* Up to len bytes of the JSON lines: >0, 0 at the end, -errno. Blocks. */
ssize_t calls_exec_read(struct exec_stream *s, char *buf, size_t len);
/* The reader is gone: a command still running is killed; waits for the
 * call to end (its audit record written), puts the sandbox back. */
void calls_exec_end(struct exec_stream *s);

/* Pass signo to the running exec exec_id of sb. 0 (202), 404 none. */
int calls_signal(struct service *svc, struct sandbox *sb, uint64_t exec_id, int signo,
		 struct call_result *r);

/* Files: path checked by the caller (api_check_path). Each fills r. */
void calls_file_put(struct service *svc, struct sandbox *sb, const char *caller, const char *path,
		    const void *data, size_t len, uint32_t mode, struct call_result *r);
/* *data malloc'd (the caller frees it) on 200. */
void calls_file_get(struct service *svc, struct sandbox *sb, const char *caller, const char *path,
		    uint8_t **data, size_t *len, struct call_result *r);
/* *out: a JSON array or object on 200. */
void calls_file_list(struct service *svc, struct sandbox *sb, const char *caller, const char *path,
		     json_t **out, struct call_result *r);
void calls_file_stat(struct service *svc, struct sandbox *sb, const char *caller, const char *path,
		     json_t **out, struct call_result *r);
void calls_mkdir(struct service *svc, struct sandbox *sb, const char *caller, const char *path,
		 bool parents, struct call_result *r);
void calls_remove(struct service *svc, struct sandbox *sb, const char *caller, const char *path,
		  bool recursive, struct call_result *r);

#endif
