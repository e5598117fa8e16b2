/* test_term.c - mayfly run/exec --tty: our terminal in raw mode and back on every exit, resizes passed on as RESIZE. */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "agent_client/session.h"
#include "cmd/term.h"
#include "lib/clock.h"
#include "fake_agent.h"

/* Run fn in a child whose stdin is a fresh pseudo-terminal; its exit
 * status is the test's verdict (0 good), so a failed check cannot leave
 * the test's own terminal in raw mode. */
static int on_a_pty(int (*fn)(int master))
{
	int master, slave, st;
	pid_t pid;

	cr_assert_eq(openpty(&master, &slave, NULL, NULL, NULL), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		dup2(slave, STDIN_FILENO);
		close(slave);
		_exit(fn(master));
	}
	close(slave);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	close(master);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}

static int raw_then_restored(int master)
{
	struct termios t;
	struct term term;

	(void)master;
	if (term_open(&term, true, false))
		return 1;
	if (tcgetattr(STDIN_FILENO, &t) || (t.c_lflag & (ICANON | ECHO | ISIG)))
		return 2;   /* not raw: Ctrl-C would be ours, not the command's */
	term_close(&term);
	if (tcgetattr(STDIN_FILENO, &t) || !(t.c_lflag & ICANON) || !(t.c_lflag & ECHO))
		return 3;   /* not given back */
	return 0;
}

Test(term, tty_is_raw_while_the_command_runs_and_restored_after)
{
	cr_assert_eq(on_a_pty(raw_then_restored), 0);
}

static int winch_is_seen(int master)
{
	struct pollfd p;
	struct term term;

	(void)master;
	if (term_open(&term, true, false))
		return 1;
	p = (struct pollfd){ .fd = term.winch[0], .events = POLLIN };
	if (poll(&p, 1, 0) != 0)
		return 2;
	raise(SIGWINCH);
	if (poll(&p, 1, 1000) != 1)
		return 3;
	term_close(&term);
	return 0;
}

Test(term, a_resize_of_our_terminal_is_seen)
{
	cr_assert_eq(on_a_pty(winch_is_seen), 0);
}

static int first_signal_then_cancel(int master)
{
	struct term term;
	uint8_t sig = 0;
	uint64_t n = 0;

	(void)master;
	if (term_open(&term, false, true))
		return 1;
	raise(SIGTERM);       /* the first: for the command */
	if (read(term.sigs[0], &sig, 1) != 1 || sig != SIGTERM)
		return 2;
	if (read(term.cancel_fd, &n, sizeof(n)) >= 0)
		return 3;         /* not yet a cancel */
	raise(SIGINT);        /* the second: give up */
	if (read(term.cancel_fd, &n, sizeof(n)) != sizeof(n) || n != 1)
		return 4;
	term_close(&term);
	return 0;
}

Test(term, exec_passes_the_first_signal_and_gives_up_on_the_second)
{
	cr_assert_eq(on_a_pty(first_signal_then_cancel), 0);
}

static void fill_pid(struct proto_writer *w, void *pid)
{
	proto_put_u32(w, *(uint32_t *)pid);
}

/* The agent side: started, then it waits for a RESIZE and keeps its size. */
static void expect_resize(struct fake_agent *fa)
{
	uint8_t buf[4096];
	size_t len = 0;
	uint32_t pid = 9;

	if (!fake_send(fa, PROTO_EXEC_STARTED, 1, fill_pid, &pid))
		return;
	while (!atomic_load(&fa->stop)) {
		struct proto_frame f;
		ssize_t n = recv(fa->fd, buf + len, sizeof(buf) - len, 0);
		int r;

		if (n <= 0)
			return;
		len += (size_t)n;
		while ((r = proto_frame_decode(buf, len, &f)) > 0) {
			if (f.type == PROTO_RESIZE && f.payload_len == 4) {
				uint16_t rows = (uint16_t)(f.payload[0] | f.payload[1] << 8);
				uint16_t cols = (uint16_t)(f.payload[2] | f.payload[3] << 8);

				atomic_store(&fa->last_signal, (uint32_t)rows << 16 | cols);
				return;
			}
			memmove(buf, buf + r, len - (size_t)r);
			len -= (size_t)r;
		}
	}
}

static void note_pid(void *opaque, uint32_t pid)
{
	*(uint32_t *)opaque = pid;
}

Test(term, a_resize_goes_to_the_agent_with_the_new_size)
{
	struct fake_agent a;
	struct exec_spec spec;
	struct exec_result res;
	struct winsize ws = { .ws_row = 33, .ws_col = 101 };
	char *argv[] = { "sh", NULL };
	int master, slave, winch[2];
	uint8_t b = 1;

	cr_assert_eq(openpty(&master, &slave, NULL, NULL, &ws), 0);
	cr_assert_eq(pipe(winch), 0);
	fake_init(&a);
	fake_start(&a, expect_resize, NULL);
	session_spec_init(&spec);
	spec.argv = argv;
	spec.argc = 1;
	spec.pty = true;
	spec.winch_fd = winch[0];
	spec.tty_fd = slave;
	spec.deadline_ns = clock_now_ns() + 3000000000ULL;
	cr_assert_eq(write(winch[1], &b, 1), 1);
	session_exec(a.client, &spec, &res);   /* ends at the deadline: no EXIT comes */
	cr_assert_eq(atomic_load(&a.last_signal), 33u << 16 | 101u, "RESIZE %x",
		     atomic_load(&a.last_signal));
	fake_fini(&a);
	close(master);
	close(slave);
	close(winch[0]);
	close(winch[1]);
}

/* Without a terminal of ours (the containerd shim's ResizePty), the size
 * comes down the pipe itself; of two queued, the last one counts. */
Test(term, a_size_sent_down_the_pipe_goes_to_the_agent)
{
	struct fake_agent a;
	struct exec_spec spec;
	struct exec_result res;
	char *argv[] = { "sh", NULL };
	uint16_t sizes[4] = { 12, 40, 50, 132 };
	uint32_t seen = 0;
	int winch[2];

	cr_assert_eq(pipe(winch), 0);
	fake_init(&a);
	fake_start(&a, expect_resize, NULL);
	session_spec_init(&spec);
	spec.argv = argv;
	spec.argc = 1;
	spec.pty = true;
	spec.winch_fd = winch[0];
	spec.tty_fd = -1;
	spec.started = note_pid;
	spec.started_opaque = &seen;
	spec.deadline_ns = clock_now_ns() + 3000000000ULL;
	cr_assert_eq(write(winch[1], sizes, sizeof(sizes)), (ssize_t)sizeof(sizes));
	session_exec(a.client, &spec, &res);   /* ends at the deadline: no EXIT comes */
	cr_assert_eq(atomic_load(&a.last_signal), 50u << 16 | 132u, "RESIZE %x",
		     atomic_load(&a.last_signal));
	cr_assert_eq(seen, 9, "the started hook saw pid %u", seen);
	cr_assert_eq(res.pid, 9);
	fake_fini(&a);
	close(winch[0]);
	close(winch[1]);
}
