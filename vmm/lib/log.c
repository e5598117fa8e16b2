/* log.c - human-readable event lines on stderr, per-cause limits, and a writer thread so no VM thread waits for stderr. */
#include "lib/log.h"
#include "lib/clock.h"
#include "lib/thread.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define LOG_MSG_MAX   1024
#define LOG_LINE_MAX  (LOG_MSG_MAX + 64)
#define LOG_CHUNK     8192   /* the writer's largest write(2); more than a line */

static struct {
	char vm_id[32];
	enum log_level level;
} log_cfg = { "-", LOG_WARN };

/* What log_limited suppressed and no later line reported, over all causes. */
static struct {
	pthread_mutex_t lock;         /* also guards every struct log_limit */
	uint64_t generation;          /* bumped by each log_report_suppressed */
	uint64_t unreported;
	enum log_level level;         /* the most severe among them */
} limits = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Lines on their way to the writer thread: a byte ring of whole lines. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t more;          /* lines queued, lines dropped, or stopping */
	char ring[LOG_QUEUE_BYTES];
	size_t head, len;
	uint64_t dropped;             /* lines that did not fit, not yet reported */
	bool running;                 /* lines go to the ring, not to stderr */
	bool stopping;
	bool stuck;                   /* stderr did not drain at the last stop */
	pthread_t thread;
	void (*enter)(void);           /* log_writer_start's, run first on the writer */
	atomic_bool give_up;          /* thread_stop's: stderr does not drain, drop the rest */
} queue = { .lock = PTHREAD_MUTEX_INITIALIZER, .more = PTHREAD_COND_INITIALIZER };

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

static size_t format_line(char *line, int level, const char *suffix, const char *fmt, va_list ap)
	__attribute__((format(printf, 4, 0)));

/* One whole line, "\n" included, into line[LOG_LINE_MAX]; its length.
 * level < 0: a log_say line, with no VM id or level. */
static size_t format_line(char *line, int level, const char *suffix, const char *fmt, va_list ap)
{
	char msg[LOG_MSG_MAX];
	int n;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (level < 0)
		n = snprintf(line, LOG_LINE_MAX, "mayfly: ");
	else
		n = snprintf(line, LOG_LINE_MAX, "mayfly[%s] %s: ", log_cfg.vm_id, level_names[level]);
	n += (int)log_escape(line + n, LOG_LINE_MAX - (size_t)n - 1, msg);
	if (suffix)
		n += snprintf(line + n, LOG_LINE_MAX - (size_t)n - 1, "%s", suffix);
	if (n > LOG_LINE_MAX - 2)
		n = LOG_LINE_MAX - 2;
	line[n++] = '\n';
	return (size_t)n;
}

static size_t format_linef(char *line, enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static size_t format_linef(char *line, enum log_level level, const char *fmt, ...)
{
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	n = format_line(line, level, NULL, fmt, ap);
	va_end(ap);
	return n;
}

/* Queue lock held. */
static void ring_put(const char *line, size_t n)
{
	size_t tail = (queue.head + queue.len) % LOG_QUEUE_BYTES;
	size_t first = n < LOG_QUEUE_BYTES - tail ? n : LOG_QUEUE_BYTES - tail;

	memcpy(queue.ring + tail, line, first);
	memcpy(queue.ring, line + first, n - first);
	queue.len += n;
}

/* Queue lock held: move whole lines, at most `cap` bytes, into buf. */
static size_t ring_take_lines(char *buf, size_t cap)
{
	size_t n = queue.len < cap ? queue.len : cap;
	size_t first = n < LOG_QUEUE_BYTES - queue.head ? n : LOG_QUEUE_BYTES - queue.head;
	const char *end;

	memcpy(buf, queue.ring + queue.head, first);
	memcpy(buf + first, queue.ring, n - first);
	/* Only whole lines, so nothing else written to stderr can land
	 * inside one; a line is shorter than cap, so one is always there. */
	end = memrchr(buf, '\n', n);
	if (end)
		n = (size_t)(end - buf) + 1;
	queue.head = (queue.head + n) % LOG_QUEUE_BYTES;
	queue.len -= n;
	return n;
}

static void log_emit(const char *line, size_t n)
{
	bool stuck;

	pthread_mutex_lock(&queue.lock);
	if (queue.running) {
		if (n <= LOG_QUEUE_BYTES - queue.len) {
			ring_put(line, n);
			pthread_cond_signal(&queue.more);
		} else {
			queue.dropped++;
		}
		pthread_mutex_unlock(&queue.lock);
		return;
	}
	stuck = queue.stuck;
	pthread_mutex_unlock(&queue.lock);
	/* A failed log write has nowhere to be reported. */
	if (!stuck && write(STDERR_FILENO, line, n) < 0)
		return;
}

static void *log_writer(void *arg)
{
	static char buf[LOG_CHUNK];   /* this thread only */
	char line[LOG_LINE_MAX];

	(void)arg;
	thread_set_name("log");
	if (queue.enter)
		queue.enter();   /* the caller's filter, before anything else */
	pthread_mutex_lock(&queue.lock);
	for (;;) {
		uint64_t dropped;
		size_t n;

		while (!queue.len && !queue.dropped && !queue.stopping)
			pthread_cond_wait(&queue.more, &queue.lock);
		if (atomic_load(&queue.give_up) || (!queue.len && !queue.dropped))
			break;   /* told to stop, and nothing left to write */
		n = ring_take_lines(buf, sizeof(buf));
		dropped = queue.dropped;
		queue.dropped = 0;
		pthread_mutex_unlock(&queue.lock);
		/* A write error loses these lines; the next ones may fare better. */
		if (n)
			thread_write_all(STDERR_FILENO, buf, n, &queue.give_up);
		if (dropped) {
			n = format_linef(line, LOG_WARN, "%llu log lines dropped: stderr was not "
					 "read fast enough", (unsigned long long)dropped);
			thread_write_all(STDERR_FILENO, line, n, &queue.give_up);
		}
		pthread_mutex_lock(&queue.lock);
	}
	queue.running = false;
	if (atomic_load(&queue.give_up)) {
		queue.stuck = true;
		queue.head = queue.len = 0;
		queue.dropped = 0;
	}
	pthread_mutex_unlock(&queue.lock);
	return NULL;
}

int log_writer_start(void (*enter)(void))
{
	int rc;

	pthread_mutex_lock(&queue.lock);
	if (queue.running) {
		pthread_mutex_unlock(&queue.lock);
		return -EALREADY;
	}
	queue.head = queue.len = 0;
	queue.dropped = 0;
	queue.stopping = queue.stuck = false;
	atomic_store(&queue.give_up, false);
	queue.running = true;
	/* The writer waits for this lock before it looks at anything. */
	queue.enter = enter;
	rc = thread_start(&queue.thread, log_writer, NULL);
	if (rc)
		queue.running = false;
	pthread_mutex_unlock(&queue.lock);
	return rc;
}

void log_writer_stop(void)
{
	log_report_suppressed();
	pthread_mutex_lock(&queue.lock);
	if (!queue.running || queue.stopping) {
		pthread_mutex_unlock(&queue.lock);
		return;
	}
	queue.stopping = true;
	pthread_cond_signal(&queue.more);
	pthread_mutex_unlock(&queue.lock);
	thread_stop(queue.thread, LOG_WRITER_GRACE_MS, &queue.give_up);
}

static void log_vmsg(int level, const char *suffix, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));

static void log_vmsg(int level, const char *suffix, const char *fmt, va_list ap)
{
	char line[LOG_LINE_MAX];

	log_emit(line, format_line(line, level, suffix, fmt, ap));
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
	pthread_mutex_lock(&limits.lock);
	/* A count log_report_suppressed already reported is not repeated. */
	if (lim->generation != limits.generation) {
		lim->generation = limits.generation;
		lim->suppressed = 0;
	}
	pass = lim->burst < LOG_LIMIT_BURST || now >= lim->next_ns;
	if (pass) {
		if (lim->burst < LOG_LIMIT_BURST)
			lim->burst++;
		lim->next_ns = now + LOG_LIMIT_INTERVAL_S * 1000000000ULL;
		suppressed = lim->suppressed;
		lim->suppressed = 0;
		limits.unreported -= suppressed;
	} else {
		lim->suppressed++;
		if (!limits.unreported || level < limits.level)
			limits.level = level;
		limits.unreported++;
	}
	pthread_mutex_unlock(&limits.lock);
	if (!pass)
		return;
	if (suppressed)
		snprintf(suffix, sizeof(suffix), " (%llu similar lines suppressed)",
			 (unsigned long long)suppressed);
	va_start(ap, fmt);
	log_vmsg(level, suppressed ? suffix : NULL, fmt, ap);
	va_end(ap);
}

void log_report_suppressed(void)
{
	enum log_level level;
	uint64_t n;

	pthread_mutex_lock(&limits.lock);
	n = limits.unreported;
	level = limits.level;
	limits.unreported = 0;
	limits.generation++;
	pthread_mutex_unlock(&limits.lock);
	if (n)
		log_msg(level, "%llu more lines suppressed by the per-cause log limits",
			(unsigned long long)n);
}

void log_say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(-1, NULL, fmt, ap);
	va_end(ap);
}
