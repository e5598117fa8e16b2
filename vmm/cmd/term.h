/* term.h - the user's side of a command in the guest: our terminal in raw mode, its resizes, and signals meant for the command. */
#ifndef MAYFLY_CMD_TERM_H
#define MAYFLY_CMD_TERM_H

#include <stdbool.h>
#include <termios.h>

/* One per process (signal handlers are process-wide). */
struct term {
	int tty_fd;            /* the terminal in raw mode, or -1 */
	bool raw;
	struct termios saved;
	int winch[2];          /* a byte per SIGWINCH; -1 when not watched */
	int sigs[2];           /* a byte (the signal number) per SIGINT/SIGTERM/SIGHUP; -1: not caught */
	int cancel_fd;         /* eventfd: a second such signal (give up now); -1: not caught */
};

/* Set up what was asked: `interactive` puts stdin's terminal (when it is
 * one) in raw mode and watches SIGWINCH; `catch_signals` turns SIGINT,
 * SIGTERM and SIGHUP into bytes on sigs (the first) and a write to
 * cancel_fd (the second). 0 or -errno; term_close undoes a partial open. */
int term_open(struct term *t, bool interactive, bool catch_signals);

/* Restore the terminal and the signal dispositions; close the pipes.
 * Safe to call twice. */
void term_close(struct term *t);

#endif
