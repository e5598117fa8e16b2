/* exitcode.h - mayfly's process exit codes; README.md documents the same table. */
#ifndef MAYFLY_EXITCODE_H
#define MAYFLY_EXITCODE_H

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

#endif
