/* e2b_msg.h - E2B envd's process and filesystem messages (protobuf JSON) as pure functions: requests checked into typed values, events and entries rendered. */
#ifndef MAYFLY_SERVE_E2B_MSG_H
#define MAYFLY_SERVE_E2B_MSG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define E2B_MAX_ARGS     1024          /* argv (cmd and args) and env entries each */
#define E2B_MAX_EXEC     (1u << 20)    /* argv and env bytes together, NULs counted */
#define E2B_MAX_INPUT    (1u << 20)    /* SendInput's bytes, decoded */
#define E2B_MAX_DATA     (1u << 20)    /* an output chunk e2b_event_data renders */
#define E2B_MAX_PTY      1000          /* pty columns and rows, each */
#define E2B_MAX_DEPTH    16            /* ListDir's depth */
#define E2B_MAX_TEXT     1024          /* an end event's status and error */
#define E2B_MAX_NAME     4096          /* a watch event's name */

/*
 * Parsing, common to every e2b_parse_*: json[0..len) is one message as
 * protobuf's JSON mapping reads it (len 0 is {}): unknown members are
 * ignored, null is an unset member, a uint32 may be a number or a decimal
 * string, bytes are base64 (standard or URL-safe, padded or not). Every
 * member we read is one word, so its JSON and proto names are the same.
 * Duplicate keys, text that is not UTF-8 and strings holding NUL are
 * refused. Each returns 0, or -EINVAL with one line in err naming the
 * member (invalid_argument); outputs are unspecified on failure.
 */

/* process.Process/Start's StartRequest. */
struct e2b_start {
	char **argv;               /* NULL-terminated: process.cmd, then process.args;
				    * the strings are owner's, read-only */
	int argc;                  /* 1..E2B_MAX_ARGS */
	char **env;                /* NULL-terminated "K=V" (malloc'd), from process.envs */
	int nenv;
	char cwd[4096];            /* process.cwd, as given (the guest resolves it) */
	bool has_cwd;              /* false: absent, null or "" (the default directory) */
	bool stdin_open;           /* "stdin"; absent: true, as envd has it */
	bool pty;                  /* "pty" given: cols and rows are set */
	unsigned cols, rows;       /* 1..E2B_MAX_PTY */
	char tag[256];
	bool has_tag;
	json_t *owner;
};

/* process.cmd is required and not empty; argv and env together take at
 * most E2B_MAX_EXEC bytes; an envs key is not empty and has no '='. */
int e2b_parse_start(const uint8_t *json, size_t len, struct e2b_start *s, char *err,
		    size_t errlen);
/* Releases what a successful parse holds (a zeroed struct is fine too). */
void e2b_start_free(struct e2b_start *s);

/* ConnectRequest and CloseStdinRequest: {"process":{"pid":N}} or
 * {"process":{"tag":"x"}}, exactly one. By pid: *pid and tag "". By tag
 * (1..tagcap-1 bytes): tag and *pid 0. */
int e2b_parse_selector(const uint8_t *json, size_t len, uint32_t *pid, char *tag, size_t tagcap,
		       char *err, size_t errlen);

/* The requests below select their process by pid only (as the SDK does);
 * a tag is refused. */

/* SendSignalRequest: "signal" SIGNAL_SIGKILL or SIGNAL_SIGTERM (or 9, 15);
 * any other, unspecified included, is refused. */
int e2b_parse_signal(const uint8_t *json, size_t len, uint32_t *pid, int *signo, char *err,
		     size_t errlen);

/* SendInputRequest: input.stdin or input.pty (exactly one), at most
 * E2B_MAX_INPUT bytes decoded, into *data (malloc'd, also for 0 bytes;
 * the caller frees it) and *datalen; *pty says which. */
int e2b_parse_input(const uint8_t *json, size_t len, uint32_t *pid, uint8_t **data,
		    size_t *datalen, bool *pty, char *err, size_t errlen);

/* UpdateRequest: pty.size.cols and rows, 1..E2B_MAX_PTY. No "pty" is
 * nothing to change: 0 with *cols and *rows 0. */
int e2b_parse_update(const uint8_t *json, size_t len, uint32_t *pid, unsigned *cols,
		     unsigned *rows, char *err, size_t errlen);

/* filesystem.Filesystem's requests. Each path is required, 1..cap-1 bytes,
 * as given (the guest resolves it). */

/* StatRequest, MakeDirRequest, RemoveRequest: "path". */
int e2b_parse_path(const uint8_t *json, size_t len, char *path, size_t cap, char *err,
		   size_t errlen);
/* ListDirRequest: "path" and "depth" (absent or 0: 1; at most E2B_MAX_DEPTH). */
int e2b_parse_list_dir(const uint8_t *json, size_t len, char *path, size_t cap,
		       unsigned *depth, char *err, size_t errlen);
/* MoveRequest: "source" and "destination", each into a buffer of cap. */
int e2b_parse_move(const uint8_t *json, size_t len, char *src, char *dst, size_t cap, char *err,
		   size_t errlen);
/* WatchDirRequest and CreateWatcherRequest: "path" and "recursive"
 * (absent: false); "includeEntry" true is refused (envd 0.5.7 has none). */
int e2b_parse_watch_dir(const uint8_t *json, size_t len, char *path, size_t cap,
			bool *recursive, char *err, size_t errlen);
/* GetWatcherEventsRequest, RemoveWatcherRequest: "watcherId" (required). */
int e2b_parse_watcher_id(const uint8_t *json, size_t len, char *id, size_t cap, char *err,
			 size_t errlen);

/* Rendering: each returns malloc'd compact JSON, valid UTF-8 whatever
 * bytes the strings hold (connect_json_text), or NULL when out of memory
 * or an argument is out of its range. */

/* {"event":{"start":{"pid":N}}} */
char *e2b_event_start(uint32_t pid);
/* {"event":{"data":{"stdout":"<base64>"}}}: stream "stdout", "stderr" or
 * "pty"; len at most E2B_MAX_DATA (a caller cuts larger output). */
char *e2b_event_data(const char *stream, const uint8_t *data, size_t len);
/* {"event":{"end":{"exitCode":3,"exited":true,"status":"...","error":"..."}}}
 * with proto3's omissions: exitCode when 0, exited when false, status when
 * NULL or "". error NULL: none (the SDK's CommandExitError message is it).
 * status and error are cut to E2B_MAX_TEXT bytes. */
char *e2b_event_end(int exit_code, bool exited, const char *status, const char *error);
/* {"event":{"keepalive":{}}} */
char *e2b_event_keepalive(void);
/* WatchDirResponse (its oneof at the top): {"start":{}} first, then
 * {"filesystem":FilesystemEvent} or {"keepalive":{}}. A FilesystemEvent
 * is {"name":"a/b","type":"EVENT_TYPE_CREATE"}: kind 1..5 as enum
 * proto_watch_kind (E2B's numbers), the name at most E2B_MAX_NAME bytes. */
char *e2b_watch_start(void);
char *e2b_watch_event(unsigned kind, const char *name);
char *e2b_watch_keepalive(void);
json_t *e2b_fs_event(unsigned kind, const char *name);

/* Where a relative path is: E2B resolves it in its user's home. */
#define E2B_HOME "/root"

/* A guest path as E2B gives it (absolute, or relative to E2B_HOME) into
 * out (cap bytes). 0; -EINVAL none given (NULL or ""); -ENAMETOOLONG it
 * does not fit. */
int e2b_guest_path(const char *given, char *out, size_t cap);

/* E2B's error body (control plane and envd's REST): {"code": status,
 * "message"}, the SDK reading both; the message as connect_json_text
 * makes it (valid UTF-8, at most CONNECT_MAX_ERROR_TEXT bytes). NULL only
 * when out of memory. */
json_t *e2b_error_json(int status, const char *message);

/* A file as EntryInfo tells it. */
struct e2b_entry {
	char name[256];
	char path[4096];
	int type;                  /* 1 file, 2 dir, 3 symlink; else unspecified */
	uint64_t size;
	uint32_t mode;
	char permissions[11];      /* e2b_permissions */
	char owner[64], group[64];
	int64_t mtime_s;           /* seconds since the epoch */
	char symlink_target[4096];
	bool has_target;
};

/* EntryInfo: {"name","type":"FILE_TYPE_FILE"...,"path","size":"N" (int64
 * as a string, at most INT64_MAX),"mode","permissions","owner","group",
 * "modifiedTime":"2024-01-01T00:00:00Z" (UTC, clamped to years 1-9999),
 * "symlinkTarget" when has_target}. The SDK drops an entry of type
 * FILE_TYPE_UNSPECIFIED from a listing. NULL when out of memory. */
json_t *e2b_entry_json(const struct e2b_entry *e);

/* ls -l's mode string of st_mode ("-rw-r--r--", "drwxr-xr-x", "lrwxrwxrwx";
 * s/S and t/T for the set-id and sticky bits), NUL-terminated. */
void e2b_permissions(uint32_t mode, char out[11]);

#endif
