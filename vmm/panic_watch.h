/* panic_watch.h - spots a Linux guest's panic banner in its console output stream. */
#ifndef MAYFLY_PANIC_WATCH_H
#define MAYFLY_PANIC_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Linux prints this (KERN_EMERG, so always) before acting on panic=. An x86
 * guest without ACPI has no other channel to say it panicked: the reboot
 * that follows looks like any other. A guest program can print the banner
 * too; that only changes its own VM's exit code. */
#define PANIC_BANNER "Kernel panic - not syncing"

struct panic_watch {
	size_t matched;   /* bytes of the banner matched so far */
	bool seen;
};

/* Feed console bytes in order; returns true once the banner has been seen. */
bool panic_watch_feed(struct panic_watch *w, const uint8_t *buf, size_t len);

#endif
