/* audit_writer.h - the audit log's writer: a process forked before the jail that holds the log, so the jailed VM process never does and cannot cut it back. */
#ifndef MAYFLY_POLICY_AUDIT_WRITER_H
#define MAYFLY_POLICY_AUDIT_WRITER_H

#include "policy/audit.h"

/* Hand log (open, held locally) to a writer process forked now, before
 * jail_start and any filter: it keeps the log's descriptor and a socket
 * (nothing else but stderr; stdin and stdout /dev/null), and appends each
 * record it is sent, keeping the chain (the lock, the fsync, the tail
 * check against other writers are its own). Here the descriptor is closed
 * and every audit_append goes over the socket, answered with the writer's
 * result. The writer ends at the socket's end of file (once this process
 * and the VM process it forks are gone, whatever ended them), or on a
 * stream that is not of records. 0, or -errno with one line in err (the
 * log then stays local). */
int audit_writer_start(struct audit_log *log, char *err, size_t errlen)
	__attribute__((warn_unused_result));

#endif
