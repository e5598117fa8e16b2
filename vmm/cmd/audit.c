/* audit.c - mayfly audit verify: the audit log's chain checked line by line, the verdict in one line. */
#include "cmd/audit.h"
#include "policy/audit.h"
#include "lib/log.h"

#include <stdio.h>
#include <string.h>

int cmd_audit(struct cli *c, int argc, char **argv)
{
	struct audit_verdict v;
	const char *path;
	int rc;

	/* "audit verify ...": the subcommand is the name the flags follow. */
	if (argc >= 2 && !strcmp(argv[1], "verify")) {
		argc--;
		argv++;
	} else if (argc < 2 || (strcmp(argv[1], "--help") && strcmp(argv[1], "-h"))) {
		log_say("usage: mayfly audit verify [--head HASH] FILE");
		return AUDIT_EXIT_USAGE;
	}
	rc = cli_parse_or_exit(c, CLI_AUDIT, argc, argv, AUDIT_EXIT_USAGE);
	if (rc >= 0)
		return rc;
	path = c->run.argv[0];
	rc = audit_verify(path, c->audit_head, &v);
	if (rc < 0) {
		log_say("cannot read the audit log '%s': %s", path, strerror(-rc));
		return AUDIT_EXIT_USAGE;
	}
	if (rc) {
		log_say("%s: line %llu: %s (%llu records before it are intact)", path,
			(unsigned long long)v.bad_line, v.why, (unsigned long long)v.records);
		return AUDIT_EXIT_BROKEN;
	}
	printf("audit: %llu records intact, head %s\n", (unsigned long long)v.records, v.head);
	return AUDIT_EXIT_OK;
}
