/* jsoncheck.c - every line on stdin must be one strict JSON object (RFC 8259, strict UTF-8) with an "event": the e2e suite's reader of --json output. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Exit 0 when every line passes (and there was one), 1 naming the first
 * that does not. JSON_ALLOW_NUL: \u0000 is valid JSON, only jansson's C
 * strings need the flag. */
int main(void)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	long lines = 0;

	while ((n = getline(&line, &cap, stdin)) > 0) {
		json_error_t err;
		json_t *j;

		if (line[n - 1] != '\n') {
			fprintf(stderr, "jsoncheck: line %ld has no newline\n", lines + 1);
			return 1;
		}
		line[n - 1] = '\0';
		j = json_loadb(line, (size_t)n - 1, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &err);
		if (!j || !json_is_object(j) || !json_is_string(json_object_get(j, "event"))) {
			fprintf(stderr, "jsoncheck: line %ld is not a JSON event: %s\n", lines + 1,
				j ? "no \"event\"" : err.text);
			return 1;
		}
		json_decref(j);
		lines++;
	}
	free(line);
	printf("%ld\n", lines);
	return lines ? 0 : 1;
}
