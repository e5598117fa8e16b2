/* console_watch.c - streaming matches of the panic banner and init's status line across arbitrary chunk boundaries. */
#include "vm/console_watch.h"

/* One byte of a streaming match of pat, whose first byte occurs nowhere
 * else in it: on a mismatch the only possible restart is at this very
 * byte. True when the byte completes a match (which starts over). */
static bool match_byte(const char *pat, size_t len, size_t *matched, uint8_t c)
{
	if (c == (uint8_t)pat[*matched])
		(*matched)++;
	else
		*matched = c == (uint8_t)pat[0];
	if (*matched < len)
		return false;
	*matched = 0;
	return true;
}

/* A byte after a whole INIT_STATUS_PREFIX; false once the number ended. */
static bool read_status_digit(struct console_watch *w, uint8_t c)
{
	if (c >= '0' && c <= '9' && w->digits < 3) {
		w->value = w->value * 10 + (unsigned)(c - '0');
		w->digits++;
		return true;
	}
	if ((c < '0' || c > '9') && w->digits && w->value <= 255) {
		w->status = (uint8_t)w->value;
		w->status_seen = true;
	}
	w->reading_status = false;
	return false;
}

void console_watch_feed(struct console_watch *w, const uint8_t *buf, size_t len)
{
	static const char banner[] = PANIC_BANNER, prefix[] = INIT_STATUS_PREFIX;

	for (size_t i = 0; i < len; i++) {
		if (match_byte(banner, sizeof(banner) - 1, &w->banner_matched, buf[i]))
			w->panicked = true;
		/* The byte that ends a number may begin the next line's prefix. */
		if (w->reading_status && read_status_digit(w, buf[i]))
			continue;
		if (match_byte(prefix, sizeof(prefix) - 1, &w->prefix_matched, buf[i])) {
			w->reading_status = true;
			w->digits = w->value = 0;
		}
	}
}
