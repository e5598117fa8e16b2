/* console_watch.h - spots what the guest says on its console that decides mayfly's exit code. */
#ifndef MAYFLY_VM_CONSOLE_WATCH_H
#define MAYFLY_VM_CONSOLE_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Linux prints this (KERN_EMERG, so always) before acting on panic=. An x86
 * guest without ACPI has no other channel to say it panicked: the reboot
 * that follows looks like any other. A guest program can print the banner
 * too; that only changes its own VM's exit code. */
#define PANIC_BANNER "Kernel panic - not syncing"

/* mayfly's guest init (rootfs/init, docs/rootfs.md) prints this, then the
 * exit status (0-255) of the command it ran, a newline, and reboots. A
 * command whose output does not end in a newline gets the line appended
 * to its last line, so it counts anywhere in a line, and the last one
 * wins. A guest program can print it too; that only changes its own VM's
 * exit code. */
#define INIT_STATUS_PREFIX "mayfly: exit status "

/* Each pattern's first byte occurs nowhere else in it (the matcher relies
 * on that). Zero-initialised is ready. */
struct console_watch {
	size_t banner_matched;   /* bytes of PANIC_BANNER matched so far */
	size_t prefix_matched;   /* bytes of INIT_STATUS_PREFIX matched so far */
	bool reading_status;     /* the prefix is whole: digits come next */
	unsigned digits, value;  /* digits read so far, and their value */
	bool panicked;           /* PANIC_BANNER was seen */
	bool status_seen;        /* a whole status line was seen: */
	uint8_t status;          /* the last one's status */
};

/* Feed console bytes in order, in chunks of any size. A status counts
 * once a non-digit ends it: 1 to 3 digits, at most 255; anything else
 * after the prefix is not a status line. */
void console_watch_feed(struct console_watch *w, const uint8_t *buf, size_t len);

#endif
