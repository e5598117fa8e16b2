/* json_shape.h - a bound on a JSON text's parsed size, checked before a parser builds it: how many values, how deep. */
#ifndef MAYFLY_LIB_JSON_SHAPE_H
#define MAYFLY_LIB_JSON_SHAPE_H

#include <stdbool.h>
#include <stddef.h>

/* Whether the JSON text buf[0, len) holds at most max_values values and
 * nests at most max_depth arrays and objects, counted from its structure
 * outside strings ('[', '{', ',' and ':' each start one more; a string is
 * one value whatever its length): an upper bound of what a parser would
 * allocate, in one pass and no memory. Not a validator: a text that passes
 * may still be malformed; one that fails is too big to parse. */
bool json_shape_within(const char *buf, size_t len, size_t max_values, unsigned max_depth);

#endif
