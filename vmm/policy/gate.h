/* gate.h - every tool call through one gate: put to the approver (--approve) before it runs, recorded in the audit log (--audit) after. */
#ifndef MAYFLY_POLICY_GATE_H
#define MAYFLY_POLICY_GATE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/exitcode.h"
#include "agent_client/session.h"
#include "policy/approve.h"
#include "policy/approve_spawner.h"
#include "policy/audit.h"


struct gate {
	struct audit_log *audit;   /* NULL: nothing recorded */
	struct approver approver;  /* .cmd NULL: every call allowed */
	struct approve_spawner *spawner;   /* NULL: the approver runs from this process */
	const char *sandbox;       /* the VM's id, in every record */
	const char *caller;        /* who asked (run: "cli", mcp: "mcp:<client name>") */
};

/* Set g up for one sandbox's calls: approve_cmd (--approve; NULL: every
 * call allowed) with its timeout, nothing recorded yet (the one who opens
 * the audit log sets g->audit: launch_run does). */
void gate_init(struct gate *g, const char *approve_cmd, unsigned approve_timeout_s,
	       const char *sandbox, const char *caller);

/* gate_init, and the audit log at audit_path (NULL: none) opened into
 * *log and recorded to (a service's gate, for as long as it runs). 0, or
 * -1 after one line saying why the audit log cannot be used. */
int gate_open(struct gate *g, struct audit_log *log, const char *audit_path,
	      const char *approve_cmd, unsigned approve_timeout_s, const char *sandbox,
	      const char *caller);
void gate_close(struct gate *g);

/* The JSON of a call (what the approver reads on stdin, and the "call" of
 * its audit record), or NULL when out of memory. Environment values are
 * never in it: only the keys. stdin_data (NULL: none) is described by
 * its size and sha256. */
json_t *gate_exec_call(const struct exec_spec *spec, const void *stdin_data, size_t stdin_len);
/* tool: "write_file", "read_file" or "list_files"; local: the host file
 * (NULL: none). */
json_t *gate_file_call(const char *tool, const char *guest, const char *local);

/* Ask the approver about call (a tool's JSON from above; it gets "tool",
 * "sandbox" and "caller" added); only an exec or a write_file is asked
 * about, reads are let through. 0: allowed. -EPERM: refused, why says
 * why (one line) and the refusal is already recorded. -EIO: the audit
 * log could not record the refusal (why says so). *start_ns is set to
 * when the call began, for its record. */
int gate_ask(struct gate *g, json_t *call, uint64_t *start_ns, char *why, size_t whylen);

/* Record a finished exec (res as session_exec left it). 0, or -EIO with
 * why when the audit log failed (the caller must then fail the call). */
int gate_record_exec(struct gate *g, json_t *call, uint64_t start_ns, const struct exec_result *res,
		     char *why, size_t whylen);

/* Record a finished file call: rc its result (0 or -errno), err its
 * message, st what moved (NULL: nothing). 0 or -EIO with why. */
int gate_record_file(struct gate *g, json_t *call, uint64_t start_ns, int rc, const char *err,
		     const struct transfer_stats *st, char *why, size_t whylen);

#endif
