/* log.c - human-readable event lines on stderr, one write(2) per line, with per-cause limits. */
#include "log.h"
#include "clock.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define LOG_LINE_MAX 1024

static struct {
	char vm_id[32];
	enum log_level level;
} log_cfg = { "-", LOG_WARN };

static pthread_mutex_t limit_lock = PTHREAD_MUTEX_INITIALIZER;

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

size_t log_escape(char *out, size_t cap, const char *msg)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	if (!cap)
		return 0;
	for (const unsigned char *p = (const unsigned char *)msg; *p && o + 5 < cap; p++) {
		if (*p >= 0x20 && *p < 0x7f) {
			out[o++] = (char)*p;
			continue;
		}
		out[o++] = '\\';
		out[o++] = 'x';
		out[o++] = hex[*p >> 4];
		out[o++] = hex[*p & 15];
	}
	out[o] = '\0';
	return o;
}

/* level < 0: a log_say line, with no VM id or level. */
static void log_vmsg(int level, const char *suffix, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));
static void log_vmsg(int level, const char *suffix, const char *fmt, va_list ap)
{
	char msg[LOG_LINE_MAX], line[LOG_LINE_MAX + 64];
	int n;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (level < 0)
		n = snprintf(line, sizeof(line), "mayfly: ");
	else
		n = snprintf(line, sizeof(line), "mayfly[%s] %s: ", log_cfg.vm_id, level_names[level]);
	n += (int)log_escape(line + n, sizeof(line) - (size_t)n - 1, msg);
	if (suffix)
		n += snprintf(line + n, sizeof(line) - (size_t)n - 1, "%s", suffix);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	/* A failed log write has nowhere to be reported. */
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	va_list ap;

	if (!log_enabled(level))
		return;
	va_start(ap, fmt);
	log_vmsg(level, NULL, fmt, ap);
	va_end(ap);
}

void log_limited(struct log_limit *lim, enum log_level level, const char *fmt, ...)
{
	uint64_t now = clock_now_ns(), suppressed = 0;
	char suffix[64] = "";
	bool pass;
	va_list ap;

	if (!log_enabled(level))
		return;
	pthread_mutex_lock(&limit_lock);
	pass = lim->burst < LOG_LIMIT_BURST || now >= lim->next_ns;
	if (pass) {
		if (lim->burst < LOG_LIMIT_BURST)
			lim->burst++;
		lim->next_ns = now + LOG_LIMIT_INTERVAL_S * 1000000000ULL;
		suppressed = lim->suppressed;
		lim->suppressed = 0;
	} else {
		lim->suppressed++;
	}
	pthread_mutex_unlock(&limit_lock);
	if (!pass)
		return;
	if (suppressed)
		snprintf(suffix, sizeof(suffix), " (%llu similar lines suppressed)",
			 (unsigned long long)suppressed);
	va_start(ap, fmt);
	log_vmsg(level, suppressed ? suffix : NULL, fmt, ap);
	va_end(ap);
}

void log_say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(-1, NULL, fmt, ap);
	va_end(ap);
}
