/* audit.h - mayfly audit verify: check an audit log's hash chain. */
#ifndef MAYFLY_CMD_AUDIT_H
#define MAYFLY_CMD_AUDIT_H

#include "cmd/cli.h"

/* Exit codes of mayfly audit verify. */
#define AUDIT_EXIT_OK     0   /* the chain is intact */
#define AUDIT_EXIT_BROKEN 1   /* a line is edited, removed, inserted, moved or cut */
#define AUDIT_EXIT_USAGE  2   /* bad usage, or the file cannot be read */

/* Parse `audit verify [--head HASH] FILE` and check FILE: one line on
 * stdout when intact ("audit: N records intact, head H"), one on stderr
 * naming the first bad line otherwise. Returns AUDIT_EXIT_*. */
int cmd_audit(struct cli *c, int argc, char **argv);

#endif
