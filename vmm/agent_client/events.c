/* events.c - mayfly run/exec --json: one JSON object per line (jansson), valid whatever bytes the command writes. */
#include "agent_client/events.h"
#include "lib/base64.h"
#include "lib/log.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

size_t utf8_valid_prefix(const uint8_t *s, size_t len, bool *cut)
{
	size_t i = 0;

	*cut = false;
	while (i < len) {
		uint8_t b = s[i], lo = 0x80, hi = 0xbf;
		size_t need;

		if (b < 0x80) {
			i++;
			continue;
		}
		/* RFC 3629's table: the second byte's range rules out overlong
		 * forms (E0, F0), surrogates (ED) and code points past U+10FFFF (F4). */
		if (b >= 0xc2 && b <= 0xdf)
			need = 1;
		else if (b >= 0xe0 && b <= 0xef)
			need = 2, lo = b == 0xe0 ? 0xa0 : 0x80, hi = b == 0xed ? 0x9f : 0xbf;
		else if (b >= 0xf0 && b <= 0xf4)
			need = 3, lo = b == 0xf0 ? 0x90 : 0x80, hi = b == 0xf4 ? 0x8f : 0xbf;
		else
			return i;
		for (size_t k = 1; k <= need; k++) {
			if (i + k >= len) {
				*cut = true;   /* so far so good: the rest may come next */
				return i;
			}
			if (s[i + k] < (k == 1 ? lo : 0x80) || s[i + k] > (k == 1 ? hi : 0xbf))
				return i;
		}
		i += need + 1;
	}
	return i;
}

/* Write obj as one compact line and drop it. A line that cannot be built
 * (out of memory) is left out rather than written half. */
static void emit(FILE *out, json_t *obj)
{
	char *s;

	if (!obj)
		return;
	s = json_dumps(obj, JSON_COMPACT | JSON_REAL_PRECISION(12));
	json_decref(obj);
	if (!s)
		return;
	fputs(s, out);
	fputc('\n', out);
	fflush(out);
	free(s);
}

void events_prepare(void)
{
	json_object_seed(0);
}

void event_started(FILE *out, uint32_t pid)
{
	emit(out, json_pack("{s:s, s:I}", "event", "started", "pid", (json_int_t)pid));
}

static void emit_base64(FILE *out, const char *name, const uint8_t *s, size_t len)
{
	char *b64 = malloc(BASE64_LEN(len) + 1);

	if (!b64)
		return;
	base64_encode(s, len, b64);
	emit(out, json_pack("{s:s, s:s}", "event", name, "data_b64", b64));
	free(b64);
}

void event_output(FILE *out, struct event_stream *st, const uint8_t *data, size_t len)
{
	size_t total = st->ncarry + len, ok;
	uint8_t *buf = malloc(total ? total : 1);
	bool cut;

	if (!buf)
		return;
	memcpy(buf, st->carry, st->ncarry);
	memcpy(buf + st->ncarry, data, len);
	st->ncarry = 0;
	ok = utf8_valid_prefix(buf, total, &cut);
	if (ok < total && !cut) {
		emit_base64(out, st->name, buf, total);
	} else {
		/* json_stringn checks the UTF-8 again; NUL bytes become \u0000. */
		json_t *text = ok ? json_stringn((const char *)buf, ok) : NULL;

		if (text)
			emit(out, json_pack("{s:s, s:o}", "event", st->name, "data", text));
		else if (ok)
			emit_base64(out, st->name, buf, ok);
		st->ncarry = total - ok;   /* at most 3 bytes of a cut sequence */
		memcpy(st->carry, buf + ok, st->ncarry);
	}
	free(buf);
}

void event_output_flush(FILE *out, struct event_stream *st)
{
	if (st->ncarry)
		emit_base64(out, st->name, st->carry, st->ncarry);
	st->ncarry = 0;
}

void event_exit(FILE *out, int code, int signo, bool timed_out, uint64_t duration_us,
		int exit_code, bool truncated)
{
	emit(out, json_pack("{s:s, s:i, s:i, s:b, s:I, s:i, s:b}", "event", "exit", "code", code,
			    "signal", signo, "timed_out", timed_out, "duration_us",
			    (json_int_t)duration_us, "exit_code", exit_code, "truncated", truncated));
}

void event_error(FILE *out, const char *msg)
{
	char text[512];

	log_escape(text, sizeof(text), msg);
	emit(out, json_pack("{s:s, s:s}", "event", "error", "message", text));
}

/* {"io":N,...}: the kinds' counts, those of one name added up. */
static json_t *exits_json(const struct event_timings *t)
{
	json_t *o = json_object();

	for (size_t i = 0; i < t->nexits && o; i++) {
		json_t *had = json_object_get(o, t->exit_kinds[i]);
		json_int_t n = (json_int_t)t->exit_counts[i] + (had ? json_integer_value(had) : 0);

		if (t->exit_counts[i] && json_object_set_new(o, t->exit_kinds[i], json_integer(n))) {
			json_decref(o);
			o = NULL;
		}
	}
	return o;
}

void event_timings(FILE *out, const struct event_timings *t)
{
	json_t *phases = json_object();

	/* A phase never reached is left out: "phases" holds what happened. */
	for (int p = 0; p < PHASE_NR && phases; p++)
		if (t->phases[p] >= 0 && json_object_set_new(phases, phase_name(p),
							     json_real(t->phases[p]))) {
			json_decref(phases);
			phases = NULL;
		}
	emit(out, json_pack("{s:s, s:b, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:I, s:o*, s:o*}", "event",
			    "timings", "restored", t->restored, "vmm_setup_ms", t->vmm_setup,
			    "first_run_ms", t->first_run, "guest_init_ms", t->guest_init,
			    "agent_ready_ms", t->agent_ready, "command_start_ms", t->command_start,
			    "command_end_ms", t->command_end, "teardown_ms", t->teardown,
			    "total_ms", t->total, "start_monotonic_ns", (json_int_t)t->start_ns,
			    "phases_ms", phases, "vm_exits", exits_json(t)));
}
