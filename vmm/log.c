/* log.c - human-readable event lines on stderr, one write(2) per line. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static struct {
	char vm_id[32];
	enum log_level level;
} log_cfg = { "-", LOG_WARN };

static const char *const level_names[] = {
	[LOG_ERROR] = "error", [LOG_WARN] = "warn",
	[LOG_INFO] = "info",   [LOG_DEBUG] = "debug",
};

void log_init(const char *vm_id, enum log_level level)
{
	snprintf(log_cfg.vm_id, sizeof(log_cfg.vm_id), "%s", vm_id ? vm_id : "-");
	log_cfg.level = level;
}

int log_enabled(enum log_level level)
{
	return level <= log_cfg.level;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	if (!log_enabled(level))
		return;
	n = snprintf(line, sizeof(line), "mayfly[%s] %s: ", log_cfg.vm_id,
		     level_names[level]);
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	/* A failed log write has nowhere to be reported. */
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}
