/* test_console.c - the console thread: output to stdout, a stop that always ends it, and the exit code the guest's output decides. */
#include <criterion/criterion.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/exitcode.h"
#include "observe.h"
#include "vm/console.h"

static struct console con;
static struct serial serial;
static char reason[160];      /* console_exit_code's */
static struct redirect out = { .saved = -1 };

/* The console's one way to end the VM (Ctrl-A x); not reached here. */
static void stop(void *opaque, int code, const char *why)
{
	(void)opaque;
	(void)code;
	(void)why;
}

/* console_exit_code with the reason in `reason`. */
static int exit_code(int code)
{
	return console_exit_code(&con, code, reason, sizeof(reason));
}

static void setup(void)
{
	log_init("t", LOG_WARN);
	memset(&serial, 0, sizeof(serial));
	reason[0] = '\0';
	con = (struct console){ .serial = &serial, .out = CONSOLE_OUT_STDOUT, .stop = stop };
	con.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	cr_assert_geq(con.wake_fd, 0);
	/* The serial port's notify wakes the console thread, as in vm_build. */
	serial_init(&serial, NULL, console_notify, &con);
	redirect_to_pipe(&out, STDOUT_FILENO);
}

/* What vm_destroy does to the console's side of the VM. */
static void teardown(void)
{
	if (con.started)
		console_stop(&con);   /* a test that failed half-way */
	redirect_restore(&out);
	close(out.rd);
	serial_destroy(&serial);
	close(con.wake_fd);
	memset(&con, 0x5a, sizeof(con));   /* a thread still using it would trip */
	memset(&serial, 0x5a, sizeof(serial));
}

TestSuite(console, .init = setup, .fini = teardown);

/* The guest writes s to the UART's transmit register, byte by byte. */
static void guest_write(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		uint8_t b = (uint8_t)s[i];

		serial_io(&serial, 0, &b, 1, true);
	}
}

static void guest_puts(const char *s)
{
	guest_write(s, strlen(s));
}

/* Start the console, let the guest write `s`, stop it; stdout's text. */
static char *run_console(const char *s)
{
	struct drain d;

	drain_start(&d, out.rd, 1 << 20);
	cr_assert_eq(console_start(&con), 0);
	guest_puts(s);
	console_stop(&con);
	redirect_restore(&out);
	return drain_finish(&d);
}

/* Wait (10 s at most) until nobody-reads stdout's pipe is full: the
 * console thread is then blocked in write(2) with more to write. Full is
 * "more than half its size, and not growing for 300 ms": a pipe's pages
 * are not always filled to the last byte (writes of odd sizes leave
 * slack in each page), so its exact size is never a test. */
static void wait_for_full_stdout(void)
{
	int size = fcntl(out.rd, F_GETPIPE_SZ), queued = 0, before = -1, still = 0;

	for (int i = 0; i < 100 && still < 3; i++) {
		before = queued;
		usleep(100000);
		cr_assert_eq(ioctl(out.rd, FIONREAD, &queued), 0);
		still = queued > size / 2 && queued == before ? still + 1 : 0;
	}
	cr_assert(still >= 3, "stdout's pipe never filled (%d of %d bytes)", queued, size);
}

/* Wait (10 s at most) until the UART's output buffer has room for n bytes. */
static void wait_for_room(size_t n)
{
	size_t queued = SERIAL_OUT_MAX;

	for (int i = 0; i < 10000; i++) {
		pthread_mutex_lock(&serial.lock);
		queued = serial.out_count;
		pthread_mutex_unlock(&serial.lock);
		if (SERIAL_OUT_MAX - queued >= n)
			return;
		usleep(1000);
	}
	cr_assert_fail("the UART's buffer stayed full (%zu bytes)", queued);
}

/* At least `bytes` of output in lines, none dropped: at the pace of the
 * console thread while it can write, so that it ends up blocked, not the
 * UART turning bytes away. */
static void guest_floods(size_t bytes)
{
	static const char line[] = "flood flood flood flood flood flood flood flood flood flood\r\n";

	for (size_t done = 0; done < bytes; done += sizeof(line) - 1) {
		wait_for_room(sizeof(line) - 1);
		guest_write(line, sizeof(line) - 1);
	}
}

/* More than stdout's pipe, and the chunk the console thread holds, take. */
static size_t more_than_stdout_holds(void)
{
	return (size_t)fcntl(out.rd, F_GETPIPE_SZ) + 16384;
}

Test(console, output_reaches_stdout)
{
	char *text = run_console("hello from the guest\r\n");

	cr_assert_str_eq(text, "hello from the guest\r\n");
	free(text);
}

Test(console, stop_ends_the_thread_even_when_stdout_is_never_read, .timeout = 60)
{
	struct capture cap;
	unsigned threads;
	uint64_t start, ms;
	char *err;

	cr_assert_eq(console_start(&con), 0);
	threads = nr_threads();
	guest_floods(more_than_stdout_holds());
	wait_for_full_stdout();

	capture_start(&cap);
	start = clock_now_ns();
	console_stop(&con);
	ms = (clock_now_ns() - start) / 1000000;
	err = capture_stop(&cap);
	cr_assert_lt(ms, CONSOLE_STOP_GRACE_MS + 10000, "console_stop took %llu ms",
		     (unsigned long long)ms);
	/* Joined, not abandoned: teardown frees what it uses right after. */
	cr_assert_eq(nr_threads_settled(threads - 1), threads - 1, "the console thread outlived console_stop");
	cr_assert_eq(count_lines(err, "console output still blocked at exit"), 1, "stderr: %s", err);
	free(err);
}

Test(console, init_status_line_is_the_exit_code_with_init_cmd)
{
	char *text;

	con.init_cmd = true;
	text = run_console("hi\r\nmayfly: exit status 7\r\n[    1.5] reboot: Restarting system\r\n");
	cr_assert(strstr(text, "mayfly: exit status 7\r\n"), "the line still reaches stdout");
	free(text);
	cr_assert_eq(exit_code(EXIT_GUEST_RESET), 7);
	cr_assert(strstr(reason, "exited with status 7"), "reason: %s", reason);
	/* Only a reset by the guest: a crash or a signal keeps its own code. */
	cr_assert_eq(exit_code(EXIT_TRIPLE_FAULT), EXIT_TRIPLE_FAULT);
	cr_assert_eq(exit_code(128 + 15), 128 + 15);
}

Test(console, status_zero_is_a_clean_exit)
{
	con.init_cmd = true;
	free(run_console("mayfly: exit status 0\r\n"));
	cr_assert_eq(exit_code(EXIT_GUEST_RESET), 0);
}

Test(console, status_line_ignored_without_init_cmd)
{
	/* Without --init-cmd the guest's init is not ours to trust: a shell
	 * session's status line says nothing about how mayfly ends. */
	free(run_console("mayfly: exit status 7\r\n"));
	cr_assert_eq(exit_code(EXIT_GUEST_RESET), EXIT_GUEST_RESET);
}

Test(console, no_status_line_is_a_plain_reset)
{
	con.init_cmd = true;
	free(run_console("mayfly-init: init failed (status 1); rebooting\r\n"));
	cr_assert_eq(exit_code(EXIT_GUEST_RESET), EXIT_GUEST_RESET);
}

Test(console, quit_from_the_console_is_not_the_command_status)
{
	con.init_cmd = true;
	free(run_console("mayfly: exit status 7\r\n"));
	con.quit = true;   /* what Ctrl-A x on a raw tty sets */
	cr_assert_eq(exit_code(EXIT_GUEST_RESET), EXIT_GUEST_RESET);
}

Test(console, panic_wins_over_the_status_line)
{
	con.init_cmd = true;
	free(run_console("mayfly: exit status 7\r\nKernel panic - not syncing: Attempted to kill init!\r\n"));
	cr_assert_eq(exit_code(EXIT_GUEST_RESET), EXIT_GUEST_PANIC);
	cr_assert(strstr(reason, "panicked"), "reason: %s", reason);
}

Test(console, output_dropped_at_stop_is_still_watched, .timeout = 60)
{
	struct capture cap;

	con.init_cmd = true;
	cr_assert_eq(console_start(&con), 0);
	guest_floods(more_than_stdout_holds());
	wait_for_full_stdout();
	guest_puts("mayfly: exit status 9\r\n");
	capture_start(&cap);
	console_stop(&con);
	free(capture_stop(&cap));
	cr_assert_eq(exit_code(EXIT_GUEST_RESET), 9);
}
