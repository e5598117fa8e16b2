/* seccomp_libs_helper.c - for test_seccomp: the release binary's libraries (glibc's malloc, jansson; built without sanitizers, static) in a thread under a role's release filter, after seccomp_setup, as mayfly's threads use them. */
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "lib/log.h"
#include "seccomp/seccomp.h"

/* Linked with seccomp.c alone (not mayfly's core, which a sanitizer build
 * instruments): its two log calls, on paths this helper does not take. */
void log_msg(enum log_level level, const char *fmt, ...)
{
	va_list ap;

	(void)level;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

void log_say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

static pthread_barrier_t busy_up, busy_done;
static int role;
static void *volatile kept;

static void *busy(void *arg)
{
	void *volatile p = malloc(100);

	(void)arg;
	pthread_barrier_wait(&busy_up);
	pthread_barrier_wait(&busy_done);
	free(p);
	return NULL;
}

/* What a mayfly thread does with memory after its filter: the process's
 * first JSON object (boot --audit's I/O thread makes one), small blocks
 * (glibc would give a thread its own arena), freed back to an empty heap
 * (which glibc trims), large blocks (mmap), realloc (mremap), then the
 * thread's end. */
static void *filtered(void *arg)
{
	void *volatile small[256];
	json_t *rec;
	char *line;

	(void)arg;
	if (seccomp_install((enum seccomp_role)role))
		exit(100);
	rec = json_pack("{s:s, s:i}", "host", "files.test", "port", 443);
	line = rec ? json_dumps(rec, JSON_COMPACT) : NULL;
	if (!line)
		exit(104);
	free(line);
	json_decref(rec);
	for (int i = 0; i < 256; i++)
		small[i] = malloc(64 + (size_t)i * 64);
	for (int i = 255; i >= 0; i--)
		free(small[i]);
	kept = malloc(1 << 20);
	kept = realloc(kept, 4 << 20);
	free(kept);
	kept = calloc(1, 300 << 10);
	free(kept);
	return NULL;
}

/* usage: seccomp_libs_helper ROLE BUSY: BUSY threads malloc and stay
 * before the filtered one starts (8: glibc sizes its arena limit at the
 * ninth thread arena; 0: the first thread heap, trimmed). Exit 0, or 159
 * with mayfly's seccomp line. */
int main(int argc, char **argv)
{
	pthread_t t, busy_t[16];
	int nbusy;

	if (argc != 3 || (role = atoi(argv[1])) < 0 || role >= SECCOMP_ROLE_COUNT ||
	    (nbusy = atoi(argv[2])) < 0 || nbusy > 16)
		return 2;
	/* mayfly allocates long before its filters (glibc's tcache key). */
	kept = malloc(1);
	free(kept);
	if (seccomp_setup(false))
		return 101;
	pthread_barrier_init(&busy_up, NULL, (unsigned)nbusy + 1);
	pthread_barrier_init(&busy_done, NULL, (unsigned)nbusy + 1);
	for (int i = 0; i < nbusy; i++)
		if (pthread_create(&busy_t[i], NULL, busy, NULL))
			return 102;
	pthread_barrier_wait(&busy_up);
	if (pthread_create(&t, NULL, filtered, NULL) || pthread_join(t, NULL))
		return 103;
	pthread_barrier_wait(&busy_done);
	for (int i = 0; i < nbusy; i++)
		pthread_join(busy_t[i], NULL);
	return 0;
}
