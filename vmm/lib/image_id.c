/* image_id.c - the content identity of a file: sha256 (libmd), remembered in the cache by its stat identity; a sparse digest for a snapshot's own files. */
#include "lib/image_id.h"
#include "lib/errmsg.h"
#include "lib/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HASH_CHUNK (1 << 20)

int image_cache_dir(char *out, size_t len)
{
	const char *env = getenv("MAYFLY_CACHE"), *xdg = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");
	int n;

	if (env && *env)
		n = snprintf(out, len, "%s", env);
	else if (xdg && *xdg)
		n = snprintf(out, len, "%s/mayfly", xdg);
	else if (home && *home)
		n = snprintf(out, len, "%s/.cache/mayfly", home);
	else
		return -ENOENT;
	return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

void image_hash_hex(const uint8_t sha256[IMAGE_HASH_LEN], char out[2 * IMAGE_HASH_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";

	for (int i = 0; i < IMAGE_HASH_LEN; i++) {
		out[2 * i] = hex[sha256[i] >> 4];
		out[2 * i + 1] = hex[sha256[i] & 15];
	}
	out[2 * IMAGE_HASH_LEN] = '\0';
}

static void fill_stat(struct image_id *id, const struct stat *st)
{
	id->dev = (uint64_t)st->st_dev;
	id->ino = (uint64_t)st->st_ino;
	id->size = (uint64_t)st->st_size;
	id->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
	id->ctime_ns = (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
}

bool image_id_same_file(const struct image_id *id, const struct stat *st)
{
	struct image_id now;

	fill_stat(&now, st);
	return now.dev == id->dev && now.ino == id->ino && now.size == id->size &&
	       now.mtime_ns == id->mtime_ns && now.ctime_ns == id->ctime_ns;
}

/* <cache>/hashes/<dev>-<ino>-<size>-<mtime>-<ctime>. */
static int memo_path(const struct image_id *id, char *out, size_t len)
{
	char dir[4096];
	int n;

	if (image_cache_dir(dir, sizeof(dir)))
		return -ENOENT;
	n = snprintf(out, len, "%s/hashes/%llx-%llx-%llx-%llx-%llx", dir,
		     (unsigned long long)id->dev, (unsigned long long)id->ino,
		     (unsigned long long)id->size, (unsigned long long)id->mtime_ns,
		     (unsigned long long)id->ctime_ns);
	return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

static int unhex(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static bool memo_read(const char *path, uint8_t sha[IMAGE_HASH_LEN])
{
	char text[2 * IMAGE_HASH_LEN + 2];
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	ssize_t n;

	if (fd < 0)
		return false;
	n = read(fd, text, sizeof(text));
	close(fd);
	if (n != 2 * IMAGE_HASH_LEN + 1 || text[2 * IMAGE_HASH_LEN] != '\n')
		return false;
	for (int i = 0; i < IMAGE_HASH_LEN; i++) {
		int hi = unhex(text[2 * i]), lo = unhex(text[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return false;
		sha[i] = (uint8_t)(hi << 4 | lo);
	}
	return true;
}

/* Best effort: a cache that cannot be written only costs a later re-hash. */
static void memo_write(const char *path, const uint8_t sha[IMAGE_HASH_LEN])
{
	char text[2 * IMAGE_HASH_LEN + 2], dir[4200];
	struct atomic_file f;
	char *slash;

	if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir))
		return;
	slash = strrchr(dir, '/');
	if (!slash)
		return;
	*slash = '\0';
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return;
	image_hash_hex(sha, text);
	text[2 * IMAGE_HASH_LEN] = '\n';
	if (atomic_file_open(&f, path))
		return;
	if (write(f.fd, text, 2 * IMAGE_HASH_LEN + 1) != 2 * IMAGE_HASH_LEN + 1 ||
	    atomic_file_commit(&f))
		atomic_file_abort(&f);
}

static int hash_fd(int fd, uint8_t sha[IMAGE_HASH_LEN])
{
	uint8_t *buf = malloc(HASH_CHUNK);
	SHA2_CTX ctx;
	ssize_t n;

	if (!buf)
		return -ENOMEM;
	SHA256Init(&ctx);
	while ((n = read(fd, buf, HASH_CHUNK)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			free(buf);
			return -errno;
		}
		SHA256Update(&ctx, buf, (size_t)n);
	}
	SHA256Final(sha, &ctx);
	free(buf);
	return 0;
}

int image_id_get(const char *path, struct image_id *id, const char **why)
{
	char memo[4200];
	struct stat st;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return errmsg_why(why, -errno, "cannot open '%s': %s", path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		rc = fstat(fd, &st) < 0 ? -errno : -EINVAL;
		close(fd);
		return errmsg_why(why, rc, "'%s' is not a regular file", path);
	}
	memset(id, 0, sizeof(*id));
	fill_stat(id, &st);
	if (!memo_path(id, memo, sizeof(memo)) && memo_read(memo, id->sha256)) {
		close(fd);
		return 0;
	}
	rc = hash_fd(fd, id->sha256);
	/* The file changed while it was read: this hash names nothing. */
	if (!rc && (fstat(fd, &st) < 0 || !image_id_same_file(id, &st)))
		rc = -EAGAIN;
	close(fd);
	if (rc)
		return errmsg_why(why, rc, "cannot hash '%s': %s", path,
				rc == -EAGAIN ? "it changed while being read" : strerror(-rc));
	if (!memo_path(id, memo, sizeof(memo)))
		memo_write(memo, id->sha256);
	return 0;
}

int image_id_fd(int fd, struct image_id *id, const char **why)
{
	struct stat st;
	int rc;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return errmsg_why(why, -EINVAL, "not a regular file");
	memset(id, 0, sizeof(*id));
	fill_stat(id, &st);
	rc = lseek(fd, 0, SEEK_SET) < 0 ? -errno : hash_fd(fd, id->sha256);
	if (!rc && (fstat(fd, &st) < 0 || !image_id_same_file(id, &st)))
		rc = -EAGAIN;
	if (rc)
		return errmsg_why(why, rc, "cannot hash a snapshot file: %s",
				rc == -EAGAIN ? "it changed while being read" : strerror(-rc));
	return 0;
}

/* ---- the sparse digest of a snapshot's own files ---- */

#define SPARSE_PAGE 4096u
static const char sparse_tag[16] = "mayfly-sparse-1";

static bool span_is_zero(const uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i])
			return false;
	return true;
}

static void put_le64(SHA2_CTX *ctx, uint64_t v)
{
	uint8_t b[8];

	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	SHA256Update(ctx, b, sizeof(b));
}

/* Hash the nonzero pages of len bytes read from file offset off (page
 * aligned): each as its page number, then its bytes. */
static void sparse_pages(SHA2_CTX *ctx, const uint8_t *buf, size_t len, uint64_t off)
{
	for (size_t i = 0; i < len; i += SPARSE_PAGE) {
		size_t n = len - i < SPARSE_PAGE ? len - i : SPARSE_PAGE;

		if (span_is_zero(buf + i, n))
			continue;
		put_le64(ctx, (off + i) / SPARSE_PAGE);
		SHA256Update(ctx, buf + i, n);
	}
}

/* Hash [from, to) of fd (from page aligned) through buf. */
static int sparse_range(int fd, SHA2_CTX *ctx, uint8_t *buf, uint64_t from, uint64_t to)
{
	while (from < to) {
		size_t want = to - from < HASH_CHUNK ? (size_t)(to - from) : HASH_CHUNK, got = 0;

		while (got < want) {
			ssize_t n = pread(fd, buf + got, want - got, (off_t)(from + got));

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				return n < 0 ? -errno : -EAGAIN;   /* it shrank */
			got += (size_t)n;
		}
		sparse_pages(ctx, buf, want, from);
		from += want;
	}
	return 0;
}

/* SHA-256 of the tag, the size, and each nonzero page with its number:
 * holes and zero pages cost a seek, not a hash, and a copy that filled the
 * holes with zeros has the same digest. */
static int sparse_hash(int fd, uint64_t size, uint8_t sha[IMAGE_HASH_LEN])
{
	uint8_t *buf = malloc(HASH_CHUNK);
	uint64_t off = 0;
	SHA2_CTX ctx;
	int rc = 0;

	if (!buf)
		return -ENOMEM;
	SHA256Init(&ctx);
	SHA256Update(&ctx, (const uint8_t *)sparse_tag, sizeof(sparse_tag));
	put_le64(&ctx, size);
	while (!rc && off < size) {
		off_t data = lseek(fd, (off_t)off, SEEK_DATA), hole;

		if (data < 0 && errno == ENXIO)
			break;       /* only holes from off on */
		if (data < 0) {
			rc = -errno;
			break;
		}
		data &= ~(off_t)(SPARSE_PAGE - 1);
		hole = lseek(fd, data, SEEK_HOLE);
		if (hole < 0 || (uint64_t)hole > size)
			hole = (off_t)size;
		/* Whole pages: a hole may start inside one. */
		if ((uint64_t)hole < size && (hole & (SPARSE_PAGE - 1)))
			hole = (hole | (off_t)(SPARSE_PAGE - 1)) + 1;
		if ((uint64_t)hole > size)
			hole = (off_t)size;
		rc = sparse_range(fd, &ctx, buf, (uint64_t)data, (uint64_t)hole);
		off = (uint64_t)hole;
	}
	SHA256Final(sha, &ctx);
	free(buf);
	return rc;
}

/* id's stat identity and sparse digest of the open regular file fd. */
static int sparse_id(int fd, struct image_id *id)
{
	struct stat st;
	int rc;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return -EINVAL;
	memset(id, 0, sizeof(*id));
	fill_stat(id, &st);
	rc = sparse_hash(fd, id->size, id->sha256);
	/* The file changed while it was read: this digest names nothing. */
	if (!rc && (fstat(fd, &st) < 0 || !image_id_same_file(id, &st)))
		rc = -EAGAIN;
	return rc;
}

int image_id_sparse_fd(int fd, struct image_id *id, const char **why)
{
	int rc = sparse_id(fd, id);

	if (rc)
		return errmsg_why(why, rc, "cannot hash a snapshot file: %s",
				rc == -EAGAIN ? "it changed while being read" : strerror(-rc));
	return 0;
}

int image_id_check_sparse(const char *path, const struct image_id *id, const char **why)
{
	struct image_id now;
	struct stat st;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return errmsg_why(why, -errno, "cannot open '%s': %s", path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return errmsg_why(why, -EINVAL, "'%s' is not a regular file", path);
	}
	if (image_id_same_file(id, &st)) {
		close(fd);
		return 0;
	}
	rc = sparse_id(fd, &now);
	close(fd);
	if (rc)
		return errmsg_why(why, rc, "cannot hash '%s': %s", path,
				rc == -EAGAIN ? "it changed while being read" : strerror(-rc));
	return now.size != id->size || memcmp(now.sha256, id->sha256, IMAGE_HASH_LEN) ? -ESTALE : 0;
}

int image_id_remembered(int fd, struct image_id *id)
{
	char memo[4200];
	struct stat st;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return -EINVAL;
	memset(id, 0, sizeof(*id));
	fill_stat(id, &st);
	if (memo_path(id, memo, sizeof(memo)) || !memo_read(memo, id->sha256))
		return -ENOENT;
	return 0;
}

int image_id_check(const char *path, const struct image_id *id, const char **why)
{
	struct image_id now;
	struct stat st;
	int rc;

	if (stat(path, &st) == 0 && image_id_same_file(id, &st))
		return 0;
	rc = image_id_get(path, &now, why);
	if (rc)
		return rc;
	return memcmp(now.sha256, id->sha256, IMAGE_HASH_LEN) ? -ESTALE : 0;
}
