/* rules.h - the readable seccomp rule tables: what each mayfly thread role may ask the kernel, and why. */
#ifndef MAYFLY_SECCOMP_RULES_H
#define MAYFLY_SECCOMP_RULES_H

#include <stddef.h>
#include <stdint.h>

/* One per kind of thread mayfly starts; each installs its own filter as
 * its first act (the main thread once every other thread is started,
 * before the first KVM_RUN). Order = the generated filters' order. */
enum seccomp_role {
	SECCOMP_ROLE_MAIN,       /* main thread: signals, waits, teardown */
	SECCOMP_ROLE_VCPU,       /* one per vCPU: KVM_RUN and device exits */
	SECCOMP_ROLE_IO,         /* event loop: virtio queues, disks, vsock */
	SECCOMP_ROLE_CONSOLE,    /* serial bytes to stdout, stdin to the guest */
	SECCOMP_ROLE_LOG,        /* log writer: lines to stderr */
	SECCOMP_ROLE_AGENT,      /* mayfly run's client: the agent, --put/--get files */
	SECCOMP_ROLE_SNAPSHOT,   /* snapshot create's client: setup, then the save */
	SECCOMP_ROLE_BROKER,     /* the network broker process: resolve, connect, pass the fd */
	SECCOMP_ROLE_AUDIT,      /* the audit log's writer process: records in, appended */
	SECCOMP_ROLE_SUPERVISOR, /* the jail's supervisor: waits for the VM, then cleans up */
	SECCOMP_ROLE_COUNT,
};

enum seccomp_cond {
	SECCOMP_ANY,        /* any arguments */
	SECCOMP_ARG_EQ,     /* argument `arg` == value (all 64 bits) */
	SECCOMP_ARG_CLEAR,  /* argument `arg` & value == 0 (a flag never set) */
};

struct seccomp_rule {
	int nr;                  /* x86-64 system call number (SYS_*) */
	const char *name;
	enum seccomp_cond cond;
	uint8_t arg;             /* 0-5 */
	uint64_t value;
	const char *value_name;  /* the constant's name (KVM_RUN), for docs and tests */
	const char *why;         /* one line: who needs it */
};

struct seccomp_group {
	const char *name;
	const struct seccomp_rule *rules;
	size_t n;
};

#define SECCOMP_MAX_GROUPS 8

struct seccomp_role_rules {
	const char *name;        /* as the SIGSYS line and docs/security.md say it */
	const struct seccomp_group *groups[SECCOMP_MAX_GROUPS];   /* NULL-terminated */
};

/* The rules of every role; the sanitizer group is added by the generator
 * only to sanitizer builds. */
extern const struct seccomp_role_rules seccomp_rules[SECCOMP_ROLE_COUNT];
extern const struct seccomp_group seccomp_sanitizer_group;

#endif
