/* fuzz_common.h - what the libFuzzer targets share: a cursor over the input that reads zeros past its end, and the log switch. */
#ifndef MAYFLY_FUZZ_COMMON_H
#define MAYFLY_FUZZ_COMMON_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sanitizer/asan_interface.h>

#include "lib/log.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input's cursor: reads past the end give zeros, so any prefix of an
 * input is an input too. */
struct cursor {
	const uint8_t *p;
	size_t left;
};

static inline uint8_t take8(struct cursor *c)
{
	if (!c->left)
		return 0;
	c->left--;
	return *c->p++;
}

static inline uint16_t take16(struct cursor *c)
{
	uint16_t lo = take8(c);

	return (uint16_t)(lo | take8(c) << 8);
}

static inline uint32_t take32(struct cursor *c)
{
	uint32_t lo = take16(c);

	return lo | (uint32_t)take16(c) << 16;
}

static inline uint64_t take64(struct cursor *c)
{
	uint64_t lo = take32(c);

	return lo | (uint64_t)take32(c) << 32;
}

/* Up to n bytes at the cursor (fewer at the end); *got says how many. */
static inline const uint8_t *take_bytes(struct cursor *c, size_t n, size_t *got)
{
	const uint8_t *p = c->p;

	*got = n < c->left ? n : c->left;
	c->p += *got;
	c->left -= *got;
	return p;
}

/* Errors only, unless MAYFLY_FUZZ_LOG=debug (reproducing a crash): a
 * broken guest fails a device on most inputs. Returns whether debug is on. */
static inline bool fuzz_log_init(void)
{
	const char *lvl = getenv("MAYFLY_FUZZ_LOG");
	bool debug = lvl && !strcmp(lvl, "debug");

	log_init("fuzz", debug ? LOG_DEBUG : LOG_ERROR);
	return debug;
}

/* The harness itself failed (not the code under test): say so and stop. */
static inline void fuzz_die(const char *what)
{
	fprintf(stderr, "fuzz: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* The code under test broke an invariant: abort, so libFuzzer keeps the
 * input. Not inlined, so the stack trace names the check's caller. */
__attribute__((noinline, noreturn, unused))
static void fuzz_broken(const char *what, const char *why)
{
	fprintf(stderr, "fuzz: %s%s%s%s\n", what, why ? " (" : "", why ? why : "", why ? ")" : "");
	abort();
}

/* The lowest free file descriptor: one an input leaves open moves it. */
static inline int lowest_free_fd(void)
{
	int fd = dup(0);

	if (fd < 0)
		fuzz_die("dup");
	close(fd);
	return fd;
}

/* Guard zones either side of fake guest RAM: poisoned for ASan (an
 * instrumented access faults at once) and holding a canary checked after
 * every input (catches writes ASan cannot see, e.g. by the kernel). */
#define FUZZ_CANARY 0x5au

static inline void guards_set(uint8_t *lo, uint8_t *hi, size_t n)
{
	memset(lo, FUZZ_CANARY, n);
	memset(hi, FUZZ_CANARY, n);
	ASAN_POISON_MEMORY_REGION(lo, n);
	ASAN_POISON_MEMORY_REGION(hi, n);
}

/* Reads the poisoned guards on purpose, so ASan must not check it. */
__attribute__((no_sanitize("address"), noinline, unused))
static bool guards_intact(const uint8_t *lo, const uint8_t *hi, size_t n)
{
	const volatile uint8_t *l = lo, *h = hi;
	uint8_t diff = 0;

	for (size_t i = 0; i < n; i++)
		diff |= (uint8_t)((l[i] ^ FUZZ_CANARY) | (h[i] ^ FUZZ_CANARY));
	return diff == 0;
}

#endif
