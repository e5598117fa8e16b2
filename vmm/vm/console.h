/* console.h - the console thread: guest serial output to stdout, stdin to the guest, never blocking a vCPU. */
#ifndef MAYFLY_VM_CONSOLE_H
#define MAYFLY_VM_CONSOLE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <termios.h>

#include "vm/config.h"
#include "vm/console_watch.h"
#include "devices/serial.h"

/* One VM's console. The VM sets the first block (and wake_fd, an
 * eventfd it owns) before console_start. */
struct console {
	struct serial *serial;   /* the UART it drains and feeds */
	enum console_out out;    /* where the guest's output goes */
	bool interactive;        /* --console: stdin to the guest, Ctrl-A x quits */
	bool init_cmd;           /* --init-cmd: init's status line is the exit code */
	/* Ends the VM (Ctrl-A x): code and a one-line reason, first caller wins. */
	void (*stop)(void *opaque, int code, const char *reason);
	void *stop_opaque;

	pthread_t thread;
	bool started;
	int wake_fd;             /* eventfd: output pending, input room, or stop */
	_Atomic bool stopping;
	atomic_bool give_up;     /* stdout did not drain in time: drop the rest */
	bool raw_tty;            /* stdin was switched to raw mode */
	int in_fd, out_fd;
	struct termios saved_tty;
	/* Console thread only, read after join: */
	struct console_watch watch;  /* every byte of guest output passes it */
	bool quit;                   /* the user typed Ctrl-A x */
};

/* Serial notify hook (opaque = struct console): wakes the console thread.
 * Runs on a vCPU thread and never blocks. */
void console_notify(void *opaque);
/* Start the console thread: the serial output to stdout (or as con->out
 * says), stdin to the guest when interactive. 0 or -errno. */
int console_start(struct console *con) __attribute__((warn_unused_result));
#define CONSOLE_STOP_GRACE_MS 2000
/* After the vCPUs are joined: write out the remaining output, for at most
 * CONSOLE_STOP_GRACE_MS; if stdout does not take it by then, drop the rest.
 * Returns once the console thread has exited and been joined (so the VM
 * can be freed), whatever stdout does; restores the terminal. */
void console_stop(struct console *con);
/* After console_stop: the exit code once the guest's console output is
 * taken into account, for a VM that ended with `code`. A guest reset
 * (EXIT_GUEST_RESET) after the panic banner is EXIT_GUEST_PANIC; with
 * init_cmd, a guest reset after init's "mayfly: exit status N" line is N
 * (not when the user quit with Ctrl-A x). The reason (len bytes) then
 * says so. Any other code is returned as it is, the reason untouched. */
int console_exit_code(const struct console *con, int code, char *reason, size_t len);

#endif
