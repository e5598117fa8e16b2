/* panic_watch.c - streaming match of the panic banner across arbitrary chunk boundaries. */
#include "panic_watch.h"

bool panic_watch_feed(struct panic_watch *w, const uint8_t *buf, size_t len)
{
	static const char banner[] = PANIC_BANNER;

	for (size_t i = 0; i < len && !w->seen; i++) {
		/* The banner's first byte occurs nowhere else in it, so on a
		 * mismatch the only possible restart is at this very byte. */
		if (buf[i] == (uint8_t)banner[w->matched])
			w->matched++;
		else
			w->matched = buf[i] == (uint8_t)banner[0];
		if (w->matched == sizeof(banner) - 1)
			w->seen = true;
	}
	return w->seen;
}
