/* log.h - one line per event, tagged with the VM id and a level; quiet by default. */
#ifndef MAYFLY_LOG_H
#define MAYFLY_LOG_H

enum log_level { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

/* Set the VM id shown on every line and the most verbose level printed.
 * Logging is the one process-wide setting: a process runs exactly one VM. */
void log_init(const char *vm_id, enum log_level level);

/* Print "mayfly[<id>] <level>: <message>" to stderr when level is enabled.
 * Thread-safe: each line is written with a single write(2). */
void log_msg(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

int log_enabled(enum log_level level);

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
