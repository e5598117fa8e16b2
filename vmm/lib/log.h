/* log.h - one line per event, tagged with the VM id and a level; quiet by default. */
#ifndef MAYFLY_LIB_LOG_H
#define MAYFLY_LIB_LOG_H

#include <stddef.h>
#include <stdint.h>

enum log_level { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

/* Set the VM id shown on every line and the most verbose level printed.
 * Logging is the one process-wide setting: a process runs exactly one VM.
 * Call before log_writer_start. */
void log_init(const char *vm_id, enum log_level level);

/* Print "mayfly[<id>] <level>: <message>" to stderr when level is enabled.
 * Bytes of the message that are not printable ASCII are written as \xNN, so
 * text that came from the guest never reaches a terminal raw, and a line
 * never holds a newline of its own.
 * Thread-safe. While the log writer runs (log_writer_start) the line is
 * queued and the caller never waits for stderr; otherwise it is written by
 * the caller with a single write(2). */
void log_msg(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

int log_enabled(enum log_level level);

/* The limit on one cause of lines a guest can trigger (a bad register
 * write, a malformed packet): the first LOG_LIMIT_BURST lines pass, then
 * at most one per LOG_LIMIT_INTERVAL_S; the next line that passes ends
 * with how many were suppressed. Zero-initialised is ready; keep one per
 * cause and per device, and never reset it with the device (a guest that
 * resets and breaks the device again in a loop stays limited). */
#define LOG_LIMIT_BURST       5
#define LOG_LIMIT_INTERVAL_S  10
struct log_limit {
	uint64_t next_ns;             /* CLOCK_MONOTONIC: when the next line may pass */
	unsigned burst;               /* lines passed so far without waiting */
	uint64_t suppressed;          /* since the last line that passed */
	uint64_t generation;          /* log_report_suppressed's, when `suppressed` was counted */
};

/* log_msg through `lim`. Thread-safe (the limits share one lock). */
void log_limited(struct log_limit *lim, enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Copy in into out (cap bytes, NUL-terminated), each byte that is not
 * printable ASCII as \xNN: for text from the guest. Returns the length. */
size_t log_escape(char *out, size_t cap, const char *in);

/* The one-line message of a command that failed, for its user: "mayfly:
 * <message>" on stderr whatever the level, escaped as log_msg escapes. */
void log_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Log one line saying how many lines log_limited suppressed that no later
 * line of their cause has reported yet (nothing when there are none), at
 * the most severe level among them, and count them as reported. For the
 * end of a VM: a guest that stopped misbehaving leaves no line behind to
 * carry the count. log_writer_stop calls it. */
void log_report_suppressed(void);

/* The queue between logging threads and the log writer thread. A line
 * that does not fit is dropped and counted; the writer logs the count
 * ("N log lines dropped") as soon as stderr takes lines again. */
#define LOG_QUEUE_BYTES       (64 * 1024)
/* How long log_writer_stop waits for stderr to take the queued lines. */
#define LOG_WRITER_GRACE_MS   2000

/* Start the log writer thread: from here on every line is queued, and
 * a thread that logs (a vCPU, the I/O thread holding a device lock)
 * never waits for stderr, even when nobody reads it. Call on the main
 * thread before starting the threads that log; pair with log_writer_stop.
 * enter (NULL: none) runs first on the writer thread: the caller's
 * set-up for it, such as its seccomp filter. 0, -EALREADY when it runs,
 * or -errno (lines then keep going straight to stderr). */
int log_writer_start(void (*enter)(void)) __attribute__((warn_unused_result));

/* Report what log_limited suppressed (log_report_suppressed), then stop
 * the log writer: it writes out the queued lines, for at most
 * LOG_WRITER_GRACE_MS; what stderr has not taken by then is dropped and
 * the writer is interrupted out of its write. Returns once the writer
 * thread has exited and been joined, whatever stderr does. Afterwards
 * lines go straight to stderr again from the calling thread, except
 * when stderr did not drain in time: then they are dropped, so that the
 * process can still exit. Main thread (the one that started it); nothing
 * when the writer is not running. */
void log_writer_stop(void);

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
