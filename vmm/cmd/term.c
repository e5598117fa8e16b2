/* term.c - our terminal in raw mode for an interactive command, its resizes, and signals meant for the command. */
#include "cmd/term.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* What the handlers write to: signals know no context but globals. */
static volatile int winch_w = -1, sig_w = -1, cancel_w = -1;
static volatile sig_atomic_t caught;

static void on_winch(int signo)
{
	int saved = errno;
	uint8_t b = (uint8_t)signo;

	if (winch_w >= 0 && write(winch_w, &b, 1) < 0)
		(void)0;   /* the pipe is full: a resize is already pending */
	errno = saved;
}

static void on_signal(int signo)
{
	int saved = errno;
	uint8_t b = (uint8_t)signo;
	uint64_t one = 1;

	if (caught++ == 0) {
		if (sig_w >= 0 && write(sig_w, &b, 1) < 0)
			(void)0;
	} else if (cancel_w >= 0 && write(cancel_w, &one, sizeof(one)) < 0) {
		(void)0;
	}
	errno = saved;
}

static int make_pipe(int p[2])
{
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) {
		p[0] = p[1] = -1;
		return -errno;
	}
	return 0;
}

static int catch(int signo, void (*fn)(int))
{
	struct sigaction sa = { .sa_handler = fn, .sa_flags = SA_RESTART };

	sigemptyset(&sa.sa_mask);
	return sigaction(signo, &sa, NULL) < 0 ? -errno : 0;
}

int term_open(struct term *t, bool interactive, bool catch_signals)
{
	struct termios raw;
	int rc = 0;

	memset(t, 0, sizeof(*t));
	t->tty_fd = t->cancel_fd = -1;
	t->winch[0] = t->winch[1] = t->sigs[0] = t->sigs[1] = -1;
	if (catch_signals) {
		caught = 0;
		t->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (t->cancel_fd < 0 || (rc = make_pipe(t->sigs)))
			return t->cancel_fd < 0 ? -errno : rc;
		sig_w = t->sigs[1];
		cancel_w = t->cancel_fd;
		if ((rc = catch(SIGINT, on_signal)) || (rc = catch(SIGTERM, on_signal)) ||
		    (rc = catch(SIGHUP, on_signal)))
			return rc;
	}
	if (!interactive || !isatty(STDIN_FILENO))
		return 0;
	if ((rc = make_pipe(t->winch)))
		return rc;
	winch_w = t->winch[1];
	if ((rc = catch(SIGWINCH, on_winch)))
		return rc;
	if (tcgetattr(STDIN_FILENO, &t->saved) < 0)
		return -errno;
	raw = t->saved;
	cfmakeraw(&raw);
	if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) < 0)
		return -errno;
	t->tty_fd = STDIN_FILENO;
	t->raw = true;
	return 0;
}

static void close_pair(int p[2])
{
	for (int i = 0; i < 2; i++)
		if (p[i] >= 0)
			close(p[i]);
	p[0] = p[1] = -1;
}

void term_close(struct term *t)
{
	if (t->raw) {
		tcsetattr(t->tty_fd, TCSANOW, &t->saved);
		t->raw = false;
	}
	if (t->winch[1] >= 0) {
		signal(SIGWINCH, SIG_DFL);
		winch_w = -1;
	}
	if (t->sigs[1] >= 0) {
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		sig_w = cancel_w = -1;
	}
	close_pair(t->winch);
	close_pair(t->sigs);
	if (t->cancel_fd >= 0)
		close(t->cancel_fd);
	t->cancel_fd = -1;
}
