/* exitcode.h - mayfly's process exit codes, every command's; docs/exit-codes.md documents the same tables. */
#ifndef MAYFLY_LIB_EXITCODE_H
#define MAYFLY_LIB_EXITCODE_H

enum mayfly_exit {
	EXIT_GUEST_RESET   = 0,  /* guest rebooted or powered off: a normal end */
	EXIT_INTERNAL      = 1,  /* mayfly itself failed (host resource, bug) */
	EXIT_USAGE         = 2,  /* bad command-line flag or value */
	EXIT_BAD_IMAGE     = 3,  /* kernel or initrd missing, unreadable or malformed */
	EXIT_NO_KVM        = 4,  /* /dev/kvm missing or no permission */
	EXIT_KVM_UNSUPPORTED = 5, /* wrong KVM API version or a capability missing */
	EXIT_TRIPLE_FAULT  = 6,  /* guest triple-faulted (KVM_EXIT_SHUTDOWN) */
	EXIT_KVM_ERROR     = 7,  /* KVM internal error, emulation failure, failed entry */
	EXIT_GUEST_PANIC   = 8,  /* guest kernel panicked */
	/* A thread made a system call its seccomp filter forbids (one line on
	 * stderr names the thread role and the call): 128 + SIGSYS, as if the
	 * kernel had killed the process with that signal. Every command. */
	EXIT_SECCOMP       = 159,
};

/* What mayfly run, exec, cp and mcp exit with, besides the command's own
 * code. Like timeout(1) and env(1): 124 timed out, 125 mayfly itself
 * failed, 126 could not run the command, 127 command not found, 128+N
 * signal N; and 123 when the approver (--approve) refused a call. */
#define RUN_EXIT_REFUSED   123
#define RUN_EXIT_TIMEOUT   124
#define RUN_EXIT_MAYFLY    125
#define RUN_EXIT_AGENT     126
#define RUN_EXIT_NOTFOUND  127

#endif
