/* json_shape.c - one pass over a JSON text counting the values and nesting a parser would build, strings skipped with their escapes. */
#include "lib/json_shape.h"

bool json_shape_within(const char *buf, size_t len, size_t max_values, unsigned max_depth)
{
	size_t values = 1;
	unsigned depth = 0;
	bool in_string = false;

	for (size_t i = 0; i < len; i++) {
		char c = buf[i];

		if (in_string) {
			if (c == '\\')
				i++;   /* the escaped character, whatever it is */
			else if (c == '"')
				in_string = false;
			continue;
		}
		switch (c) {
		case '"':
			in_string = true;
			break;
		case '[':
		case '{':
			if (++depth > max_depth)
				return false;
			/* a container's first member, as after a comma */
			__attribute__((fallthrough));
		case ',':
		case ':':
			if (++values > max_values)
				return false;
			break;
		case ']':
		case '}':
			if (depth)
				depth--;
			break;
		}
	}
	return true;
}
