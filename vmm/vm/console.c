/* console.c - the console thread: guest serial output to stdout, stdin to the guest, never blocking a vCPU. */
#include "vm/console.h"
#include "lib/exitcode.h"
#include "lib/log.h"
#include "lib/thread.h"
#include "seccomp/seccomp.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <termios.h>
#include <unistd.h>

#define CONSOLE_ESCAPE 0x01   /* Ctrl-A, then 'x' quits (as in QEMU) */

static void console_wake(struct console *con)
{
	uint64_t one = 1;

	/* A full eventfd counter still wakes the reader: ignoring EAGAIN is safe. */
	if (write(con->wake_fd, &one, sizeof(one)) < 0)
		return;
}

void console_notify(void *opaque)
{
	console_wake(opaque);
}

static void console_drain_output(struct console *con)
{
	uint8_t buf[4096];
	size_t n;

	while ((n = serial_take_output(con->serial, buf, sizeof(buf))) > 0) {
		int rc;

		console_watch_feed(&con->watch, buf, n);
		if (con->out_fd < 0)
			continue;
		/* console_stop gives up on a reader that stopped reading: the
		 * rest is dropped (but still watched). */
		rc = thread_write_all(con->out_fd, buf, n, &con->give_up);
		if (rc && rc != -ECANCELED) {
			/* The reader went away: keep draining so the guest
			 * is never held up, but stop writing. */
			log_warn("console output closed: %s", strerror(-rc));
			con->out_fd = -1;
		}
	}
}

struct input {
	uint8_t buf[256];
	size_t len, off;
	bool eof;
	bool escape;    /* previous byte was CONSOLE_ESCAPE */
};

/* Read stdin; in raw-tty mode watch for Ctrl-A x. */
static void console_read_input(struct console *con, struct input *in)
{
	uint8_t raw[256];
	ssize_t n = read(con->in_fd, raw, sizeof(raw));

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		in->eof = true;
		return;
	}
	in->len = in->off = 0;
	for (ssize_t i = 0; i < n; i++) {
		if (con->raw_tty && in->escape) {
			in->escape = false;
			if (raw[i] == 'x') {
				con->quit = true;
				con->stop(con->stop_opaque, EXIT_GUEST_RESET,
					  "quit from the console (Ctrl-A x)");
				return;
			}
			if (raw[i] != CONSOLE_ESCAPE)
				in->buf[in->len++] = CONSOLE_ESCAPE;
		} else if (con->raw_tty && raw[i] == CONSOLE_ESCAPE) {
			in->escape = true;
			continue;
		}
		in->buf[in->len++] = raw[i];
	}
}

static void *console_thread(void *arg)
{
	struct console *con = arg;
	struct input in = { .eof = !con->interactive };

	thread_set_name("console");
	seccomp_enter(SECCOMP_ROLE_CONSOLE);
	for (;;) {
		struct pollfd fds[2] = { { .fd = con->wake_fd, .events = POLLIN },
					 { .fd = con->in_fd, .events = POLLIN } };
		bool want_input = !in.eof && in.off == in.len;
		uint64_t count;

		if (poll(fds, want_input ? 2 : 1, -1) < 0 && errno != EINTR)
			break;
		if (fds[0].revents & POLLIN) {
			if (read(con->wake_fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
				break;
		}
		console_drain_output(con);
		if (atomic_load(&con->stopping))
			break;
		if (want_input && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)))
			console_read_input(con, &in);
		/* Feed what the guest's FIFO has room for; the serial model
		 * notifies us when the guest reads and makes more room. */
		if (in.off < in.len)
			in.off += serial_receive(con->serial, in.buf + in.off, in.len - in.off);
	}
	console_drain_output(con);
	return NULL;
}

static void console_setup_tty(struct console *con)
{
	struct termios raw;

	if (!con->interactive || !isatty(con->in_fd) || tcgetattr(con->in_fd, &con->saved_tty))
		return;
	raw = con->saved_tty;
	cfmakeraw(&raw);
	raw.c_oflag |= OPOST | ONLCR;   /* host-side newlines still render */
	if (tcsetattr(con->in_fd, TCSANOW, &raw) == 0)
		con->raw_tty = true;
}

int console_start(struct console *con)
{
	int rc;

	con->in_fd = STDIN_FILENO;
	/* mayfly run keeps stdout for the command's own output: the serial
	 * console then goes to stderr (-v) or nowhere, still panic-watched. */
	con->out_fd = con->out == CONSOLE_OUT_STDERR  ? STDERR_FILENO :
		      con->out == CONSOLE_OUT_DISCARD ? -1 : STDOUT_FILENO;
	console_setup_tty(con);
	atomic_store(&con->stopping, false);
	atomic_store(&con->give_up, false);
	rc = thread_start(&con->thread, console_thread, con);
	if (rc)
		return rc;
	con->started = true;
	return 0;
}

void console_stop(struct console *con)
{
	if (con->started) {
		atomic_store(&con->stopping, true);
		console_wake(con);
		/* A reader that stopped reading must not keep mayfly alive, and
		 * the thread must not outlive the VM it drains: past the grace
		 * it is kicked out of its write and drops the rest. */
		if (!thread_stop(con->thread, CONSOLE_STOP_GRACE_MS, &con->give_up))
			log_warn("console output still blocked at exit; remaining output dropped");
		con->started = false;
	}
	if (con->raw_tty) {
		tcsetattr(con->in_fd, TCSANOW, &con->saved_tty);
		con->raw_tty = false;
	}
	if (serial_dropped(con->serial))
		log_warn("console: %llu bytes of guest output dropped (reader too slow)",
			 (unsigned long long)serial_dropped(con->serial));
}

int console_exit_code(const struct console *con, int code, char *reason, size_t len)
{
	const struct console_watch *w = &con->watch;

	if (code != EXIT_GUEST_RESET)
		return code;
	if (w->panicked) {
		snprintf(reason, len, "guest kernel panicked (\"" PANIC_BANNER "\" on its console)");
		return EXIT_GUEST_PANIC;
	}
	if (con->init_cmd && w->status_seen && !con->quit) {
		snprintf(reason, len, "the guest's init command exited with status %u", w->status);
		return w->status;
	}
	return code;
}
