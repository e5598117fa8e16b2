/* test_log.c - log lines: escaping, per-cause limits, and a writer thread no logger ever waits for. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "observe.h"
#include "lib/clock.h"
#include "lib/log.h"

static struct capture cap;

static void setup(void)
{
	log_init("t", LOG_INFO);
}

TestSuite(log, .init = setup);

/* ---- lines and limits ---- */

Test(log, one_line_per_call_with_non_printable_bytes_escaped)
{
	char *text;

	capture_start(&cap);
	log_warn("guest said \"%s\"", "a\nb\x1b[2J\xff");
	log_debug("not shown at info level");
	text = capture_stop(&cap);
	cr_assert_str_eq(text, "mayfly[t] warn: guest said \"a\\x0ab\\x1b[2J\\xff\"\n");
	free(text);
}

Test(log, limit_passes_a_burst_then_counts)
{
	struct log_limit lim = { 0 };
	char *text;

	capture_start(&cap);
	for (int i = 0; i < 1000; i++)
		log_limited(&lim, LOG_WARN, "bad register %d", i);
	cr_assert_eq(count_lines(text = capture_stop(&cap), "bad register"), LOG_LIMIT_BURST);
	free(text);
	cr_assert_eq(lim.suppressed, 1000 - LOG_LIMIT_BURST);

	/* When the interval has passed, the next line carries the count. */
	lim.next_ns = 0;
	capture_start(&cap);
	log_limited(&lim, LOG_WARN, "bad register again");
	text = capture_stop(&cap);
	cr_assert_str_eq(text, "mayfly[t] warn: bad register again (995 similar lines suppressed)\n");
	free(text);
}

Test(log, limits_are_per_cause)
{
	struct log_limit a = { 0 }, b = { 0 };
	char *text;

	capture_start(&cap);
	for (int i = 0; i < 100; i++)
		log_limited(&a, LOG_WARN, "cause a");
	log_limited(&b, LOG_WARN, "cause b");
	text = capture_stop(&cap);
	cr_assert_eq(count_lines(text, "cause a"), LOG_LIMIT_BURST);
	cr_assert_eq(count_lines(text, "cause b"), 1, "a flood of one cause hides no other");
	free(text);
}

Test(log, summary_reports_what_no_line_carried_and_only_once)
{
	struct log_limit lim = { 0 };
	char *text;

	capture_start(&cap);
	for (int i = 0; i < 20; i++)
		log_limited(&lim, LOG_ERROR, "device failed");
	log_report_suppressed();
	text = capture_stop_summed(&cap);
	expect_limited(text, "device failed", 20);
	cr_assert_eq(count_lines(text, "mayfly[t] error: 15 more lines suppressed"), 1,
		     "one summary, at the suppressed lines' level:\n%s", text);
	free(text);

	/* Reported once: the cause's next line does not count them again. */
	lim.next_ns = 0;
	capture_start(&cap);
	log_limited(&lim, LOG_ERROR, "device failed");
	text = capture_stop(&cap);
	cr_assert_str_eq(text, "mayfly[t] error: device failed\n");
	free(text);
}

Test(log, disabled_levels_are_neither_printed_nor_counted)
{
	struct log_limit lim = { 0 };
	char *text;

	capture_start(&cap);
	for (int i = 0; i < 100; i++)
		log_limited(&lim, LOG_DEBUG, "debug detail");
	text = capture_stop_summed(&cap);
	cr_assert_str_eq(text, "");
	free(text);
}

/* ---- the writer thread ---- */

static struct redirect err = { .saved = -1 };

#define FLOOD_LINES 20000

static void *flood(void *arg)
{
	(void)arg;
	for (int i = 0; i < FLOOD_LINES; i++)
		log_warn("line %06d: a guest-triggered line of about a hundred bytes, padded ....", i);
	return NULL;
}

/* Run flood on a thread; its duration in ms, or -1 when it had not
 * returned after 30 s (it blocked). */
static long timed_flood(void)
{
	pthread_t t;
	struct timespec deadline;
	uint64_t start = clock_now_ns();

	cr_assert_eq(pthread_create(&t, NULL, flood, NULL), 0);
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 30;
	if (pthread_timedjoin_np(t, NULL, &deadline))
		return -1;
	return (long)((clock_now_ns() - start) / 1000000);
}

Test(log, a_stderr_nobody_reads_blocks_no_logger_and_the_writer_still_stops, .timeout = 60)
{
	unsigned threads;
	uint64_t start;
	long ms;

	redirect_to_pipe(&err, STDERR_FILENO);
	threads = nr_threads();
	cr_assert_eq(log_writer_start(NULL), 0);
	cr_assert_eq(nr_threads(), threads + 1);
	/* 2 MB of lines into a 64 KiB pipe that is never read. */
	ms = timed_flood();
	cr_assert_neq(ms, -1, "a logging thread blocked on stderr");
	cr_log_info("%d lines logged in %ld ms", FLOOD_LINES, ms);

	start = clock_now_ns();
	log_writer_stop();
	ms = (long)((clock_now_ns() - start) / 1000000);
	cr_assert_lt(ms, LOG_WRITER_GRACE_MS + 10000, "log_writer_stop took %ld ms", ms);
	cr_assert_eq(nr_threads_settled(threads), threads, "the writer thread outlived log_writer_stop");

	/* stderr is known stuck: lines are dropped, nobody blocks. */
	ms = timed_flood();
	cr_assert_neq(ms, -1, "logging after the stop blocked on the stuck stderr");
	redirect_restore(&err);
	close(err.rd);
}

Test(log, lines_that_do_not_fit_are_dropped_counted_and_reported, .timeout = 60)
{
	struct drain d;
	unsigned lines = 0;
	unsigned long long dropped = 0;
	int last = -1;
	char *text;

	redirect_to_pipe(&err, STDERR_FILENO);
	cr_assert_eq(log_writer_start(NULL), 0);
	/* Nobody reads yet: the pipe and the queue fill, the rest is dropped. */
	cr_assert_neq(timed_flood(), -1);
	/* Now a reader: the writer catches up and says how many it dropped. */
	drain_start(&d, err.rd, 4 << 20);
	log_writer_stop();
	redirect_restore(&err);   /* the last write end: the reader sees EOF */
	text = drain_finish(&d);
	close(err.rd);

	for (char *line = text, *end; *line; line = end + 1) {
		int i;

		end = strchr(line, '\n');
		cr_assert_not_null(end, "a line without its newline: %s", line);
		*end = '\0';
		if (sscanf(line, "mayfly[t] warn: line %d:", &i) == 1) {
			cr_assert_gt(i, last, "line %d after line %d", i, last);
			cr_assert(end - line > 11 && !strcmp(end - 11, "padded ...."),
				  "torn line: %s", line);
			last = i;
			lines++;
		} else {
			unsigned long long n;

			cr_assert_eq(sscanf(line, "mayfly[t] warn: %llu log lines dropped", &n), 1,
				     "unexpected line: %s", line);
			dropped += n;
		}
	}
	cr_log_info("%u lines written, %llu dropped", lines, dropped);
	cr_assert_gt(dropped, 0, "a never-read pipe and a 64 KiB queue took 2 MB?");
	cr_assert_eq(lines + dropped, FLOOD_LINES, "every line is either written or counted");
	free(text);
}

Test(log, lines_go_straight_to_stderr_again_after_a_stop)
{
	char *text;

	cr_assert_eq(log_writer_start(NULL), 0);
	cr_assert_eq(log_writer_start(NULL), -EALREADY);
	log_writer_stop();
	capture_start(&cap);
	log_warn("after the writer");
	text = capture_stop(&cap);
	cr_assert_str_eq(text, "mayfly[t] warn: after the writer\n");
	free(text);
}
