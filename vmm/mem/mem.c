/* mem.c - guest RAM mapping, checked gpa -> hva translation, and the snapshot memory file. */
#include "mem/mem.h"
#include "lib/errmsg.h"
#include "lib/atomic_file.h"
#include "snapshot/codec.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Whether `bytes` of RAM fit layout: a whole number of pages, and slots
 * that are page-aligned, in address order, not overlapping, with only the
 * last one unbounded and nothing in any of them past the top of the
 * address space. */
static bool layout_fits(const struct mem_layout *layout, uint64_t bytes)
{
	uint64_t room = 0, end = 0;
	bool unbounded = false;

	if (bytes == 0 || (bytes & (MEM_PAGE_SIZE - 1)) || layout->nr_slots < 1 ||
	    layout->nr_slots > MEM_MAX_REGIONS)
		return false;
	for (int i = 0; i < layout->nr_slots; i++) {
		uint64_t gpa = layout->slots[i].gpa, max = layout->slots[i].max;

		if (unbounded || gpa < end || ((gpa | max) & (MEM_PAGE_SIZE - 1)))
			return false;
		if (max) {
			if (__builtin_add_overflow(gpa, max, &end) ||
			    __builtin_add_overflow(room, max, &room))
				return false;
			continue;
		}
		unbounded = true;
		if (bytes > room && __builtin_add_overflow(gpa, bytes - room - 1, &end))
			return false;
		room = bytes;
	}
	return bytes <= room;
}

/* Split the host mapping p of `bytes` into layout's slots (layout_fits). */
static void mem_lay_out(struct guest_mem *mem, void *p, uint64_t bytes,
			const struct mem_layout *layout)
{
	uint64_t done = 0;

	/* Guest RAM never needs to be in a core dump of the VMM. */
	madvise(p, bytes, MADV_DONTDUMP);
	mem->base = p;
	mem->total = bytes;
	mem->nr_regions = 0;
	for (int i = 0; i < layout->nr_slots && done < bytes; i++) {
		uint64_t n = bytes - done, max = layout->slots[i].max;

		if (max && n > max)
			n = max;
		mem->regions[mem->nr_regions++] = (struct mem_region){ layout->slots[i].gpa, n,
								       mem->base + done };
		done += n;
	}
}

int mem_init(struct guest_mem *mem, uint64_t bytes, const struct mem_layout *layout)
{
	void *p;

	memset(mem, 0, sizeof(*mem));
	if (!layout_fits(layout, bytes))
		return -EINVAL;
	/* NORESERVE: the guest touches pages lazily; untouched RAM costs nothing. */
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	mem_lay_out(mem, p, bytes, layout);
	return 0;
}

void mem_init_fake(struct guest_mem *mem, void *host, uint64_t bytes)
{
	memset(mem, 0, sizeof(*mem));
	mem->total = bytes;
	mem->regions[0] = (struct mem_region){ 0, bytes, host };
	mem->nr_regions = 1;
}

void mem_free(struct guest_mem *mem)
{
	if (mem->base)
		munmap(mem->base, mem->total);
	memset(mem, 0, sizeof(*mem));
}

void *mem_gpa_to_hva(const struct guest_mem *mem, uint64_t gpa, uint64_t len)
{
	uint64_t last;

	if (len == 0)
		len = 1;
	if (__builtin_add_overflow(gpa, len - 1, &last))
		return NULL;
	for (int i = 0; i < mem->nr_regions; i++) {
		const struct mem_region *r = &mem->regions[i];

		if (gpa >= r->gpa && last - r->gpa < r->size && gpa - r->gpa < r->size)
			return r->hva + (gpa - r->gpa);
	}
	return NULL;
}

int mem_write(const struct guest_mem *mem, uint64_t gpa, const void *src, uint64_t len)
{
	void *dst = mem_gpa_to_hva(mem, gpa, len);

	if (!dst)
		return -EFAULT;
	if (len)
		memcpy(dst, src, len);
	return 0;
}

int mem_read(const struct guest_mem *mem, uint64_t gpa, void *dst, uint64_t len)
{
	const void *src = mem_gpa_to_hva(mem, gpa, len);

	if (!src)
		return -EFAULT;
	if (len)
		memcpy(dst, src, len);
	return 0;
}

uint64_t mem_low_end(const struct guest_mem *mem)
{
	return mem->regions[0].gpa + mem->regions[0].size;
}

/* Pages per mincore() / pagemap look-up: 64 MiB of RAM. */
#define SAVE_CHUNK_PAGES 16384u
#define PAGEMAP_PRESENT  (1ULL << 63)
#define PAGEMAP_SWAPPED  (1ULL << 62)

struct save_ctx {
	const struct guest_mem *mem;
	int fd;                  /* the memory file */
	int pagemap_fd;          /* /proc/self/pagemap, or -1 */
	unsigned char vec[SAVE_CHUNK_PAGES];
	uint64_t pm[SAVE_CHUNK_PAGES];
	struct mem_save_stats st;
};

static bool page_is_zero(const uint8_t *p)
{
	const uint64_t *w = (const uint64_t *)p;

	for (size_t i = 0; i < MEM_PAGE_SIZE / 8; i++)
		if (w[i])
			return false;
	return true;
}

static int pwrite_all(int fd, const uint8_t *p, uint64_t len, uint64_t off)
{
	while (len) {
		ssize_t n = pwrite(fd, p, len > (1u << 30) ? (1u << 30) : (size_t)len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		len -= (uint64_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

/* Mark in c->vec which of the `n` pages at `hva` may hold data. mincore()
 * cannot tell a page never touched from one swapped out, nor, for RAM
 * mapped from a file, from a file page not in the page cache: those are
 * read unless pagemap proves them untouched anonymous memory. */
static void find_candidates(struct save_ctx *c, const uint8_t *hva, size_t n)
{
	bool all_resident = true;

	if (mincore((void *)hva, n * MEM_PAGE_SIZE, c->vec) < 0) {
		memset(c->vec, 1, n);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		c->vec[i] &= 1;
		all_resident &= c->vec[i];
	}
	if (all_resident)
		return;
	if (c->mem->file_backed || c->pagemap_fd < 0 ||
	    pread(c->pagemap_fd, c->pm, n * 8, (off_t)((uintptr_t)hva / MEM_PAGE_SIZE * 8)) !=
	    (ssize_t)(n * 8)) {
		memset(c->vec, 1, n);
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (c->pm[i] & (PAGEMAP_PRESENT | PAGEMAP_SWAPPED))
			c->vec[i] = 1;
}

/* Write the data pages of `n` pages at `hva` to file offset `off`, runs of
 * adjacent data pages in one write each. */
static int save_chunk(struct save_ctx *c, const uint8_t *hva, size_t n, uint64_t off)
{
	size_t run = 0;   /* data pages pending before page i */

	find_candidates(c, hva, n);
	for (size_t i = 0; i <= n; i++) {
		bool data = false;

		if (i < n && c->vec[i]) {
			data = !page_is_zero(hva + i * MEM_PAGE_SIZE);
			if (!data)
				c->st.zero_bytes += MEM_PAGE_SIZE;
		} else if (i < n) {
			c->st.absent_bytes += MEM_PAGE_SIZE;
		}
		if (data) {
			run++;
			continue;
		}
		if (run) {
			uint64_t start = (uint64_t)(i - run) * MEM_PAGE_SIZE;
			int rc = pwrite_all(c->fd, hva + start, run * MEM_PAGE_SIZE, off + start);

			if (rc)
				return rc;
			c->st.data_bytes += run * MEM_PAGE_SIZE;
			run = 0;
		}
	}
	return 0;
}

int mem_save_fd(const struct guest_mem *mem, int fd, struct mem_save_stats *stats,
		const char **why)
{
	struct save_ctx *c;
	uint64_t off = 0;
	int rc = 0;

	for (int r = 0; r < mem->nr_regions; r++)
		if (mem->regions[r].size % MEM_PAGE_SIZE)
			return errmsg_why(why, -EINVAL, "guest RAM is not a whole number of pages");
	c = calloc(1, sizeof(*c));
	if (!c)
		return errmsg_why(why, -ENOMEM, "out of memory saving guest RAM");
	c->mem = mem;
	c->fd = fd;
	/* Absent in a jail (no /proc): mincore alone, untouched pages read. */
	c->pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	/* The file's size first: every page not written stays a hole. */
	if (ftruncate(fd, (off_t)mem->total) < 0)
		rc = -errno;
	for (int r = 0; !rc && r < mem->nr_regions; r++) {
		const struct mem_region *reg = &mem->regions[r];

		for (uint64_t done = 0; !rc && done < reg->size; ) {
			uint64_t pages = (reg->size - done) / MEM_PAGE_SIZE;
			size_t n = pages > SAVE_CHUNK_PAGES ? SAVE_CHUNK_PAGES : (size_t)pages;

			rc = save_chunk(c, reg->hva + done, n, off + done);
			done += (uint64_t)n * MEM_PAGE_SIZE;
		}
		off += reg->size;
	}
	if (!rc && stats)
		*stats = c->st;
	if (c->pagemap_fd >= 0)
		close(c->pagemap_fd);
	free(c);
	return rc ? errmsg_why(why, rc, "cannot write guest RAM: %s", strerror(-rc)) : 0;
}

struct mem_fill {
	const struct guest_mem *mem;
	struct mem_save_stats *stats;
};

static int mem_fill(int fd, void *opaque, const char **why)
{
	struct mem_fill *m = opaque;

	return mem_save_fd(m->mem, fd, m->stats, why);
}

int mem_save(const struct guest_mem *mem, const char *path, struct mem_save_stats *stats,
	     const char **why)
{
	struct mem_fill m = { mem, stats };

	return atomic_file_fill(path, mem_fill, &m, why);
}

int mem_populate_write(struct guest_mem *mem, uint64_t first_page, uint64_t pages)
{
	uint64_t total = mem->total / MEM_PAGE_SIZE;

	if (!mem->base || first_page > total || pages > total - first_page)
		return -EINVAL;
	if (madvise(mem->base + first_page * MEM_PAGE_SIZE, pages * MEM_PAGE_SIZE,
		    MADV_POPULATE_WRITE) < 0)
		return -errno;
	return 0;
}

int mem_restore(struct guest_mem *mem, uint64_t bytes, const struct mem_layout *layout,
		const char *path, const char **why)
{
	struct stat st;
	void *p;
	int fd, rc;

	memset(mem, 0, sizeof(*mem));
	if (!layout_fits(layout, bytes))
		return errmsg_why(why, -EINVAL, "guest RAM size %llu is not a whole number of pages "
				  "that fits the memory layout", (unsigned long long)bytes);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);   /* a FIFO: refused, not waited on */
	if (fd < 0) {
		rc = -errno;
		return errmsg_why(why, rc, "cannot open %s: %s", path, strerror(-rc));
	}
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		errmsg_why(why, rc, "cannot stat %s: %s", path, strerror(-rc));
		goto err_fd;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = errmsg_why(why, -EINVAL, "%s is not a regular file", path);
		goto err_fd;
	}
	if ((uint64_t)st.st_size != bytes) {
		rc = errmsg_why(why, -EINVAL, "%s is %llu bytes, the guest has %llu bytes of RAM",
			      path, (unsigned long long)st.st_size, (unsigned long long)bytes);
		goto err_fd;
	}
	/* Private and writable: the guest's writes are copy-on-write pages of
	 * this process; the file (opened read-only) is never written. */
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, fd, 0);
	if (p == MAP_FAILED) {
		rc = -errno;
		errmsg_why(why, rc, "cannot map %s: %s", path, strerror(-rc));
		goto err_fd;
	}
	close(fd);   /* the mapping keeps the file */
	mem_lay_out(mem, p, bytes, layout);
	mem->file_backed = true;
	return 0;

err_fd:
	close(fd);
	return rc;
}
