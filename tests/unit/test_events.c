/* test_events.c - the UTF-8 check behind --json's "data", by RFC 3629's table, and the events' shape. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "agent_client/events.h"

struct vector {
	const char *what;
	const char *bytes;
	size_t len, valid;   /* the valid prefix */
	bool cut;
};

#define V(what, s, valid, cut) { what, s, sizeof(s) - 1, valid, cut }

static const struct vector vectors[] = {
	V("ascii", "hello", 5, false),
	V("two bytes", "\xc3\xa9", 2, false),
	V("three bytes", "\xe2\x82\xac", 3, false),
	V("four bytes", "\xf0\x9f\x98\x80", 4, false),
	V("the last code point", "\xf4\x8f\xbf\xbf", 4, false),
	V("NUL is text", "a\0b", 3, false),
	V("overlong NUL", "\xc0\x80", 0, false),
	V("overlong slash", "a\xc0\xaf", 1, false),
	V("overlong C1", "\xc1\xbf", 0, false),
	V("overlong three", "\xe0\x80\xaf", 0, false),
	V("overlong four", "\xf0\x80\x80\xaf", 0, false),
	V("high surrogate", "x\xed\xa0\x80", 1, false),
	V("low surrogate", "\xed\xbf\xbf", 0, false),
	V("past U+10FFFF", "\xf4\x90\x80\x80", 0, false),
	V("F5 lead", "\xf5\x80\x80\x80", 0, false),
	V("FF", "ok\xff", 2, false),
	V("lone continuation", "\x80", 0, false),
	V("bad second byte", "\xe2\x28\xa1", 0, false),
	V("bad third byte", "\xe2\x82\x28", 0, false),
	V("cut two", "ab\xc3", 2, true),
	V("cut three", "ab\xe2\x82", 2, true),
	V("cut four", "\xf0\x9f\x98", 0, true),
	V("cut but already wrong", "\xed\xa0", 0, false),
	V("cut overlong", "\xe0\x80", 0, false),
};

Test(events, utf8_by_the_rfc_table)
{
	for (size_t i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++) {
		const struct vector *v = &vectors[i];
		bool cut;
		size_t got = utf8_valid_prefix((const uint8_t *)v->bytes, v->len, &cut);

		cr_assert_eq(got, v->valid, "%s: valid prefix %zu, want %zu", v->what, got, v->valid);
		cr_assert_eq(cut, v->cut, "%s: cut %d, want %d", v->what, cut, v->cut);
	}
}

/* Every 1- to 3-byte string: whatever utf8_valid_prefix accepts, jansson's
 * strict decoder must accept too (two independent readings agree). */
Test(events, every_short_string_agrees_with_jansson)
{
	uint8_t s[3];

	for (uint32_t v = 0; v < (1u << 24); v += 7) {
		bool cut;
		size_t n = 1 + v % 3, ok;

		s[0] = (uint8_t)(v >> 16);
		s[1] = (uint8_t)(v >> 8);
		s[2] = (uint8_t)v;
		ok = utf8_valid_prefix(s, n, &cut);
		if (ok == n) {
			json_t *j = json_stringn((const char *)s, n);

			cr_assert_not_null(j, "jansson refuses %02x %02x %02x (%zu)", s[0], s[1], s[2], n);
			json_decref(j);
		}
	}
}

Test(events, each_event_is_one_line_of_json)
{
	char buf[4096] = "";
	FILE *f = fmemopen(buf, sizeof(buf), "w");
	struct event_stream st = { .name = "stdout" };
	struct event_timings t = { .vmm_setup = 1.5, .first_run = 2, .guest_init = 3, .agent_ready = 4,
				   .command_start = 5, .command_end = 6, .teardown = 7, .total = 8 };
	char *line, *save;
	int n = 0;

	event_started(f, 42);
	event_output(f, &st, (const uint8_t *)"caf\xc3", 4);    /* the é is cut */
	event_output(f, &st, (const uint8_t *)"\xa9!", 2);
	event_output(f, &st, (const uint8_t *)"\xff", 1);
	event_exit(f, 3, 0, false, 12, 3, false);
	event_error(f, "bad \xff\x1b thing");
	event_timings(f, &t);
	fclose(f);
	cr_assert_not_null(strstr(buf, "{\"event\":\"stdout\",\"data\":\"caf\"}\n"), "%s", buf);
	cr_assert_not_null(strstr(buf, "{\"event\":\"stdout\",\"data\":\"\xc3\xa9!\"}\n"), "%s", buf);
	cr_assert_not_null(strstr(buf, "{\"event\":\"stdout\",\"data_b64\":\"/w==\"}\n"), "%s", buf);
	cr_assert_not_null(strstr(buf, "\"message\":\"bad \\\\xff\\\\x1b thing\""), "%s", buf);
	cr_assert_not_null(strstr(buf, "\"vmm_setup_ms\":1.5,"), "%s", buf);
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save), n++) {
		json_t *j = json_loads(line, JSON_REJECT_DUPLICATES, NULL);

		cr_assert_not_null(j, "%s", line);
		json_decref(j);
	}
	cr_assert_eq(n, 7);
}
