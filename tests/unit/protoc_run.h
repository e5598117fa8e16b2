/* protoc_run.h - protoc run on a test's bytes: --encode (text to protobuf's binary encoding) or --decode (back), so vectors come from protoc, never from the C under test. */
#ifndef MAYFLY_TESTS_PROTOC_RUN_H
#define MAYFLY_TESTS_PROTOC_RUN_H

#include <stddef.h>
#include <stdint.h>

/* protoc --MODE=TYPE ("encode" or "decode") over in[0..len), with every
 * .proto file of the directory named by the environment variable
 * dirs_env[0] and import paths in all of dirs_env (NULL-terminated; PROTOC
 * names protoc). Its output (malloc'd, NUL-terminated) and *outlen; a
 * failure fails the test. */
uint8_t *protoc_run(const char *mode, const char *type, const char *const *dirs_env,
		    const void *in, size_t len, size_t *outlen);

#endif
