/* image_id.h - the content identity of a file (kernel, root image, mayfly itself): sha256, remembered by its stat identity. */
#ifndef MAYFLY_LIB_IMAGE_ID_H
#define MAYFLY_LIB_IMAGE_ID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#define IMAGE_HASH_LEN 32

struct image_id {
	uint8_t sha256[IMAGE_HASH_LEN];
	/* The file as it was when hashed: while all of these stay the same,
	 * the content has not changed (a write moves ctime, and ctime cannot
	 * be set back). */
	uint64_t dev, ino, size;
	int64_t mtime_ns, ctime_ns;
};

/* mayfly's cache directory: $MAYFLY_CACHE, else $XDG_CACHE_HOME/mayfly,
 * else $HOME/.cache/mayfly (the tools build the guest there too). 0, or
 * -ENOENT when none can be named. Nothing is created. */
int image_cache_dir(char *out, size_t len);

/* The identity of the file at path. The hash of a file whose stat identity
 * was hashed before is read back from <cache>/hashes/ (written there the
 * first time, best effort), so only a new or changed file is read whole.
 * 0, or -errno with *why. */
int image_id_get(const char *path, struct image_id *id, const char **why);

/* The identity of the open regular file fd (read whole from its start;
 * no hash cache: a jailed VM has none). 0, or -errno with *why. */
int image_id_fd(int fd, struct image_id *id, const char **why);

/* A snapshot's own file (memory, an overlay: written by mayfly, sparse,
 * then only read): its stat identity and, instead of the sha256 of every
 * byte, the sparse digest: SHA-256 of a tag, the size, and each nonzero
 * 4 KiB page preceded by its page number (docs/snapshot.md). Holes are
 * skipped by SEEK_DATA/SEEK_HOLE, so the cost follows the data, not the
 * size. 0, or -errno with *why (-EAGAIN: it changed while read). */
int image_id_sparse_fd(int fd, struct image_id *id, const char **why);

/* image_id_check for such a file: 0 when its stat identity is id's (no
 * read) or, failing that (a copy), its sparse digest and size are; else
 * -ESTALE, or -errno with *why. No hash cache: copies are rare. */
int image_id_check_sparse(const char *path, const struct image_id *id, const char **why);

/* The identity of the open file fd only if its hash is remembered in
 * <cache>/hashes/ (no read): 0, or -ENOENT (never hashed, or changed). */
int image_id_remembered(int fd, struct image_id *id);

/* Whether st is the very file id was taken from, unchanged since. */
bool image_id_same_file(const struct image_id *id, const struct stat *st);

/* Whether the file at path has the content id names: the stat identity
 * first (no read), the hash when that differs (a copy, a move to another
 * file system). 0 when it does, -ESTALE when the content differs, or
 * -errno with *why. */
int image_id_check(const char *path, const struct image_id *id, const char **why);

/* 64 hex digits and a NUL. */
void image_hash_hex(const uint8_t sha256[IMAGE_HASH_LEN], char out[2 * IMAGE_HASH_LEN + 1]);

#endif
