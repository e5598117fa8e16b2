/* api.h - mayfly serve's HTTP API as pure functions: which route a request is, and its JSON body checked into a typed request. */
#ifndef MAYFLY_SERVE_API_H
#define MAYFLY_SERVE_API_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define API_ID_MAX        32       /* a sandbox's id: config_id_valid */
#define API_TEMPLATE_MAX  64
#define API_MAX_TTL_S     (7u * 24 * 3600)
#define API_MAX_ARGS      1024     /* PROTO_MAX_ARGS */
#define API_MAX_PATH      4095     /* PROTO_MAX_PATH - 1 */
#define API_MAX_METADATA  64       /* a create's "metadata" members */
#define API_MAX_META_KEY  64
#define API_MAX_META_VALUE 512

enum api_route {
	API_HEALTH, API_METRICS,
	API_CREATE, API_LIST, API_GET, API_DELETE,
	API_EXEC, API_SIGNAL,
	API_FILE_PUT, API_FILE_GET, API_FILE_REMOVE, API_FILE_LIST, API_FILE_STAT, API_MKDIR,
	API_PAUSE, API_RESUME, API_FORK,
	API_NR_ROUTES,
};

struct api_match {
	enum api_route route;
	char id[API_ID_MAX + 1];   /* the sandbox, when the route has one */
	uint64_t exec_id;          /* API_SIGNAL */
};

/* Match method and url (the path, no query) to a route. 0; 404 no such
 * path (or a malformed id); 405 the path exists but not for the method.
 * *allow then lists the methods it has (for the Allow header). */
int api_route(const char *method, const char *url, struct api_match *m, const char **allow);

/* Whether the route reads a JSON body (Content-Type application/json). */
bool api_wants_json(enum api_route r);
/* The route's name in metrics and logs ("create", "exec"...). */
const char *api_route_name(enum api_route r);

/* A sandbox's network (POST /sandboxes "allow_net", "resolve"): the rule
 * strings of mayfly run's --allow-net and --resolve, each checked with
 * their parser and limits, given to each of its VM processes (a resume
 * and a fork child's too). nallow 0: no network. */
struct api_net {
	char **allow;              /* malloc'd strings */
	int nallow;
	char **resolve;
	int nresolve;
};

/* Copy src into dst (each string). 0 or -ENOMEM (dst then empty). */
int api_net_copy(struct api_net *dst, const struct api_net *src);
void api_net_free(struct api_net *n);

/* POST /sandboxes */
struct api_create {
	char template[API_TEMPLATE_MAX + 1];   /* "": the default template */
	unsigned cpus;             /* 0: the template's */
	uint64_t mem_mib;          /* 0: the template's */
	uint64_t disk_quota;       /* 0: the default */
	char **env;                /* "K=V", nenv (every exec gets them first) */
	int nenv;
	unsigned ttl_s;            /* 0: none; deleted this long after creation */
	unsigned idle_s;           /* 0: none */
	struct api_net net;        /* none: no network */
	json_t *metadata;          /* an object of strings (a client's labels), or NULL; in owner */
	json_t *owner;             /* holds env's strings */
};

/* POST /sandboxes/{id}/exec */
struct api_exec {
	const char **argv;         /* NULL-terminated */
	int argc;
	char **env;
	int nenv;
	const char *cwd;           /* NULL: the agent's default */
	uint8_t *stdin_data;       /* NULL: stdin is /dev/null */
	size_t stdin_len;
	unsigned timeout_s;        /* 0: none */
	/* E2B's envd (not serve's own API): stdin stays open for
	 * calls_exec_input until calls_exec_close_stdin (stdin_data unused);
	 * a pty of rows x cols, resized by calls_exec_resize. */
	bool stdin_open;
	bool pty;
	uint16_t rows, cols;
	json_t *owner;
};

/* Each parses body[0..len) (NULL/0: empty, for create and mkdir allowed
 * as {}): a JSON object with only the documented members, each of its
 * type and range. 0, or -EINVAL with one line in err naming the member.
 * The _free functions release what a successful parse holds. */
int api_parse_create(const char *body, size_t len, struct api_create *c, char *err, size_t errlen);
void api_create_free(struct api_create *c);
int api_parse_exec(const char *body, size_t len, struct api_exec *e, char *err, size_t errlen);
void api_exec_free(struct api_exec *e);
/* {"signal": N or "TERM"}: 1..64 or a name (with or without "SIG"). */
int api_parse_signal(const char *body, size_t len, int *signo, char *err, size_t errlen);
/* {"path": "/abs", "parents": bool} */
int api_parse_mkdir(const char *body, size_t len, char *path, size_t pathcap, bool *parents,
		    char *err, size_t errlen);

/* {"count": N}: 1..max (empty body: 1). */
int api_parse_fork(const char *body, size_t len, unsigned max, unsigned *count, char *err,
		   size_t errlen);

/* A guest path from ?path=: absolute, 1..API_MAX_PATH bytes. 0 or -EINVAL
 * with err. */
int api_check_path(const char *path, char *err, size_t errlen);

#endif
